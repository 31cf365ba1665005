//! Retries (via `backon`) and the HTTP plumbing both wire formats share: sending a JSON POST,
//! classifying transport failures (a body cut off mid-transfer is retried like a connection
//! error), refusing redirects, and turning a non-2xx answer into a scrubbed
//! [`ProviderError::Status`] with the server's `Retry-After`.

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use reqwest::header::{HeaderMap, HeaderValue};

use super::{redact, ClientConfig, Completion, ProviderError, Secret};

/// The longest backoff between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The longest server-requested `Retry-After` we honour.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);
/// The longest error-body excerpt kept in a [`ProviderError::Status`], in characters.
const EXCERPT_CHARS: usize = 500;

/// Run `f` (one HTTP attempt) until it succeeds, fails with a non-retryable error, or
/// `cfg.max_retries` retries are spent. Delays grow exponentially from `cfg.initial_backoff`
/// (with jitter, capped at 60 s); a server's `Retry-After` replaces a shorter computed delay.
/// The returned [`Completion::attempts`] counts the HTTP attempts made.
pub(crate) async fn with_retries<F, Fut>(
    cfg: &ClientConfig,
    mut f: F,
) -> Result<Completion, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Completion, ProviderError>>,
{
    // Atomic rather than a `Cell` so the future stays `Send` (callers may `tokio::spawn` it).
    let attempts = AtomicUsize::new(0);
    let backoff = ExponentialBuilder::default()
        .with_jitter()
        // backon without its `std` feature seeds jitter with a constant: every process would
        // then back off in lockstep. Seed it from std's per-process random hasher keys instead.
        .with_jitter_seed(random_seed())
        .with_min_delay(cfg.initial_backoff)
        .with_max_delay(MAX_BACKOFF.max(cfg.initial_backoff))
        .with_max_times(cfg.max_retries);
    let result = (|| {
        attempts.fetch_add(1, Ordering::Relaxed);
        f()
    })
    .retry(backoff)
    .sleep(tokio::time::sleep)
    .when(ProviderError::retryable)
    // `backoff` is `None` once the retries are spent: keep it `None` so a `Retry-After` never
    // extends the retry budget.
    .adjust(|err: &ProviderError, backoff: Option<Duration>| {
        backoff.map(|computed| {
            err.retry_after()
                .map_or(computed, |server| server.max(computed))
        })
    })
    .notify(|err: &ProviderError, delay: Duration| {
        tracing::warn!(
            attempt = attempts.load(Ordering::Relaxed),
            ?delay,
            "retrying after: {err}"
        );
    })
    .await;
    result.map(|mut completion| {
        completion.attempts = attempts.load(Ordering::Relaxed);
        completion
    })
}

fn random_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// The API key when one is configured and non-empty.
pub(super) fn key(cfg: &ClientConfig) -> Option<&Secret> {
    cfg.api_key.as_ref().filter(|k| !k.is_empty())
}

/// Remove the key (if any) and the secret parts of the base URL (see [`redact::mask_url`])
/// from `text`.
pub(super) fn scrub(cfg: &ClientConfig, text: &str) -> String {
    let text = redact::scrub_url(&cfg.base_url, text);
    match key(cfg) {
        Some(k) => k.scrub(&text),
        None => text,
    }
}

/// `{base_url}{path}` (before the base URL's query, if any), tolerating a trailing slash on
/// the base. This is the URL requested; show it only through [`shown_endpoint`].
pub(super) fn endpoint(cfg: &ClientConfig, path: &str) -> String {
    redact::join(&cfg.base_url, path)
}

/// [`endpoint`] as errors show it: masked and scrubbed of the key.
pub(super) fn shown_endpoint(cfg: &ClientConfig, path: &str) -> String {
    scrub(cfg, &redact::mask_url(&endpoint(cfg, path)))
}

/// A header value carrying the key, marked sensitive so it never shows in `Debug` output.
pub(super) fn secret_header(value: &str) -> Result<HeaderValue, ProviderError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        ProviderError::Config(
            "the API key contains characters that are not allowed in an HTTP header".into(),
        )
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// A 2xx answer's body, or a non-2xx answer's status, headers and body.
pub(super) enum Reply {
    Ok(String),
    Failed {
        status: u16,
        headers: HeaderMap,
        body: String,
    },
}

