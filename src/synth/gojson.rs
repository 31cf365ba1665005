//! Compact JSON text exactly as Go's `encoding/json` writes it: no spaces, keys in the order the
//! caller writes them (struct order, or sorted for Go maps), `<`, `>`, `&`, U+2028 and U+2029
//! escaped as `\u003c`-style sequences, and floats in Go's shortest form (`0`, `0.0037`, `1e-7`).
//!
//! The writer appends straight into a `String`, so a large conversation is built without an
//! intermediate value tree.

/// Append `s` as a JSON string literal with Go's escaping (HTML-safe).
pub fn string(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            b'<' => Some("\\u003c"),
            b'>' => Some("\\u003e"),
            b'&' => Some("\\u0026"),
            0xE2 if i + 2 < bytes.len()
                && bytes[i + 1] == 0x80
                && (bytes[i + 2] == 0xA8 || bytes[i + 2] == 0xA9) =>
            {
                Some(if bytes[i + 2] == 0xA8 {
                    "\\u2028"
                } else {
                    "\\u2029"
                })
            }
            _ if b < 0x20 => None,
            _ => {
                i += 1;
                continue;
            }
        };
        out.push_str(&s[start..i]);
        match esc {
            Some(e) => {
                out.push_str(e);
                i += if b == 0xE2 { 3 } else { 1 };
            }
            None => {
                // Other control characters: \u00XX with lowercase hex, as Go writes them.
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xF) as usize] as char);
                i += 1;
            }
        }
        start = i;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// The length of `s` once written by [`string`] (without the quotes).
pub fn escaped_len(s: &str) -> usize {
    let mut n = s.len();
    for &b in s.as_bytes() {
        n += match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' => 1,
            b'<' | b'>' | b'&' => 5,
            _ if b < 0x20 => 5,
            _ => 0,
        };
    }
    n
}

/// A float64 as Go's `encoding/json` writes it.
pub fn float(out: &mut String, f: f64) {
    use std::fmt::Write;
    if f == 0.0 || !f.is_finite() {
        out.push('0');
        return;
    }
    let a = f.abs();
    if !(1e-6..1e21).contains(&a) {
        // Go: 'e' format, then "e-07" becomes "e-7"; positive exponents keep their sign.
        let e = format!("{f:e}");
        let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        if exp < 0 {
            let _ = write!(out, "{mant}e-{}", exp.unsigned_abs());
        } else {
            let _ = write!(out, "{mant}e+{exp:02}");
        }
    } else {
        // Rust's Display prints the shortest round-trip digits without an exponent.
        let _ = write!(out, "{f}");
    }
}

/// An object under construction. Every method appends one member (with its comma).
pub struct Obj<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Obj<'a> {
    pub fn start(out: &'a mut String) -> Self {
        out.push('{');
        Obj { out, first: true }
    }

    /// Write `"key":` and return the buffer for the value.
    pub fn field(&mut self, key: &str) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        string(self.out, key);
        self.out.push(':');
        self.out
    }

    pub fn str(&mut self, key: &str, v: &str) -> &mut Self {
        let o = self.field(key);
        string(o, v);
        self
    }

    pub fn int(&mut self, key: &str, v: i64) -> &mut Self {
        use std::fmt::Write;
        let o = self.field(key);
        let _ = write!(o, "{v}");
        self
    }

    pub fn float(&mut self, key: &str, v: f64) -> &mut Self {
        let o = self.field(key);
        float(o, v);
        self
    }

    pub fn bool(&mut self, key: &str, v: bool) -> &mut Self {
        let o = self.field(key);
        o.push_str(if v { "true" } else { "false" });
        self
    }

    /// A value that is already compact JSON text.
    pub fn raw(&mut self, key: &str, json: &str) -> &mut Self {
        let o = self.field(key);
        o.push_str(json);
        self
    }

    pub fn end(self) {
        self.out.push('}');
    }
}

/// An array under construction.
pub struct Arr<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Arr<'a> {
    pub fn start(out: &'a mut String) -> Self {
        out.push('[');
        Arr { out, first: true }
    }

    /// Append a comma if needed and return the buffer for the next element.
    pub fn item(&mut self) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        self.out
    }

    pub fn str(&mut self, v: &str) -> &mut Self {
        let o = self.item();
        string(o, v);
        self
    }

    pub fn end(self) {
        self.out.push(']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> String {
        let mut o = String::new();
        string(&mut o, x);
        o
    }

    fn f(x: f64) -> String {
        let mut o = String::new();
        float(&mut o, x);
        o
    }

    #[test]
    fn go_string_escaping() {
        assert_eq!(s("a<b>&c"), r#""a\u003cb\u003e\u0026c""#);
        assert_eq!(s("q\"\\\n\t\r"), r#""q\"\\\n\t\r""#);
        assert_eq!(s("\u{1}x"), r#""\u0001x""#);
        assert_eq!(s("é\u{2028}ü\u{2029}"), "\"é\\u2028ü\\u2029\"");
        // Escaped text parses back to the original.
        let orig = "fn main() { if a < b && c > d { println!(\"\u{2028}\"); } }";
        assert_eq!(serde_json::from_str::<String>(&s(orig)).unwrap(), orig);
        // U+2028 (3 bytes) becomes a 6-byte escape, which escaped_len does not count.
        assert_eq!(escaped_len(orig) + 2 + 3, s(orig).len());
    }

    #[test]
    fn go_floats() {
        assert_eq!(f(0.0), "0");
        assert_eq!(f(2.0), "2");
        assert_eq!(f(0.0037), "0.0037");
        assert_eq!(f(0.0000001), "1e-7");
        assert_eq!(f(0.000001), "0.000001");
        assert_eq!(f(1.25e21), "1.25e+21");
    }

    #[test]
    fn objects_and_arrays() {
        let mut out = String::new();
        let mut o = Obj::start(&mut out);
        o.str("type", "text").int("n", 3).bool("ok", false);
        {
            let mut a = Arr::start(o.field("list"));
            a.str("x").str("y");
            a.end();
        }
        o.end();
        assert_eq!(out, r#"{"type":"text","n":3,"ok":false,"list":["x","y"]}"#);
    }
}
