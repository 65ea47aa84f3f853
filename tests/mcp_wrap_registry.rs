//! A real MCP server from a package registry, jailed as `kind: mcp`: the
//! reference `mcp-server-time` (PyPI, pinned; tests/mcp/setup-time.sh
//! installs it in target/mcp-time-venv with the system python, which the
//! jail's baseline holds). Listed and called through `glovebox mcp`, with
//! its own schemas; granted nothing but its venv.
//!
//! Without the venv (no network) the test skips with the reason, and
//! fails under `GLOVEBOX_REQUIRE_KERNEL=1` (CI).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod runkit;
mod servekit;

use common::*;
use runkit::*;
use serde_json::json;
use servekit::StdioMcp;

#[test]
fn the_reference_time_server_runs_jailed_through_glovebox_mcp() {
    if !jail_available() {
        return;
    }
    let Some(program) = venv_program(
        "tests/mcp/setup-time.sh",
        "GLOVEBOX_MCP_TIME_VENV",
        "mcp-time-venv",
        "mcp-server-time",
    ) else {
        return;
    };
    let venv = program.parent().unwrap().parent().unwrap();
    let f = Fixture::new();
    f.tool(&json!({
        "name": "time",
        "description": "the reference time server",
        "kind": "mcp",
        "version": 1,
        "exec": {"mcp": {"entrypoint": program, "args": ["--local-timezone", "UTC"]}},
        "permissions": {"fs": {"read": [venv]}},
    }));
    let state = f.state();
    let mut s = StdioMcp::start(
        &f.root,
        &[("GLOVEBOX_STATE_DIR", state.to_str().unwrap())],
        &[],
    );
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}));
    let list = s.reply();
    let tools = list["result"]["tools"].as_array().unwrap();
    let current = tools
        .iter()
        .find(|t| t["name"] == "time__get_current_time")
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(
        current["inputSchema"]["required"],
        json!(["timezone"]),
        "{current}"
    );
    assert!(tools.iter().any(|t| t["name"] == "time__convert_time"));

    let now = s.call(
        2,
        "time__get_current_time",
        json!({"timezone": "Asia/Tokyo"}),
    );
    let out = &now["result"];
    assert_ne!(out["isError"], json!(true), "{now}");
    let text = out.to_string();
    assert!(
        text.contains("Asia/Tokyo") && text.contains("+09:00"),
        "{now}"
    );

    let converted = s.call(
        3,
        "time__convert_time",
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}),
    );
    assert_ne!(converted["result"]["isError"], json!(true), "{converted}");
    assert!(
        converted.to_string().contains("Europe/Paris"),
        "{converted}"
    );

    // Its schema is enforced by glovebox; its own errors come back as one.
    let missing = s.call(4, "time__get_current_time", json!({}));
    assert_eq!(
        servekit::tool_error(&missing["result"])["kind"],
        "input_invalid",
        "{missing}"
    );
    let bad = s.call(
        5,
        "time__get_current_time",
        json!({"timezone": "Not/AZone"}),
    );
    assert_eq!(bad["result"]["isError"], json!(true), "{bad}");
    let log = f.audit_log();
    assert!(
        log.contains("mcp_server=time") && log.contains("mcp_tool=convert_time"),
        "{log}"
    );
}
