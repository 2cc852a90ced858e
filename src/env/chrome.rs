//! A headless Chromium owned by rmsweb: launched through chromiumoxide on a private
//! tokio runtime, driven from synchronous code, and killed when dropped.

use anyhow::{Context, Result, bail};
use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::handler::viewport::Viewport;
use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

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
        let (browser, mut handler) = rt
            .block_on(Browser::launch(config))
            .with_context(|| format!("launching {}", options.executable.display()))?;
        let handle = rt.spawn(async move {
            while let Some(event) = handler.next().await {
                if let Err(e) = event {
                    tracing::debug!("CDP handler: {e}");
                }
            }
        });
        Ok(Chrome {
            rt,
            browser: Some(browser),
            handler: Some(handle),
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

    /// Opens a new tab on `about:blank`.
    pub fn new_tab(&self) -> Result<crate::env::Tab> {
        let browser = self.browser.as_ref().context("the browser is closed")?;
        let page = self
            .rt
            .block_on(browser.new_page("about:blank"))
            .context("opening a tab")?;
        Ok(crate::env::Tab::new(
            self.rt.clone(),
            page,
            self.options.viewport,
        ))
    }
}

impl Drop for Chrome {
    fn drop(&mut self) {
        if let Some(mut browser) = self.browser.take() {
            let rt = self.rt.clone();
            rt.block_on(async {
                let closed = tokio::time::timeout(Duration::from_secs(3), browser.close()).await;
                if !matches!(closed, Ok(Ok(_))) {
                    let _ = browser.kill().await;
                }
                let _ = tokio::time::timeout(Duration::from_secs(3), browser.wait()).await;
                if let Ok(None) = browser.try_wait() {
                    let _ = browser.kill().await;
                }
            });
        }
        if let Some(h) = self.handler.take() {
            h.abort();
        }
    }
}
