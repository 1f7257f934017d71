//! MCP Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) for
//! long commands, on rmcp's task manager.
//!
//! Where a request declares the extension, `bash` answers at once with a
//! task; the command runs on as the call would have run it (its timeout,
//! its audit line) but to its end: it yields a session only when the call
//! asked (`yield_after_seconds`), since the task is how the client waits.
//! `tasks/get` shows its output so far as the status message, then the
//! call's own result. Clients that do not declare the extension see no
//! change.
//!
//! Guarantees:
//! - a task belongs to the principal that created it: to anyone else its id
//!   is unknown, with the very error of an id never issued;
//! - at most [`MAX_RUNNING`] running and [`MAX_KEPT`] kept tasks per
//!   principal; beyond them a call answers the tool error `TOO_MANY_TASKS`;
//! - a task is kept [`TTL`] from its creation and, once ended, one more
//!   TTL at most (rmcp's retention); a command still running at its TTL
//!   (none can: the longest timeout is 600 s) would be stopped;
//! - `tasks/cancel` cancels the call's token: the command's tree is killed,
//!   its audit line written, and the task ends `cancelled`;
//! - at shutdown every task is aborted: its command's supervisor sees its
//!   control channel end and kills the tree.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CreateTaskResult, DetailedTask};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use tokio_util::sync::CancellationToken;

/// Running tasks one principal may have (each also takes a command slot).
pub(crate) const MAX_RUNNING: usize = 16;
/// Tasks, running or ended, one principal may have kept at once.
pub(crate) const MAX_KEPT: usize = 256;
/// How long a task is kept after its creation.
pub(crate) const TTL: Duration = Duration::from_secs(3600);
/// The polling interval suggested to clients.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The tasks of every principal.
#[derive(Default)]
pub(crate) struct Tasks {
    manager: TaskManager,
    /// Task id → the principal that created it.
    owners: Mutex<HashMap<String, String>>,
}

/// Where a task's call reports what it is doing: the status message that
/// `tasks/get` shows.
#[derive(Clone)]
pub(crate) struct StatusLine(TaskContext);

impl StatusLine {
    /// Replaces the task's status message.
    pub(crate) fn set(&self, message: String) {
        self.0.set_status_message(message);
    }
}

impl Tasks {
    /// Starts `call` as a task of `principal`. `call` gets the token that
    /// `tasks/cancel` cancels and the task's status line.
    ///
    /// # Errors
    /// `TOO_MANY_TASKS: …` (the tool error's text) when `principal` is at a
    /// bound.
    // A `String`: the tool error's text, as `ToolResult`'s.
    pub(crate) fn start<F, Fut>(&self, principal: &str, call: F) -> Result<CreateTaskResult, String>
    where
        F: FnOnce(CancellationToken, StatusLine) -> Fut,
        Fut: Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'static,
    {
        let mut owners = self.owners();
        // The principal's tasks only: each look-up makes rmcp sweep every
        // task, and another principal's are counted (and their expired
        // ones forgotten) when that principal starts one.
        let (mut running, mut kept) = (0, 0);
        owners.retain(|id, owner| {
            if owner != principal {
                return true;
            }
            let Ok(task) = self.manager.get_task(id) else { return false };
            kept += 1;
            running += usize::from(!task.status().is_terminal());
            true
        });
        if running >= MAX_RUNNING || kept >= MAX_KEPT {
            let minutes = TTL.as_secs() / 60;
            return Err(format!(
                "TOO_MANY_TASKS: at most {MAX_RUNNING} running and {MAX_KEPT} kept tasks per client; \
                 wait for one to end (or cancel one); ended tasks are forgotten {minutes} minutes after they began."
            ));
        }
        let options = TaskOptions::new()
            .with_ttl_ms(millis(TTL))
            .with_poll_interval_ms(millis(POLL_INTERVAL))
            .with_status_message("started");
        let task = self.manager.spawn(options, move |context| {
            let cancel = CancellationToken::new();
            let work = call(cancel.clone(), StatusLine(context.clone()));
            Box::pin(async move {
                let mut work = std::pin::pin!(work);
                let response = tokio::select! {
                    response = &mut work => response,
                    () = context.cancelled() => {
                        cancel.cancel();
                        work.await
                    }
                };
                if context.is_cancel_requested() {
                    return Err(TaskExit::Cancelled);
                }
                match response? {
                    CallToolResponse::Complete(result) => Ok(result),
                    // The tool router answers a plain result for every tool
                    // that runs as a task.
                    _ => Err(TaskExit::Error(ErrorData::internal_error(
                        "the call did not answer a result",
                        None,
                    ))),
                }
            })
        });
        tracing::info!(event = "task_started", principal, task_id = %task.task_id);
        owners.insert(task.task_id.clone(), principal.to_owned());
        Ok(CreateTaskResult::new(task))
    }

