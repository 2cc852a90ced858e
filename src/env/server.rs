//! A static file server on 127.0.0.1 (random port) for a local page tree such as the
//! MiniWoB++ html folder (its flight tasks need http, not file://).

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

/// A running static server; it stops when dropped.
pub struct StaticServer {
    addr: SocketAddr,
    root: PathBuf,
    stop: Option<oneshot::Sender<()>>,
}

impl StaticServer {
    /// Serves `root` on 127.0.0.1 at a free port, on the given runtime.
    pub fn start(rt: &Runtime, root: &Path) -> Result<StaticServer> {
        let root = root.to_path_buf();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .context("binding the static server to 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let app = axum::Router::new().fallback_service(tower_http::services::ServeDir::new(&root));
        let (tx, rx) = oneshot::channel::<()>();
        rt.spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::warn!("static server stopped: {e}");
            }
        });
        Ok(StaticServer {
            addr,
            root,
            stop: Some(tx),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The folder it serves.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The URL of a path relative to the served root (`miniwob/click-button.html`).
    pub fn url(&self, rel: &str) -> String {
        format!("http://{}/{}", self.addr, rel.trim_start_matches('/'))
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}
