//! `glovebox import hdn FILE`: HDN's `tools_bootstrap.json` (a JSON array
//! of HDN `Tool` objects, or `{"tools": [...]}`) as v2 command tools.
//!
//! | HDN | v2 manifest |
//! |---|---|
//! | `id` (else `name`) | `name`, the directory |
//! | `description` (else `name`) | `description` |
//! | `exec.type: cmd`, `exec.cmd` | `kind: command`, `exec.command.entrypoint` (relative paths from the project root) |
//! | `exec.args`, `{param}` | `exec.command.args`, `${param}` (each arg stays one argv entry; no shell) |
//! | `input_schema` `{param: type}` | `inputs.schema` object, `additionalProperties: false`; params used in `args` are required |
//! | `output_schema` `{field: type}` | `outputs.schema` object (fields not required; a mismatch is a warning) |
//! | HDN's output rule | `outputs.format: json`, `exec.command.stdout: {format: json, select: last_json_line}` |
//! | `fs:read` / `fs:write` | `permissions.fs.read: ["."]` / also `permissions.fs.write: ["."]` |
//! | `net:read` | `permissions.network: true` |
//! | `proc:exec` | nothing: running a process is what a command tool does |
//! | `safety_level: high`, or `created_by: agent` | `approval.required: true` |
//!
//! Type names map as: `string`/`str`/`text` → string, `int`/`integer`/
//! `int32`/`int64`/`long` → integer, `float`/`double`/`number`/`float64` →
//! number, `bool`/`boolean` → boolean, `object`/`map`/`dict`/`json` →
//! object, `array`/`list` → array, `T[]` or `[]T` → array of T; anything
//! else is taken as a description of a string parameter.
//!
//! A tool with neither `fs:read` nor `fs:write` may read nothing of the
//! project; it runs in its own tool directory (`cwd` and `fs.read` =
//! `.glee/tools/<name>`, which holds only its manifest), plus read access to
//! its program when that is a relative path.
//!
//! Refused, with the reason, and not written (other entries still are):
//! `docker` and any other permission not listed above, `exec.type: image`
//! or an unknown type, no `exec` (HDN built-ins run inside its server), an
//! unknown `safety_level`, a `{param}` whose name is not an identifier, a
//! literal `${` in `cmd` or `args` (glovebox would read it as a
//! placeholder), and names that are not valid tool names.

use std::collections::BTreeMap;
use std::path::Path;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{read_input, tools_dir, write_tool, Converted, ImportError, Refused, Report};

/// Put on top of every imported `tool.yml`.
const HEADER: &str = "# Imported from an HDN tools_bootstrap.json by `glovebox import hdn`.\n";

