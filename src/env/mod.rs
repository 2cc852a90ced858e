//! Live environment: a headless Chromium owned over CDP ([`Chrome`]), a static server
//! for local pages ([`StaticServer`]), Browser Use style observations ([`observe`]),
//! actions executed as real input events ([`act`]), the MiniWoB++ suite
//! ([`miniwob`]) and live-web tasks' sites ([`web`]).

pub mod act;
pub mod chrome;
pub mod miniwob;
pub mod observe;
pub mod server;
pub mod tab;
pub mod watch;
pub mod web;

pub use chrome::{Chrome, ChromeOptions, DEFAULT_CHROMIUM};
pub use miniwob::{MiniwobEnv, PageReward};
pub use observe::Observation;
pub use server::StaticServer;
pub use tab::{ObserveOptions, Tab};
pub use watch::{BrowserGone, is_browser_gone};
pub use web::WebEnv;
