//! Live-web tasks in the browser: each episode opens its task's website in a fresh
//! page and runs until the agent calls `done` or its steps run out. Unlike MiniWoB++
//! pages, a website does not score itself: an LLM judge does
//! ([`crate::judge`]), after the episode.

use crate::env::{Chrome, ChromeOptions, Observation, ObserveOptions, Tab};
use crate::trajectory::{ActionResult, Task};
use crate::util::sanitize::clean_line;
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A browser tab that plays live-web tasks, by task id.
pub struct WebEnv {
    tab: Tab,
    chrome: Arc<Chrome>,
    tasks: Arc<BTreeMap<String, Task>>,
    /// Whether observations include a screenshot of the viewport.
    pub screenshots: bool,
}

/// Whether `website` is a page a browser episode may start at: an `http` or `https`
/// URL (not `file:`, `javascript:`, `chrome:` or a bare name).
pub fn startable(website: &str) -> bool {
    match url::Url::parse(website) {
        Ok(u) => matches!(u.scheme(), "http" | "https") && u.host_str().is_some(),
        Err(_) => false,
    }
}

impl WebEnv {
    /// Launches Chromium for `tasks`; a task whose website is not an `http(s)` URL is
    /// refused by id, before anything starts.
    pub fn open(chrome: &ChromeOptions, tasks: Vec<Task>) -> Result<WebEnv> {
        let mut by_id = BTreeMap::new();
        for t in tasks {
            if !startable(&t.website) {
                bail!(
                    "task {}: its website {:?} is not an http(s) URL a browser can open",
                    clean_line(&t.task_id),
                    clean_line(&t.website)
                );
            }
            if t.instruction.trim().is_empty() {
                bail!("task {}: no instruction", clean_line(&t.task_id));
            }
            by_id.insert(t.task_id.clone(), t);
        }
        let chrome = Arc::new(Chrome::launch(chrome)?);
        Ok(WebEnv {
            tab: chrome.new_tab()?,
            chrome,
            tasks: Arc::new(by_id),
            screenshots: true,
        })
    }

    /// Another environment in a new tab of the same browser, for the same tasks.
    pub fn open_tab(&self) -> Result<WebEnv> {
        Ok(WebEnv {
            tab: self.chrome.new_tab()?,
            chrome: Arc::clone(&self.chrome),
            tasks: Arc::clone(&self.tasks),
            screenshots: self.screenshots,
        })
    }

    /// The task ids, in order.
    pub fn task_ids(&self) -> Vec<String> {
        self.tasks.keys().cloned().collect()
    }

    /// Opens task `id`'s website afresh and returns the task.
    pub fn begin(&mut self, id: &str) -> Result<Task> {
        let Some(task) = self.tasks.get(id) else {
            bail!("unknown task {}", clean_line(id));
        };
        self.tab.goto("about:blank")?;
        self.tab.goto(&task.website)?;
        Ok(task.clone())
    }

    /// The page as the agent sees it (every element; the viewport's screenshot
    /// when enabled).
    pub fn observe(&self) -> Result<Observation> {
        self.tab.observe(&ObserveOptions {
            exclude: None,
            screenshot: self.screenshots,
            clip: None,
        })
    }

    /// Executes an action in the tab.
    pub fn execute(&self, action: &crate::action::Action) -> Result<ActionResult> {
        self.tab.execute(action)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_http_urls_start_an_episode() {
        for ok in ["http://127.0.0.1:8080/shop", "https://www.buyly.test/"] {
            assert!(super::startable(ok), "{ok}");
        }
        for bad in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "chrome://settings",
            "www.buyly.test",
            "",
            "http://",
        ] {
            assert!(!super::startable(bad), "{bad}");
        }
    }
}
