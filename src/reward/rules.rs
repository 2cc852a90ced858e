//! The rubric rows of ALGORITHMS.md §3, one function per action type. Both actions
//! reaching here are canonical and of the same type. Every decision names its rule
//! (`<type>.<what>`, or `index.absent`, `key_tokens.mismatch`, `params.missing`) and
//! gives a one-line reason quoting the concrete values (cleaned for terminals).

use super::config::RewardConfig;
use super::elements::{describe, element_at, equivalent, find};
use super::key_tokens::{all_present, key_tokens, show};
use super::normalize::{
    jaccard, normalize_text, same_token_set, token_f1, tokens, tokens_of_normalized,
};
use super::quote::quote;
use super::url_norm::{first_difference, normalize_url};
use super::{Decision, Level};
use crate::action::Action;
use crate::trajectory::Element;
use crate::util::sanitize::clean_line;
use serde_json::Value;

/// What the rules need besides the two actions.
pub struct Ctx<'a> {
    pub elements: &'a [Element],
    pub cfg: &'a RewardConfig,
}

const NO_ELEMENTS: &str = "element checks skipped: no elements given";

fn d(level: Level, rule: &str, reason: String) -> Decision {
    Decision::new(level, rule, reason)
}

fn missing(action: &Action, who: &str, key: &str) -> Decision {
    d(
        Level::Wrong,
        "params.missing",
        format!("{who} {} has no valid `{key}`", clean_line(&action.short())),
    )
}

