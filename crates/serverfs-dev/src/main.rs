//! The `serverfs-dev` binary; everything is in the library. The hidden
//! `__supervise` subcommand is the per-command supervisor of
//! `serverfs-supervisor`, dispatched before anything else runs.

fn main() -> std::process::ExitCode {
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == serverfs_dev::SUPERVISE) {
        return serverfs_supervisor::main(args);
    }
    serverfs_dev::run()
}
