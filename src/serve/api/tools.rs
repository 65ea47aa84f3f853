//! The HDN tool view: a project tool in the shape agent frameworks read
//! from HDN's registry (`/api/v1/tools`), plus what glovebox knows about
//! it under `glovebox`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use crate::manifest::model::{Format, Kind, Manifest};
use crate::manifest::project::{Origin, Tool};

/// A tool in HDN's registry shape, plus what glovebox knows about it
/// under `glovebox`.
#[derive(Debug, Clone, Serialize)]
pub struct ApiTool {
    /// The tool's name (HDN keeps a separate id; here they are the same).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// `inputs.schema`: a JSON Schema (HDN's is a flat `{param: type}`).
    pub input_schema: Value,
    /// `outputs.schema`, or `{}` when the manifest has none.
    pub output_schema: Value,
    /// HDN permission strings: `fs:read`, `fs:write`, `net:read`,
    /// `proc:exec`, where the manifest maps onto them.
    pub permissions: Vec<String>,
    /// `low` | `medium` | `high`, from the permissions.
    pub safety_level: &'static str,
    /// `agent` for agent-created tools, else `system`.
    pub created_by: &'static str,
    /// glovebox's own view of the tool.
    pub glovebox: GloveboxInfo,
}

/// glovebox's fields of an [`ApiTool`].
#[derive(Debug, Clone, Serialize)]
pub struct GloveboxInfo {
    /// `http`, `command` or `python`.
    pub kind: &'static str,
    /// The manifest's version.
    pub version: u64,
    /// `json` or `text`: how `output` of an Outcome comes back.
    pub output_format: &'static str,
    /// The format the tool was written in: `dir`, `v1`, `agentcli`,
    /// `builtin`.
    pub origin: &'static str,
    /// Whether a person must approve the tool before it runs.
    pub approval_required: bool,
    /// Whether it has an approval matching its current content.
    pub approved: bool,
    /// Who created it, for agent-created tools (`mcp`, `http:AGENT`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creator: Option<String>,
    /// The manifest's `permissions`, as enforced by the jail.
    pub permissions: Value,
}

/// HDN permission strings for a manifest.
pub fn hdn_permissions(m: &Manifest) -> Vec<String> {
    let p = &m.permissions;
    let mut out = Vec::new();
    if !p.fs.read.is_empty() || !p.fs.write.is_empty() {
        out.push("fs:read".to_string());
    }
    if !p.fs.write.is_empty() {
        out.push("fs:write".to_string());
    }
    if p.network.enabled() || m.kind == Kind::Http {
        out.push("net:read".to_string());
    }
    if m.kind != Kind::Http {
        out.push("proc:exec".to_string());
    }
    out
}

/// `low`: reads at most, no network, no secrets; `high`: writes files or
/// holds secrets, and reaches the network; `medium`: anything between.
pub fn safety_level(m: &Manifest) -> &'static str {
    let p = &m.permissions;
    let net = p.network.enabled() || m.kind == Kind::Http;
    let sensitive = !p.fs.write.is_empty() || !p.secrets.is_empty();
    match (net, sensitive) {
        (false, false) => "low",
        (true, true) => "high",
        _ => "medium",
    }
}

fn origin_name(o: Origin) -> &'static str {
    match o {
        Origin::Dir => "dir",
        Origin::V1 => "v1",
        Origin::AgentCli => "agentcli",
        Origin::Builtin => "builtin",
    }
}

/// A tool as the API shows it. Its text is the manifest's without
/// invisible code points, as `tools/list` serves it ([`crate::offer`]).
pub fn api_tool(tool: &Tool, created: &BTreeMap<String, String>, approved: bool) -> ApiTool {
    let m = &tool.manifest;
    let creator = created.get(&tool.name).cloned();
    let clean = |mut v: Value| {
        crate::invisible::remove_in(&mut v);
        v
    };
    ApiTool {
        id: tool.name.clone(),
        name: tool.name.clone(),
        description: crate::invisible::remove(&m.description).into_owned(),
        input_schema: clean(m.inputs.schema.clone()),
        output_schema: clean(m.outputs.schema.clone().unwrap_or_else(|| json!({}))),
        permissions: hdn_permissions(m),
        safety_level: safety_level(m),
        created_by: if creator.is_some() { "agent" } else { "system" },
        glovebox: GloveboxInfo {
            kind: m.kind.as_str(),
            version: m.version,
            output_format: match m.outputs.format {
                Format::Json => "json",
                Format::Text => "text",
            },
            origin: origin_name(tool.origin),
            approval_required: m.approval.required,
            approved,
            creator,
            permissions: json!({
                "network": m.permissions.network,
                "fs": {"read": m.permissions.fs.read, "write": m.permissions.fs.write},
                "secrets": m.permissions.secrets.keys().collect::<Vec<_>>(),
            }),
        },
    }
}
