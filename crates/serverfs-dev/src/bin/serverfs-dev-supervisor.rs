//! The per-command supervisor of `serverfs-supervisor` as a program of its own,
//! installed beside `serverfs-dev`: it links only the supervisor, so it
//! starts in a fraction of the server binary's time, once per command.
//! (`serverfs-dev __supervise` is the same entry point, used when this
//! program is not beside the server.)

fn main() -> std::process::ExitCode {
    serverfs_supervisor::main(std::env::args_os().skip(1))
}
