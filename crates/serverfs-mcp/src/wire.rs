//! serverfs-mcp's own wire types: list_workdirs, and the `workdir` every
//! other tool takes and (for list, read and stat) returns around the shared
//! tools' workdir-free types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serverfs_tools::{Reported, ToText};

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

impl ToText for ListWorkdirsResult {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        if self.workdirs.is_empty() {
            out.push_str("no workdirs configured\n");
        }
        for w in &self.workdirs {
            out.push_str(&w.alias);
            if let Some(d) = &w.description {
                out.push_str(" - ");
                out.push_str(d);
            }
            out.push('\n');
        }
    }
}

/// The tool's own text, its paths shown as `workdir:/path`.
impl<T: ToText> ToText for InWorkdir<T> {
    fn to_text(&self, _: Option<&str>, out: &mut String) {
        self.inner.to_text(Some(&self.workdir), out);
    }
}
