//! `notifications/cancelled` over stateless HTTP: the POST that carries it
//! stops the request it names.
//!
//! Stateless HTTP serves every POST on its own (rmcp builds one service per
//! request), so a cancel notification arriving in its own POST never meets
//! the request it names, and rmcp answers it 202 and does nothing. Here,
//! before rmcp, every request POST is recorded under its caller and its
//! JSON-RPC id while it is in flight, with a token in its HTTP parts'
//! extensions ([`ClientCancel`]); the servers' handlers merge that token
//! into rmcp's own ([`with_client_cancel`]). A cancel notification from the
//! same caller naming that id fires it: the handler stops its work (a
//! command's tree is killed). The client gets no answer to the cancelled
//! request, as the protocol asks: its POST ends at once with an empty
//! event stream (or, when the answer was already streaming progress, the
//! stream ends there). What rmcp still sends for it is read to its end and
//! dropped, so its service ends normally; only a handler that has not
//! answered [`CANCEL_GRACE`] after the cancel is dropped, as when the client
//! closes its connection.
//!
//! Guarantees:
//! - Only the caller that sent a request can cancel it: the caller is the
//!   authenticated principal (`token:<name>`, `access:<email>`, `token` for
//!   the holders of the one unnamed token), or `anonymous` without one.
//! - Several requests in flight with the same caller and id (two anonymous
//!   clients both counting from 1, or two holders of the unnamed token)
//!   cannot be told apart: a cancel naming them cancels none, and says so
//!   in the log.
//! - The notification itself goes on to rmcp and is answered as before.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt as _;
use hyper::body::Frame;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::auth::Principal;

/// How long a cancelled request's handler may take to answer before its
/// POST is dropped.
pub const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// Fired when the client cancels the request whose HTTP parts carry it.
#[derive(Clone, Debug)]
pub struct ClientCancel(CancellationToken);

/// rmcp's token for a request (`ct`), merged with the client's cancel of it
/// when the request came over HTTP through the cancel layer (see the module
/// docs); otherwise `ct` itself. `extensions` are the request context's.
#[must_use]
pub fn with_client_cancel(
    ct: CancellationToken,
    extensions: &rmcp::model::Extensions,
) -> CancellationToken {
    let Some(ClientCancel(client)) =
        extensions.get::<Parts>().and_then(|parts| parts.extensions.get::<ClientCancel>())
    else {
        return ct;
    };
    let merged = ct.child_token();
    let (client, watched) = (client.clone(), merged.clone());
    // Ends when either fires; rmcp cancels `ct` once the request is answered.
    tokio::spawn(async move {
        tokio::select! {
            () = client.cancelled() => watched.cancel(),
            () = watched.cancelled() => {}
        }
    });
    merged
}

/// Who sent a request and its JSON-RPC id (its JSON text).
type Key = (String, String);

/// The request POSTs in flight, by caller and id.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    requests: Mutex<HashMap<Key, Vec<(u64, CancellationToken)>>>,
    serial: AtomicU64,
}

/// Just what is needed of a JSON-RPC message; `params` stays unparsed
/// unless it is a cancel notification's.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelParams<'a> {
    #[serde(borrow)]
    request_id: &'a RawValue,
}

/// An id's canonical JSON text (`1` and `"1"` stay different ids).
fn id_text(id: &RawValue) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(id.get()).ok()?;
    matches!(value, serde_json::Value::Number(_) | serde_json::Value::String(_))
        .then(|| value.to_string())
}

fn caller(parts: &Parts) -> String {
    parts.extensions.get::<Principal>().map_or_else(|| "anonymous".to_owned(), ToString::to_string)
}

/// What a POST carries, as far as cancellation goes.
enum Carried {
    /// A request with this id.
    Request(String),
    /// A cancel notification naming this request id (when it names one).
    Cancel(Option<String>),
    /// Anything else: a response, a batch, another notification, what does
    /// not parse.
    Other,
}

