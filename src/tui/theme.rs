//! Colour themes loaded from `themes/*.toml`.

use anyhow::{Context, bail};
use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The themes shipped with rmsweb (also found in the repository's `themes/`).
const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: String,
    fg: String,
    bg: String,
    accent: String,
    muted: String,
    border: String,
    selected_fg: String,
    selected_bg: String,
    ok: String,
    bad: String,
    warn: String,
    title: String,
    #[serde(default = "default_syntax")]
    syntax: String,
}

fn default_syntax() -> String {
    "base16-ocean.dark".into()
}

/// The colours every view draws with.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub fg: Color,
    pub bg: Color,
    pub accent: Color,
    pub muted: Color,
    pub border: Color,
    pub selected_fg: Color,
    pub selected_bg: Color,
    pub ok: Color,
    pub bad: Color,
    pub warn: Color,
    pub title: Color,
    /// syntect theme used to highlight JSON.
    pub syntax: String,
}

impl Default for Theme {
    fn default() -> Self {
        Theme::parse(BUILTIN[0].1, Path::new("themes/dark.toml")).expect("built-in theme parses")
    }
}

impl Theme {
    /// Parses a theme file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &Path) -> anyhow::Result<Theme> {
        let f: ThemeFile =
            toml::from_str(text).map_err(|e| anyhow::anyhow!("{}: {e}", origin.display()))?;
        let c = |field: &str, v: &str| {
            Color::from_str(v.trim()).map_err(|_| {
                anyhow::anyhow!("{}: {field}: `{v}` is not a colour", origin.display())
            })
        };
        Ok(Theme {
            name: f.name.clone(),
            fg: c("fg", &f.fg)?,
            bg: c("bg", &f.bg)?,
            accent: c("accent", &f.accent)?,
            muted: c("muted", &f.muted)?,
            border: c("border", &f.border)?,
            selected_fg: c("selected_fg", &f.selected_fg)?,
            selected_bg: c("selected_bg", &f.selected_bg)?,
            ok: c("ok", &f.ok)?,
            bad: c("bad", &f.bad)?,
            warn: c("warn", &f.warn)?,
            title: c("title", &f.title)?,
            syntax: f.syntax,
        })
    }

    /// Loads `--theme NAME|FILE`: an existing file path (or one ending in `.toml`) is
    /// read as is; a name is looked up as `themes/NAME.toml` in the current folder,
    /// next to the sources, then among the built-in themes.
    pub fn load(spec: &str) -> anyhow::Result<Theme> {
        let as_path = Path::new(spec);
        if as_path.is_file() || spec.ends_with(".toml") {
            let text = std::fs::read_to_string(as_path)
                .with_context(|| format!("reading theme {}", as_path.display()))?;
            return Theme::parse(&text, as_path);
        }
        if spec.is_empty() || spec.contains(['/', '\\']) {
            bail!("theme `{spec}`: not a theme name or file");
        }
        for dir in [
            PathBuf::from("themes"),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("themes"),
        ] {
            let p = dir.join(format!("{spec}.toml"));
            if p.is_file() {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("reading theme {}", p.display()))?;
                return Theme::parse(&text, &p);
            }
        }
        match BUILTIN.iter().find(|(n, _)| *n == spec) {
            Some((n, text)) => Theme::parse(text, &PathBuf::from(format!("themes/{n}.toml"))),
            None => bail!(
                "no theme `{spec}` (built-in: {}; or give a TOML file)",
                BUILTIN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// Plain text.
    pub fn text(&self) -> Style {
        Style::default().fg(self.fg).bg(self.bg)
    }
    /// Secondary text.
    pub fn dim(&self) -> Style {
        Style::default().fg(self.muted)
    }
    /// Headings and labels.
    pub fn label(&self) -> Style {
        Style::default()
            .fg(self.accent)
            .add_modifier(Modifier::BOLD)
    }
    /// The selected row.
    pub fn selected(&self) -> Style {
        Style::default()
            .fg(self.selected_fg)
            .bg(self.selected_bg)
            .add_modifier(Modifier::BOLD)
    }
    /// A pane border; focused panes use the accent colour.
    pub fn border(&self, focused: bool) -> Style {
        Style::default().fg(if focused { self.accent } else { self.border })
    }
    /// Success, failure and warning text.
    pub fn good(&self) -> Style {
        Style::default().fg(self.ok)
    }
    pub fn bad(&self) -> Style {
        Style::default().fg(self.bad)
    }
    pub fn warn(&self) -> Style {
        Style::default().fg(self.warn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_themes_load_by_name_and_bad_colours_name_the_field() {
        assert_eq!(Theme::load("dark").unwrap().name, "dark");
        assert_eq!(Theme::load("light").unwrap().name, "light");
        assert!(Theme::load("no-such-theme").is_err());
        let bad = BUILTIN[0].1.replace("#88c0d0", "not-a-colour");
        let e = Theme::parse(&bad, Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.toml") && e.contains("accent"), "{e}");
    }
}
