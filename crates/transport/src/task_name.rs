//! `Mcp-Name` on `tasks/get`, `tasks/update` and `tasks/cancel`, for clients
//! that leave it out.
//!
//! rmcp requires the header on every `tasks/*` request and answers -32020
//! without it. Some clients (fastmcp's tasks package 4.1.x) send
//! `Mcp-Method` but no `Mcp-Name` there, so they could never poll the task
//! a `bash` call gave them. The header only repeats the body's `taskId` for
//! intermediaries that route by it; on this server the id in the body is
//! what decides, and its owner check is the principal's. So a missing
//! `Mcp-Name` on these methods is filled in from the body, before rmcp's
//! check.
//!
//! Guarantees:
//! - only a *missing* header is filled, and only on the three task methods
//!   named by `Mcp-Method`: a present header, right or wrong, reaches rmcp
//!   as sent (a mismatch stays -32020), and every other request is passed
//!   untouched without its body being parsed;
//! - the value is the body's `taskId` only when it can be a header as it is
//!   (printable ASCII, no surrounding blanks, not the Base64 form): rmcp
//!   compares the decoded header with the body, so any other id is left
//!   to be refused as before — task ids this server issues are all plain.

use axum::http::HeaderValue;
use axum::http::request::Parts;
use rmcp::transport::common::http_header::{
    BASE64_HEADER_PREFIX, HEADER_MCP_METHOD, HEADER_MCP_NAME,
};

/// The methods whose `Mcp-Name` is the task id (SEP-2663).
const TASK_METHODS: &[&str] = &["tasks/get", "tasks/update", "tasks/cancel"];

/// Sets `Mcp-Name` from the body's `params.taskId` when `parts` names a
/// task method in `Mcp-Method` and carries no `Mcp-Name`.
pub(crate) fn fill_missing(parts: &mut Parts, body: &[u8]) {
    let headers = &parts.headers;
    let is_task_method = headers
        .get(HEADER_MCP_METHOD)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|method| TASK_METHODS.contains(&method));
    if !is_task_method || headers.contains_key(HEADER_MCP_NAME) {
        return;
    }
    if let Some(value) = task_id(body).and_then(|id| plain_header(&id)) {
        parts.headers.insert(HEADER_MCP_NAME, value);
    }
}

/// The body's `params.taskId`, when it is a string.
fn task_id(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Message {
        params: Params,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        task_id: String,
    }
    serde_json::from_slice::<Message>(body).ok().map(|m| m.params.task_id)
}

/// `id` as a header value rmcp reads back unchanged, if it is one.
fn plain_header(id: &str) -> Option<HeaderValue> {
    let printable = !id.is_empty() && id.bytes().all(|b| (0x20..=0x7e).contains(&b));
    let blank_ends = id.starts_with([' ', '\t']) || id.ends_with([' ', '\t']);
    if !printable || blank_ends || id.starts_with(BASE64_HEADER_PREFIX) {
        return None;
    }
    HeaderValue::from_str(id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut request = Request::post("/mcp");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).expect("request").into_parts().0
    }

    const GET: &[u8] =
        br#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"3f2a-task"}}"#;

    #[test]
    fn a_missing_name_on_a_task_method_is_the_body_task_id() {
        for method in TASK_METHODS {
            let mut parts = parts(&[("Mcp-Method", method)]);
            fill_missing(&mut parts, GET);
            assert_eq!(parts.headers[HEADER_MCP_NAME], "3f2a-task", "{method}");
        }
    }

    #[test]
    fn a_name_sent_is_left_as_sent_even_when_it_differs() {
        let mut parts = parts(&[("Mcp-Method", "tasks/get"), ("Mcp-Name", "another")]);
        fill_missing(&mut parts, GET);
        assert_eq!(parts.headers[HEADER_MCP_NAME], "another");
    }

    #[test]
    fn other_methods_and_requests_without_a_method_header_are_untouched() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash"}}"#;
        for (headers, body) in [
            (&[("Mcp-Method", "tools/call")][..], &call[..]),
            (&[][..], GET),
            (&[("Mcp-Method", "tasks/list")][..], GET),
        ] {
            let mut parts = parts(headers);
            fill_missing(&mut parts, body);
            assert!(!parts.headers.contains_key(HEADER_MCP_NAME), "{headers:?}");
        }
    }

    #[test]
    fn an_id_that_is_not_a_plain_header_is_left_for_rmcp_to_refuse() {
        for id in ["", " padded", "naïve", "=?base64?YQ==?=", "line\nbreak"] {
            let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get",
                "params": {"taskId": id}})
            .to_string();
            let mut parts = parts(&[("Mcp-Method", "tasks/get")]);
            fill_missing(&mut parts, body.as_bytes());
            assert!(!parts.headers.contains_key(HEADER_MCP_NAME), "{id:?}");
        }
        let mut parts = parts(&[("Mcp-Method", "tasks/get")]);
        fill_missing(&mut parts, b"not json");
        assert!(!parts.headers.contains_key(HEADER_MCP_NAME));
    }
}
