//! Base URLs as agent-db shows them: a credential written into the URL itself (a password or a
//! bare user name in the userinfo, query values, a fragment) is masked as `***`, while the
//! scheme, host, port and path stay readable. Every place that prints a base URL or an endpoint
//! (errors, `agent-db config`, the strategy line, reports, logs) goes through [`mask_url`];
//! texts that might quote the URL (error bodies, transport errors) go through [`scrub_url`].
//!
//! The URL text is split by hand rather than parsed, so what is shown is exactly what the user
//! wrote, minus the secrets (a parser would normalize it, and rejects some inputs outright).

/// The mask put where a secret was.
pub const MASK: &str = "***";

/// Secret parts shorter than this are not scrubbed from free text (as with [`super::Secret`]):
/// replacing every `1` or `on` in a message would garble it and protect nothing.
const MIN_SCRUB_LEN: usize = 4;

/// The pieces of a URL text: `{head}{userinfo@}{rest}?{query}#{fragment}`.
struct Parts<'a> {
    /// `scheme://` (or empty when there is no scheme).
    head: &'a str,
    /// The userinfo, without its `@`.
    userinfo: Option<&'a str>,
    /// Host, port and path.
    rest: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

fn split(url: &str) -> Parts<'_> {
    let (before_fragment, fragment) = match url.split_once('#') {
        Some((a, f)) => (a, Some(f)),
        None => (url, None),
    };
    let (before_query, query) = match before_fragment.split_once('?') {
        Some((a, q)) => (a, Some(q)),
        None => (before_fragment, None),
    };
    let authority_start = before_query.find("://").map_or(0, |i| i + 3);
    let (head, after_head) = before_query.split_at(authority_start);
    let authority_end = after_head.find('/').unwrap_or(after_head.len());
    let (userinfo, rest) = match after_head[..authority_end].rfind('@') {
        Some(at) => (Some(&after_head[..at]), &after_head[at + 1..]),
        None => (None, after_head),
    };
    Parts {
        head,
        userinfo,
        rest,
        query,
        fragment,
    }
}

/// `url` with its credentials masked: `https://user:***@host:8443/v1?key=***&org=***#***`. A
/// userinfo without a password is masked whole (tokens are often passed as the user name).
pub fn mask_url(url: &str) -> String {
    let p = split(url);
    let mut out = String::with_capacity(url.len());
    out.push_str(p.head);
    if let Some(ui) = p.userinfo {
        match ui.split_once(':') {
            Some((user, _)) => {
                out.push_str(user);
                out.push(':');
                out.push_str(MASK);
            }
            None => out.push_str(MASK),
        }
        out.push('@');
    }
    out.push_str(p.rest);
    if let Some(q) = p.query {
        out.push('?');
        let pairs: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) => format!("{k}={MASK}"),
                None if pair.is_empty() => String::new(),
                None => MASK.to_string(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    if let Some(f) = p.fragment {
        out.push('#');
        if !f.is_empty() {
            out.push_str(MASK);
        }
    }
    out
}

/// The secret parts of `url` (the password or bare user name, each query value, the fragment),
/// as written and percent-decoded, longest first.
fn secrets(url: &str) -> Vec<String> {
    use base64::Engine;
    let p = split(url);
    let mut found: Vec<&str> = Vec::new();
    let mut basic = None;
    if let Some(ui) = p.userinfo {
        found.push(ui.split_once(':').map_or(ui, |(_, pw)| pw));
        // reqwest sends a userinfo as `Authorization: Basic base64(user:password)`; a server
        // that echoes its headers would quote that.
        let pair = match ui.contains(':') {
            true => percent_decode(ui),
            false => format!("{}:", percent_decode(ui)),
        };
        basic = Some(base64::engine::general_purpose::STANDARD.encode(pair));
    }
    if let Some(q) = p.query {
        for pair in q.split('&') {
            found.push(pair.split_once('=').map_or(pair, |(_, v)| v));
        }
    }
    found.extend(p.fragment);
    found.extend(basic.as_deref());
    let mut out: Vec<String> = Vec::new();
    for s in found {
        for v in [s.to_string(), percent_decode(s)] {
            if v.len() >= MIN_SCRUB_LEN && !out.contains(&v) {
                out.push(v);
            }
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

/// `text` with every secret part of `url` (see [`mask_url`]) replaced by `***`: for texts that
/// may quote the URL, such as a server's error body or a transport error.
pub fn scrub_url(url: &str, text: &str) -> String {
    let mut text = text.to_string();
    for s in secrets(url) {
        if text.contains(&s) {
            text = text.replace(&s, MASK);
        }
    }
    text
}

/// `base` with `path` appended to its path, before any query or fragment: a gateway that takes
/// its key as `?key=…` still gets the request at `{base path}{path}?key=…`.
pub fn join(base: &str, path: &str) -> String {
    let cut = base.find(['?', '#']).unwrap_or(base.len());
    let (before, after) = base.split_at(cut);
    format!("{}{path}{after}", before.trim_end_matches('/'))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied(), b.get(i + 2).copied()) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_userinfo_query_and_fragment_and_keeps_the_rest() {
        let cases = [
            ("https://api.openai.com/v1", "https://api.openai.com/v1"),
            ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
            (
                "https://user:sk-secret@host:8443/v1",
                "https://user:***@host:8443/v1",
            ),
            ("https://sk-token@host/v1", "https://***@host/v1"),
            (
                "https://gw.example/v1?key=sk-abc&org=acme",
                "https://gw.example/v1?key=***&org=***",
            ),
            ("https://gw.example/v1?sk-bare", "https://gw.example/v1?***"),
            ("https://gw.example/v1?", "https://gw.example/v1?"),
            ("https://h/v1#frag-secret", "https://h/v1#***"),
            (
                "http://u:p@ss@h:1/p?a=1&&b#c",
                "http://u:***@h:1/p?a=***&&***#***",
            ),
            // An `@` in the path is not a userinfo.
            ("https://h/v1/@models", "https://h/v1/@models"),
            ("user:pw@host:8080/v1", "user:***@host:8080/v1"),
            ("", ""),
        ];
        for (url, want) in cases {
            assert_eq!(mask_url(url), want, "{url}");
        }
    }

    #[test]
    fn scrubs_every_secret_part_also_percent_decoded() {
        let url = "https://me:pa%24%24word@h/v1?key=sk-query-123&v=1";
        let text = "GET /v1?key=sk-query-123&v=1 by me:pa$$word (pa%24%24word), v=1";
        let got = scrub_url(url, text);
        assert_eq!(got, "GET /v1?key=***&v=1 by me:*** (***), v=1");
        assert_eq!(
            scrub_url("http://127.0.0.1:1/v1", "no secrets"),
            "no secrets"
        );
        // base64("me:pa$$word"), as in a Basic authorization header.
        assert_eq!(
            scrub_url(url, "authorization: Basic bWU6cGEkJHdvcmQ="),
            "authorization: Basic ***"
        );
    }

    #[test]
    fn join_puts_the_path_before_the_query() {
        assert_eq!(join("http://h/v1/", "/chat"), "http://h/v1/chat");
        assert_eq!(join("http://h/v1?key=k", "/chat"), "http://h/v1/chat?key=k");
        assert_eq!(join("http://h/?key=k#f", "/v1/m"), "http://h/v1/m?key=k#f");
        assert_eq!(join("http://h", "/v1/m"), "http://h/v1/m");
    }
}
