//! The rows of page-level actions: navigate, search queries, scroll, keys, tabs,
//! done and wait.

use super::common::*;
use crate::action::Action;
use crate::reward::decision::{Decision, Level};
use crate::reward::key_tokens::{all_present, key_tokens, show};
use crate::reward::normalize::{
    jaccard, normalize_text, same_token_set, token_f1, tokens, tokens_of_normalized,
};
use crate::reward::quote::quote;
use crate::reward::url_norm::{first_difference, normalize_url};

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
