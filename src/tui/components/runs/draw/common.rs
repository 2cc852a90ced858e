//! What the Runs tab's parts share: a run's age and state styles, durations, the
//! colours and markers of chart lines, short metric names.

use crate::runs::info::DisplayState;
use crate::runs::launch::ChildState;
use crate::runs::monitor::Track;
use crate::runs::tail::TailState;
use crate::tui::theme::Theme;
use ratatui::style::Color;
use ratatui::symbols::Marker;

pub(super) fn age(
    updated: Option<chrono::DateTime<chrono::Utc>>,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let Some(t) = updated else {
        return "-".into();
    };
    let s = (now - t).num_seconds().max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The state word and its style. A run launched from here that has not written
/// its status yet is "starting" while its process lives and "exit N" once it
/// ended without one (a bad argument, say: its log tail tells why).
pub(super) fn state_style(
    t: &Track,
    child: Option<ChildState>,
    th: &Theme,
) -> (String, ratatui::style::Style) {
    if t.vanished {
        return ("gone".into(), th.bad());
    }
    let s = t.state();
    match (s, child) {
        (DisplayState::Unknown, Some(ChildState::Running)) => {
            return ("starting".into(), th.good());
        }
        (DisplayState::Unknown, None)
            if matches!(t.tail, TailState::Missing | TailState::Waiting) =>
        {
            // A watched file whose trainer (verl) has not created it yet.
            return ("waiting".into(), th.dim());
        }
        (DisplayState::Unknown, Some(ChildState::Exited(c))) => {
            return (format!("exit {c}"), th.bad());
        }
        _ => {}
    }
    let style = match s {
        DisplayState::Running | DisplayState::Queued => th.good(),
        DisplayState::Finished => th.text(),
        DisplayState::Stopped | DisplayState::Unknown => th.dim(),
        DisplayState::Failed | DisplayState::Lost => th.bad(),
    };
    (s.label().into(), style)
}

/// Markers telling keys apart in an overlay (colours tell the runs apart), with
/// the symbol shown in the panel title.
pub(super) const KEY_MARKERS: [(Marker, &str); 3] = [
    (Marker::Braille, "⣿"),
    (Marker::Dot, "•"),
    (Marker::Bar, "▄"),
];

/// Colours for chart lines, after the theme's own.
pub(super) fn palette(th: &Theme) -> Vec<Color> {
    vec![
        th.accent,
        th.warn,
        th.ok,
        th.bad,
        Color::Magenta,
        Color::Cyan,
        Color::LightBlue,
        Color::LightYellow,
    ]
}

pub(super) fn short_key(k: &str) -> &str {
    k.rsplit('/').next().unwrap_or(k)
}

/// A duration in at most six characters: `45s`, `12m`, `3h05m`, `2d`.
pub(super) fn short_time(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..=99 => format!("{s}s"),
        100..=5999 => format!("{}m", s.div_ceil(60)),
        6000..=359_999 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_times_fit_the_eta_column() {
        let cases = [
            (0.0, "0s"),
            (45.4, "45s"),
            (2376.0, "40m"),
            (7500.0, "2h05m"),
            (359_000.0, "99h43m"),
            (400_000.0, "4d"),
        ];
        for (s, want) in cases {
            let got = super::short_time(s);
            assert_eq!(got, want);
            assert!(got.len() <= 6, "{got}");
        }
    }
}