    /// `tasks/get`: `principal`'s task `id`.
    ///
    /// # Errors
    /// Unknown task (also another principal's).
    pub(crate) fn get(&self, principal: &str, id: &str) -> Result<DetailedTask, ErrorData> {
        self.owned(principal, id)?;
        self.manager.get_task(id)
    }

    /// `tasks/cancel`: kills the command of `principal`'s task `id`.
    ///
    /// # Errors
    /// Unknown task (also another principal's).
    pub(crate) fn cancel(&self, principal: &str, id: &str) -> Result<(), ErrorData> {
        self.owned(principal, id)?;
        tracing::info!(event = "task_cancel", principal, task_id = id);
        self.manager.cancel_task(id)
    }

    /// `tasks/update`: no task of ours asks for input, so there is nothing
    /// to deliver; the id is still checked.
    ///
    /// # Errors
    /// Unknown task (also another principal's).
    pub(crate) fn update(&self, principal: &str, id: &str) -> Result<(), ErrorData> {
        self.owned(principal, id)?;
        self.manager.update_task(id, [])
    }

    /// Aborts every task (at shutdown).
    pub(crate) fn shutdown(&self) {
        self.manager.shutdown();
        self.owners().clear();
    }

    fn owned(&self, principal: &str, id: &str) -> Result<(), ErrorData> {
        match self.owners().get(id) {
            Some(owner) if owner == principal => Ok(()),
            // Exactly rmcp's answer for an id it never issued.
            _ => Err(ErrorData::invalid_params(format!("unknown task: {id}"), None)),
        }
    }

    fn owners(&self) -> MutexGuard<'_, HashMap<String, String>> {
        // Never held across an await or a panic-prone call.
        self.owners.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that runs until `tasks/cancel`, then ends with a plain result.
    async fn until_cancelled(
        cancel: CancellationToken,
        _: StatusLine,
    ) -> Result<CallToolResponse, ErrorData> {
        cancel.cancelled().await;
        Ok(CallToolResponse::Complete(rmcp::model::CallToolResult::success(vec![])))
    }

    fn refused(result: Result<CreateTaskResult, String>) -> String {
        result.map(|t| t.task.task_id).expect_err("not refused")
    }

    #[tokio::test]
    async fn running_tasks_are_bounded_per_principal() {
        let tasks = Tasks::default();
        let ids: Vec<String> = (0..MAX_RUNNING)
            .map(|_| tasks.start("alice", until_cancelled).unwrap().task.task_id)
            .collect();
        let message = refused(tasks.start("alice", until_cancelled));
        assert!(message.starts_with("TOO_MANY_TASKS: "), "{message}");
        // Another principal is not held back by alice's tasks.
        tasks.start("bob", until_cancelled).unwrap();
        // One ended (kept, not running): alice may start one more.
        tasks.cancel("alice", &ids[0]).unwrap();
        while !tasks.get("alice", &ids[0]).unwrap().status().is_terminal() {
            tokio::task::yield_now().await;
        }
        tasks.start("alice", until_cancelled).unwrap();
        assert!(refused(tasks.start("alice", until_cancelled)).starts_with("TOO_MANY_TASKS: "));
        tasks.shutdown();
        assert!(tasks.get("alice", &ids[1]).is_err(), "kept after shutdown");
    }

    #[tokio::test]
    async fn kept_tasks_are_bounded_per_principal() {
        let tasks = Tasks::default();
        let done = |_: CancellationToken, _: StatusLine| async {
            Ok(CallToolResponse::Complete(rmcp::model::CallToolResult::success(vec![])))
        };
        for _ in 0..MAX_KEPT {
            let id = tasks.start("alice", done).unwrap().task.task_id;
            while !tasks.get("alice", &id).unwrap().status().is_terminal() {
                tokio::task::yield_now().await;
            }
        }
        assert!(refused(tasks.start("alice", done)).starts_with("TOO_MANY_TASKS: "));
        tasks.start("bob", done).unwrap();
    }
}
