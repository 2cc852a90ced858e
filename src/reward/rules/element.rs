//! The rows of actions on one element: click, input and select (element text),
//! upload, and the element-only and field-by-field comparisons.

use super::common::*;
use crate::action::Action;
use crate::reward::decision::{Decision, Level};
use crate::reward::elements::{describe, element_at, find};
use crate::reward::normalize::normalize_text;
use crate::reward::quote::quote;
use crate::trajectory::Element;

/// click, dropdown_options: the element is all there is.
pub fn element_only(ty: &str, c: &Action, t: &Action, ctx: &Ctx) -> Decision {
    let Some(ci) = c.int_param("index") else {
        return missing(c, "candidate", "index");
    };
    let Some(ti) = t.int_param("index") else {
        return missing(t, "target", "index");
    };
    if ci == ti {
        let what = find(ctx.elements, ti).map_or(String::new(), |e| format!(" ({})", describe(e)));
        return d(
            Level::Exact,
            &format!("{ty}.same_index"),
            format!("index {ci} as in the target{what}"),
        );
    }
    if let Err(e) = check_index(ctx, ci, Some(ti)) {
        return e;
    }
    match relate(ctx, ci, ti) {
        Relation::Equivalent(why) => d(Level::Core, &format!("{ty}.equivalent_element"), why),
        Relation::Other(why) => d(Level::Type, &format!("{ty}.other_element"), why),
    }
}

/// Where a click lands: an element index, or a viewport point with the element
/// whose box holds it (if the state has boxes).
#[derive(Clone, Copy)]
pub(super) enum Target<'a> {
    Index(i64),
    Point((f64, f64), Option<&'a Element>),
}

impl<'a> Target<'a> {
    fn of(a: &Action, ctx: &Ctx<'a>) -> Option<Self> {
        match a.point() {
            Some(p) => Some(Target::Point(p, element_at(ctx.elements, p))),
            None => a.int_param("index").map(Target::Index),
        }
    }

    /// The element index it comes down to, if any.
    fn index(self) -> Option<i64> {
        match self {
            Target::Index(i) => Some(i),
            Target::Point(_, e) => e.map(|e| i64::from(e.index)),
        }
    }

    fn show(self) -> String {
        match self {
            Target::Index(i) => format!("index {i}"),
            Target::Point((x, y), Some(e)) => {
                format!("point ({x}, {y}) on index {} {}", e.index, describe(e))
            }
            Target::Point((x, y), None) => format!("point ({x}, {y})"),
        }
    }
}

/// click: by index (as [`element_only`]) or by viewport point
/// (`coordinate_x, coordinate_y`, Browser Use 0.13). A point counts as the element
/// whose box holds it (the innermost): the same element as the target's → exact
/// (`click.same_element`), an equivalent one → core (`click.equivalent_element`),
/// another → type (`click.other_element`). When a point falls in no box (the state
/// has none there), two points within `click_point_tolerance` pixels are exact
/// (`click.same_point`), and anything else is type (`click.unresolved_point`).
pub fn click(c: &Action, t: &Action, ctx: &Ctx) -> Decision {
    if c.point().is_none() && t.point().is_none() {
        return element_only("click", c, t, ctx);
    }
    let Some(ct) = Target::of(c, ctx) else {
        return missing(c, "candidate", "index or coordinate_x/coordinate_y");
    };
    let Some(tt) = Target::of(t, ctx) else {
        return missing(t, "target", "index or coordinate_x/coordinate_y");
    };
    let (ci, ti) = (ct.index(), tt.index());
    if let (Some(ci), Some(ti)) = (ci, ti) {
        let what = format!("{} vs target {}", ct.show(), tt.show());
        if ci == ti {
            return d(Level::Exact, "click.same_element", what);
        }
        if let Err(e) = check_index(ctx, ci, Some(ti)) {
            return e;
        }
        return match relate(ctx, ci, ti) {
            Relation::Equivalent(why) => d(
                Level::Core,
                "click.equivalent_element",
                format!("{what}: {why}"),
            ),
            Relation::Other(why) => d(Level::Type, "click.other_element", format!("{what}: {why}")),
        };
    }
    if let (Target::Point((cx, cy), _), Target::Point((tx, ty), _)) = (ct, tt) {
        let tol = ctx.cfg.click_point_tolerance;
        if (cx - tx).abs() <= tol && (cy - ty).abs() <= tol {
            return d(
                Level::Exact,
                "click.same_point",
                format!(
                    "point ({cx}, {cy}) within {tol} px of target ({tx}, {ty}); no element box holds them"
                ),
            );
        }
    }
    d(
        Level::Type,
        "click.unresolved_point",
        format!(
            "{} vs target {}: no element box of the state holds the point, so the elements cannot be compared",
            ct.show(),
            tt.show()
        ),
    )
}