/// Send `req` and read the whole body, mapping transport failures to `Timeout` / `Connect`, a
/// 2xx body cut off mid-transfer to `Cut` (all three retried) and a 3xx to `Redirect`. `url`
/// must already be masked and scrubbed (it is only used in error texts).
pub(super) async fn post(
    cfg: &ClientConfig,
    url: &str,
    req: reqwest::RequestBuilder,
) -> Result<Reply, ProviderError> {
    let resp = req.send().await.map_err(|e| transport_error(cfg, url, e))?;
    let status = resp.status();
    if status.is_redirection() {
        return Err(redirect_error(cfg, url, &resp));
    }
    let headers = resp.headers().clone();
    let body = match resp.text().await {
        Ok(body) => body,
        Err(e) if status.is_success() => return Err(body_error(cfg, url, e)),
        // A failed answer's status decides what happens next; the lost body is only noted.
        Err(e) => format!(
            "(the response body was cut off: {})",
            error_chain(cfg, e.without_url())
        ),
    };
    if status.is_success() {
        Ok(Reply::Ok(body))
    } else {
        Ok(Reply::Failed {
            status: status.as_u16(),
            headers,
            body,
        })
    }
}

/// A 3xx answer, which is never followed. Only the origin of its `Location` is named: a path
/// or query there could carry anything.
fn redirect_error(cfg: &ClientConfig, url: &str, resp: &reqwest::Response) -> ProviderError {
    let location = match resp.headers().get(reqwest::header::LOCATION) {
        None => "nowhere (no Location header)".to_string(),
        Some(v) => match v.to_str().ok().and_then(|l| resp.url().join(l).ok()) {
            Some(target) => scrub(cfg, &target.origin().ascii_serialization()),
            None => "an unreadable Location".to_string(),
        },
    };
    ProviderError::Redirect {
        status: resp.status().as_u16(),
        url: url.to_string(),
        location,
    }
}

/// A 2xx body that could not be read to its end: a timeout, or a cut (retried either way).
fn body_error(cfg: &ClientConfig, url: &str, e: reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        return ProviderError::Timeout {
            url: url.to_string(),
            after: cfg.timeout,
        };
    }
    ProviderError::Cut {
        url: url.to_string(),
        detail: error_chain(cfg, e.without_url()),
    }
}

/// `e` and its sources, joined with `: ` and scrubbed. reqwest's own message is often just
/// "error sending request"; the cause is further down the chain.
fn error_chain(cfg: &ClientConfig, e: reqwest::Error) -> String {
    let mut detail = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    scrub(cfg, &detail)
}

fn transport_error(cfg: &ClientConfig, url: &str, e: reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        return ProviderError::Timeout {
            url: url.to_string(),
            after: cfg.timeout,
        };
    }
    // The URL is already in our error (masked): drop reqwest's copy of it.
    let e = e.without_url();
    let (builder, decode, connect) = (e.is_builder(), e.is_decode(), e.is_connect());
    let detail = error_chain(cfg, e);
    let url = url.to_string();
    if builder {
        ProviderError::Config(format!("cannot build the request to {url}: {detail}"))
    } else if decode {
        ProviderError::Decode { url, detail }
    } else if connect {
        ProviderError::Unreachable { url, detail }
    } else {
        ProviderError::Connect { url, detail }
    }
}

/// A non-2xx answer as a [`ProviderError::Status`]: `body` is the text to excerpt (already
/// condensed by the caller when the format has a structured error), scrubbed then cut to 500
/// characters; `Retry-After` (or `retry-after-ms`) is parsed from `headers`.
pub(super) fn status_error(
    cfg: &ClientConfig,
    url: &str,
    status: u16,
    headers: &HeaderMap,
    body: &str,
) -> ProviderError {
    ProviderError::Status {
        status,
        url: url.to_string(),
        body: excerpt(&scrub(cfg, body.trim())),
        retry_after: retry_after(headers, std::time::SystemTime::now()),
    }
}

