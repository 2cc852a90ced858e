//! Gates a candidate must pass to be kept (ALGORITHMS.md §4.6): validity (both
//! actions are known actions and the target is executable in the success state),
//! visual context (the success state has a screenshot inside the dataset that decodes
//! as an image) and progress (`|p_i − p_j|` within the gate).

use crate::action::Action;
use crate::trajectory::State;
use crate::util::fs::resolve_inside;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why the validity gate failed, if it did.
pub fn validity(target: &Action, loc_action: &Action, success_state: &State) -> Result<(), String> {
    if !target.is_known() {
        return Err(format!(
            "target action `{}` is not a known action",
            target.name
        ));
    }
    if !loc_action.is_known() {
        return Err(format!(
            "loc action `{}` is not a known action",
            loc_action.name
        ));
    }
    if let Some(idx) = target.target_index()
        && success_state.element(idx).is_none()
    {
        return Err(format!("target element {idx} is not in the success state"));
    }
    if target.params.contains_key("index") && target.target_index().is_none() {
        return Err("target index is not an integer".into());
    }
    Ok(())
}

/// Whether the progress gap is within the gate.
pub fn progress_ok(p_success: f64, p_loc: f64, gate: f64) -> bool {
    (p_success - p_loc).abs() <= gate + 1e-12
}

/// The visual gate, remembering each screenshot's verdict (one task's states often
/// share screenshots, and only the header of an image is read).
#[derive(Debug)]
pub struct VisualGate {
    root: PathBuf,
    seen: HashMap<String, Result<(), String>>,
}

impl VisualGate {
    /// A gate resolving screenshot paths inside the dataset `root`.
    pub fn new(root: &Path) -> Self {
        VisualGate {
            root: root.to_path_buf(),
            seen: HashMap::new(),
        }
    }

    /// Why the state's screenshot is unusable, if it is.
    pub fn check(&mut self, shot: Option<&str>) -> Result<(), String> {
        let Some(rel) = shot.filter(|s| !s.trim().is_empty()) else {
            return Err("the success state has no screenshot".into());
        };
        if let Some(r) = self.seen.get(rel) {
            return r.clone();
        }
        let r = readable_image(&self.root, rel);
        self.seen.insert(rel.to_string(), r.clone());
        r
    }
}

fn readable_image(root: &Path, rel: &str) -> Result<(), String> {
    let path = resolve_inside(root, rel).map_err(|e| format!("screenshot: {e}"))?;
    let reader = image::ImageReader::open(&path)
        .map_err(|e| format!("screenshot {rel}: {e}"))?
        .with_guessed_format()
        .map_err(|e| format!("screenshot {rel}: {e}"))?;
    let (w, h) = reader
        .into_dimensions()
        .map_err(|e| format!("screenshot {rel}: not a readable image ({e})"))?;
    if w == 0 || h == 0 {
        return Err(format!("screenshot {rel}: empty image"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visual_gate_needs_a_real_image_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let img = image::RgbImage::new(4, 3);
        img.save(dir.path().join("ok.png")).unwrap();
        std::fs::write(dir.path().join("bad.png"), b"not a png").unwrap();
        let mut g = VisualGate::new(dir.path());
        assert!(g.check(Some("ok.png")).is_ok());
        assert!(g.check(Some("bad.png")).is_err());
        assert!(g.check(Some("missing.png")).is_err());
        assert!(g.check(Some("../ok.png")).is_err());
        assert!(g.check(None).is_err());
    }
}
