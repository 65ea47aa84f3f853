//! [`Problem`]: an HTTP request glovebox refuses or cannot serve, answered
//! as JSON in the Outcome's own error shape:
//!
//! ```json
//! {"error": {"kind": "input_invalid", "message": "…", "details": {}}}
//! ```
//!
//! `kind` takes the values of [`ErrorKind`] (the `error.kind` of an
//! Outcome), so a client handles a refused request and a failed call
//! alike. Requests the server itself turns away map onto them as:
//! a malformed request, a missing or wrong token, an unknown route →
//! `input_invalid`; a body over the limit, no free call slot →
//! `resource_limit`; the request timeout → `timeout`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::run::ErrorKind;

/// A JSON error answer: status, kind, message and details.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The HTTP status.
    pub status: StatusCode,
    /// The Outcome error kind.
    pub kind: ErrorKind,
    /// What is wrong and how to fix it, lowercase.
    pub message: String,
    /// Structured details; `{}` when none (boxed: keeps `Result`s small).
    pub details: Box<Value>,
    /// Extra response headers (`WWW-Authenticate`, `Retry-After`).
    pub headers: Vec<(header::HeaderName, HeaderValue)>,
}

impl Problem {
    /// A problem with no details.
    pub fn new(status: StatusCode, kind: ErrorKind, message: impl Into<String>) -> Self {
        Problem {
            status,
            kind,
            message: message.into(),
            details: Box::new(json!({})),
            headers: Vec::new(),
        }
    }

    /// A malformed request: 400 `input_invalid`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, ErrorKind::InputInvalid, message)
    }

    /// With these details.
    pub fn details(mut self, details: Value) -> Self {
        self.details = Box::new(details);
        self
    }

    /// With this response header.
    pub fn header(mut self, name: header::HeaderName, value: &'static str) -> Self {
        self.headers.push((name, HeaderValue::from_static(value)));
        self
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {"kind": self.kind, "message": self.message, "details": self.details}})
    }
}

/// A JSON response with `status`.
pub fn json_response(status: StatusCode, body: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Internal,
            format!("cannot encode the answer: {e}"),
        )
        .into_response(),
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        if self.status != StatusCode::SERVICE_UNAVAILABLE || self.details["draining"] != true {
            super::metrics::get().refused(&format!("http_{}", self.status.as_u16()));
        }
        let mut response = json_response(self.status, &self.body());
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_the_outcome_error_shape() {
        let p = Problem::bad_request("bad").details(json!({"x": 1}));
        assert_eq!(
            p.body(),
            json!({"error": {"kind": "input_invalid", "message": "bad", "details": {"x": 1}}})
        );
    }
}
