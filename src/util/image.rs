//! Image size caps, checked from the header before any pixel is decoded: a
//! 20000×20000 PNG (400 MB of pixels from a few KiB of file) is refused, not decoded.

use image::{ImageFormat, ImageReader, Limits};
use std::io::Cursor;
use std::path::Path;

/// Longest side accepted, in pixels (a full-page screenshot of a long page fits).
pub const MAX_SIDE: u32 = 16_384;

/// Most pixels accepted: 64 Mpx, 256 MiB as RGBA.
pub const MAX_PIXELS: u64 = 64 << 20;

/// Largest image file read (a screenshot, even of a long page, is a few MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Checks that an image file can be read: a regular file (not a FIFO or device)
/// of at most [`MAX_FILE_BYTES`], without reading it. Errors name the path.
pub fn check_file(path: &Path) -> std::io::Result<u64> {
    let named =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let len = super::fs::open_regular(path)
        .and_then(|f| f.metadata())
        .map_err(named)?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: {} is over the {} limit",
                path.display(),
                super::human_bytes(len),
                super::human_bytes(MAX_FILE_BYTES)
            ),
        ));
    }
    Ok(len)
}

/// Reads an image file's bytes: [`super::fs::read_limited`] at [`MAX_FILE_BYTES`].
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    super::fs::read_limited(path, MAX_FILE_BYTES)
}

/// Refuses dimensions over [`MAX_SIDE`] or [`MAX_PIXELS`], with a message giving both.
pub fn check_dimensions(width: u32, height: u32) -> Result<(), String> {
    if width > MAX_SIDE || height > MAX_SIDE || u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(format!(
            "{width}×{height} pixels is over the limit of {MAX_SIDE} pixels a side and {} Mpx",
            MAX_PIXELS >> 20
        ));
    }
    Ok(())
}

/// Decoder limits matching the caps (and bounding the decoder's own allocations).
pub fn limits() -> Limits {
    let mut l = Limits::default();
    l.max_image_width = Some(MAX_SIDE);
    l.max_image_height = Some(MAX_SIDE);
    l.max_alloc = Some(MAX_PIXELS * 4 + (64 << 20));
    l
}

/// The dimensions in an image's header, checked against the caps.
pub fn dimensions(bytes: &[u8]) -> Result<(u32, u32), String> {
    let reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    let (w, h) = reader
        .into_dimensions()
        .map_err(|e| format!("not a readable image: {e}"))?;
    check_dimensions(w, h)?;
    Ok((w, h))
}

/// Decodes image bytes after checking their dimensions; returns the image and its format.
pub fn decode(bytes: &[u8]) -> Result<(image::DynamicImage, ImageFormat), String> {
    let format = image::guess_format(bytes).map_err(|e| format!("not an image: {e}"))?;
    dimensions(bytes)?;
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(limits());
    let img = reader
        .decode()
        .map_err(|e| format!("image does not decode ({format:?}): {e}"))?;
    Ok((img, format))
}

/// Reads and decodes an image file (a regular file of at most `max_bytes`) after
/// checking its dimensions.
pub fn open(path: &Path, max_bytes: u64) -> Result<image::DynamicImage, String> {
    let bytes = super::fs::read_limited(path, max_bytes).map_err(|e| e.to_string())?;
    decode(&bytes)
        .map(|(img, _)| img)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The dimensions of an image file, from its header only (checked against the caps).
pub fn file_dimensions(path: &Path) -> Result<(u32, u32), String> {
    let f = super::fs::open_regular(path).map_err(|e| e.to_string())?;
    let reader = ImageReader::new(std::io::BufReader::new(f))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    let (w, h) = reader.into_dimensions().map_err(|e| e.to_string())?;
    check_dimensions(w, h)?;
    Ok((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = image::GrayImage::new(w, h);
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn huge_dimensions_are_refused_from_the_header() {
        assert_eq!(dimensions(&png(4, 3)).unwrap(), (4, 3));
        assert!(decode(&png(4, 3)).is_ok());
        // 20000×1: cheap to make, over the side limit.
        let e = decode(&png(20_000, 1)).unwrap_err();
        assert!(e.contains("20000×1 pixels is over"), "{e}");
        assert!(check_dimensions(MAX_SIDE, 4096).is_ok());
        assert!(check_dimensions(MAX_SIDE, MAX_SIDE).is_err());
    }
}
