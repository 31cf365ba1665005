//! Images inside messages: their decoded size, their dimensions when the header can be read,
//! and what a model would bill for them (never their base64 length).

use base64::Engine;
use serde::Serialize;

/// What agent-db knows about one image.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImageInfo {
    pub media_type: Option<String>,
    /// Decoded payload size in bytes (0 for a URL reference).
    pub bytes: usize,
    pub width: Option<u32>,
    pub height: Option<u32>,
    /// `true` when the image is a URL, not inline data.
    pub url: bool,
}

impl ImageInfo {
    /// From inline base64 data.
    pub fn from_base64(media_type: Option<&str>, data: &str) -> ImageInfo {
        let data = data.trim();
        let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
        let bytes = (data.len() / 4) * 3
            + match data.len() % 4 {
                2 => 1,
                3 => 2,
                _ => 0,
            }
            - padding.min(2);
        // Headers sit at the start; JPEG SOF may follow EXIF data, so decode up to ~96 KB.
        let prefix_len = data.len().min(128 * 1024) / 4 * 4;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&data[..prefix_len])
            .ok();
        let dims = decoded
            .as_deref()
            .and_then(|d| imagesize::blob_size(d).ok());
        ImageInfo {
            media_type: media_type.map(str::to_string),
            bytes,
            width: dims.map(|d| d.width as u32),
            height: dims.map(|d| d.height as u32),
            url: false,
        }
    }

    /// From an `image_url` value: a `data:` URL is decoded, anything else is a reference.
    pub fn from_url(url: &str) -> ImageInfo {
        if let Some(rest) = url.strip_prefix("data:") {
            if let Some((head, data)) = rest.split_once(',') {
                let media = head.split(';').next().filter(|m| !m.is_empty());
                if head.ends_with(";base64") {
                    return ImageInfo::from_base64(media, data);
                }
            }
        }
        ImageInfo {
            media_type: None,
            bytes: 0,
            width: None,
            height: None,
            url: true,
        }
    }

    /// A short placeholder such as `[image: image/png 640x480, 12.3 KiB]`.
    pub fn placeholder(&self) -> String {
        let mut s = String::from("[image");
        if let Some(m) = &self.media_type {
            s.push_str(": ");
            s.push_str(m);
        }
        if let (Some(w), Some(h)) = (self.width, self.height) {
            s.push_str(&format!(" {w}x{h}"));
        }
        if self.bytes > 0 {
            s.push_str(&format!(
                ", {}",
                crate::util::human_bytes(self.bytes as u64)
            ));
        }
        s.push(']');
        s
    }

    /// Tokens Anthropic bills: about width×height/750 after resizing to fit 1568 px on the long
    /// edge and ~1.15 megapixels; 1,600 (the cap) when the size is unknown.
    pub fn anthropic_tokens(&self) -> usize {
        match (self.width, self.height) {
            (Some(w), Some(h)) if w > 0 && h > 0 => {
                let (mut w, mut h) = (w as f64, h as f64);
                let long = w.max(h);
                if long > 1568.0 {
                    let s = 1568.0 / long;
                    w *= s;
                    h *= s;
                }
                let area = w * h;
                if area > 1_150_000.0 {
                    let s = (1_150_000.0 / area).sqrt();
                    w *= s;
                    h *= s;
                }
                ((w * h) / 750.0).ceil().clamp(1.0, 1600.0) as usize
            }
            _ => 1600,
        }
    }

    /// Tokens OpenAI bills at high detail: 85 + 170 per 512-px tile after fitting in 2048×2048
    /// and scaling the short side to 768; 765 (a 1024×1024 image) when the size is unknown.
    pub fn openai_tokens(&self) -> usize {
        match (self.width, self.height) {
            (Some(w), Some(h)) if w > 0 && h > 0 => {
                let (mut w, mut h) = (w as f64, h as f64);
                let long = w.max(h);
                if long > 2048.0 {
                    let s = 2048.0 / long;
                    w *= s;
                    h *= s;
                }
                let short = w.min(h);
                if short > 768.0 {
                    let s = 768.0 / short;
                    w *= s;
                    h *= s;
                }
                let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
                85 + 170 * tiles as usize
            }
            _ => 765,
        }
    }
}

/// Replace OpenAI chat `image_url` parts (`{"type":"image_url","image_url":{"url":…}}`) by text
/// placeholders; whether any was replaced. Every codec whose messages use that part shape
/// prunes images with it.
pub(crate) fn elide_image_parts(parts: &mut [serde_json::Value]) -> bool {
    let mut changed = false;
    for p in parts.iter_mut() {
        if super::str_field(p, "type") == Some("image_url") {
            let url = p
                .get("image_url")
                .and_then(|u| super::str_field(u, "url"))
                .unwrap_or("");
            let text = ImageInfo::from_url(url).placeholder();
            *p = serde_json::json!({"type": "text", "text": text});
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal valid PNG header for a w×h image (signature + IHDR).
    fn png_b64(w: u32, h: u32) -> String {
        let mut b = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
        b.extend_from_slice(b"IHDR");
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    #[test]
    fn reads_dimensions_and_size() {
        let data = png_b64(1000, 500);
        let img = ImageInfo::from_base64(Some("image/png"), &data);
        assert_eq!((img.width, img.height), (Some(1000), Some(500)));
        assert_eq!(img.bytes, 33);
        assert_eq!(img.anthropic_tokens(), 667);
        // 1000x500 -> short side 500 (no scale) -> 2x1 tiles
        assert_eq!(img.openai_tokens(), 85 + 170 * 2);
        let url = ImageInfo::from_url(&format!("data:image/png;base64,{data}"));
        assert_eq!(url, img);
    }

    #[test]
    fn unknown_images_count_the_cap() {
        let img = ImageInfo::from_url("https://example.com/a.png");
        assert!(img.url);
        assert_eq!(img.anthropic_tokens(), 1600);
        assert_eq!(img.openai_tokens(), 765);
        let junk = ImageInfo::from_base64(None, "not base64 at all!");
        assert_eq!(junk.width, None);
    }
}