/// A numeric parameter (numbers or numeric strings).
fn num_param(a: &Action, key: &str) -> Option<f64> {
    match a.params.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A text parameter; numbers are read as their JSON text (`input(3, 42)`).
fn text_param(a: &Action, key: &str) -> Option<String> {
    match a.params.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A tab id as text, whether written as a number or a string.
fn tab_param(a: &Action) -> Option<String> {
    match a.params.get("tab_id")? {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Fails with `index.absent` when the candidate's index is not in the state (and is
/// not the target's own index: the target defines what exists).
fn check_index(ctx: &Ctx, cand: i64, target: Option<i64>) -> Result<(), Decision> {
    if ctx.elements.is_empty() || Some(cand) == target || find(ctx.elements, cand).is_some() {
        return Ok(());
    }
    Err(d(
        Level::Wrong,
        "index.absent",
        format!(
            "index {cand} is not among the state's {} elements",
            ctx.elements.len()
        ),
    ))
}

/// How the candidate's element relates to the target's (indices already differ).
enum Relation {
    Equivalent(String),
    Other(String),
}

fn relate(ctx: &Ctx, c: i64, t: i64) -> Relation {
    if ctx.elements.is_empty() {
        return Relation::Other(format!("index {c}, target {t} ({NO_ELEMENTS})"));
    }
    let ce = find(ctx.elements, c);
    match (ce, find(ctx.elements, t)) {
        (Some(ce), Some(te)) if equivalent(ce, te, ctx.cfg) => {
            Relation::Equivalent(format!("index {c} is a {} like target {t}", describe(ce)))
        }
        (Some(ce), Some(te)) => Relation::Other(format!(
            "index {c} is {}, target {t} is {}",
            describe(ce),
            describe(te)
        )),
        (Some(ce), None) => Relation::Other(format!(
            "index {c} is {}; target index {t} is not in the element list, so equivalence cannot be checked",
            describe(ce)
        )),
        (None, _) => Relation::Other(format!("index {c}, target {t}")),
    }
}

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
enum Target<'a> {
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

/// Key tokens of two texts when they differ (and checking is on).
fn key_token_mismatch(ctx: &Ctx, c: &str, t: &str) -> Option<Decision> {
    if !ctx.cfg.check_key_tokens {
        return None;
    }
    let (kc, kt) = (key_tokens(c), key_tokens(t));
    (kc != kt).then(|| {
        d(
            Level::Type,
            "key_tokens.mismatch",
            format!(
                "numbers/dates differ: {} has {}, target {} has {}",
                quote(c),
                show(&kc),
                quote(t),
                show(&kt)
            ),
        )
    })
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

/// navigate: the URL, exact or after normalization (`new_tab` is not compared: the
/// page reached is what matters).
pub fn navigate(c: &Action, t: &Action, ctx: &Ctx) -> Decision {
    let Some(cu) = c.str_param("url") else {
        return missing(c, "candidate", "url");
    };
    let tu = t.str_param("url").unwrap_or("");
    if cu.trim() == tu.trim() {
        return d(
            Level::Exact,
            "navigate.same_url",
            format!("URL {} as in the target", quote(cu.trim())),
        );
    }
    match (normalize_url(cu, ctx.cfg), normalize_url(tu, ctx.cfg)) {
        (Some(cn), Some(tn)) if cn == tn => d(
            Level::Core,
            "navigate.normalized_url",
            format!(
                "{} equals target {} after normalization ({})",
                quote(cu),
                quote(tu),
                quote(&tn.to_string())
            ),
        ),
        (Some(cn), Some(tn)) => {
            let (rule, why) = first_difference(&cn, &tn);
            d(Level::Type, &format!("navigate.{rule}"), why)
        }
        _ => d(
            Level::Type,
            "navigate.other_url",
            format!(
                "{} vs target {} (not both readable as URLs)",
                quote(cu),
                quote(tu)
            ),
        ),
    }
}

/// search, extract, find_text: a free-text query compared by tokens (search's
/// `engine` is not compared).
/// `threshold` = `None` means only normalized equality earns 0.7.
pub fn query(
    ty: &str,
    key: &str,
    c: &Action,
    t: &Action,
    ctx: &Ctx,
    threshold: Option<f64>,
) -> Decision {
    let Some(cq) = text_param(c, key) else {
        return missing(c, "candidate", key);
    };
    let tq = text_param(t, key).unwrap_or_default();
    if cq.trim() == tq.trim() {
        return d(
            Level::Exact,
            &format!("{ty}.same_{key}"),
            format!("{key} {} as in the target", quote(cq.trim())),
        );
    }
    if let Some(m) = key_token_mismatch(ctx, &cq, &tq) {
        return m;
    }
    let (nc, nt) = (normalize_text(&cq), normalize_text(&tq));
    if nc == nt {
        return d(
            Level::Core,
            &format!("{ty}.normalized_{key}"),
            format!(
                "{} equals target {} after normalization",
                quote(&cq),
                quote(&tq)
            ),
        );
    }
    let (ct, tt) = (tokens_of_normalized(&nc), tokens_of_normalized(&nt));
    if threshold.is_some() && same_token_set(&ct, &tt) {
        return d(
            Level::Core,
            &format!("{ty}.same_tokens"),
            format!("{} has the same words as target {}", quote(&cq), quote(&tq)),
        );
    }
    match threshold {
        Some(th) => {
            let j = jaccard(&ct, &tt);
            if j >= th {
                d(
                    Level::Core,
                    &format!("{ty}.similar_{key}"),
                    format!(
                        "word Jaccard {j:.2} ≥ {th}: {} vs target {}",
                        quote(&cq),
                        quote(&tq)
                    ),
                )
            } else {
                d(
                    Level::Type,
                    &format!("{ty}.other_{key}"),
                    format!(
                        "word Jaccard {j:.2} < {th}: {} vs target {}",
                        quote(&cq),
                        quote(&tq)
                    ),
                )
            }
        }
        None => d(
            Level::Type,
            &format!("{ty}.other_{key}"),
            format!("{} vs target {}", quote(&cq), quote(&tq)),
        ),
    }
}

/// scroll: direction, element, pages.
pub fn scroll(c: &Action, t: &Action, ctx: &Ctx) -> Decision {
    let dir = |a: &Action| a.bool_param("down").unwrap_or(true);
    let pages = |a: &Action| num_param(a, "pages").or_else(|| num_param(a, "amount"));
    let (cd, td) = (dir(c), dir(t));
    let (ci, ti) = (c.int_param("index"), t.int_param("index"));
    let word = |down: bool| if down { "down" } else { "up" };
    let place = |i: Option<i64>| i.map_or("the page".to_string(), |i| format!("element {i}"));
    if let Some(ci) = ci
        && let Err(e) = check_index(ctx, ci, ti)
    {
        return e;
    }
    if cd != td {
        return d(
            Level::Type,
            "scroll.other_direction",
            format!("scrolls {}, target scrolls {}", word(cd), word(td)),
        );
    }
    if ci != ti {
        return d(
            Level::Type,
            "scroll.other_element",
            format!("scrolls {}, target scrolls {}", place(ci), place(ti)),
        );
    }
    let (cp, tp) = (pages(c), pages(t));
    if cp == tp {
        d(
            Level::Exact,
            "scroll.same",
            format!("scrolls {} {} as in the target", place(ci), word(cd)),
        )
    } else {
        let show = |p: Option<f64>| p.map_or("default".to_string(), |p| p.to_string());
        d(
            Level::Core,
            "scroll.other_amount",
            format!(
                "same direction and {}; amount {} vs target {}",
                place(ci),
                show(cp),
                show(tp)
            ),
        )
    }
}

/// A key chord in canonical form: modifiers sorted, aliases unified, case folded;
/// chords separated by spaces are a sequence.
pub fn normalize_keys(keys: &str) -> String {
    let alias = |k: &str| -> String {
        let k = k.trim().to_lowercase();
        match k.as_str() {
            "return" | "enter" => "enter".into(),
            "ctrl" | "control" => "control".into(),
            "cmd" | "command" | "meta" | "super" | "win" => "meta".into(),
            "option" | "alt" => "alt".into(),
            "esc" | "escape" => "escape".into(),
            "del" | "delete" => "delete".into(),
            "space" | "spacebar" => "space".into(),
            _ => k,
        }
    };
    let is_mod = |k: &str| matches!(k, "control" | "meta" | "alt" | "shift");
    keys.split_whitespace()
        .map(|chord| {
            let mut parts: Vec<String> = chord
                .split('+')
                .map(alias)
                .filter(|k| !k.is_empty())
                .collect();
            // Modifiers first in a fixed order, then the rest in written order.
            parts.sort_by_key(|k| {
                (
                    !is_mod(k),
                    if is_mod(k) { k.clone() } else { String::new() },
                )
            });
            parts.join("+")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// send_keys.
pub fn send_keys(c: &Action, t: &Action) -> Decision {
    let Some(ck) = c.str_param("keys") else {
        return missing(c, "candidate", "keys");
    };
    let tk = t.str_param("keys").unwrap_or("");
    if ck == tk {
        return d(
            Level::Exact,
            "send_keys.same_keys",
            format!("keys {} as in the target", quote(ck)),
        );
    }
    if normalize_keys(ck) == normalize_keys(tk) {
        d(
            Level::Core,
            "send_keys.same_chord",
            format!(
                "{} is the same chord as target {} ({})",
                quote(ck),
                quote(tk),
                quote(&normalize_keys(tk))
            ),
        )
    } else {
        d(
            Level::Type,
            "send_keys.other_keys",
            format!("keys {} vs target {}", quote(ck), quote(tk)),
        )
    }
}

/// switch, close: the tab.
pub fn tab(ty: &str, c: &Action, t: &Action) -> Decision {
    let Some(ct) = tab_param(c) else {
        return missing(c, "candidate", "tab_id");
    };
    let tt = tab_param(t).unwrap_or_default();
    if ct == tt {
        d(
            Level::Exact,
            &format!("{ty}.same_tab"),
            format!("tab {} as in the target", quote(&ct)),
        )
    } else {
        d(
            Level::Type,
            &format!("{ty}.other_tab"),
            format!("tab {} vs target {}", quote(&ct), quote(&tt)),
        )
    }
}

/// done: the success flag (absent = true, Browser Use's default), then the answer.
pub fn done(c: &Action, t: &Action, ctx: &Ctx) -> Decision {
    let flag = |a: &Action| a.bool_param("success").unwrap_or(true);
    let (cf, tf) = (flag(c), flag(t));
    if cf != tf {
        return d(
            Level::Type,
            "done.wrong_success_flag",
            format!("success={cf}, target success={tf}"),
        );
    }
    let ct = text_param(c, "text").unwrap_or_default();
    let tt = text_param(t, "text").unwrap_or_default();
    if ct.trim() == tt.trim() {
        return d(
            Level::Exact,
            "done.same_text",
            format!("success={cf} and the same text {}", quote(ct.trim())),
        );
    }
    if ctx.cfg.check_key_tokens {
        let (kc, kt) = (key_tokens(&ct), key_tokens(&tt));
        let ok = if ctx.cfg.done_allow_extra_key_tokens {
            all_present(&kt, &kc)
        } else {
            kc == kt
        };
        if !ok {
            let missing: Vec<String> = kt
                .iter()
                .filter(|k| kc.binary_search(k).is_err())
                .cloned()
                .collect();
            let why = if missing.is_empty() {
                format!(
                    "answer has numbers/dates {} beyond the target's {}",
                    show(&kc),
                    show(&kt)
                )
            } else {
                format!(
                    "target numbers/dates {} missing from the answer (it has {})",
                    show(&missing),
                    show(&kc)
                )
            };
            return d(Level::Type, "key_tokens.mismatch", why);
        }
    }
    let f1 = token_f1(&tokens(&ct), &tokens(&tt));
    let th = ctx.cfg.done_token_f1;
    if f1 >= th {
        d(
            Level::Core,
            "done.similar_text",
            format!("success={cf}, target numbers/dates present, token F1 {f1:.2} ≥ {th}"),
        )
    } else {
        d(
            Level::Type,
            "done.other_text",
            format!(
                "success={cf}, token F1 {f1:.2} < {th}: {} vs target {}",
                quote(&ct),
                quote(&tt)
            ),
        )
    }
}

/// wait: 1.0 for the same seconds, 0.7 otherwise.
pub fn wait(c: &Action, t: &Action, ctx: &Ctx) -> Decision {
    let secs = |a: &Action| num_param(a, "seconds").unwrap_or(ctx.cfg.default_wait_seconds);
    let (cs, ts) = (secs(c), secs(t));
    if (cs - ts).abs() <= ctx.cfg.wait_seconds_tolerance {
        d(
            Level::Exact,
            "wait.same_seconds",
            format!("waits {cs} s as in the target"),
        )
    } else {
        d(
            Level::Core,
            "wait.other_seconds",
            format!("waits {cs} s, target {ts} s"),
        )
    }
}
