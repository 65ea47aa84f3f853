//! What a web page may do with `glovebox serve` (issue 43, item 1): any
//! page the user opens runs on the user's own account, so the account
//! check of [`super::owner`] lets its requests in; these rules keep them
//! out.
//!
//! - [`Origins`]: a request that carries an `Origin` (every request a
//!   browser sends cross-origin: `fetch` in any mode, a form post) is
//!   refused with 403 unless that origin was configured with
//!   `--allow-origin`; none is by default, a loopback origin neither (a
//!   dev server or a notebook on another localhost port is a web page
//!   like any other). CORS is granted to configured origins only.
//! - [`acts_without_json`]: a request that acts (`POST`, `PUT`, `PATCH`)
//!   must say `Content-Type: application/json`: a browser sends that only
//!   after a CORS preflight, which only a configured origin passes, so no
//!   "simple request" (`text/plain`, a form, no body at all) can run a
//!   tool, create one or rescan, even from a browser that sent no
//!   `Origin`.
//!
//! The decisions are pure functions, unit-tested here; the guard of
//! [`super::http`] and the CORS answers of [`super::mcp::compat`] apply
//! them.

use axum::http::{header, HeaderMap, Method};

/// Why an `--allow-origin` value was refused.
#[derive(Debug, thiserror::Error)]
#[error("--allow-origin {given:?}: an origin is `http://NAME[:PORT]` or `https://NAME[:PORT]`, as a browser sends it (no path, no trailing slash)")]
pub struct OriginError {
    given: String,
}

/// The browser origins that may call (`--allow-origin`), each as a
/// browser writes it in `Origin`, lowercased.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins {
    allowed: Vec<String>,
}

impl Origins {
    /// The origins given, each checked to be one a browser sends.
    pub fn parse(given: &[String]) -> Result<Origins, OriginError> {
        let mut allowed = Vec::new();
        for g in given {
            let o = normalise(g).ok_or_else(|| OriginError { given: g.clone() })?;
            if !allowed.contains(&o) {
                allowed.push(o);
            }
        }
        Ok(Origins { allowed })
    }

    /// Whether a request with this `Origin` value may call.
    pub fn allows(&self, origin: &str) -> bool {
        normalise(origin).is_some_and(|o| self.allowed.contains(&o))
    }

    /// The request's `Origin`, when it is one that may call.
    pub fn allowed_origin<'a>(&self, headers: &'a HeaderMap) -> Option<&'a header::HeaderValue> {
        headers
            .get(header::ORIGIN)
            .filter(|o| o.to_str().is_ok_and(|o| self.allows(o)))
    }

    /// Whether none is configured.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_empty()
    }
}

/// `scheme://host[:port]` lowercased, or `None` when `origin` is not an
/// origin as browsers serialise it (`null`, a path, userinfo, another
/// scheme, an empty or bad port).
fn normalise(origin: &str) -> Option<String> {
    let lower = origin.trim().to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))?;
    let (host_ok, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (h, tail) = v6.split_once(']')?;
        let port = match tail {
            "" => None,
            t => Some(t.strip_prefix(':')?),
        };
        let ok = !h.is_empty()
            && h.chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
        (ok, port)
    } else {
        let (h, port) = match rest.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        };
        let ok = !h.is_empty()
            && h.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        (ok, port)
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.parse::<u16>().is_ok());
    (host_ok && port_ok).then_some(lower)
}

/// Whether a request acts without saying it is JSON: a `POST`, `PUT` or
/// `PATCH` whose `Content-Type` is not `application/json` (parameters
/// allowed) — what a browser can send without a preflight. Such a
/// request is refused (415) before it reaches any route.
pub fn acts_without_json(method: &Method, headers: &HeaderMap) -> bool {
    if !(method == Method::POST || method == Method::PUT || method == Method::PATCH) {
        return false;
    }
    let mut types = headers.get_all(header::CONTENT_TYPE).iter();
    let json = types.next().is_some_and(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        })
    });
    // Two Content-Type headers: which one a parser believes is not ours to
    // guess.
    !json || types.next().is_some()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn origins(list: &[&str]) -> Origins {
        Origins::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn no_origin_is_allowed_by_default_not_even_loopback() {
        let o = Origins::default();
        for origin in [
            "http://localhost:18099",
            "http://127.0.0.1:3000",
            "http://[::1]:80",
            "https://evil.example",
            "null",
        ] {
            assert!(!o.allows(origin), "{origin}");
        }
    }

    #[test]
    fn configured_origins_match_exactly() {
        let o = origins(&["http://localhost:6274", "https://App.Example"]);
        assert!(o.allows("http://localhost:6274"));
        assert!(o.allows("HTTP://LOCALHOST:6274"));
        assert!(o.allows("https://app.example"));
        for other in [
            "http://localhost:6275",
            "http://localhost",
            "https://localhost:6274",
            "http://127.0.0.1:6274",
            "https://app.example:8443",
            "https://app.example.evil",
            "http://app.example",
            "null",
            "http://localhost:6274/",
        ] {
            assert!(!o.allows(other), "{other}");
        }
    }

    #[test]
    fn only_origins_a_browser_sends_can_be_configured() {
        for good in [
            "http://localhost:1",
            "https://a.b",
            "http://[::1]:8080",
            "http://[::1]",
        ] {
            assert!(Origins::parse(&[good.to_string()]).is_ok(), "{good}");
        }
        for bad in [
            "localhost:3000",
            "http://localhost:3000/",
            "http://localhost:3000/app",
            "null",
            "*",
            "http://",
            "http://a:b",
            "http://a:",
            "http://user@a",
            "file:///x",
            "http://[::1]x",
        ] {
            assert!(Origins::parse(&[bad.to_string()]).is_err(), "{bad}");
        }
    }

    fn headers(types: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for t in types {
            h.append(header::CONTENT_TYPE, t.parse().unwrap());
        }
        h
    }

    #[test]
    fn no_simple_request_acts() {
        // What a page can send without a preflight.
        for simple in [
            &[][..],
            &["text/plain"],
            &["text/plain;charset=UTF-8"],
            &["application/x-www-form-urlencoded"],
            &["multipart/form-data; boundary=x"],
            &["application/json", "text/plain"],
            &["application/jsonx"],
        ] {
            assert!(
                acts_without_json(&Method::POST, &headers(simple)),
                "{simple:?}"
            );
        }
        assert!(!acts_without_json(
            &Method::POST,
            &headers(&["application/json"])
        ));
        assert!(!acts_without_json(
            &Method::POST,
            &headers(&["Application/JSON; charset=utf-8"])
        ));
        assert!(acts_without_json(&Method::PUT, &headers(&["text/plain"])));
        // Reads and deletes are not refused here (a DELETE is never simple).
        assert!(!acts_without_json(&Method::GET, &headers(&[])));
        assert!(!acts_without_json(&Method::DELETE, &headers(&[])));
    }
}