/// Actions judged by a few text parameters (Browser Use 0.13's page tools and file
/// system: search_page, find_elements, evaluate, write_file, replace_file,
/// read_file): all equal → exact (`<type>.same`), all equal after text
/// normalization → core (`<type>.normalized`), else type (`<type>.other_<key>`,
/// naming the first that differs). With no keys (screenshot, save_as_pdf) the type
/// is all there is: exact.
pub fn fields(ty: &str, keys: &[&str], c: &Action, t: &Action) -> Decision {
    let value = |a: &Action, k: &str| text_param(a, k).unwrap_or_default();
    let mut normalized_only = false;
    for k in keys {
        let (cv, tv) = (value(c, k), value(t, k));
        if cv == tv {
            continue;
        }
        if normalize_text(&cv) == normalize_text(&tv) {
            normalized_only = true;
            continue;
        }
        return d(
            Level::Type,
            &format!("{ty}.other_{k}"),
            format!("{k} {} vs target {}", quote(&cv), quote(&tv)),
        );
    }
    let shown: Vec<String> = keys
        .iter()
        .map(|k| format!("{k} {}", quote(&value(t, k))))
        .collect();
    let shown = if shown.is_empty() {
        "no parameters to compare".to_string()
    } else {
        shown.join(", ")
    };
    if normalized_only {
        d(
            Level::Core,
            &format!("{ty}.normalized"),
            format!("equal to the target after normalization: {shown}"),
        )
    } else {
        d(
            Level::Exact,
            &format!("{ty}.same"),
            format!("as in the target: {shown}"),
        )
    }
}

/// input, select_dropdown: element and text.
pub fn element_text(ty: &str, c: &Action, t: &Action, ctx: &Ctx) -> Decision {
    let Some(ci) = c.int_param("index") else {
        return missing(c, "candidate", "index");
    };
    let Some(ti) = t.int_param("index") else {
        return missing(t, "target", "index");
    };
    let Some(ct) = text_param(c, "text") else {
        return missing(c, "candidate", "text");
    };
    let tt = text_param(t, "text").unwrap_or_default();
    if ci == ti && ct.trim() == tt.trim() {
        return d(
            Level::Exact,
            &format!("{ty}.same"),
            format!("index {ci} and text {} as in the target", quote(ct.trim())),
        );
    }
    if let Err(e) = check_index(ctx, ci, Some(ti)) {
        return e;
    }
    let element = if ci == ti {
        Ok(format!("same index {ci}"))
    } else {
        match relate(ctx, ci, ti) {
            Relation::Equivalent(why) => Ok(why),
            Relation::Other(why) => Err(why),
        }
    };
    let element = match element {
        Ok(e) => e,
        Err(why) => return d(Level::Type, &format!("{ty}.other_element"), why),
    };
    if let Some(m) = key_token_mismatch(ctx, &ct, &tt) {
        return m;
    }
    if normalize_text(&ct) == normalize_text(&tt) {
        let rule = if ci == ti {
            "normalized_text"
        } else {
            "equivalent_element"
        };
        d(
            Level::Core,
            &format!("{ty}.{rule}"),
            format!(
                "{element}; text {} equals target {} after normalization",
                quote(&ct),
                quote(&tt)
            ),
        )
    } else {
        d(
            Level::Type,
            &format!("{ty}.other_text"),
            format!("{element}; text {} vs target {}", quote(&ct), quote(&tt)),
        )
    }
}

/// upload_file: element and file (the file name decides for an equivalent element).
pub fn upload(c: &Action, t: &Action, ctx: &Ctx) -> Decision {
    let (Some(ci), Some(ti)) = (c.int_param("index"), t.int_param("index")) else {
        return missing(c, "candidate or target", "index");
    };
    let cp = c.str_param("path").unwrap_or("").trim();
    let tp = t.str_param("path").unwrap_or("").trim();
    if ci == ti && cp == tp {
        return d(
            Level::Exact,
            "upload_file.same",
            format!("index {ci} and path {}", quote(cp)),
        );
    }
    if let Err(e) = check_index(ctx, ci, Some(ti)) {
        return e;
    }
    let file = |p: &str| {
        std::path::Path::new(p)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
    };
    let same_element = ci == ti || matches!(relate(ctx, ci, ti), Relation::Equivalent(_));
    if same_element && file(cp).is_some() && file(cp) == file(tp) {
        d(
            Level::Core,
            "upload_file.same_file_name",
            format!("same file name, path {} vs target {}", quote(cp), quote(tp)),
        )
    } else {
        d(
            Level::Type,
            "upload_file.other",
            format!(
                "index {ci} path {} vs target {ti} path {}",
                quote(cp),
                quote(tp)
            ),
        )
    }
}
