//! `serverfs-mcp selfcheck`: what the container really allows, checked from
//! inside (the image has no shell). Writability is asked of the kernel with
//! `access(2)`; nothing is ever written.

use std::path::Path;

use crate::workdirs::SLOT_COUNT;
use rustix::fs::{Access, AtFlags, CWD};
use serde_json::json;

/// Variables that belong to the tunnel (or to Compose) and must never be
/// visible to serverfs-mcp.
const FOREIGN_PREFIXES: &[&str] = &["CONTROL_PLANE_", "OPENAI_", "MCP_SERVER_URL", "TUNNEL_"];

fn writable(path: &Path) -> bool {
    rustix::fs::accessat(CWD, path, Access::WRITE_OK, AtFlags::EACCESS).is_ok()
}

/// Prints the report; true if nothing is wrong.
pub(crate) fn run(workdirs_dir: &Path, workdir_args: &[String]) -> bool {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let root_writable = writable(Path::new("/"));
    let workdirs: Vec<serde_json::Value> = if workdir_args.is_empty() {
        (1..=SLOT_COUNT)
            .map(|n| {
                let slot = format!("{n:02}");
                let alias = std::env::var(format!("WORKDIR_{slot}_ALIAS")).ok().filter(|a| !a.is_empty());
                let dir = workdirs_dir.join(&slot);
                json!({ "slot": slot, "alias": alias, "present": dir.is_dir(), "writable": writable(&dir) })
            })
            .collect()
    } else {
        workdir_args
            .iter()
            .filter_map(|a| a.split_once('='))
            .map(|(alias, path)| json!({ "alias": alias, "present": Path::new(path).is_dir(), "writable": writable(Path::new(path)) }))
            .collect()
    };
    let mut visible: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| {
            FOREIGN_PREFIXES.iter().any(|p| k.starts_with(p))
                || (k.starts_with("WORKDIR_") && k.ends_with("_PATH"))
        })
        .collect();
    visible.sort();
    let any_writable = workdirs.iter().any(|w| w["writable"] == json!(true));
    let ok = uid != 0 && gid != 0 && !root_writable && !any_writable && visible.is_empty();
    let report = json!({
        "uid": uid,
        "gid": gid,
        "root_writable": root_writable,
        "workdirs": workdirs,
        "foreign_env_visible": visible,
        "ok": ok,
    });
    // The report is this subcommand's output; it never runs beside stdio MCP.
    #[allow(clippy::print_stdout)]
    {
        println!("{report}");
    }
    ok
}
