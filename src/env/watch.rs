//! The browser watchdog. Every CDP call made from synchronous code goes through
//! [`Watch::call`], which ends it with [`BrowserGone`] when Chromium's process dies
//! (polled every [`POLL`]), its DevTools connection closes, or it stops answering,
//! instead of waiting forever for a reply that cannot come.

use anyhow::Result;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::browser::GetVersionParams;
use chromiumoxide::error::CdpError;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::sync::watch;

/// How often the browser's process is looked at.
pub const POLL: Duration = Duration::from_millis(250);

/// How long a browser that let a call time out has to answer `Browser.getVersion`
/// before it is taken for hung.
pub const PROBE: Duration = Duration::from_secs(5);

/// Chromium is gone (its process died, its DevTools connection closed) or stopped
/// answering: nothing more can be done in it. [`is_browser_gone`] tells it from a
/// page's own failure.
#[derive(Debug, Clone)]
pub struct BrowserGone {
    /// What was being done (`evaluating JavaScript in the page`).
    pub doing: String,
    /// `None`: the browser died; `Some(t)`: no answer within `t`.
    pub silent_for: Option<Duration>,
}

impl std::fmt::Display for BrowserGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.silent_for {
            None => write!(
                f,
                "Chromium is gone (the browser exited or was killed) while {}",
                self.doing
            ),
            Some(t) => write!(
                f,
                "Chromium did not answer within {} while {} (the browser hangs)",
                seconds(t),
                self.doing
            ),
        }
    }
}

impl std::error::Error for BrowserGone {}

fn seconds(t: Duration) -> String {
    format!("{:.1} s", t.as_secs_f64())
}

/// Whether `e` (or a cause of it) is [`BrowserGone`].
pub fn is_browser_gone(e: &anyhow::Error) -> bool {
    e.downcast_ref::<BrowserGone>().is_some() || e.chain().any(|c| c.is::<BrowserGone>())
}

/// Whether process `pid` has ended (gone, or a zombie not yet reaped).
fn process_ended(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // `pid (comm) state ...`: comm may hold spaces and parentheses.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    matches!(state, Some("Z" | "X"))
}

/// What a browser's users share to notice that it is gone.
#[derive(Debug, Clone)]
pub struct Watch {
    rt: Arc<Runtime>,
    alive: watch::Receiver<bool>,
    /// The longest a call may take before the browser is probed.
    limit: Duration,
}

/// The sending side: whoever sees the browser go says so.
pub(crate) type Alarm = Arc<watch::Sender<bool>>;

impl Watch {
    /// Starts watching process `pid` on `rt` (polled every [`POLL`]); the returned
    /// alarm is for the DevTools handler to raise when the connection breaks, the
    /// task is the poller (to abort when the browser is closed).
    pub(crate) fn start(
        rt: Arc<Runtime>,
        pid: Option<u32>,
        limit: Duration,
    ) -> (Watch, Alarm, Option<tokio::task::JoinHandle<()>>) {
        let (tx, alive) = watch::channel(true);
        let alarm = Arc::new(tx);
        let poller = pid.map(|pid| {
            let alarm = Arc::clone(&alarm);
            rt.spawn(async move {
                while !process_ended(pid) {
                    tokio::time::sleep(POLL).await;
                }
                tracing::debug!("Chromium (pid {pid}) has ended");
                alarm.send_replace(false);
            })
        });
        (Watch { rt, alive, limit }, alarm, poller)
    }

    /// Whether the browser is still there.
    pub fn is_alive(&self) -> bool {
        *self.alive.borrow()
    }

    /// Runs CDP call `fut` to its end, the browser's end (then [`BrowserGone`]), or
    /// the time limit. A call that times out (CDP's own timeout or the limit) has
    /// the browser probed through `page`: no answer is [`BrowserGone`], an answer
    /// leaves it the page's own failure. `doing` names the call in errors.
    pub fn call<T, E>(
        &self,
        doing: &str,
        page: Option<&Page>,
        fut: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let gone = |silent_for| BrowserGone {
            doing: doing.to_string(),
            silent_for,
        };
        let mut alive = self.alive.clone();
        self.rt.block_on(async move {
            let timed_out = tokio::select! {
                r = fut => match r {
                    Ok(v) => return Ok(v),
                    Err(e) => {
                        let e = anyhow::Error::new(e);
                        let timeout = matches!(e.downcast_ref::<CdpError>(), Some(CdpError::Timeout));
                        if !*self.alive.borrow() {
                            return Err(e.context(gone(None)));
                        }
                        if !timeout {
                            return Err(e.context(doing.to_string()));
                        }
                        Some(e)
                    }
                },
                _ = alive.wait_for(|up| !*up) => return Err(gone(None).into()),
                _ = tokio::time::sleep(self.limit) => None,
            };
            if !answers(page).await {
                return Err(gone(Some(self.limit)).into());
            }
            Err(match timed_out {
                Some(e) => e.context(doing.to_string()),
                None => anyhow::anyhow!(
                    "no answer within {} while {doing} (the browser itself answers)",
                    seconds(self.limit)
                ),
            })
        })
    }
}

/// Whether the browser answers `Browser.getVersion` within [`PROBE`] (handled by the
/// browser process, not the page's renderer).
async fn answers(page: Option<&Page>) -> bool {
    let Some(page) = page else { return false };
    matches!(
        tokio::time::timeout(PROBE, page.execute(GetVersionParams::default())).await,
        Ok(Ok(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_processes_are_told_from_running_ones() {
        assert!(!process_ended(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited but not reaped: a zombie.
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"))
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(process_ended(pid));
        child.wait().unwrap();
        assert!(process_ended(pid));
    }

    #[test]
    fn a_call_ends_when_the_browser_does() {
        let rt = Arc::new(tokio::runtime::Runtime::new().unwrap());
        let (w, alarm, _) = Watch::start(rt, None, Duration::from_secs(60));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            alarm.send_replace(false);
        });
        let never = std::future::pending::<Result<(), std::io::Error>>();
        let e = w.call("waiting", None, never).unwrap_err();
        assert!(is_browser_gone(&e), "{e:#}");
        assert!(e.to_string().contains("while waiting"), "{e:#}");
        // Said at once from then on.
        let e = w.call(
            "again",
            None,
            std::future::pending::<Result<(), std::io::Error>>(),
        );
        assert!(is_browser_gone(&e.unwrap_err()));
    }

    #[test]
    fn a_silent_call_without_a_page_to_probe_is_a_hang() {
        let rt = Arc::new(tokio::runtime::Runtime::new().unwrap());
        let (w, _alarm, _) = Watch::start(rt, None, Duration::from_millis(50));
        let never = std::future::pending::<Result<(), std::io::Error>>();
        let e = w.call("waiting", None, never).unwrap_err();
        assert!(
            e.to_string().contains("did not answer within 0.1 s"),
            "{e:#}"
        );
    }
}
