//! serverfs-exec's tests that make this process the adopter of orphans
//! (`adopt_orphans`: process-wide, so a binary of their own: its sweeps
//! would kill the children of the other tests' processes).

#[path = "../common/mod.rs"]
mod common;

mod adopt;
mod forge;
