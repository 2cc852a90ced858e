//! SFT chat samples built from a dataset's successful trajectories.
//!
//! SFT trains on exactly the curate stage's flattened samples
//! ([`crate::curate::flatten`]): the project prompt renderer's messages and the
//! step's Browser Use output, plus extraction samples.

use crate::model::Message;
use crate::trajectory::Dataset;
use anyhow::Result;

/// The SFT chats of a dataset: exactly the curate stage's flattened samples
/// (`sft/samples.jsonl` when it is at least as new as the trajectories, otherwise the
/// filter's kept trajectories flattened in memory through the project prompt
/// renderer). Unreadable files are an error naming file and line.
pub fn from_dataset(ds: &Dataset) -> Result<Vec<Vec<Message>>> {
    Ok(with_screenshots(ds)?.into_iter().map(|(c, _)| c).collect())
}

/// The SFT chats of a dataset ([`from_dataset`]) with the screenshot each last user
/// message describes (the sample's last image, resolved inside the dataset root).
pub fn with_screenshots(ds: &Dataset) -> Result<Vec<(Vec<Message>, Option<std::path::PathBuf>)>> {
    with_screenshots_of(ds, crate::curate::current_samples(ds)?)
}

/// [`with_screenshots`] of samples already read from `ds`.
pub fn with_screenshots_of(
    ds: &Dataset,
    samples: Vec<crate::curate::flatten::Sample>,
) -> Result<Vec<(Vec<Message>, Option<std::path::PathBuf>)>> {
    samples
        .into_iter()
        .map(|s| {
            let image = s.images.last().map(|rel| ds.resolve(rel)).transpose()?;
            let chat = s
                .messages
                .into_iter()
                .map(|m| Message::new(&m.role, m.content))
                .collect();
            Ok((chat, image))
        })
        .collect()
}
