//! JSON highlighted with syntect, as ratatui lines.

use crate::util::sanitize::clean_line;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use std::sync::OnceLock;
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, ThemeSet};
use syntect::parsing::SyntaxSet;

struct Assets {
    syntaxes: SyntaxSet,
    themes: ThemeSet,
}

static ASSETS: OnceLock<Assets> = OnceLock::new();

fn assets() -> &'static Assets {
    ASSETS.get_or_init(|| Assets {
        syntaxes: SyntaxSet::load_defaults_newlines(),
        themes: ThemeSet::load_defaults(),
    })
}

/// Loads syntect's syntaxes and themes now (call from a background thread at start
/// so the first highlighted frame does not wait for them).
pub fn warm_up() {
    assets();
}

/// Whether the highlighter is loaded. Until it is, [`json_lines`] returns plain
/// lines instead of waiting (the first frame must not wait for syntect).
pub fn ready() -> bool {
    ASSETS.get().is_some()
}

/// Starts loading the highlighter on a background thread.
pub fn warm_up_in_background() {
    if !ready() {
        let _ = std::thread::Builder::new()
            .name("rmsweb-syntect".into())
            .spawn(warm_up);
    }
}

/// Highlights `json` (already serialized, so control characters are escaped) with
/// the syntect theme `theme` (falls back to plain text when unknown). Each line is
/// sanitized before it becomes a span.
pub fn json_lines(json: &str, theme: &str) -> Vec<Line<'static>> {
    json_lines_with(json, theme, false)
}

/// Like [`json_lines`]; with `wait = false` and the highlighter still loading, the
/// lines come back plain.
pub fn json_lines_with(json: &str, theme: &str, wait: bool) -> Vec<Line<'static>> {
    let a = match ASSETS.get() {
        Some(a) => a,
        None if wait => assets(),
        None => {
            return json
                .lines()
                .map(|l| Line::from(clean_line(l).into_owned()))
                .collect();
        }
    };
    let (Some(syntax), Some(th)) = (
        a.syntaxes.find_syntax_by_extension("json"),
        a.themes.themes.get(theme),
    ) else {
        return json
            .lines()
            .map(|l| Line::from(clean_line(l).into_owned()))
            .collect();
    };
    let mut h = HighlightLines::new(syntax, th);
    let mut out = Vec::new();
    for raw in syntect::util::LinesWithEndings::from(json) {
        let Ok(ranges) = h.highlight_line(raw, &a.syntaxes) else {
            out.push(Line::from(
                clean_line(raw.trim_end_matches('\n')).into_owned(),
            ));
            continue;
        };
        let spans: Vec<Span<'static>> = ranges
            .into_iter()
            .filter_map(|(style, text)| {
                let text = clean_line(text.trim_end_matches(['\n', '\r'])).into_owned();
                (!text.is_empty()).then(|| Span::styled(text, convert(style)))
            })
            .collect();
        out.push(Line::from(spans));
    }
    out
}

fn convert(s: syntect::highlighting::Style) -> Style {
    let mut st = Style::default().fg(Color::Rgb(s.foreground.r, s.foreground.g, s.foreground.b));
    if s.font_style.contains(FontStyle::BOLD) {
        st = st.add_modifier(Modifier::BOLD);
    }
    if s.font_style.contains(FontStyle::ITALIC) {
        st = st.add_modifier(Modifier::ITALIC);
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highlights_json_keys_and_values_in_colour_without_controls() {
        let lines = json_lines_with(
            "{\n  \"name\": \"click\\u001b[2J\"\n}",
            "base16-ocean.dark",
            true,
        );
        assert_eq!(lines.len(), 3);
        let text: String = lines[1].spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "  \"name\": \"click\\u001b[2J\"");
        assert!(lines[1].spans.iter().any(|s| s.style.fg.is_some()));
    }
}
