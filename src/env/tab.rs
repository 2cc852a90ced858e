//! One browser tab driven synchronously: navigation, JavaScript evaluation,
//! observation and screenshots.

use super::observe::{Observation, PageElements, dom_text, observe_script};
use super::watch::Watch;
use anyhow::{Context, Result, bail};
use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams, NavigateParams, Viewport,
};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// What an observation should include.
#[derive(Debug, Clone, Default)]
pub struct ObserveOptions {
    /// CSS selector of subtrees whose elements are left out (harness chrome).
    pub exclude: Option<String>,
    /// Take a screenshot.
    pub screenshot: bool,
    /// CSS selector of the area to capture (the whole viewport when absent or not found).
    pub clip: Option<String>,
}

/// A tab of a [`crate::env::Chrome`].
pub struct Tab {
    pub(crate) rt: Arc<Runtime>,
    pub(crate) page: Page,
    pub(crate) viewport: (u32, u32),
    watch: Watch,
}

impl Tab {
    pub(crate) fn new(rt: Arc<Runtime>, page: Page, viewport: (u32, u32), watch: Watch) -> Tab {
        Tab {
            rt,
            page,
            viewport,
            watch,
        }
    }

    /// Runs a CDP call, ending it with [`super::watch::BrowserGone`] when the browser
    /// dies or stops answering; `doing` names it in errors.
    pub(crate) fn call<T, E>(
        &self,
        doing: &str,
        fut: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        self.watch.call(doing, Some(&self.page), fut)
    }

    /// Loads `url` and waits for the load event.
    pub fn goto(&self, url: &str) -> Result<()> {
        let params = NavigateParams::new(url.to_string());
        self.call(&format!("loading {url}"), self.page.goto(params))?;
        Ok(())
    }

    /// Evaluates a JavaScript expression and returns its value (promises awaited).
    pub fn eval_value(&self, expression: &str) -> Result<serde_json::Value> {
        let params = EvaluateParams::builder()
            .expression(expression)
            .return_by_value(true)
            .await_promise(true)
            .build()
            .map_err(|e| anyhow::anyhow!("evaluate params: {e}"))?;
        let res = self.call(
            "evaluating JavaScript in the page",
            self.page.evaluate_expression(params),
        )?;
        if let Some(ex) = &res.object().subtype
            && format!("{ex:?}").to_lowercase().contains("error")
        {
            bail!("page script failed: {:?}", res.object().description);
        }
        Ok(res.value().cloned().unwrap_or(serde_json::Value::Null))
    }

    /// Evaluates an expression and deserializes its value.
    pub fn eval<T: DeserializeOwned>(&self, expression: &str) -> Result<T> {
        let v = self.eval_value(expression)?;
        serde_json::from_value(v.clone())
            .with_context(|| format!("unexpected value from the page: {v}"))
    }

    /// Lists the visible interactive elements (one evaluation) and optionally takes a
    /// screenshot.
    pub fn observe(&self, opts: &ObserveOptions) -> Result<Observation> {
        let arg = match &opts.exclude {
            Some(sel) => serde_json::to_string(sel)?,
            None => "null".into(),
        };
        let json: String = self.eval(&format!("({})({arg})", observe_script()))?;
        let page: PageElements = serde_json::from_str(&json).context("reading the element list")?;
        let page = page.sanitized();
        let screenshot = if opts.screenshot {
            Some(self.screenshot(opts.clip.as_deref())?)
        } else {
            None
        };
        Ok(Observation {
            dom_text: dom_text(&page.elements),
            url: page.url,
            title: page.title,
            elements: page.elements,
            screenshot,
        })
    }

    /// A PNG of the viewport, or of the element matched by `clip` when it exists.
    pub fn screenshot(&self, clip: Option<&str>) -> Result<Vec<u8>> {
        let mut params = CaptureScreenshotParams::builder().format(CaptureScreenshotFormat::Png);
        if let Some(sel) = clip {
            let rect: Option<[f64; 4]> = self.eval(&format!(
                "(() => {{ const e = document.querySelector({}); if (!e) return null; \
                 const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; }})()",
                serde_json::to_string(sel)?
            ))?;
            if let Some([x, y, w, h]) = rect
                && w >= 1.0
                && h >= 1.0
            {
                params = params.clip(Viewport {
                    x: x.max(0.0),
                    y: y.max(0.0),
                    width: w.min(f64::from(self.viewport.0)),
                    height: h.min(f64::from(self.viewport.1)),
                    scale: 1.0,
                });
            }
        }
        let shot = self.call("taking a screenshot", self.page.execute(params.build()))?;
        let b64: &str = shot.result.data.as_ref();
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .context("decoding the screenshot")
    }

    /// Waits a little for the page to react to input.
    pub(crate) fn settle(&self, ms: u64) {
        self.rt
            .block_on(async { tokio::time::sleep(Duration::from_millis(ms)).await });
    }
}
