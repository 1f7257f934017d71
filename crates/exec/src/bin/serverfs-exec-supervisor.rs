//! The supervisor as a program of its own, for this crate's tests
//! (serverfs-dev runs the same entry point under a hidden subcommand).

use std::process::ExitCode;

fn main() -> ExitCode {
    serverfs_supervisor::main(std::env::args_os().skip(1))
}
