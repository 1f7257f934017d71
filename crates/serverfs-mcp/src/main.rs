//! `serverfs-mcp`: everything is in the library ([`serverfs_mcp::run`]).

fn main() -> std::process::ExitCode {
    serverfs_mcp::run()
}
