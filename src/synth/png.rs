//! Small, valid PNG images built deterministically (no image crate): an RGB gradient with a few
//! "UI" bars, stored with uncompressed deflate blocks. The IHDR carries the real width and
//! height, so tools that read image dimensions from the header see what was generated.

use rand::Rng;

fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (n, slot) in t.iter_mut().enumerate() {
            let mut c = n as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        t
    });
    let mut c = 0xFFFF_FFFFu32;
    for &b in data {
        c = table[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
    }
    c ^ 0xFFFF_FFFF
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += x as u32;
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// zlib stream of `raw` using stored (uncompressed) deflate blocks.
fn zlib_stored(raw: &[u8]) -> Vec<u8> {
    let mut z = Vec::with_capacity(raw.len() + raw.len() / 65535 * 5 + 16);
    z.extend_from_slice(&[0x78, 0x01]);
    let mut blocks = raw.chunks(65535).peekable();
    if blocks.peek().is_none() {
        z.extend_from_slice(&[1, 0, 0, 0xFF, 0xFF]);
    }
    while let Some(block) = blocks.next() {
        let last = blocks.peek().is_none();
        z.push(if last { 1 } else { 0 });
        let len = block.len() as u16;
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    z.extend_from_slice(&adler32(raw).to_be_bytes());
    z
}

/// A `width` x `height` 8-bit RGB PNG with a pattern drawn from `rng`.
pub fn make_png<R: Rng>(rng: &mut R, width: u32, height: u32) -> Vec<u8> {
    let c0: [u8; 3] = [rng.random(), rng.random(), rng.random()];
    let c1: [u8; 3] = [rng.random(), rng.random(), rng.random()];
    let bar: [u8; 3] = [rng.random(), rng.random(), rng.random()];
    let bars: Vec<(u32, u32)> = (0..rng.random_range(1..4))
        .map(|_| {
            let y = rng.random_range(0..height);
            (
                y,
                (y + rng.random_range(1..=height.div_ceil(6))).min(height),
            )
        })
        .collect();
    let mut raw = Vec::with_capacity(((width * 3 + 1) * height) as usize);
    for y in 0..height {
        raw.push(0); // filter: none
        let in_bar = bars.iter().any(|&(a, b)| y >= a && y < b);
        for x in 0..width {
            if in_bar && x > width / 10 && x < width - width / 10 {
                raw.extend_from_slice(&bar);
            } else {
                let t = (x + y) as f32 / (width + height).max(1) as f32;
                for k in 0..3 {
                    raw.push((c0[k] as f32 * (1.0 - t) + c1[k] as f32 * t) as u8);
                }
            }
        }
    }
    let mut png = Vec::with_capacity(raw.len() + 128);
    png.extend_from_slice(b"\x89PNG\r\n\x1a\n");
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &zlib_stored(&raw));
    chunk(&mut png, b"IEND", &[]);
    png
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, SeedableRng};

    #[test]
    fn png_header_has_dimensions() {
        let mut rng = StdRng::seed_from_u64(7);
        let png = make_png(&mut rng, 37, 21);
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let size = imagesize::blob_size(&png).unwrap();
        assert_eq!((size.width, size.height), (37, 21));
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
        assert_eq!(
            &png[png.len() - 8..],
            &[0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
        );
    }
}