impl Carried {
    fn of(body: &[u8]) -> Self {
        let Ok(message) = serde_json::from_slice::<Message<'_>>(body) else { return Self::Other };
        match (message.method.as_deref(), message.id.and_then(id_text)) {
            (Some("notifications/cancelled"), None) => Self::Cancel(
                message
                    .params
                    .and_then(|p| serde_json::from_str::<CancelParams<'_>>(p.get()).ok())
                    .and_then(|p| id_text(p.request_id)),
            ),
            (Some(_), Some(id)) => Self::Request(id),
            _ => Self::Other,
        }
    }
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<(u64, CancellationToken)>>> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves the POST `parts` with its whole `body`: a request is recorded
    /// while it runs and ends when cancelled; a cancel notification cancels
    /// the request it names first. Anything else passes untouched: rmcp
    /// answers it.
    pub(crate) async fn serve(self: Arc<Self>, parts: Parts, body: Bytes, next: Next) -> Response {
        let carried = Carried::of(&body);
        let key = |id| (caller(&parts), id);
        match carried {
            Carried::Cancel(Some(id)) => self.cancel(key(id)),
            Carried::Request(id) => {
                let entry = self.enter(key(id));
                let token = entry.token.clone();
                let mut parts = parts;
                parts.extensions.insert(ClientCancel(token.clone()));
                let mut response = Box::pin(next.run(Request::from_parts(parts, Body::from(body))));
                let response = tokio::select! {
                    response = &mut response => response,
                    () = token.cancelled() => {
                        let unseen = async move { response.await.into_body() };
                        tokio::spawn(finish_unseen(unseen, entry));
                        return no_answer();
                    }
                };
                let (parts, inner) = response.into_parts();
                let body = UntilCancelled {
                    inner: Some(inner),
                    cancelled: Box::pin(token.cancelled_owned()),
                    entry: Some(entry),
                };
                return Response::from_parts(parts, Body::new(body));
            }
            Carried::Cancel(None) | Carried::Other => {}
        }
        next.run(Request::from_parts(parts, Body::from(body))).await
    }

    fn enter(self: &Arc<Self>, key: Key) -> Entry {
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        self.lock().entry(key.clone()).or_default().push((serial, token.clone()));
        Entry { in_flight: Arc::clone(self), key, serial, token }
    }

    fn cancel(&self, key: Key) {
        let requests = self.lock();
        match requests.get(&key).map(Vec::as_slice) {
            Some([(_, token)]) => {
                token.cancel();
                tracing::info!(event = "cancelled", principal = key.0, request_id = key.1);
            }
            Some(several) => tracing::info!(
                event = "cancel_ignored",
                principal = key.0,
                request_id = key.1,
                reason = "several requests in flight have this id",
                in_flight = several.len(),
            ),
            None => {}
        }
    }
}

/// A request recorded in flight; dropped (its response sent, or given up),
/// it is forgotten.
struct Entry {
    in_flight: Arc<InFlight>,
    key: Key,
    serial: u64,
    token: CancellationToken,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut requests = self.in_flight.lock();
        if let Some(entries) = requests.get_mut(&self.key) {
            entries.retain(|(serial, _)| *serial != self.serial);
            if entries.is_empty() {
                requests.remove(&self.key);
            }
        }
    }
}

/// Calls `server`'s tool through `router` (what rmcp's `#[tool_handler]`
/// generates), with the call's token merged with the client's HTTP cancel
/// ([`with_client_cancel`]).
///
/// # Errors
/// What the tool router answers: an unknown tool, bad arguments.
pub async fn call_tool<S: Send + Sync + 'static>(
    router: &ToolRouter<S>,
    server: &S,
    request: CallToolRequestParams,
    mut context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    context.ct = with_client_cancel(context.ct, &context.extensions);
    router.call(ToolCallContext::new(server, request, context)).await
}

/// Reads the answer of a cancelled request to its end, unseen, within
/// [`CANCEL_GRACE`] (dropping it then stops the handler, as a closed
/// connection does), and only then forgets the request.
async fn finish_unseen(answer: impl Future<Output = Body>, entry: Entry) {
    let read = async { answer.await.collect().await.map(drop) };
    let _ = tokio::time::timeout(CANCEL_GRACE, read).await;
    drop(entry);
}

/// The answer to a cancelled request: an event stream with no event.
fn no_answer() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response
}

/// A response body (an event stream still sending progress, say) that ends
/// when its request is cancelled; the rest of it is read unseen (see
/// [`finish_unseen`]).
struct UntilCancelled {
    inner: Option<Body>,
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    entry: Option<Entry>,
}

impl hyper::body::Body for UntilCancelled {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if this.inner.is_some()
            && this.cancelled.as_mut().poll(cx).is_ready()
            && let (Some(inner), Some(entry)) = (this.inner.take(), this.entry.take())
        {
            tokio::spawn(finish_unseen(std::future::ready(inner), entry));
        }
        match &mut this.inner {
            Some(inner) => Pin::new(inner).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(hyper::body::Body::is_end_stream)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.as_ref().map(hyper::body::Body::size_hint).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_numbers_or_strings_kept_apart() {
        let raw = |s: &str| serde_json::from_str::<&RawValue>(s).unwrap().to_owned();
        assert_eq!(id_text(&raw("7")).as_deref(), Some("7"));
        assert_eq!(id_text(&raw("\"7\"")).as_deref(), Some("\"7\""));
        assert_eq!(id_text(&raw("\"\\u0037\"")).as_deref(), Some("\"7\""));
        assert_eq!(id_text(&raw("null")), None);
        assert_eq!(id_text(&raw("[1]")), None);
    }

    #[test]
    fn a_cancel_reaches_only_an_unambiguous_request_of_the_same_caller() {
        let in_flight = Arc::new(InFlight::default());
        let key = |who: &str, id: &str| (who.to_owned(), id.to_owned());
        let alice = in_flight.enter(key("token:alice", "1"));
        let bob = in_flight.enter(key("token:bob", "1"));
        in_flight.cancel(key("token:bob", "2"));
        in_flight.cancel(key("token:carol", "1"));
        assert!(!alice.token.is_cancelled() && !bob.token.is_cancelled());
        in_flight.cancel(key("token:alice", "1"));
        assert!(alice.token.is_cancelled() && !bob.token.is_cancelled());

        let first = in_flight.enter(key("anonymous", "1"));
        let second = in_flight.enter(key("anonymous", "1"));
        in_flight.cancel(key("anonymous", "1"));
        assert!(!first.token.is_cancelled() && !second.token.is_cancelled());
        drop(second);
        in_flight.cancel(key("anonymous", "1"));
        assert!(first.token.is_cancelled());

        drop((alice, bob, first));
        assert!(in_flight.lock().is_empty(), "every entry is forgotten when dropped");
    }
}
