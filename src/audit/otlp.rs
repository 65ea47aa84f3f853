//! Audit lines as OpenTelemetry logs over OTLP/HTTP (JSON), through the
//! `opentelemetry` crates: `glovebox serve --audit-otlp URL`.
//!
//! Each exported line becomes one log record: the line itself as the
//! body (its mac included, so a collector keeps what `--verify` checks),
//! the event as the record's event name, and attributes after the
//! GenAI and MCP semantic conventions where they fit —
//! `gen_ai.operation.name` (`execute_tool` for a call's lines),
//! `gen_ai.tool.name`, `gen_ai.tool.call.id`, `mcp.method.name`
//! (`tools/call`, for a call made over MCP) — plus `glovebox.*` for the
//! rest of the line's fields. To `http://` (a collector on the node or
//! in the pod) or `https://` (verified: the Mozilla roots plus
//! `--audit-otlp-ca`; `otlp/https.rs`). The caller's
//! `traceparent` (MCP `_meta.traceparent`, HTTP `traceparent`), logged as
//! `traceparent=` on the call's lines, is continued: those records carry
//! its trace id and, as their span id, the caller's span. The resource names the service
//! (`glovebox`) and the replica (`service.instance.id`). Records are
//! batched on a thread of the SDK's own; a collector that is down loses
//! records after the SDK's retries (the signed stdout export is the one
//! to verify against).

use std::path::Path;

use opentelemetry::logs::{AnyValue, LogRecord, Logger, LoggerProvider, Severity};
use opentelemetry::{KeyValue, SpanId, TraceFlags, TraceId};
use opentelemetry_otlp::{LogExporter, Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::logs::{SdkLogger, SdkLoggerProvider};
use opentelemetry_sdk::Resource;

use super::event;

mod https;

/// How long one export may take (the SDK's default).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Errors starting the OTLP export.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The exporter could not be built (a malformed endpoint).
    #[error("cannot export the audit over OTLP to {endpoint}: {message}; pass a collector's logs URL such as http://127.0.0.1:4318/v1/logs (on the node or in the pod) or https://collector:4318/v1/logs (with --audit-otlp-ca for a private CA)")]
    Build { endpoint: String, message: String },
}

/// The OTLP side of the export.
#[derive(Debug)]
pub struct Otlp {
    provider: SdkLoggerProvider,
    logger: SdkLogger,
}

/// The events a line can name, as the `'static` names records take.
const EVENTS: [&str; 9] = [
    event::TOOL_STARTED,
    event::TOOL_EXECUTED,
    event::TOOL_DENIED,
    event::TOOL_CREATED,
    event::TOOL_DELETED,
    event::TOOL_APPROVED,
    event::AUDIT_INTERRUPTED,
    event::AUDIT_BREAK,
    event::AUDIT_RESEALED,
];

impl Otlp {
    /// Exports to `endpoint` (the full logs URL: `http://`, or `https://`
    /// verified against the Mozilla roots plus the PEM certificates of
    /// `ca`) as `replica`. Must be called outside an async runtime (the
    /// HTTP clients block).
    pub fn start(endpoint: &str, replica: &str, ca: Option<&Path>) -> Result<Otlp, OtlpError> {
        let fail = |message: String| OtlpError::Build {
            endpoint: endpoint.to_string(),
            message,
        };
        let builder = LogExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpJson)
            .with_endpoint(endpoint);
        let exporter = if endpoint.starts_with("https://") {
            let tls = crate::httpclient::tls::client_config(ca)
                .map_err(|e| fail(crate::kind::error_chain(&e)))?;
            let client = https::Https::new(tls, TIMEOUT).map_err(|e| fail(e.to_string()))?;
            builder
                .with_http_client(client)
                .with_timeout(TIMEOUT)
                .build()
        } else if endpoint.starts_with("http://") {
            if ca.is_some() {
                return Err(fail("--audit-otlp-ca is for an https:// collector".into()));
            }
            builder.with_timeout(TIMEOUT).build()
        } else {
            return Err(fail("not an http:// or https:// URL".into()));
        }
        .map_err(|e| fail(e.to_string()))?;
        let resource = Resource::builder_empty()
            .with_service_name("glovebox")
            .with_attribute(KeyValue::new("service.instance.id", replica.to_string()))
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkLoggerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let logger = provider.logger("glovebox.audit");
        Ok(Otlp { provider, logger })
    }

    /// One audit line.
    pub fn line(&self, line: &str) {
        let mut record = self.logger.create_log_record();
        record.set_body(AnyValue::from(line.to_string()));
        record.set_severity_number(Severity::Info);
        record.set_severity_text("INFO");
        if let Some(entry) = super::line::parse(line) {
            if let Some(name) = EVENTS.iter().find(|e| **e == entry.event) {
                record.set_event_name(name);
            }
            let is_call = matches!(
                entry.event.as_str(),
                event::TOOL_STARTED | event::TOOL_EXECUTED
            );
            if is_call {
                record.add_attribute("gen_ai.operation.name", "execute_tool");
            }
            for (k, v) in &entry.fields {
                match k.as_str() {
                    "name" => record.add_attribute("gen_ai.tool.name", v.clone()),
                    "call" => record.add_attribute("gen_ai.tool.call.id", v.clone()),
                    "caller" if is_call && v.starts_with("mcp") => {
                        record.add_attribute("mcp.method.name", "tools/call");
                        record.add_attribute("glovebox.caller", v.clone());
                    }
                    "traceparent" => {
                        if let Some((trace, span, flags)) = trace_context(v) {
                            record.set_trace_context(trace, span, Some(flags));
                        }
                        record.add_attribute("glovebox.traceparent", v.clone());
                    }
                    "mac" => {}
                    _ => record.add_attribute(format!("glovebox.{k}"), v.clone()),
                }
            }
            record.add_attribute("glovebox.event", entry.event);
        }
        self.logger.emit(record);
    }

    /// Sends what is batched and stops the exporter's thread.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("glovebox: the OTLP audit export did not end cleanly: {e}");
        }
    }
}

/// A logged `traceparent` (`00-TRACE-SPAN-FLAGS`, validated before it
/// was logged) as OpenTelemetry's ids; `None` for anything else.
fn trace_context(v: &str) -> Option<(TraceId, SpanId, TraceFlags)> {
    let mut parts = v.split('-');
    let _version = parts.next()?;
    let trace = TraceId::from_hex(parts.next()?).ok()?;
    let span = SpanId::from_hex(parts.next()?).ok()?;
    let flags = u8::from_str_radix(parts.next()?, 16).ok()?;
    (trace != TraceId::INVALID && span != SpanId::INVALID).then_some((
        trace,
        span,
        TraceFlags::new(flags),
    ))
}
