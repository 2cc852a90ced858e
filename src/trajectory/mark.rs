//! Where a step acted, to draw on its screenshot: the acted-on element's box or a
//! coordinate click's point ([`step_mark`], [`action_mark`]), and the drawing itself
//! ([`mark_image`]). The workbench and `rmsweb show` draw the same marks.

use super::{State, Step};
use crate::action::Action;

/// Where a step acted, in the screenshot's pixels (page CSS pixels: rmsweb's
/// screenshots are taken at a device scale of 1, the elements' boxes in the same
/// coordinates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mark {
    /// An element's box `[x, y, width, height]`.
    Box([f32; 4]),
    /// A coordinate click.
    Point(f32, f32),
}

impl Mark {
    /// The mark in whole pixels (a cache key).
    pub fn key(self) -> [i64; 5] {
        match self {
            Mark::Box(b) => [0, b[0] as i64, b[1] as i64, b[2] as i64, b[3] as i64],
            Mark::Point(x, y) => [1, x as i64, y as i64, 0, 0],
        }
    }
}

/// The colour marks are drawn in (magenta: rare on web pages).
pub const MARK_COLOR: image::Rgba<u8> = image::Rgba([255, 0, 255, 255]);

/// How thick a mark's lines are on an image of `dims` pixels shown in `cells`
/// (columns, rows): one terminal half-block at least, so the outline survives the
/// downscaling of a small preview, and 1/80 of the image at least.
pub fn line_width(dims: (u32, u32), cells: (u32, u32)) -> u32 {
    let (w, h) = dims;
    let per_cell_x = w.div_ceil(cells.0.max(1));
    let per_cell_y = h.div_ceil(cells.1.max(1).saturating_mul(2));
    per_cell_x.max(per_cell_y).max(w.max(h) / 80).max(2)
}

/// Draws `mark` onto `img` with lines `t` pixels thick (at least 1): a box's
/// outline, or a cross through a point; what falls outside is clipped.
pub fn mark_image(img: &mut image::RgbaImage, mark: Mark, t: u32) {
    let (w, h) = (img.width() as i64, img.height() as i64);
    let t = i64::from(t.max(1));
    let mut fill = |x0: i64, y0: i64, x1: i64, y1: i64| {
        for y in y0.max(0)..y1.min(h) {
            for x in x0.max(0)..x1.min(w) {
                img.put_pixel(x as u32, y as u32, MARK_COLOR);
            }
        }
    };
    match mark {
        Mark::Box([x, y, bw, bh]) => {
            let (x0, y0) = (x.floor() as i64, y.floor() as i64);
            let (x1, y1) = ((x + bw).ceil() as i64, (y + bh).ceil() as i64);
            fill(x0 - t, y0 - t, x1 + t, y0);
            fill(x0 - t, y1, x1 + t, y1 + t);
            fill(x0 - t, y0, x0, y1);
            fill(x1, y0, x1 + t, y1);
        }
        Mark::Point(x, y) => {
            let (cx, cy) = (x.round() as i64, y.round() as i64);
            let arm = 4 * t;
            fill(cx - arm, cy - t / 2, cx + arm + 1, cy + t - t / 2);
            fill(cx - t / 2, cy - arm, cx + t - t / 2, cy + arm + 1);
        }
    }
}

/// Where a step's first action acted, to draw on its screenshot: a coordinate
/// click's point, else the box of the element its index names (when the page
/// recorded one).
pub fn step_mark(step: &Step) -> Option<Mark> {
    action_mark(&step.state, step.output.actions.first()?)
}

/// Where `a` acts on the page `state` ([`step_mark`] for any action: a mined pair's
/// target or its failing action).
pub fn action_mark(state: &State, a: &Action) -> Option<Mark> {
    if let Some((x, y)) = a.point() {
        return Some(Mark::Point(x as f32, y as f32));
    }
    let i = a.target_index()?;
    let e = state.elements.iter().find(|e| i64::from(e.index) == i)?;
    let b = e.bbox;
    (b[2] > 0.0 && b[3] > 0.0 && b.iter().all(|v| v.is_finite()))
        .then(|| Mark::Box([b[0] as f32, b[1] as f32, b[2] as f32, b[3] as f32]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_box_is_outlined_around_the_element_and_clipped_at_the_edges() {
        let white = image::Rgba([255, 255, 255, 255]);
        let mut img = image::RgbaImage::from_pixel(100, 80, white);
        mark_image(&mut img, Mark::Box([20.0, 10.0, 30.0, 20.0]), 2);
        // Just outside each edge: marked; inside the box and far away: untouched.
        for (x, y) in [(35, 9), (35, 30), (19, 20), (50, 20)] {
            assert_eq!(*img.get_pixel(x, y), MARK_COLOR, "({x}, {y})");
        }
        for (x, y) in [(35, 20), (21, 11), (80, 60)] {
            assert_eq!(*img.get_pixel(x, y), white, "({x}, {y})");
        }
        // Partly or wholly outside the image: clipped, no panic.
        mark_image(&mut img, Mark::Box([90.0, 70.0, 50.0, 50.0]), 2);
        mark_image(&mut img, Mark::Box([-500.0, -500.0, 10.0, 10.0]), 2);
        mark_image(&mut img, Mark::Point(99.6, -3.0), 2);
        assert_eq!(*img.get_pixel(89, 75), MARK_COLOR);
    }

    #[test]
    fn a_point_is_a_cross_through_it() {
        let mut img = image::RgbaImage::new(60, 60);
        mark_image(&mut img, Mark::Point(30.0, 30.0), 2);
        for (x, y) in [(30, 30), (22, 30), (38, 30), (30, 22), (30, 38)] {
            assert_eq!(*img.get_pixel(x, y), MARK_COLOR, "({x}, {y})");
        }
        assert_ne!(*img.get_pixel(22, 22), MARK_COLOR);
    }

    #[test]
    fn lines_are_a_half_block_thick_at_least() {
        // 160x210 in 20x13 cells: 8 px a column, ~8 px a half-block row.
        assert_eq!(line_width((160, 210), (20, 13)), 9);
        // Full size on a large pane: the 1/80 floor, 2 px at least.
        assert_eq!(line_width((1280, 800), (200, 60)), 16);
        assert_eq!(line_width((100, 100), (200, 100)), 2);
    }
}
