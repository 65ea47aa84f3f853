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
//! rest of the line's fields. Plain HTTP only (no TLS client is built
//! in): send to a collector on the node or in the pod. The caller's
//! `traceparent` is not carried yet. The resource names the service
//! (`glovebox`) and the replica (`service.instance.id`). Records are
//! batched on a thread of the SDK's own; a collector that is down loses
//! records after the SDK's retries (the signed stdout export is the one
//! to verify against).

use opentelemetry::logs::{AnyValue, LogRecord, Logger, LoggerProvider, Severity};
use opentelemetry::KeyValue;
use opentelemetry_otlp::{LogExporter, Protocol, WithExportConfig};
use opentelemetry_sdk::logs::{SdkLogger, SdkLoggerProvider};
use opentelemetry_sdk::Resource;

use super::event;

/// Errors starting the OTLP export.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The exporter could not be built (a malformed endpoint).
    #[error("cannot export the audit over OTLP to {endpoint}: {message}; pass an http URL such as http://127.0.0.1:4318/v1/logs (a collector on the node or in the pod, which forwards over TLS)")]
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
    /// Exports to `endpoint` (the full logs URL) as `replica`. Must be
    /// called outside an async runtime (the HTTP client is blocking).
    pub fn start(endpoint: &str, replica: &str) -> Result<Otlp, OtlpError> {
        if !endpoint.starts_with("http://") {
            return Err(OtlpError::Build {
                endpoint: endpoint.to_string(),
                message: "only plain http is built in".into(),
            });
        }
        let exporter = LogExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpJson)
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| OtlpError::Build {
                endpoint: endpoint.to_string(),
                message: e.to_string(),
            })?;
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