/// One HDN `Tool` object (`hdn/tools.go`).
#[derive(Debug, Deserialize)]
struct HdnTool {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    input_schema: Option<IndexMap<String, String>>,
    #[serde(default)]
    output_schema: Option<IndexMap<String, String>>,
    #[serde(default)]
    permissions: Option<Vec<String>>,
    #[serde(default)]
    safety_level: Option<String>,
    #[serde(default)]
    created_by: Option<String>,
    #[serde(default)]
    exec: Option<HdnExec>,
    /// `created_at` and anything HDN may add; reported as ignored.
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

/// HDN's `exec` block.
#[derive(Debug, Deserialize)]
struct HdnExec {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    cmd: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    image: Option<String>,
}

/// Imports the HDN tool file `file` into the project at `root`.
pub fn import(root: &Path, file: &Path, force: bool) -> Result<Report, ImportError> {
    let bytes = read_input(file)?;
    let entries = entries(file, &bytes)?;
    let root = &std::path::absolute(root)
        .map(|r| crate::manifest::discover::normalize(&r))
        .map_err(|e| ImportError::ToolsDir {
            path: root.to_path_buf(),
            message: e.to_string(),
        })?;
    let tools = tools_dir(root)?;
    let mut report = Report::default();
    let mut seen = std::collections::HashSet::new();
    for (i, entry) in entries.iter().enumerate() {
        let converted = match convert(i, entry) {
            Ok(c) => c,
            Err(r) => {
                report.refused.push(r);
                continue;
            }
        };
        if !seen.insert(converted.name.clone()) {
            report.refused.push(Refused {
                tool: converted.name.clone(),
                reason: format!("tool[{i}] repeats a name already imported from this file"),
            });
            continue;
        }
        match write_tool(root, &tools, &converted, HEADER, force) {
            Ok(w) => report.written.push(w),
            Err(r) => report.refused.push(r),
        }
    }
    Ok(report)
}

/// The tool objects of the file: a JSON array, or `{"tools": [...]}`.
fn entries(file: &Path, bytes: &[u8]) -> Result<Vec<Value>, ImportError> {
    let format = |message: String| ImportError::Format {
        path: file.to_path_buf(),
        expected: "an HDN tool file (a JSON array of Tool objects, or {\"tools\": [...]})",
        message,
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format(e.to_string()))?;
    match value {
        Value::Array(a) => Ok(a),
        Value::Object(mut o) => match o.remove("tools") {
            Some(Value::Array(a)) => Ok(a),
            _ => Err(format("the object has no `tools` array".into())),
        },
        _ => Err(format(
            "the top level is neither an array nor an object".into(),
        )),
    }
}

/// Converts entry `i` or says why it cannot be.
pub fn convert(i: usize, entry: &Value) -> Result<Converted, Refused> {
    let label = entry
        .get("id")
        .or_else(|| entry.get("name"))
        .and_then(Value::as_str)
        .map_or_else(|| format!("tool[{i}]"), str::to_string);
    let refuse = |reason: String| Refused {
        tool: label.clone(),
        reason,
    };
    let t: HdnTool = serde_json::from_value(entry.clone())
        .map_err(|e| refuse(format!("not an HDN Tool object: {e}")))?;
    let Some(name) = t.id.clone().or_else(|| t.name.clone()) else {
        return Err(refuse("has neither `id` nor `name`; add an `id`".into()));
    };
    if !super::valid_tool_name(&name) {
        return Err(refuse(format!(
            "`{name}` is not a valid tool name (letters, digits, `_`, `.`, `-`, not starting with `.` or `-`, at most 64 characters); give it an `id` that is"
        )));
    }
    let mut problems = Vec::new();
    let mut notes = Vec::new();

    // Permissions.
    let mut read = false;
    let mut write = false;
    let mut network = false;
    for p in t.permissions.iter().flatten() {
        match p.as_str() {
            "fs:read" => read = true,
            "fs:write" => write = true,
            "net:read" => network = true,
            "proc:exec" => notes.push(
                "`proc:exec` needs no permission: running a process is what a command tool does (inside the jail)".to_string(),
            ),
            "docker" => problems.push(
                "permission `docker` is unsupported: glovebox does not give tools the Docker daemon (that would be root on the host)".to_string(),
            ),
            other => problems.push(format!(
                "permission `{other}` is unsupported (glovebox maps fs:read, fs:write, net:read and proc:exec)"
            )),
        }
    }

    // Approval.
    let mut reasons = Vec::new();
    match t.safety_level.as_deref() {
        None | Some("low") | Some("medium") => {}
        Some("high") => reasons.push("HDN safety_level: high"),
        Some(other) => problems.push(format!(
            "safety_level `{other}` is unknown (low, medium or high); fix it so the tool's approval is not guessed"
        )),
    }
    if t.created_by.as_deref() == Some("agent") {
        reasons.push("created by an agent in HDN");
    }

    // Exec.
    let (cmd, args) = match &t.exec {
        None => {
            problems.push("has no `exec`: HDN runs it inside its server (a built-in); only `exec.type: cmd` tools can be imported — give it a command".to_string());
            (String::new(), Vec::new())
        }
        Some(e) if e.kind == "image" => {
            problems.push(format!(
                "`exec.type: image` ({}) is unsupported: glovebox does not run Docker images; give the tool a command instead",
                e.image.as_deref().unwrap_or("no image")
            ));
            (String::new(), Vec::new())
        }
        Some(e) if e.kind == "cmd" => match e.cmd.as_deref().map(str::trim) {
            Some(c) if !c.is_empty() => (c.to_string(), e.args.clone().unwrap_or_default()),
            _ => {
                problems.push("`exec.type: cmd` without `exec.cmd`; name the program".to_string());
                (String::new(), Vec::new())
            }
        },
        Some(e) => {
            problems.push(format!("`exec.type: {}` is unknown (cmd or image)", e.kind));
            (String::new(), Vec::new())
        }
    };
    if cmd.contains("${") {
        problems
            .push("`exec.cmd` contains `${`, which glovebox would read as a placeholder".into());
    }

    // Inputs and args.
    let params = t.input_schema.clone().unwrap_or_default();
    let mut used = Vec::new();
    let mut templates = Vec::new();
    for (j, arg) in args.iter().enumerate() {
        match template(arg, &params, &mut used) {
            Ok(s) => templates.push(Value::String(s)),
            Err(why) => problems.push(format!("exec.args[{j}] {arg:?}: {why}")),
        }
    }
    if !problems.is_empty() {
        return Err(refuse(problems.join("; ")));
    }
    let mut properties = Map::new();
    for (p, ty) in &params {
        properties.insert(p.clone(), param_schema(ty));
    }
    let required: Vec<&String> = params.keys().filter(|p| used.contains(*p)).collect();
    let mut inputs =
        json!({"type": "object", "additionalProperties": false, "properties": properties});
    if !required.is_empty() {
        inputs["required"] = json!(required);
    }

    let mut outputs = json!({"format": "json"});
    if let Some(out) = t.output_schema.as_ref().filter(|o| !o.is_empty()) {
        let props: Map<String, Value> = out
            .iter()
            .map(|(k, ty)| (k.clone(), param_schema(ty)))
            .collect();
        outputs["schema"] = json!({"type": "object", "properties": props});
    }

    let own_dir = format!("{}/{name}", crate::manifest::discover::TOOLS_DIR);
    let (cwd, fs_read, fs_write) = if read || write {
        // Writing implies reading; listing "." under read too lets the jail
        // execute the tool's program from the root.
        let r = vec!["."];
        let w: Vec<&str> = if write { vec!["."] } else { vec![] };
        (".".to_string(), json!(r), json!(w))
    } else {
        let mut r = vec![own_dir.clone()];
        if cmd.contains('/') && !Path::new(&cmd).is_absolute() {
            r.push(cmd.clone());
        }
        notes.push(format!(
            "no fs permission: the tool runs in {own_dir} and reads nothing else of the project"
        ));
        (own_dir.clone(), json!(r), json!([]))
    };

    let description = t
        .description
        .clone()
        .filter(|d| !d.trim().is_empty())
        .or_else(|| t.name.clone().filter(|n| !n.trim().is_empty()))
        .unwrap_or_else(|| format!("{name} (imported from HDN)"));
    let mut manifest = json!({
        "name": name,
        "description": description,
        "kind": "command",
        "version": 1,
        "inputs": {"schema": inputs},
        "outputs": outputs,
        "exec": {"command": {
            "entrypoint": cmd,
            "args": templates,
            "cwd": cwd,
            "stdout": {"format": "json", "select": "last_json_line"},
        }},
        "permissions": {"network": network, "fs": {"read": fs_read, "write": fs_write}, "secrets": {}},
        "approval": {"required": false},
    });
    if !reasons.is_empty() {
        manifest["approval"] = json!({"required": true, "reason": reasons.join("; ")});
    }
    for key in t.other.keys() {
        if key != "created_at" {
            notes.push(format!(
                "field `{key}` has no v2 equivalent and was ignored"
            ));
        }
    }
    Ok(Converted {
        name,
        manifest,
        notes,
    })
}

/// An HDN arg with `{param}` (for params of `input_schema`) rewritten as
/// `${param}`; other braces stay literal, as HDN leaves them. `used`
/// collects the params referenced.
fn template(
    arg: &str,
    params: &IndexMap<String, String>,
    used: &mut Vec<String>,
) -> Result<String, String> {
    if arg.contains("${") {
        return Err("contains `${`, which glovebox would read as a placeholder; remove it".into());
    }
    let mut out = String::with_capacity(arg.len() + 4);
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let param = after
            .find('}')
            .map(|close| &after[..close])
            .filter(|inner| params.contains_key(*inner));
        match param {
            Some(p) => {
                if !identifier(p) {
                    return Err(format!(
                        "parameter `{p}` is not an identifier (letters, digits, `_`), so it cannot be a placeholder; rename it"
                    ));
                }
                out.push_str("${");
                out.push_str(p);
                out.push('}');
                if !used.iter().any(|u| u == p) {
                    used.push(p.to_string());
                }
                rest = &after[p.len() + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// The JSON Schema of an HDN type name (see the module docs).
pub fn param_schema(ty: &str) -> Value {
    let t = ty.trim().to_ascii_lowercase();
    if let Some(inner) = t.strip_suffix("[]").or_else(|| t.strip_prefix("[]")) {
        if let Some(item) = simple_type(inner) {
            return json!({"type": "array", "items": {"type": item}});
        }
    }
    match simple_type(&t) {
        Some(s) => json!({ "type": s }),
        None => json!({"type": "string", "description": ty.trim()}),
    }
}

fn simple_type(t: &str) -> Option<&'static str> {
    Some(match t {
        "string" | "str" | "text" => "string",
        "int" | "integer" | "int32" | "int64" | "long" => "integer",
        "float" | "double" | "number" | "float64" => "number",
        "bool" | "boolean" => "boolean",
        "object" | "map" | "dict" | "json" => "object",
        "array" | "list" => "array",
        _ => return None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn params(names: &[&str]) -> IndexMap<String, String> {
        names
            .iter()
            .map(|n| (n.to_string(), "string".to_string()))
            .collect()
    }

    #[test]
    fn placeholders_become_templates_and_other_braces_stay() {
        let mut used = Vec::new();
        let p = params(&["url", "n"]);
        assert_eq!(
            template("--url={url}&{other}{n}", &p, &mut used).unwrap(),
            "--url=${url}&{other}${n}"
        );
        assert_eq!(template("{\"a\": 1}", &p, &mut used).unwrap(), "{\"a\": 1}");
        assert_eq!(template("{", &p, &mut used).unwrap(), "{");
        assert_eq!(used, ["url", "n"]);
        assert!(template("${HOME}", &p, &mut used).is_err());
        assert!(template("{a-b}", &params(&["a-b"]), &mut used).is_err());
    }

    #[test]
    fn type_names_map() {
        assert_eq!(param_schema("int"), json!({"type": "integer"}));
        assert_eq!(param_schema(" Boolean "), json!({"type": "boolean"}));
        assert_eq!(
            param_schema("string[]"),
            json!({"type": "array", "items": {"type": "string"}})
        );
        assert_eq!(
            param_schema("regex pattern"),
            json!({"type": "string", "description": "regex pattern"})
        );
    }

    #[test]
    fn docker_and_images_are_refused_with_the_reason() {
        let docker =
            json!({"id": "d", "permissions": ["docker"], "exec": {"type": "cmd", "cmd": "docker"}});
        assert!(convert(0, &docker).unwrap_err().reason.contains("docker"));
        let image = json!({"id": "i", "exec": {"type": "image", "image": "alpine"}});
        assert!(convert(0, &image).unwrap_err().reason.contains("image"));
        let none = json!({"name": "HTTP GET"});
        assert!(convert(3, &none)
            .unwrap_err()
            .reason
            .contains("valid tool name"));
    }

    #[test]
    fn a_cmd_tool_converts() {
        let t = json!({
            "id": "echo_it", "description": "Echo", "input_schema": {"text": "string", "n": "int"},
            "permissions": ["fs:read", "proc:exec"], "safety_level": "high",
            "exec": {"type": "cmd", "cmd": "/bin/echo", "args": ["{text}"]}
        });
        let c = convert(0, &t).unwrap();
        let m = &c.manifest;
        assert_eq!(m["exec"]["command"]["args"], json!(["${text}"]));
        assert_eq!(m["inputs"]["schema"]["required"], json!(["text"]));
        assert_eq!(m["permissions"]["fs"]["read"], json!(["."]));
        assert_eq!(m["approval"]["required"], json!(true));
        assert_eq!(
            m["exec"]["command"]["stdout"]["select"],
            json!("last_json_line")
        );
    }
}