/// A response body that is not the JSON we expect.
pub(super) fn decode_error(cfg: &ClientConfig, url: &str, what: &str, body: &str) -> ProviderError {
    ProviderError::Decode {
        url: url.to_string(),
        detail: excerpt(&scrub(cfg, &format!("{what}; body: {}", body.trim()))),
    }
}

/// At most [`EXCERPT_CHARS`] characters of `text` (scrub *before* cutting, so a cut never
/// leaves half a key behind).
pub(super) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The server's requested delay: `retry-after-ms` (OpenAI), else `Retry-After` as seconds or
/// an HTTP date (a past date means "now"); capped at 300 s.
pub(super) fn retry_after(headers: &HeaderMap, now: std::time::SystemTime) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let parsed = if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        secs_f64(ms / 1000.0)
    } else {
        let v = get("retry-after")?;
        if let Ok(secs) = v.parse::<f64>() {
            secs_f64(secs)
        } else {
            let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
            let at = std::time::SystemTime::from(at.with_timezone(&chrono::Utc));
            Some(at.duration_since(now).unwrap_or(Duration::ZERO))
        }
    }?;
    Some(parsed.min(MAX_RETRY_AFTER))
}

fn secs_f64(secs: f64) -> Option<Duration> {
    if secs.is_finite() && secs >= 0.0 {
        Some(Duration::from_secs_f64(
            secs.min(MAX_RETRY_AFTER.as_secs_f64()),
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Instant, SystemTime};

    use reqwest::header::HeaderName;

    use super::*;
    use crate::provider::{ProviderKind, StopReason};

    fn cfg(max_retries: usize) -> ClientConfig {
        ClientConfig {
            kind: ProviderKind::OpenAi,
            base_url: "http://127.0.0.1:1/v1/".into(),
            api_key: Some(Secret::new("sk-unit-SECRET-42")),
            model: "m".into(),
            timeout: Duration::from_secs(1),
            max_retries,
            initial_backoff: Duration::from_millis(1),
        }
    }

    fn ok() -> Completion {
        Completion {
            text: "ok".into(),
            stop: StopReason::Complete,
            prompt_tokens: 1,
            completion_tokens: 1,
            model: "m".into(),
            attempts: 1,
        }
    }

    fn status(code: u16, retry_after: Option<Duration>) -> ProviderError {
        ProviderError::Status {
            status: code,
            url: "u".into(),
            body: String::new(),
            retry_after,
        }
    }

    /// Fails with `errors` in order, then succeeds.
    async fn run(
        cfg: &ClientConfig,
        errors: Vec<ProviderError>,
    ) -> (Result<Completion, ProviderError>, usize) {
        let calls = AtomicUsize::new(0);
        let result = with_retries(cfg, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let outcome = errors.get(n).cloned().map_or_else(|| Ok(ok()), Err);
            async move { outcome }
        })
        .await;
        (result, calls.load(Ordering::SeqCst))
    }

    #[test]
    fn client_futures_are_send() {
        fn assert_send<T: Send>(_: &T) {}
        let client = crate::provider::Client::new(cfg(0)).unwrap();
        let req = crate::provider::ChatRequest {
            system: String::new(),
            user: String::new(),
            max_tokens: 1,
            temperature: None,
        };
        assert_send(&client.complete(&req));
    }

    #[tokio::test]
    async fn success_first_time_is_one_attempt() {
        let (r, calls) = run(&cfg(3), vec![]).await;
        assert_eq!(r.unwrap().attempts, 1);
        assert_eq!(calls, 1);
    }

    #[tokio::test]
    async fn retryable_errors_are_retried_and_counted() {
        let errors = vec![
            status(500, None),
            status(429, None),
            ProviderError::Timeout {
                url: "u".into(),
                after: Duration::from_secs(1),
            },
            ProviderError::Connect {
                url: "u".into(),
                detail: "refused".into(),
            },
            ProviderError::Cut {
                url: "u".into(),
                detail: "unexpected end of file".into(),
            },
        ];
        let (r, calls) = run(&cfg(5), errors).await;
        assert_eq!(r.unwrap().attempts, 6);
        assert_eq!(calls, 6);
    }

    #[tokio::test]
    async fn gives_up_after_max_retries() {
        let (r, calls) = run(&cfg(2), vec![status(503, None); 10]).await;
        assert!(matches!(r, Err(ProviderError::Status { status: 503, .. })));
        assert_eq!(calls, 3);
        let (r, calls) = run(&cfg(0), vec![status(503, None); 10]).await;
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }

    #[tokio::test]
    async fn non_retryable_errors_stop_at_once() {
        for e in [
            status(400, None),
            status(401, None),
            ProviderError::Decode {
                url: "u".into(),
                detail: "x".into(),
            },
            ProviderError::Redirect {
                status: 307,
                url: "u".into(),
                location: "http://elsewhere".into(),
            },
        ] {
            let (r, calls) = run(&cfg(3), vec![e]).await;
            assert!(r.is_err());
            assert_eq!(calls, 1);
        }
    }

    #[tokio::test]
    async fn retry_after_is_honoured_but_never_extends_the_budget() {
        let started = Instant::now();
        let (r, calls) = run(&cfg(1), vec![status(429, Some(Duration::from_millis(120)))]).await;
        assert_eq!(r.unwrap().attempts, 2);
        assert_eq!(calls, 2);
        assert!(
            started.elapsed() >= Duration::from_millis(120),
            "waited for Retry-After"
        );
        // Spent budget: a Retry-After on the last failure does not buy another attempt.
        let (r, calls) = run(
            &cfg(1),
            vec![status(429, Some(Duration::from_millis(1))); 5],
        )
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 2);
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn retry_after_parsing() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // 1994-11-06 08:49:37 UTC
        let ra = |pairs: &[(&str, &str)]| retry_after(&headers(pairs), now);
        assert_eq!(ra(&[]), None);
        assert_eq!(ra(&[("retry-after", "1")]), Some(Duration::from_secs(1)));
        assert_eq!(ra(&[("Retry-After", " 7 ")]), Some(Duration::from_secs(7)));
        assert_eq!(
            ra(&[("retry-after", "0.5")]),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            ra(&[("retry-after", "100000")]),
            Some(Duration::from_secs(300))
        );
        assert_eq!(ra(&[("retry-after", "-3")]), None);
        assert_eq!(ra(&[("retry-after", "soon")]), None);
        assert_eq!(
            ra(&[("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT")]),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            ra(&[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(
            ra(&[("retry-after", "Mon, 07 Nov 1994 08:49:37 GMT")]),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            ra(&[("retry-after-ms", "250"), ("retry-after", "9")]),
            Some(Duration::from_millis(250))
        );
    }

    #[test]
    fn excerpts_are_scrubbed_then_cut() {
        let c = cfg(0);
        let long = format!("{}sk-unit-SECRET-42{}", "é".repeat(495), "x".repeat(600));
        let e = status_error(&c, "u", 401, &HeaderMap::new(), &long);
        let ProviderError::Status { body, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(
            !body.contains("sk-unit"),
            "no partial key after the cut: {body}"
        );
        assert_eq!(body.chars().count(), 501, "500 characters and an ellipsis");
        let e = decode_error(&c, "u", "bad", "sk-unit-SECRET-42");
        assert!(!e.to_string().contains("SECRET"), "{e}");
    }

    #[test]
    fn endpoint_and_key_helpers() {
        let mut c = cfg(0);
        assert_eq!(
            endpoint(&c, "/chat/completions"),
            "http://127.0.0.1:1/v1/chat/completions"
        );
        assert!(key(&c).is_some());
        c.api_key = Some(Secret::new(""));
        assert!(key(&c).is_none(), "an empty key is no key");
        assert!(secret_header("bad\nvalue").is_err());
        let h = secret_header("Bearer sk-unit-SECRET-42").unwrap();
        assert!(h.is_sensitive());
        assert!(!format!("{h:?}").contains("SECRET"));
    }
}
