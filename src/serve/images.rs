//! Images in chat requests (`image_url` parts with base64 `data:` URLs) for a served
//! Qwen3-VL model. The model sees one image per request, the last one sent (the
//! current screenshot of a browser agent's step); earlier images are dropped, and a
//! text model drops them all. The server fetches nothing: other URLs are refused.

use super::error::ApiError;
use base64::Engine as _;
use serde_json::Value;
use std::sync::Arc;

/// The image a request shows the model, decoded.
#[derive(Debug, Clone)]
pub struct RequestImage {
    /// Where it was sent (`messages[1].content[2].image_url.url`).
    pub field: String,
    pub image: Arc<image::DynamicImage>,
}

/// The URL of an `image_url` part (`{"url": ...}` or, as some clients send, the bare
/// string) and its field name; `part` is `messages[i].content[j]`.
pub fn image_url<'a>(p: &'a Value, part: &str) -> Result<(&'a str, String), ApiError> {
    match p.get("image_url") {
        Some(Value::String(u)) => Ok((u, format!("{part}.image_url"))),
        Some(v) => {
            let field = format!("{part}.image_url.url");
            v.get("url")
                .and_then(Value::as_str)
                .map(|u| (u, field.clone()))
                .ok_or_else(|| ApiError::invalid(field, "an image part needs a `url` string"))
        }
        None => Err(ApiError::invalid(
            format!("{part}.image_url"),
            "an image part needs `image_url`",
        )),
    }
}

/// Decodes a `data:image/…;base64,…` URL into an image; errors name `field`.
pub fn decode_data_url(url: &str, field: &str) -> Result<RequestImage, ApiError> {
    let bad = |m: String| ApiError::invalid(field, m);
    let rest = url.strip_prefix("data:").ok_or_else(|| {
        bad("only `data:` URLs with a base64 PNG or JPEG are accepted (this server fetches nothing)".into())
    })?;
    let (meta, data) = rest
        .split_once(',')
        .ok_or_else(|| bad("a data URL needs a `,` before its data".into()))?;
    if !meta.ends_with(";base64") {
        return Err(bad(
            "the data URL must be base64 (`data:image/png;base64,…`)".into(),
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| bad(format!("invalid base64: {e}")))?;
    // The dimensions in the header are checked against the caps before any pixel
    // is decoded (a 13000×13000 PNG is a few hundred KiB of base64).
    let (image, _) = crate::util::image::decode(&bytes)
        .map_err(|e| bad(format!("not a PNG or JPEG image within the limits: {e}")))?;
    Ok(RequestImage {
        field: field.to_string(),
        image: Arc::new(image),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn png_url() -> String {
        let mut bytes = Vec::new();
        image::RgbImage::from_pixel(4, 3, image::Rgb([1, 2, 3]))
            .write_to(
                &mut std::io::Cursor::new(&mut bytes),
                image::ImageFormat::Png,
            )
            .unwrap();
        format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )
    }

    #[test]
    fn a_base64_png_decodes_and_bad_urls_name_their_field() {
        let img = decode_data_url(&png_url(), "f").unwrap();
        assert_eq!((img.image.width(), img.image.height()), (4, 3));
        for (url, says) in [
            ("https://example.com/a.png", "fetches nothing"),
            ("data:image/png;base64", "`,`"),
            ("data:image/png,abc", "must be base64"),
            ("data:image/png;base64,@@@", "invalid base64"),
            ("data:image/png;base64,aGVsbG8=", "not a PNG or JPEG"),
        ] {
            let e = decode_data_url(url, "messages[1].content[0].image_url.url").unwrap_err();
            assert_eq!(
                e.param.as_deref(),
                Some("messages[1].content[0].image_url.url")
            );
            assert!(e.message.contains(says), "{url}: {}", e.message);
        }
    }

    /// The README's cap (64 Mpx) holds for requests: a 13000×13000 PNG (169 Mpx,
    /// a few hundred KiB of file) is refused from its header, never decoded.
    #[test]
    fn images_over_the_pixel_cap_are_refused_undecoded() {
        let mut bytes = Vec::new();
        image::GrayImage::new(13_000, 13_000)
            .write_to(
                &mut std::io::Cursor::new(&mut bytes),
                image::ImageFormat::Png,
            )
            .unwrap();
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        );
        let e = decode_data_url(&url, "messages[0].content[1].image_url.url").unwrap_err();
        assert!(e.message.contains("13000×13000"), "{}", e.message);
        assert_eq!(
            e.param.as_deref(),
            Some("messages[0].content[1].image_url.url")
        );
    }

    #[test]
    fn image_urls_come_as_objects_or_strings() {
        let (a, b) = (
            json!({"image_url": {"url": "data:x"}}),
            json!({"image_url": "data:y"}),
        );
        let (u, f) = image_url(&a, "p").unwrap();
        assert_eq!((u, f.as_str()), ("data:x", "p.image_url.url"));
        let (u, f) = image_url(&b, "p").unwrap();
        assert_eq!((u, f.as_str()), ("data:y", "p.image_url"));
        let e = image_url(&json!({"image_url": {}}), "p").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("p.image_url.url"));
    }
}
