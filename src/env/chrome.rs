//! A headless Chromium owned by rmsweb: launched through chromiumoxide on a private
//! tokio runtime, driven from synchronous code, watched ([`super::watch`]) and
//! killed when dropped.

use anyhow::{Context, Result, bail};
use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::handler::viewport::Viewport;
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

use super::watch::Watch;

/// The default Chromium binary (Debian's `chromium` package).
pub const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

/// How to launch Chromium.
#[derive(Debug, Clone)]
pub struct ChromeOptions {
    /// The Chromium (or Chrome) executable.
    pub executable: PathBuf,
    /// Viewport width and height in CSS pixels.
    pub viewport: (u32, u32),
    /// How long to wait for the DevTools endpoint at startup.
    pub launch_timeout: Duration,
    /// How long one CDP request may take.
    pub request_timeout: Duration,
}

impl Default for ChromeOptions {
    fn default() -> Self {
        ChromeOptions {
            executable: PathBuf::from(DEFAULT_CHROMIUM),
            viewport: (800, 600),
            launch_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(20),
        }
    }
}

/// A running headless Chromium with a fresh profile.
///
/// All CDP traffic runs on the runtime owned here; the synchronous methods of this
/// type and of [`crate::env::Tab`] block on it, so they must not be called from inside
/// another tokio runtime. Dropping it closes the browser (killing the process if it
/// does not exit) and removes the profile folder.
pub struct Chrome {
    rt: Arc<Runtime>,
    browser: Option<Browser>,
    handler: Option<tokio::task::JoinHandle<()>>,
    /// The poller of the browser's process.
    poller: Option<tokio::task::JoinHandle<()>>,
    watch: Watch,
    _profile: tempfile::TempDir,
    options: ChromeOptions,
}

/// Error text telling the user how to install what is missing.
pub fn missing_chromium_hint(path: &Path) -> String {
    format!(
        "Chromium not found at {}: install it with `.ci/install-env.sh` (or `apt-get install chromium`), or pass --chromium PATH",
        path.display()
    )
}

impl Chrome {
    /// Launches Chromium headless with the flags that keep it quiet and offline.
    pub fn launch(options: &ChromeOptions) -> Result<Chrome> {
        if !options.executable.exists() {
            bail!("{}", missing_chromium_hint(&options.executable));
        }
        let rt = Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .thread_name("rmsweb-cdp")
                .build()
                .context("starting the tokio runtime for Chromium")?,
        );
        let profile = tempfile::Builder::new()
            .prefix("rmsweb-chromium-")
            .tempdir()
            .context("creating a Chromium profile folder")?;
        let (w, h) = options.viewport;
        let config = BrowserConfig::builder()
            .chrome_executable(&options.executable)
            .no_sandbox()
            .user_data_dir(profile.path())
            .launch_timeout(options.launch_timeout)
            .request_timeout(options.request_timeout)
            .window_size(w, h)
            .viewport(Viewport {
                width: w,
                height: h,
                device_scale_factor: Some(1.0),
                emulating_mobile: false,
                is_landscape: false,
                has_touch: false,
            })
            .args([
                "disable-gpu",
                "no-first-run",
                "disable-background-networking",
                "disable-component-update",
                "disable-sync",
            ])
            .build()
            .map_err(|e| anyhow::anyhow!("Chromium configuration: {e}"))?;
        let (mut browser, mut handler) = rt
            .block_on(Browser::launch(config))
            .with_context(|| format!("launching {}", options.executable.display()))?;
        let pid = browser.get_mut_child().and_then(|c| c.inner.id());
        // The call limit: CDP's request timeout and a margin.
        let limit = options.request_timeout + Duration::from_secs(5);
        let (watch, gone, poller) = Watch::start(rt.clone(), pid, limit);
        // The handler ends when the DevTools connection does; a process that dies
        // is seen by the watch's poller.
        let handle = rt.spawn(async move {
            while let Some(event) = handler.next().await {
                if let Err(e) = event {
                    tracing::debug!("CDP handler: {e}");
                }
            }
            gone.send_replace(false);
        });
        Ok(Chrome {
            rt,
            browser: Some(browser),
            handler: Some(handle),
            poller,
            watch,
            _profile: profile,
            options: options.clone(),
        })
    }

    /// The runtime the browser's traffic runs on (servers may share it).
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    /// The options this browser was launched with.
    pub fn options(&self) -> &ChromeOptions {
        &self.options
    }

    /// Whether the browser is still there (its process runs, DevTools connected).
    pub fn is_alive(&self) -> bool {
        self.watch.is_alive()
    }

    /// Opens a new tab on `about:blank`, in a window of its own: a background tab
    /// of a shared window is not painted, and a screenshot of it after the page
    /// changed (a ticked checkbox) waits for a frame that never comes.
    pub fn new_tab(&self) -> Result<crate::env::Tab> {
        let browser = self.browser.as_ref().context("the browser is closed")?;
        let params = chromiumoxide::cdp::browser_protocol::target::CreateTargetParams::builder()
            .url("about:blank")
            .new_window(true)
            .build()
            .map_err(|e| anyhow::anyhow!("opening a tab: {e}"))?;
        let page = self
            .watch
            .call("opening a tab", None, browser.new_page(params))?;
        Ok(crate::env::Tab::new(
            self.rt.clone(),
            page,
            self.options.viewport,
            self.watch.clone(),
        ))
    }
}

impl Drop for Chrome {
    fn drop(&mut self) {
        if let Some(mut browser) = self.browser.take() {
            let rt = self.rt.clone();
            // A browser that is gone cannot be asked to close.
            let alive = self.watch.is_alive();
            rt.block_on(async {
                let closed = if alive {
                    tokio::time::timeout(Duration::from_secs(3), browser.close())
                        .await
                        .is_ok_and(|r| r.is_ok())
                } else {
                    false
                };
                if !closed {
                    let _ = browser.kill().await;
                }
                let _ = tokio::time::timeout(Duration::from_secs(3), browser.wait()).await;
                if let Ok(None) = browser.try_wait() {
                    let _ = browser.kill().await;
                }
            });
        }
        for h in [self.handler.take(), self.poller.take()]
            .into_iter()
            .flatten()
        {
            h.abort();
        }
    }
}
