//! The http kind: `exec.http` → one request through [`crate::httpclient`] → an
//! [`Outcome`].
//!
//! Building the request (nothing is sent until all of it succeeded):
//!
//! - the tool must declare `permissions.network: true`, else
//!   `manifest_invalid`;
//! - the scheme, host and port of `exec.http.url` must be written
//!   literally (a placeholder before the end of the authority is
//!   `manifest_invalid`); the URL is expanded with every value encoded as
//!   one path segment ([`template::url`]), parsed with the `url` crate, and
//!   its origin must equal the template's origin (else `input_invalid`);
//! - `query` entries are form-encoded and appended, `headers` expanded and
//!   refused when a value holds CR, LF or NUL (`input_invalid`), `body` is
//!   JSON with each whole-string placeholder keeping its JSON type; an
//!   unset optional parameter removes its query entry, header or field;
//! - a declared secret reaches only the places its manifest template
//!   names; headers and query keys whose templates mention a secret are
//!   marked, so a redirect to another origin never carries them.
//!
//! - with `exec.http.dispatch` (a glovebox extension that Glee v1's
//!   per-action `endpoints` map to), the dispatch input's value picks a
//!   route whose path is appended to the URL template before any of the
//!   above, so every check applies to the routed request as well; a value
//!   without a route is `input_invalid`.
//!
//! The response: a non-2xx status is `http_error` with the status and a
//! bounded excerpt of the body; otherwise `outputs.format: text` returns
//! the body as a string, and `json` parses it, extracts
//! `response.json_path` and projects `response.fields` (on each item when
//! the value is a list), as tools-v2.md "HTTP Response Handling" says.
//! Everything returned passes through the [`Redactor`].

use std::path::Path;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::Method as HyperMethod;
use serde_json::{json, Map, Value};
use url::Url;

use crate::httpclient::{self, ClientError, Header, Options, Request};
use crate::manifest::config::Config;
use crate::manifest::discover::resolve;
use crate::manifest::model::{Format, HttpExec, Manifest, Method, Response};
use crate::run::{ErrorKind, Outcome, Redactor};
use crate::template::{self, Bindings, TemplateError};
use crate::validate::Schemas;

/// Bytes of a non-2xx body kept in the error.
pub const EXCERPT_BYTES: usize = 2048;

/// Why a request could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The tool did not declare network access.
    #[error("http tool `{tool}` does not declare `permissions.network: true`; an http tool needs it to send its request")]
    NoNetwork {
        /// The tool.
        tool: String,
    },
    /// A placeholder in the scheme, host or port.
    #[error("exec.http.url {url:?} has a placeholder in its scheme, host or port; write them literally (a parameter may not choose where the request goes)")]
    TemplatedAuthority {
        /// The template.
        url: String,
    },
    /// The template (without its placeholders) is not an http(s) URL.
    #[error("exec.http.url {url:?} is not an http or https URL")]
    BadTemplate {
        /// The template.
        url: String,
    },
    /// A template failed to expand.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The URL needs a parameter that is not set.
    #[error("exec.http.url needs {names}, which {verb} not set")]
    UrlUnset {
        /// The placeholders of the URL.
        names: String,
        /// "is" or "are".
        verb: &'static str,
    },
    /// The expanded URL does not parse.
    #[error("the expanded URL is not valid")]
    BadUrl {
        /// Why.
        source: url::ParseError,
    },
    /// The expanded URL points elsewhere than the template.
    #[error("the expanded URL would go to {got} instead of {want}; parameters cannot change the scheme, host or port")]
    OriginChanged {
        /// The template's origin.
        want: String,
        /// The expanded URL's origin.
        got: String,
    },
    /// A header name is not valid.
    #[error("exec.http.headers: `{name}` is not a valid header name")]
    HeaderName {
        /// The name.
        name: String,
    },
    /// A header glovebox sets itself.
    #[error("exec.http.headers: `{name}` is set by glovebox and may not be templated")]
    ReservedHeader {
        /// The name.
        name: String,
    },
    /// A header value is not valid.
    #[error("header `{name}` has a value that is not a valid HTTP header value")]
    HeaderValue {
        /// The name.
        name: String,
    },
    /// The body could not be encoded.
    #[error("cannot encode the request body")]
    Body(#[from] serde_json::Error),
    /// The TLS configuration failed.
    #[error(transparent)]
    Tls(#[from] httpclient::TlsError),
    /// The dispatch input names no route (`exec.http.dispatch`).
    #[error("{message}")]
    Route {
        /// What is wrong and which values exist.
        message: String,
    },
}

impl HttpError {
    /// The Outcome's error kind: the call's values, the manifest, or
    /// glovebox.
    pub fn kind(&self) -> ErrorKind {
        match self {
            HttpError::Template(t) => t.kind(),
            HttpError::UrlUnset { .. }
            | HttpError::BadUrl { .. }
            | HttpError::OriginChanged { .. }
            | HttpError::HeaderValue { .. }
            | HttpError::Route { .. } => ErrorKind::InputInvalid,
            HttpError::Body(_) => ErrorKind::Internal,
            _ => ErrorKind::ManifestInvalid,
        }
    }
}

/// Headers glovebox writes itself (a template may not set them).
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
];

