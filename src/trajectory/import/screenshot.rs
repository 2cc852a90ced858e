//! Screenshots of imported histories: where a `screenshot_path` may point, and
//! checking that the bytes are a real image (stored as PNG; other formats are
//! re-encoded).

use crate::util::fs::resolve_under;
use std::path::{Path, PathBuf};

/// What messages call the folder relative screenshot paths resolve against.
const HISTORY_FOLDER: &str = "the history's folder";

/// Where a step's screenshot comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ShotSource {
    /// Decoded from inline base64 (`state.screenshot`).
    Inline(Vec<u8>),
    /// `state.screenshot_path` as written in the history (not yet resolved).
    Path(String),
}

/// Where path screenshots may be read from.
#[derive(Debug, Clone)]
pub struct ShotPolicy<'a> {
    /// The history file's folder: relative paths resolve against it.
    pub base_dir: &'a Path,
    /// Absolute paths are accepted only inside this folder.
    pub root: Option<&'a Path>,
    /// Screenshot files larger than this are refused.
    pub max_bytes: u64,
}

/// Returns PNG bytes for a screenshot source, or a message saying why not.
pub fn load_png(src: &ShotSource, policy: &ShotPolicy) -> Result<Vec<u8>, String> {
    let bytes = match src {
        ShotSource::Inline(b) => b.clone(),
        ShotSource::Path(p) => read_limited(&resolve_shot_path(p, policy)?, policy.max_bytes)?,
    };
    to_png(bytes)
}

/// Resolves a history's `screenshot_path`: relative paths inside the history's folder
/// (no `..`, no link out of it); absolute paths only inside `--screenshot-root`.
pub fn resolve_shot_path(p: &str, policy: &ShotPolicy) -> Result<PathBuf, String> {
    let path = Path::new(p);
    if path.is_absolute() {
        let Some(root) = policy.root else {
            return Err(format!(
                "absolute screenshot path `{p}` refused (give --screenshot-root DIR to allow paths inside DIR)"
            ));
        };
        let real_root = root
            .canonicalize()
            .map_err(|e| format!("screenshot root {}: {e}", root.display()))?;
        let real = path
            .canonicalize()
            .map_err(|e| format!("screenshot `{p}`: {e}"))?;
        if !real.starts_with(&real_root) {
            return Err(format!(
                "screenshot path `{p}` lies outside the screenshot root {}",
                root.display()
            ));
        }
        return Ok(real);
    }
    let resolved = resolve_under(policy.base_dir, p, HISTORY_FOLDER)
        .map_err(|e| format!("screenshot {e:#}"))?;
    if !resolved.is_file() {
        return Err(format!(
            "screenshot `{p}` not found (looked at {})",
            resolved.display()
        ));
    }
    Ok(resolved)
}

/// True when `p` is a path the policy accepts but no file is there (a history whose
/// screenshot folder was cleaned up). Refused paths are never "missing".
pub fn is_missing(p: &str, policy: &ShotPolicy) -> bool {
    let path = Path::new(p);
    if path.is_absolute() {
        let inside = policy
            .root
            .and_then(|r| r.canonicalize().ok())
            .is_some_and(|root| {
                path.starts_with(&root)
                    && path
                        .components()
                        .all(|c| !matches!(c, std::path::Component::ParentDir))
            });
        return inside && !path.exists();
    }
    resolve_under(policy.base_dir, p, HISTORY_FOLDER).is_ok_and(|r| !r.exists())
}

fn read_limited(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    crate::util::fs::read_limited(path, max).map_err(|e| e.to_string())
}

/// Decodes the bytes fully (a truncated or fake image fails here) after checking the
/// dimensions in the header against [`crate::util::image`]'s caps; PNGs are kept as
/// they are, other formats re-encoded to PNG.
pub fn to_png(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let (img, format) = crate::util::image::decode(&bytes)?;
    if format == image::ImageFormat::Png {
        return Ok(bytes);
    }
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .map_err(|e| format!("re-encoding to PNG: {e}"))?;
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png() -> Vec<u8> {
        let img = image::RgbImage::from_pixel(4, 3, image::Rgb([10, 20, 30]));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn png_kept_jpeg_reencoded_garbage_refused() {
        let p = png();
        assert_eq!(to_png(p.clone()).unwrap(), p);
        let mut jpg = std::io::Cursor::new(Vec::new());
        image::RgbImage::from_pixel(4, 3, image::Rgb([1, 2, 3]))
            .write_to(&mut jpg, image::ImageFormat::Jpeg)
            .unwrap();
        let out = to_png(jpg.into_inner()).unwrap();
        assert_eq!(image::guess_format(&out).unwrap(), image::ImageFormat::Png);
        assert!(to_png(b"hello".to_vec()).is_err());
        assert!(to_png(p[..p.len() / 2].to_vec()).is_err());
    }

    #[test]
    fn oversized_images_are_refused_before_decoding() {
        let mut out = std::io::Cursor::new(Vec::new());
        image::GrayImage::new(1, 20_000)
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
        let e = to_png(out.into_inner()).unwrap_err();
        assert!(e.contains("1×20000 pixels is over the limit"), "{e}");
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let policy = ShotPolicy {
            base_dir: dir.path(),
            root: Some(Path::new("/dev")),
            max_bytes: 1 << 20,
        };
        let e = load_png(&ShotSource::Path("/dev/zero".into()), &policy).unwrap_err();
        assert!(e.contains("character device"), "{e}");
    }

    #[test]
    fn paths_are_confined() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.png"), png()).unwrap();
        let policy = ShotPolicy {
            base_dir: dir.path(),
            root: None,
            max_bytes: 1 << 20,
        };
        assert!(resolve_shot_path("a.png", &policy).is_ok());
        assert!(resolve_shot_path("../a.png", &policy).is_err());
        let abs = dir.path().join("a.png");
        let abs = abs.to_str().unwrap();
        assert!(
            resolve_shot_path(abs, &policy)
                .unwrap_err()
                .contains("--screenshot-root")
        );
        let with_root = ShotPolicy {
            root: Some(dir.path()),
            ..policy.clone()
        };
        assert!(resolve_shot_path(abs, &with_root).is_ok());
        let other = tempfile::tempdir().unwrap();
        let elsewhere = ShotPolicy {
            root: Some(other.path()),
            ..policy
        };
        assert!(
            resolve_shot_path(abs, &elsewhere)
                .unwrap_err()
                .contains("outside")
        );
    }
}
