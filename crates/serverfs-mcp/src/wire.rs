//! serverfs-mcp's own wire types: list_workdirs, and the `workdir` every
//! other tool takes and (for list, read and stat) returns around the shared
//! tools' workdir-free types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serverfs_tools::Reported;

/// list_workdirs takes no arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ListWorkdirsArgs {}

/// One configured workdir.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkdirInfo {
    /// The name to pass as `workdir` to the other tools.
    pub alias: String,
    /// What the administrator says the workdir holds.
    pub description: Option<String>,
}

/// The configured workdirs, in configuration order.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListWorkdirsResult {
    /// The workdirs.
    pub workdirs: Vec<WorkdirInfo>,
}

/// A shared tool's arguments or result, in a named workdir.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct InWorkdir<T> {
    /// Workdir alias.
    pub workdir: String,
    /// The tool's own fields.
    #[serde(flatten)]
    pub inner: T,
}

impl Reported for ListWorkdirsResult {}

impl<T: Reported> Reported for InWorkdir<T> {
    fn bytes_returned(&self) -> u64 {
        self.inner.bytes_returned()
    }
}
