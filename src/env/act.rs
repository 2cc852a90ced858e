//! Executing canonical actions for real through CDP input events: mouse events at the
//! element centre, inserted text and key events, a change event for selects, wheel
//! scrolling, history and loopback-only navigation.
//!
//! Failures the model caused (an index that is not on the page, an option that does
//! not exist, a URL that leaves the machine) are an [`ActionResult`] with `error`
//! set, never an `Err`; `Err` means the browser itself failed.

use super::tab::Tab;
use crate::action::Action;
use crate::trajectory::ActionResult;
use anyhow::{Context, Result};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    InsertTextParams, MouseButton,
};
use std::time::Duration;

/// Milliseconds to wait after an action so the page can react.
pub const SETTLE_MS: u64 = 40;

fn error(msg: impl Into<String>) -> ActionResult {
    ActionResult {
        error: Some(msg.into()),
        ..Default::default()
    }
}

fn ok() -> ActionResult {
    ActionResult::default()
}

/// Whether `url` stays on this machine (http(s) to 127.0.0.1, ::1 or localhost, or
/// `about:blank`).
pub fn is_loopback_url(url: &str) -> bool {
    if url == "about:blank" {
        return true;
    }
    let Ok(u) = url::Url::parse(url) else {
        return false;
    };
    if !matches!(u.scheme(), "http" | "https") {
        return false;
    }
    match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A key of `send_keys`: its DOM `key`, `code`, virtual key code and typed text.
struct KeySpec {
    key: String,
    code: String,
    vk: i64,
    text: Option<String>,
}

fn key_spec(name: &str) -> Option<KeySpec> {
    let named = |key: &str, code: &str, vk: i64, text: Option<&str>| KeySpec {
        key: key.into(),
        code: code.into(),
        vk,
        text: text.map(Into::into),
    };
    Some(match name.to_ascii_lowercase().as_str() {
        "enter" | "return" => named("Enter", "Enter", 13, Some("\r")),
        "tab" => named("Tab", "Tab", 9, None),
        "escape" | "esc" => named("Escape", "Escape", 27, None),
        "backspace" => named("Backspace", "Backspace", 8, None),
        "delete" => named("Delete", "Delete", 46, None),
        "space" => named(" ", "Space", 32, Some(" ")),
        "arrowup" | "up" => named("ArrowUp", "ArrowUp", 38, None),
        "arrowdown" | "down" => named("ArrowDown", "ArrowDown", 40, None),
        "arrowleft" | "left" => named("ArrowLeft", "ArrowLeft", 37, None),
        "arrowright" | "right" => named("ArrowRight", "ArrowRight", 39, None),
        "home" => named("Home", "Home", 36, None),
        "end" => named("End", "End", 35, None),
        "pageup" => named("PageUp", "PageUp", 33, None),
        "pagedown" => named("PageDown", "PageDown", 34, None),
        _ => {
            let mut chars = name.chars();
            let c = chars.next()?;
            if chars.next().is_some() {
                return None;
            }
            let up = c.to_ascii_uppercase();
            let code = if c.is_ascii_alphabetic() {
                format!("Key{up}")
            } else if c.is_ascii_digit() {
                format!("Digit{c}")
            } else {
                String::new()
            };
            KeySpec {
                key: c.to_string(),
                code,
                vk: if c.is_ascii_alphanumeric() {
                    up as i64
                } else {
                    0
                },
                text: Some(c.to_string()),
            }
        }
    })
}

/// CDP modifier bit of a modifier key name.
fn modifier_bit(name: &str) -> Option<i64> {
    match name.to_ascii_lowercase().as_str() {
        "alt" => Some(1),
        "control" | "ctrl" => Some(2),
        "meta" | "cmd" | "command" => Some(4),
        "shift" => Some(8),
        _ => None,
    }
}

impl Tab {
    /// Executes one action. `Ok` with `error` set when the action was invalid for this
    /// page; `Err` only when the browser failed.
    pub fn execute(&self, action: &Action) -> Result<ActionResult> {
        let res = match action.name.as_str() {
            "click" => self.act_click(action)?,
            "input" => self.act_input(action)?,
            "select_dropdown" => self.act_select(action)?,
            "send_keys" => self.act_send_keys(action)?,
            "scroll" => self.act_scroll(action)?,
            "go_back" => {
                // Going back can leave the page before the call returns ("inspected
                // target navigated"): the navigation is the result, not a failure.
                let _ = self.eval_value("history.back()");
                self.settle(200);
                ok()
            }
            "navigate" => {
                let url = action.str_param("url").unwrap_or("");
                if !is_loopback_url(url) {
                    return Ok(error(format!(
                        "navigate refused: {url:?} is not a loopback URL (this environment is offline)"
                    )));
                }
                match self.goto(url) {
                    Ok(()) => ok(),
                    Err(e) => error(format!("{e:#}")),
                }
            }
            "wait" => {
                let s = action
                    .params
                    .get("seconds")
                    .and_then(|v| v.as_f64())
                    .unwrap_or(1.0)
                    .clamp(0.0, 10.0);
                self.rt
                    .block_on(async { tokio::time::sleep(Duration::from_secs_f64(s)).await });
                ok()
            }
            "done" => ActionResult {
                is_done: true,
                success: Some(action.bool_param("success").unwrap_or(true)),
                error: None,
                extracted_content: action.str_param("text").map(str::to_owned),
            },
            other => error(format!(
                "action `{other}` is not available in this environment"
            )),
        };
        Ok(res)
    }

    /// Scrolls the element into view and returns the point to click (its centre, or the
    /// first uncovered point inside it when the centre is covered), or an error message when
    /// the index is not one of the last observation's elements.
    fn element_centre(
        &self,
        index: Option<i64>,
    ) -> Result<std::result::Result<(f64, f64), String>> {
        let Some(i) = index else {
            return Ok(Err("missing or non-integer `index`".into()));
        };
        let v: Option<[f64; 2]> = self.eval(&format!(
            "(() => {{ const els = window.__rmswebEls || []; const e = els[{i} - 1]; \
             if ({i} < 1 || !e || !e.isConnected) return null; \
             const r0 = e.getBoundingClientRect(); \
             if (r0.top < 0 || r0.left < 0 || r0.bottom > innerHeight || r0.right > innerWidth) \
               e.scrollIntoView({{block: 'center', inline: 'center'}}); \
             const p = (window.__rmswebHitPoint || (() => null))(e); if (p) return p; \
             const r = e.getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
        ))?;
        Ok(match v {
            Some([x, y]) => Ok((x, y)),
            None => Err(format!(
                "element index {i} does not exist on the current page"
            )),
        })
    }

    fn mouse(&self, kind: DispatchMouseEventType, x: f64, y: f64, pressed: bool) -> Result<()> {
        let mut b = DispatchMouseEventParams::builder().r#type(kind).x(x).y(y);
        if pressed {
            b = b.button(MouseButton::Left).buttons(1).click_count(1);
        } else {
            b = b.button(MouseButton::Left).click_count(1);
        }
        let p = b.build().map_err(|e| anyhow::anyhow!("mouse event: {e}"))?;
        self.call("dispatching a mouse event", self.page.execute(p))?;
        Ok(())
    }

    /// A real click (move, press, release) at a point.
    pub fn click_at(&self, x: f64, y: f64) -> Result<()> {
        let p = DispatchMouseEventParams::builder()
            .r#type(DispatchMouseEventType::MouseMoved)
            .x(x)
            .y(y)
            .build()
            .map_err(|e| anyhow::anyhow!("mouse event: {e}"))?;
        self.call("moving the mouse", self.page.execute(p))?;
        self.mouse(DispatchMouseEventType::MousePressed, x, y, true)?;
        self.mouse(DispatchMouseEventType::MouseReleased, x, y, false)?;
        Ok(())
    }

    fn act_click(&self, a: &Action) -> Result<ActionResult> {
        match self.element_centre(a.int_param("index"))? {
            Err(msg) => Ok(error(msg)),
            Ok((x, y)) => {
                self.click_at(x, y)?;
                self.settle(SETTLE_MS);
                Ok(ok())
            }
        }
    }

    fn act_input(&self, a: &Action) -> Result<ActionResult> {
        let Some(text) = a.str_param("text") else {
            return Ok(error("input needs a `text` string"));
        };
        let (x, y) = match self.element_centre(a.int_param("index"))? {
            Err(msg) => return Ok(error(msg)),
            Ok(p) => p,
        };
        self.click_at(x, y)?;
        let i = a.int_param("index").unwrap_or(0);
        let clear = a.bool_param("clear").unwrap_or(true);
        // Focus (the click may have landed on a label) and select the old value so the
        // inserted text replaces it.
        let editable: bool = self.eval(&format!(
            "(() => {{ const e = (window.__rmswebEls || [])[{i} - 1]; if (!e) return false; \
             e.focus(); const ok = 'value' in e || e.isContentEditable; \
             if ({clear} && typeof e.select === 'function') e.select(); \
             else if ({clear} && e.isContentEditable) document.execCommand('selectAll'); \
             return ok; }})()"
        ))?;
        if !editable {
            return Ok(error(format!("element {i} does not accept text")));
        }
        if !text.is_empty() {
            self.call(
                "inserting text",
                self.page.execute(InsertTextParams::new(text)),
            )?;
        } else if clear {
            self.press_key(&key_spec("Delete").context("key table")?, 0)?;
        }
        self.settle(SETTLE_MS);
        Ok(ok())
    }

    fn act_select(&self, a: &Action) -> Result<ActionResult> {
        let Some(text) = a.str_param("text") else {
            return Ok(error("select_dropdown needs a `text` string"));
        };
        let Some(i) = a.int_param("index") else {
            return Ok(error("missing or non-integer `index`"));
        };
        let res: serde_json::Value = self.eval(&format!(
            "(() => {{ const e = (window.__rmswebEls || [])[{i} - 1]; \
             if ({i} < 1 || !e) return {{err: 'element index {i} does not exist on the current page'}}; \
             if (e.tagName !== 'SELECT') return {{err: 'element {i} is not a select'}}; \
             const want = {t}.trim().toLowerCase(); \
             const opts = Array.from(e.options); \
             const o = opts.find(o => o.text.trim().toLowerCase() === want) \
                    || opts.find(o => o.value.trim().toLowerCase() === want); \
             if (!o) return {{err: 'no option ' + JSON.stringify({t}) + '; options: ' + opts.map(o => o.text.trim()).join(' | ')}}; \
             e.focus(); e.value = o.value; o.selected = true; \
             e.dispatchEvent(new Event('input', {{bubbles: true}})); \
             e.dispatchEvent(new Event('change', {{bubbles: true}})); \
             return {{ok: o.text.trim()}}; }})()",
            t = serde_json::to_string(text)?
        ))?;
        self.settle(SETTLE_MS);
        Ok(match res.get("err").and_then(|v| v.as_str()) {
            Some(msg) => error(msg),
            None => ActionResult {
                extracted_content: res
                    .get("ok")
                    .and_then(|v| v.as_str())
                    .map(|s| format!("selected {s}")),
                ..Default::default()
            },
        })
    }

    fn press_key(&self, k: &KeySpec, modifiers: i64) -> Result<()> {
        let typed = if modifiers & !8 == 0 {
            k.text.clone()
        } else {
            None
        };
        let mut down = DispatchKeyEventParams::builder()
            .r#type(if typed.is_some() {
                DispatchKeyEventType::KeyDown
            } else {
                DispatchKeyEventType::RawKeyDown
            })
            .key(k.key.clone())
            .code(k.code.clone())
            .windows_virtual_key_code(k.vk)
            .native_virtual_key_code(k.vk)
            .modifiers(modifiers);
        if let Some(t) = &typed {
            down = down.text(t.clone()).unmodified_text(t.clone());
        }
        let up = DispatchKeyEventParams::builder()
            .r#type(DispatchKeyEventType::KeyUp)
            .key(k.key.clone())
            .code(k.code.clone())
            .windows_virtual_key_code(k.vk)
            .native_virtual_key_code(k.vk)
            .modifiers(modifiers);
        let down = down
            .build()
            .map_err(|e| anyhow::anyhow!("key event: {e}"))?;
        let up = up.build().map_err(|e| anyhow::anyhow!("key event: {e}"))?;
        self.call("dispatching a key event", async {
            self.page.execute(down).await?;
            self.page.execute(up).await
        })?;
        Ok(())
    }

    /// `send_keys`: a chord like `Enter`, `Control+a`, `Shift+Tab`, or plain text
    /// (typed as inserted text).
    fn act_send_keys(&self, a: &Action) -> Result<ActionResult> {
        let Some(keys) = a.str_param("keys") else {
            return Ok(error("send_keys needs a `keys` string"));
        };
        if keys.is_empty() {
            return Ok(error("send_keys got an empty `keys` string"));
        }
        let parts: Vec<&str> = keys.split('+').collect();
        let chord = parts.len() > 1
            && parts[..parts.len() - 1]
                .iter()
                .all(|p| modifier_bit(p).is_some());
        let spec = if chord {
            key_spec(parts[parts.len() - 1])
        } else {
            key_spec(keys)
        };
        match spec {
            Some(k) => {
                let mods = if chord {
                    parts[..parts.len() - 1]
                        .iter()
                        .filter_map(|p| modifier_bit(p))
                        .fold(0, |a, b| a | b)
                } else {
                    0
                };
                self.press_key(&k, mods)?;
            }
            None if chord => return Ok(error(format!("unknown key in {keys:?}"))),
            None => {
                self.call(
                    "inserting text",
                    self.page.execute(InsertTextParams::new(keys)),
                )?;
            }
        }
        self.settle(SETTLE_MS);
        Ok(ok())
    }

    fn act_scroll(&self, a: &Action) -> Result<ActionResult> {
        let down = a.bool_param("down").unwrap_or(true);
        let pages = a
            .params
            .get("pages")
            .and_then(|v| v.as_f64())
            .unwrap_or(1.0)
            .clamp(0.1, 10.0);
        let (x, y) = match a.int_param("index") {
            Some(i) if i > 0 => match self.element_centre(Some(i))? {
                Err(msg) => return Ok(error(msg)),
                Ok(p) => p,
            },
            _ => (
                f64::from(self.viewport.0) / 2.0,
                f64::from(self.viewport.1) / 2.0,
            ),
        };
        let dy = pages * f64::from(self.viewport.1) * if down { 1.0 } else { -1.0 };
        let p = DispatchMouseEventParams::builder()
            .r#type(DispatchMouseEventType::MouseWheel)
            .x(x)
            .y(y)
            .delta_x(0.0)
            .delta_y(dy)
            .build()
            .map_err(|e| anyhow::anyhow!("wheel event: {e}"))?;
        self.call("scrolling", self.page.execute(p))?;
        self.settle(120);
        Ok(ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls_are_allowed() {
        assert!(is_loopback_url("http://127.0.0.1:8080/miniwob/x.html"));
        assert!(is_loopback_url("http://localhost/a"));
        assert!(is_loopback_url("http://[::1]:3000/"));
        assert!(is_loopback_url("about:blank"));
        assert!(!is_loopback_url("https://example.com/"));
        assert!(!is_loopback_url("http://127.0.0.1.evil.com/"));
        assert!(!is_loopback_url("file:///etc/passwd"));
        assert!(!is_loopback_url("javascript:alert(1)"));
        assert!(!is_loopback_url("not a url"));
    }

    #[test]
    fn key_names_map_to_dom_keys() {
        let k = key_spec("Enter").unwrap();
        assert_eq!(
            (k.key.as_str(), k.vk, k.text.as_deref()),
            ("Enter", 13, Some("\r"))
        );
        let a = key_spec("a").unwrap();
        assert_eq!((a.code.as_str(), a.vk), ("KeyA", 65));
        assert!(key_spec("NotAKey").is_none());
        assert_eq!(modifier_bit("Ctrl"), Some(2));
    }
}
