//! What the auth layer logs when it refuses: the reason at INFO, never a
//! credential.
//!
//! This is its own test binary because it captures logs with a thread-scoped
//! subscriber, and tracing caches each callsite's interest process-wide. While
//! that subscriber is the only one registered, tracing-core 0.1.36 computes a
//! callsite's interest from the default of whichever thread first reaches it
//! (`Rebuilder::JustOne`). A test on another thread that refuses first, with no
//! subscriber, caches "never" for the refusal event, and this test would then
//! capture nothing (it failed that way in CI once). Alone in its process, the
//! callsites are first reached here (see serverfs_test_support::json_logs).

use crate::router;
use crate::support;

use std::time::Duration;

use router::*;
use serverfs_auth::combined;
use serverfs_transport::BearerAuth;
use support::*;

#[test]
fn refusals_are_logged_at_info_with_the_reason_never_the_token() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let wrong_bearer = "Bearer not-the-token-but-secret-looking";
    let (expired, logs) = serverfs_test_support::json_logs(|| {
        runtime.block_on(async {
            let server = JwksServer::start(jwks(vec![jwk(KEY_A, "kid-a")]), Duration::ZERO).await;
            let auth = combined(Some(BearerAuth::new(TOKEN).unwrap()), Some(server.verifier(None)))
                .unwrap();
            let app = app(auth);
            let expired = sign(KEY_A, "kid-a", &{
                let mut c = claims();
                c["exp"] = serde_json::json!(now() - 120);
                c
            });
            let headers: Headers<'_> =
                &[("authorization", wrong_bearer), ("cf-access-jwt-assertion", &expired)];
            assert_refused(call(&app, headers).await, "wrong bearer, expired Access token");
            expired
        })
    });
    assert!(logs.contains("\"level\":\"INFO\""), "{logs}");
    assert!(logs.contains("auth_refused"), "{logs}");
    assert!(logs.contains("invalid bearer credentials"), "{logs}");
    assert!(logs.contains("Access token expired"), "{logs}");
    assert!(!logs.contains("not-the-token"), "bearer value logged: {logs}");
    for part in expired.split('.') {
        assert!(!logs.contains(part), "Access token logged: {logs}");
    }
    assert!(!logs.contains(EMAIL), "unverified claim logged: {logs}");
}
