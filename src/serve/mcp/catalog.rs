//! The MCP tool catalog: each manifest of the project as its own MCP tool
//! (name, description, `inputSchema` = `inputs.schema`, `outputSchema` when
//! `outputs.schema` is an object schema, hints derived from the
//! permissions; [`crate::export::mcp_tool`], shared with `glovebox export`:
//! the rendering a person approved, without invisible code points),
//! plus the three `glee_*` tools of the Glee seed, paginated with opaque
//! cursors. What is offered, and under which names, is the front-end's
//! [`Offer`]: the whole project (`glovebox mcp`, `serve`), or one wrapped
//! MCP server's tools under the server's own names (`glovebox wrap`).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};

use crate::manifest::project::Project;

/// `glee_tool {name, params}`: runs any tool of the project by name.
pub const GLEE_TOOL: &str = "glee_tool";
/// `glee_tools_list {}`: the tools, as `[{name, description}]`.
pub const GLEE_TOOLS_LIST: &str = "glee_tools_list";
/// `glee_tool_create {name, definition}`: an agent-created tool.
pub const GLEE_TOOL_CREATE: &str = "glee_tool_create";

/// Tools per `tools/list` page.
pub const PAGE_SIZE: usize = 50;

const CURSOR_PREFIX: &str = "glovebox-tools:";

/// Errors reading a `tools/list` request.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The cursor is not one this server handed out.
    #[error("invalid cursor {cursor:?}: pass the nextCursor of the previous page, or none")]
    Cursor {
        /// The cursor received.
        cursor: String,
    },
}

/// Whether `name` is one of the `glee_*` tools (a project tool of that
/// name is reachable through `glee_tool` only).
pub fn is_meta_tool(name: &str) -> bool {
    matches!(name, GLEE_TOOL | GLEE_TOOLS_LIST | GLEE_TOOL_CREATE)
}

/// What a front-end offers of its project, and under which names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Offer {
    /// Every tool under its own name, and the `glee_*` tools (`glovebox
    /// mcp`, `serve`).
    #[default]
    Project,
    /// One wrapped MCP server (`glovebox wrap`): only its tools, each
    /// under the name the server gives it (a client adds its own prefix:
    /// `mcp__fs__read_text_file`, not `mcp__fs__fs__read_text_file`);
    /// `glee_tool` and `glee_tools_list` only with `meta` (never
    /// `glee_tool_create`: the wrapped project is glovebox's, not the
    /// user's).
    Server {
        /// The server's name in the project (its tools are `NAME__TOOL`
        /// there).
        name: String,
        /// Whether the `glee_*` tools are offered too.
        meta: bool,
    },
}

impl Offer {
    /// The project's name of the tool a client calls `called`.
    pub fn project_name(&self, called: &str) -> String {
        match self {
            Offer::Server { meta: true, .. } if matches!(called, GLEE_TOOL | GLEE_TOOLS_LIST) => {
                called.to_string()
            }
            Offer::Server { name, .. } => format!("{name}{}{called}", crate::mcpwrap::SEPARATOR),
            Offer::Project => called.to_string(),
        }
    }

    /// The name the client knows the project's tool `tool` by, if it is
    /// offered.
    fn offered_name(&self, tool: &crate::manifest::project::Tool) -> Option<String> {
        match self {
            Offer::Project => (!is_meta_tool(&tool.name)).then(|| tool.name.clone()),
            Offer::Server { name, .. } => match &tool.manifest.exec {
                crate::manifest::model::Exec::Mcp(m) => m
                    .wrapped
                    .as_ref()
                    .filter(|w| w.server == *name && !w.tool.is_empty())
                    .map(|w| w.tool.clone()),
                _ => None,
            },
        }
    }

    /// Whether the `glee_*` tool `name` is offered.
    pub fn offers_meta(&self, name: &str) -> bool {
        match self {
            Offer::Project => is_meta_tool(name),
            Offer::Server { meta, .. } => *meta && matches!(name, GLEE_TOOL | GLEE_TOOLS_LIST),
        }
    }
}

/// Every tool the server offers: the `glee_*` tools first, then the
/// project's tools by name.
pub fn tools(project: &Project) -> Vec<Tool> {
    offered(project, &Offer::Project)
}

/// What `offer` gives a client of `project`: the `glee_*` tools it
/// offers first, then the tools under the names it gives them.
pub fn offered(project: &Project, offer: &Offer) -> Vec<Tool> {
    let mut all: Vec<Tool> = meta_tools()
        .into_iter()
        .filter(|t| offer.offers_meta(&t.name))
        .collect();
    all.extend(project.tools.iter().filter_map(|t| {
        let shown = offer.offered_name(t)?;
        let mut tool = crate::export::mcp_tool(&t.manifest);
        tool.name = shown.into();
        Some(tool)
    }));
    all
}