/// The origin the template names: its text up to the first placeholder
/// must contain the whole authority.
fn template_origin(url: &str) -> Result<Url, HttpError> {
    let cut = url.find("${").unwrap_or(url.len());
    let prefix = &url[..cut];
    let templated = || HttpError::TemplatedAuthority {
        url: url.to_string(),
    };
    let bad = || HttpError::BadTemplate {
        url: url.to_string(),
    };
    let after_scheme = prefix.find("://").ok_or_else(templated)? + 3;
    if cut < url.len() && !prefix[after_scheme..].contains(['/', '?', '#']) {
        return Err(templated());
    }
    let parsed = Url::parse(prefix).map_err(|_| bad())?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err(bad());
    }
    Ok(parsed)
}

fn mentions_secret(template: &str, m: &Manifest) -> bool {
    template::names(template)
        .iter()
        .any(|n| m.permissions.secrets.contains_key(*n))
}

fn method(m: Method) -> HyperMethod {
    match m {
        Method::Get => HyperMethod::GET,
        Method::Post => HyperMethod::POST,
        Method::Put => HyperMethod::PUT,
        Method::Patch => HyperMethod::PATCH,
        Method::Delete => HyperMethod::DELETE,
        Method::Head => HyperMethod::HEAD,
    }
}

/// The request `exec` describes, expanded with `b`, and the query keys
/// whose templates mention a secret. With `exec.http.dispatch`, the route
/// the call's dispatch input names is applied first
/// ([`HttpExec::route`]); the origin check below then covers the route's
/// path too.
pub fn request(
    m: &Manifest,
    exec: &HttpExec,
    b: &Bindings<'_>,
) -> Result<(Request, Vec<String>), HttpError> {
    if !m.permissions.network.enabled() {
        return Err(HttpError::NoNetwork {
            tool: m.name.clone(),
        });
    }
    let exec = exec
        .route(b.params)
        .map_err(|message| HttpError::Route { message })?;
    let exec = exec.as_ref();
    let want = template_origin(&exec.url)?;
    let Some(expanded) = template::url(&exec.url, b)? else {
        let names = template::names(&exec.url);
        return Err(HttpError::UrlUnset {
            verb: if names.len() == 1 { "is" } else { "are" },
            names: names
                .iter()
                .map(|n| format!("`${{{n}}}`"))
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let mut url = Url::parse(&expanded).map_err(|source| HttpError::BadUrl { source })?;
    if url.origin() != want.origin() {
        return Err(HttpError::OriginChanged {
            want: want.origin().ascii_serialization(),
            got: url.origin().ascii_serialization(),
        });
    }

    let mut query = url.query().unwrap_or_default().to_string();
    let mut secret_keys = Vec::new();
    for (key, t) in &exec.query {
        let Some(value) = template::query_value(t, b)? else {
            continue;
        };
        if mentions_secret(t, m) {
            secret_keys.push(key.clone());
        }
        if !query.is_empty() {
            query.push('&');
        }
        query.extend(url::form_urlencoded::byte_serialize(key.as_bytes()));
        query.push('=');
        query.push_str(&value);
    }
    url.set_query(if query.is_empty() { None } else { Some(&query) });

    let mut headers = Vec::with_capacity(exec.headers.len() + 1);
    for (name, t) in &exec.headers {
        let header_name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| HttpError::HeaderName {
                name: name.to_string(),
            })?;
        if RESERVED.contains(&header_name.as_str()) {
            return Err(HttpError::ReservedHeader {
                name: name.to_string(),
            });
        }
        let Some(value) = template::header_value(name, t, b)? else {
            continue;
        };
        let value =
            HeaderValue::from_bytes(value.as_bytes()).map_err(|_| HttpError::HeaderValue {
                name: name.to_string(),
            })?;
        headers.push(Header {
            name: header_name,
            value,
            secret: mentions_secret(t, m),
        });
    }

    let (body, body_secret) = match &exec.body {
        None => (None, false),
        Some(t) => {
            let secret = json_mentions_secret(t, m);
            match template::json(t, b)? {
                Some(v) => (Some(Bytes::from(serde_json::to_vec(&v)?)), secret),
                None => (None, false),
            }
        }
    };
    if body.is_some() && !headers.iter().any(|h| h.name == CONTENT_TYPE) {
        headers.push(Header {
            name: CONTENT_TYPE,
            value: HeaderValue::from_static("application/json"),
            secret: false,
        });
    }
    Ok((
        Request {
            method: method(exec.method),
            url,
            headers,
            body,
            body_secret,
        },
        secret_keys,
    ))
}

fn json_mentions_secret(t: &Value, m: &Manifest) -> bool {
    match t {
        Value::String(s) => mentions_secret(s, m),
        Value::Array(a) => a.iter().any(|v| json_mentions_secret(v, m)),
        Value::Object(o) => o
            .iter()
            .any(|(k, v)| mentions_secret(k, m) || json_mentions_secret(v, m)),
        _ => false,
    }
}

/// The value at a dotted path (`web.results`, `items.0.title`).
pub fn at_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .try_fold(v, |cur, key| match cur {
            Value::Object(o) => o.get(key),
            Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        })
}

fn project(item: &Value, r: &Response) -> Value {
    let mut out = Map::new();
    for f in &r.fields {
        out.insert(
            f.name.clone(),
            at_path(item, &f.path).cloned().unwrap_or(Value::Null),
        );
    }
    Value::Object(out)
}

/// Applies `response.json_path` then `response.fields`. `Err(path)`: the
/// json_path is not in the body.
pub fn shape(body: Value, r: Option<&Response>) -> Result<Value, String> {
    let Some(r) = r else {
        return Ok(body);
    };
    let v = match &r.json_path {
        Some(p) => at_path(&body, p).cloned().ok_or_else(|| p.clone())?,
        None => body,
    };
    if r.fields.is_empty() {
        return Ok(v);
    }
    Ok(match v {
        Value::Array(items) => Value::Array(items.iter().map(|i| project(i, r)).collect()),
        other => project(&other, r),
    })
}

/// The start of a body for an error: redacted whole before it is cut, so
/// a cut cannot split a secret into an unrecognisable piece.
fn excerpt(redact: &Redactor, body: &[u8]) -> String {
    // The whole body (bounded by max_response_bytes): a mark may be
    // shorter than what it replaces, so any part of it may end up within
    // the excerpt.
    let (mut s, cut) = redact.cut(&String::from_utf8_lossy(body), EXCERPT_BYTES);
    if cut {
        s.push('…');
    }
    s
}

fn client_failure(tool: &str, e: &ClientError, timeout_ms: u64) -> Outcome {
    let message = crate::run::error_chain(e);
    let details = match e {
        ClientError::Timeout { ms } => json!({"limit": "timeout", "timeout_ms": ms}),
        ClientError::TooLarge { limit } => {
            json!({"limit": "response_bytes", "max_response_bytes": limit})
        }
        ClientError::CrossOriginRedirect {
            status, location, ..
        }
        | ClientError::SecretRedirect {
            status, location, ..
        } => json!({"status": status, "location": location, "redirect": "cross_origin"}),
        ClientError::Guard { host, source } => {
            let addr = match source {
                httpclient::GuardError::Forbidden { addr, .. }
                | httpclient::GuardError::Private { addr, .. } => addr.to_string(),
            };
            json!({"guard": "ssrf", "host": host, "address": addr})
        }
        ClientError::Runtime(_) => json!({}),
        _ => json!({"timeout_ms": timeout_ms}),
    };
    Outcome::failure(tool, e.kind(), message, details)
}

/// Runs one call of http tool `m` (see the module doc). Never panics;
/// every failure is an [`Outcome`], secrets redacted.
#[allow(clippy::too_many_arguments)]
pub fn run(
    root: &Path,
    m: &Manifest,
    exec: &HttpExec,
    config: &Config,
    b: &Bindings<'_>,
    redact: &Redactor,
    schemas: &Schemas,
) -> Outcome {
    let mut outcome = call(root, m, exec, config, b, schemas, redact);
    if let Some(e) = &mut outcome.error {
        e.message = redact.text(&e.message);
        e.details = redact.value(std::mem::take(&mut e.details));
    }
    if let Some(v) = outcome.output.take() {
        outcome.output = Some(redact.value(v));
    }
    outcome.warnings = outcome.warnings.iter().map(|w| redact.text(w)).collect();
    outcome
}

fn call(
    root: &Path,
    m: &Manifest,
    exec: &HttpExec,
    config: &Config,
    b: &Bindings<'_>,
    schemas: &Schemas,
    redact: &Redactor,
) -> Outcome {
    let name = &m.name;
    let fail =
        |e: HttpError| Outcome::failure(name, e.kind(), crate::run::error_chain(&e), json!({}));
    let (req, secret_query_keys) = match request(m, exec, b) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let extra_ca = config
        .security
        .http
        .extra_ca_file
        .as_deref()
        .map(|f| resolve(root, f));
    let tls = match httpclient::tls::client_config(extra_ca.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            return Outcome::failure(
                name,
                ErrorKind::ManifestInvalid,
                crate::run::error_chain(&e),
                json!({}),
            )
        }
    };
    let opts = Options {
        allow_private: config.security.http.allow_private,
        allow: match m.permissions.network.allowlist() {
            Ok(a) => a,
            Err(e) => {
                return Outcome::failure(
                    name,
                    ErrorKind::ManifestInvalid,
                    format!("permissions.network: {e}"),
                    json!({}),
                )
            }
        },
        tls,
        timeout: std::time::Duration::from_millis(exec.timeout_ms),
        max_body: exec.max_response_bytes,
        follow_cross_origin: exec.follow_cross_origin_redirects,
        secret_query_keys,
        secret_values: b.secrets.values().cloned().collect(),
    };
    let res = match httpclient::send(req, &opts) {
        Ok(r) => r,
        Err(e) => return client_failure(name, &e, exec.timeout_ms),
    };
    let status = res.status.as_u16();
    if !res.status.is_success() {
        let body = excerpt(redact, &res.body);
        return Outcome::failure(
            name,
            ErrorKind::HttpError,
            format!(
                "the server answered {} {}{}",
                status,
                res.status.canonical_reason().unwrap_or(""),
                if body.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", body.trim())
                }
            ),
            json!({"status": status, "body": body, "url": res.url.as_str()}),
        );
    }
    let output = match m.outputs.format {
        Format::Text => Value::String(String::from_utf8_lossy(&res.body).into_owned()),
        Format::Json => {
            let parsed = if res.body.iter().all(u8::is_ascii_whitespace) {
                Value::Null
            } else {
                match serde_json::from_slice::<Value>(&res.body) {
                    Ok(v) => v,
                    Err(e) => {
                        return Outcome::failure(
                            name,
                            ErrorKind::HttpError,
                            format!(
                                "the response ({status}, {}) is not valid JSON: {e}",
                                res.content_type.as_deref().unwrap_or("no content type")
                            ),
                            json!({"status": status, "body": excerpt(redact, &res.body)}),
                        )
                    }
                }
            };
            match shape(parsed, exec.response.as_ref()) {
                Ok(v) => v,
                Err(path) => {
                    return Outcome::failure(
                        name,
                        ErrorKind::HttpError,
                        format!(
                            "the response ({status}) has no value at response.json_path `{path}`"
                        ),
                        json!({"status": status, "json_path": path, "body": excerpt(redact, &res.body)}),
                    )
                }
            }
        }
    };
    let mut o = Outcome::success(name, output);
    if let Some(v) = &o.output {
        for violation in schemas.check_output(v) {
            o.warnings.push(format!(
                "output does not match outputs.schema at {:?}: {}",
                violation.pointer, violation.message
            ));
        }
    }
    o
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::manifest::model::Field;

    #[test]
    fn authority_must_be_literal() {
        assert!(template_origin("https://api.example.com/v1/${x}").is_ok());
        assert!(template_origin("https://api.example.com?q=${x}").is_ok());
        assert!(template_origin("https://api.example.com").is_ok());
        for t in [
            "https://${host}/x",
            "https://api.${region}.example.com/",
            "https://api.example.com:${port}/",
            "https://u${x}@api.example.com/",
            "${scheme}://api.example.com/",
        ] {
            assert!(
                matches!(
                    template_origin(t),
                    Err(HttpError::TemplatedAuthority { .. })
                ),
                "{t}"
            );
        }
        assert!(template_origin("ftp://example.com/").is_err());
    }

    #[test]
    fn json_path_then_fields() {
        let r = Response {
            json_path: Some("web.results".into()),
            fields: vec![
                Field {
                    name: "title".into(),
                    path: "title".into(),
                },
                Field {
                    name: "u".into(),
                    path: "meta.url".into(),
                },
            ],
        };
        let body = json!({"web": {"results": [
            {"title": "A", "meta": {"url": "https://a"}, "x": 1},
            {"title": "B"}
        ]}});
        assert_eq!(
            shape(body, Some(&r)).unwrap(),
            json!([{"title": "A", "u": "https://a"}, {"title": "B", "u": null}])
        );
        assert_eq!(
            shape(json!({"a": {"b": 1}}), None).unwrap(),
            json!({"a": {"b": 1}})
        );
        assert_eq!(shape(json!({}), Some(&r)).unwrap_err(), "web.results");
        assert_eq!(at_path(&json!({"a": [5, 6]}), "a.1"), Some(&json!(6)));
    }
}
