//! Screenshots drawn inside the frame with ratatui-image, read only when shown and
//! kept in a small most-recently-used cache; a step's target can be drawn on them
//! ([`Mark`]: the acted-on element's box, or a coordinate click's point).

use crate::trajectory::mark::line_width;
pub use crate::trajectory::mark::{Mark, mark_image};

use crate::util::fs::resolve_inside;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Paragraph;
use ratatui_image::picker::Picker;
use ratatui_image::protocol::StatefulProtocol;
use ratatui_image::{Resize, StatefulImage};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// A cached image: its file, and the mark drawn on it with the cell area it was
/// sized for.
type CacheKey = (PathBuf, Option<([i64; 5], (u16, u16))>);

/// How many decoded screenshots are kept.
pub const CACHE_SIZE: usize = 6;

/// Decoded screenshots by path (and the mark drawn on them), most recent last.
pub struct ImageCache {
    picker: Picker,
    entries: VecDeque<(CacheKey, Result<StatefulProtocol, String>)>,
    /// How many files were decoded so far (for tests and stats).
    pub decoded: usize,
}

impl ImageCache {
    /// A cache drawing with `picker` (halfblocks in tests, the terminal's best
    /// protocol otherwise).
    pub fn new(picker: Picker) -> Self {
        ImageCache {
            picker,
            entries: VecDeque::new(),
            decoded: 0,
        }
    }

    fn entry(
        &mut self,
        path: PathBuf,
        mark: Option<Mark>,
        cells: (u16, u16),
    ) -> &mut Result<StatefulProtocol, String> {
        let key = (path, mark.map(|m| (m.key(), cells)));
        if let Some(i) = self.entries.iter().position(|(k, _)| *k == key) {
            let e = self.entries.remove(i).expect("position is in range");
            self.entries.push_back(e);
        } else {
            let loaded = image::ImageReader::open(&key.0)
                .map_err(|e| e.to_string())
                .and_then(|r| r.with_guessed_format().map_err(|e| e.to_string()))
                .and_then(|r| r.decode().map_err(|e| e.to_string()))
                .map(|img| match mark {
                    Some(m) => {
                        let mut rgba = img.into_rgba8();
                        let cells = (u32::from(cells.0), u32::from(cells.1));
                        let t = line_width(rgba.dimensions(), cells);
                        mark_image(&mut rgba, m, t);
                        image::DynamicImage::ImageRgba8(rgba)
                    }
                    None => img,
                })
                .map(|img| self.picker.new_resize_protocol(img));
            self.decoded += 1;
            self.entries.push_back((key, loaded));
            while self.entries.len() > CACHE_SIZE {
                self.entries.pop_front();
            }
        }
        &mut self.entries.back_mut().expect("just pushed").1
    }

    /// Draws the screenshot `rel` (relative to the dataset `root`) into `area`, or a
    /// one-line reason when there is none or it cannot be read.
    pub fn draw(&mut self, f: &mut Frame, area: Rect, root: &Path, rel: Option<&str>, dim: Style) {
        self.draw_marked(f, area, root, rel, None, dim);
    }

    /// [`Self::draw`] with `mark` drawn on the screenshot.
    pub fn draw_marked(
        &mut self,
        f: &mut Frame,
        area: Rect,
        root: &Path,
        rel: Option<&str>,
        mark: Option<Mark>,
        dim: Style,
    ) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        let Some(rel) = rel.filter(|r| !r.is_empty()) else {
            f.render_widget(Paragraph::new("(no screenshot)").style(dim), area);
            return;
        };
        let path = match resolve_inside(root, rel) {
            Ok(p) => p,
            Err(e) => {
                let msg = crate::util::sanitize::clean_line(&format!("screenshot refused: {e}"))
                    .into_owned();
                f.render_widget(Paragraph::new(msg).style(dim), area);
                return;
            }
        };
        match self.entry(path, mark, (area.width, area.height)) {
            Ok(proto) => {
                f.render_stateful_widget(
                    StatefulImage::default().resize(Resize::Scale(None)),
                    area,
                    proto,
                );
            }
            Err(e) => {
                let msg = crate::util::sanitize::clean_line(&format!("screenshot unreadable: {e}"))
                    .into_owned();
                f.render_widget(Paragraph::new(msg).style(dim), area);
            }
        }
    }
}