/// One page of `all` starting at `cursor`, and the cursor of the next page.
pub fn page(
    all: Vec<Tool>,
    cursor: Option<&str>,
) -> Result<(Vec<Tool>, Option<String>), CatalogError> {
    let start = match cursor {
        None => 0,
        Some(c) => decode_cursor(c).ok_or_else(|| CatalogError::Cursor {
            cursor: c.to_string(),
        })?,
    };
    let end = start.saturating_add(PAGE_SIZE).min(all.len());
    let next = (end < all.len()).then(|| encode_cursor(end));
    let items = all
        .into_iter()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect();
    Ok((items, next))
}

fn encode_cursor(offset: usize) -> String {
    hex::encode(format!("{CURSOR_PREFIX}{offset}"))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let bytes = hex::decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    text.strip_prefix(CURSOR_PREFIX)?.parse().ok()
}

fn object_schema(properties: Value) -> JsonObject {
    let mut o = JsonObject::new();
    o.insert("type".into(), json!("object"));
    o.insert("properties".into(), properties);
    o
}

/// An input schema of a `glee_*` tool: closed (`additionalProperties:
/// false`), so clients with a strict mode (OpenAI's) can use it.
fn closed(mut schema: JsonObject) -> JsonObject {
    schema.insert("additionalProperties".into(), json!(false));
    schema
}

/// The meta-tools (`glee_tool`, `glee_tools_list`, `glee_tool_create`):
/// glovebox's own MCP tools about the project's tools. Not to be confused
/// with the built-in file tools of [`crate::builtin`], which are project
/// tools like any other.
fn meta_tools() -> Vec<Tool> {
    let mut run = object_schema(json!({
        "name": {"type": "string", "description": "The tool's name (its directory under .glee/tools/)"},
        "params": {"type": "object", "description": "The tool's parameters, as its inputs.schema describes them"}
    }));
    run.insert("required".into(), json!(["name"]));
    let list = object_schema(json!({}));
    let mut list_out = object_schema(json!({
        "tools": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
            "required": ["name", "description"],
            "additionalProperties": false
        }}
    }));
    list_out.insert("required".into(), json!(["tools"]));
    let mut create = object_schema(json!({
        "name": {"type": "string", "description": "The new tool's name: letters, digits, `_` and `-`"},
        "definition": {"type": "object", "description": "The fields of tool.yml (description, kind, version, inputs, outputs, exec, permissions, approval)"}
    }));
    create.insert("required".into(), json!(["name", "definition"]));
    let (run, list, list_out, create) =
        (closed(run), closed(list), closed(list_out), closed(create));
    vec![
        Tool::new(
            GLEE_TOOL,
            "Execute a tool defined in .glee/tools/ by name, jailed under its declared permissions. Call glee_tools_list to see the tools.",
            Arc::new(run),
        )
        .with_annotations(ToolAnnotations::new().open_world(true)),
        Tool::new(
            GLEE_TOOLS_LIST,
            "List the available tools as {\"tools\": [{name, description}]}.",
            Arc::new(list),
        )
        .with_raw_output_schema(Arc::new(list_out))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .open_world(false),
        ),
        Tool::new(
            GLEE_TOOL_CREATE,
            "Create a new tool definition (.glee/tools/NAME/tool.yml). Its permissions must lie within the project's ceiling; a person must approve it (glovebox approve NAME) before it runs.",
            Arc::new(create),
        )
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .open_world(false),
        ),
    ]
}

/// The tools of the `glee_tools_list` answer (`{"tools": …}`): `[{name,
/// description}]`, the description as `tools/list` serves it (without
/// invisible code points, [`crate::invisible`]).
pub fn summaries(project: &Project) -> Value {
    summaries_offered(project, &Offer::Project)
}

/// [`summaries`] under the names `offer` gives the tools.
pub fn summaries_offered(project: &Project, offer: &Offer) -> Value {
    Value::Array(
        project
            .tools
            .iter()
            .filter_map(|t| {
                let name = match offer {
                    // glee_tool reaches every tool of the project, by name.
                    Offer::Project => t.name.clone(),
                    Offer::Server { .. } => offer.offered_name(t)?,
                };
                let description = crate::invisible::remove(&t.manifest.description);
                Some(json!({"name": name, "description": description}))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: usize) -> Vec<Tool> {
        (0..n)
            .map(|i| Tool::new(format!("t{i}"), "d", Arc::new(JsonObject::new())))
            .collect()
    }

    #[test]
    fn pages_cover_everything_once() {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let (items, next) = page(named(123), cursor.as_deref()).unwrap();
            assert!(items.len() <= PAGE_SIZE);
            seen.extend(items.into_iter().map(|t| t.name.to_string()));
            match next {
                Some(n) => cursor = Some(n),
                None => break,
            }
        }
        let want: Vec<String> = (0..123).map(|i| format!("t{i}")).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn a_short_list_has_no_next_cursor() {
        let (items, next) = page(named(3), None).unwrap();
        assert_eq!(items.len(), 3);
        assert!(next.is_none());
    }

    #[test]
    fn foreign_cursors_are_refused() {
        for c in ["", "zz", "10", &hex::encode("other:3")] {
            assert!(page(named(3), Some(c)).is_err(), "{c}");
        }
    }
}
