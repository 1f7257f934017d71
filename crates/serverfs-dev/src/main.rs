//! The `serverfs-dev` binary; everything is in the library.

fn main() -> std::process::ExitCode {
    serverfs_dev::run()
}
