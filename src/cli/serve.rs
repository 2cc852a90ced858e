//! `rmsweb serve`.

use rmsweb::policy::format::PromptFormat;
use rmsweb::serve::limits::{
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_STOP_BYTES, Limits,
};
use rmsweb::serve::{ServeConfig, serve};
use std::path::PathBuf;

/// Arguments of `rmsweb serve`.
#[derive(clap::Args)]
pub struct Args {
    /// A model folder, a run checkpoint (`runs/ID/checkpoints/step-N`), or a run
    /// folder (its latest checkpoint).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port (0: any free port; the address is printed).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// `cpu` or `cuda:N`.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// The model id clients send (default: the checkpoint folder's name).
    #[arg(long)]
    pub model_name: Option<String>,
    /// Most sequences decoded together.
    #[arg(long, default_value_t = 16)]
    pub max_batch: usize,
    /// Prompt positions whose keys are kept so that later prompts sharing a prefix
    /// (the system prompt, the last step's page) encode only what follows it; 0: none.
    #[arg(long, default_value_t = 8192)]
    pub prefix_positions: usize,
    /// Append every exchange to DIR/serve/exchanges.jsonl and every finished Browser
    /// Use session to the dataset DIR as a trajectory.
    #[arg(long)]
    pub log_dataset: Option<PathBuf>,
    /// Replace each request's system message by this prompt format's (the one the
    /// model was trained with), e.g. `browser-use` for models trained on that format.
    #[arg(long, value_enum)]
    pub prompt_format: Option<PromptFormat>,
    /// Largest request body in bytes; larger ones are refused (413) before they are
    /// read whole.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_body_bytes: u64,
    /// Largest text of one message in bytes; larger messages are refused before the
    /// prompt is tokenized.
    #[arg(long, default_value_t = DEFAULT_MAX_MESSAGE_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_message_bytes: u64,
    /// Longest stop sequence in bytes (each is searched for after every token).
    #[arg(long, default_value_t = DEFAULT_MAX_STOP_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_stop_bytes: u64,
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    serve(ServeConfig {
        checkpoint: a.checkpoint,
        host: a.host,
        port: a.port,
        device: a.device,
        model_name: a.model_name,
        max_batch: a.max_batch,
        prefix_positions: a.prefix_positions,
        log_dataset: a.log_dataset,
        prompt_format: a.prompt_format,
        limits: Limits {
            max_body_bytes: usize::try_from(a.max_body_bytes).unwrap_or(usize::MAX),
            max_message_bytes: usize::try_from(a.max_message_bytes).unwrap_or(usize::MAX),
            max_stop_bytes: usize::try_from(a.max_stop_bytes).unwrap_or(usize::MAX),
        },
    })
}
