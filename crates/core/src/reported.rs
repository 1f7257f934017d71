//! [`Reported`]: what a tool result tells the call log about itself.
//!
//! It lives at the bottom of the graph so that every crate that defines a
//! tool result (the read tools, the writer, the command runner) implements
//! it beside the type, and no binary keeps a mirrored copy just to add it.

/// Result types report how many content bytes they return, for the log.
pub trait Reported {
    /// Bytes of file content the result returns (0 by default).
    fn bytes_returned(&self) -> u64 {
        0
    }
}
