//! The Access verifier against a real JWKS server on loopback, with keys
//! signed by the committed test keys. Outcomes only; nothing is timed.

use crate::support;

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::json;
use serverfs_auth::{ACCESS_JWT_HEADER, AccessError, AccessJwt};
use support::*;

async fn server_with_a() -> JwksServer {
    JwksServer::start(jwks(vec![jwk(KEY_A, "kid-a")]), Duration::ZERO).await
}

fn with_claim(key: &str, value: serde_json::Value) -> serde_json::Value {
    let mut c = claims();
    c[key] = value;
    c
}

fn without_claim(key: &str) -> serde_json::Value {
    let mut c = claims();
    c.as_object_mut().unwrap().remove(key);
    c
}

#[tokio::test]
async fn a_valid_token_yields_the_email() {
    let server = server_with_a().await;
    let verifier = server.verifier(None);
    let identity = verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.unwrap();
    assert_eq!(identity.email, EMAIL);
    assert_eq!(identity.subject, "7335d417-61da-459d-899c-0a01c76a2f94");
    // A second token: served from the cache.
    verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.unwrap();
    assert_eq!(server.fetches(), 1);
}

#[tokio::test]
async fn aud_may_be_a_string_or_an_array_with_other_tags() {
    let server = server_with_a().await;
    let verifier = server.verifier(None);
    for aud in [json!(AUD), json!(["other-app", AUD])] {
        let token = sign(KEY_A, "kid-a", &with_claim("aud", aud.clone()));
        assert!(verifier.verify(&token).await.is_ok(), "{aud}");
    }
}

#[tokio::test]
async fn time_claims_are_checked_with_a_30_second_leeway() {
    let server = server_with_a().await;
    let verifier = server.verifier(None);
    let now = now();
    let cases = [
        ("expired 2 minutes ago", with_claim("exp", json!(now - 120)), Err(AccessError::Expired)),
        ("expired 10 s ago (within leeway)", with_claim("exp", json!(now - 10)), Ok(())),
        ("valid in 2 minutes", with_claim("nbf", json!(now + 120)), Err(AccessError::NotYetValid)),
        ("valid in 10 s (within leeway)", with_claim("nbf", json!(now + 10)), Ok(())),
        ("no exp", without_claim("exp"), Err(AccessError::Claims)),
        ("exp not a number", with_claim("exp", json!("soon")), Err(AccessError::Claims)),
    ];
    for (what, claims, expected) in cases {
        let got = verifier.verify(&sign(KEY_A, "kid-a", &claims)).await.map(drop);
        assert_eq!(got, expected, "{what}");
    }
}

#[tokio::test]
async fn issuer_audience_and_email_are_required_and_checked() {
    let server = server_with_a().await;
    let verifier = server.verifier(None);
    let cases = [
        ("wrong aud", with_claim("aud", json!(["another-app"])), AccessError::Audience),
        ("wrong aud string", with_claim("aud", json!("another-app")), AccessError::Audience),
        ("no aud", without_claim("aud"), AccessError::Claims),
        (
            "another team",
            with_claim("iss", json!("https://otherteam.cloudflareaccess.com")),
            AccessError::Issuer,
        ),
        (
            "issuer with a slash",
            with_claim("iss", json!(format!("{ISSUER}/"))),
            AccessError::Issuer,
        ),
        ("no iss", without_claim("iss"), AccessError::Claims),
        ("no email (service token)", without_claim("email"), AccessError::NoEmail),
        ("empty email", with_claim("email", json!("")), AccessError::NoEmail),
    ];
    for (what, claims, expected) in cases {
        let got = verifier.verify(&sign(KEY_A, "kid-a", &claims)).await;
        assert_eq!(got, Err(expected), "{what}");
    }
}

#[tokio::test]
async fn only_rs256_is_accepted_and_others_fetch_nothing() {
    // The JWKS also lists an HMAC ("oct") key: a token "signed" with it must
    // not get in, whatever it claims.
    let secret = b"a-shared-secret-that-is-long-enough";
    let oct = json!({"kty": "oct", "kid": "hmac", "alg": "HS256",
        "k": "YS1zaGFyZWQtc2VjcmV0LXRoYXQtaXMtbG9uZy1lbm91Z2g"});
    let server = JwksServer::start(jwks(vec![jwk(KEY_A, "kid-a"), oct]), Duration::ZERO).await;
    let verifier = server.verifier(None);
    let public_pem_bytes = KEY_A.as_bytes(); // the classic RS/HS confusion secret
    let refused = [
        ("HS256 with a known RSA kid", sign_hs256(secret, "kid-a", &claims())),
        ("HS256 with the oct kid", sign_hs256(secret, "hmac", &claims())),
        ("HS256 keyed with key material", sign_hs256(public_pem_bytes, "kid-a", &claims())),
        ("alg none", unsigned(&json!({"alg": "none", "typ": "JWT", "kid": "kid-a"}), &claims())),
        ("alg None", unsigned(&json!({"alg": "None", "kid": "kid-a"}), &claims())),
        ("no alg", unsigned(&json!({"typ": "JWT", "kid": "kid-a"}), &claims())),
        ("PS256", unsigned(&json!({"alg": "PS256", "kid": "kid-a"}), &claims())),
        ("RS512", unsigned(&json!({"alg": "RS512", "kid": "kid-a"}), &claims())),
    ];
    for (what, token) in refused {
        assert_eq!(verifier.verify(&token).await, Err(AccessError::Algorithm), "{what}");
    }
    // Refused before any key lookup: nothing was fetched.
    assert_eq!(server.fetches(), 0);
    // RS256 naming the oct key: that key is not an RSA signing key.
    let got = verifier.verify(&sign(KEY_A, "hmac", &claims())).await;
    assert_eq!(got, Err(AccessError::UnknownKeyId));
    // And the RSA key still works.
    assert!(verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.is_ok());
}

#[tokio::test]
async fn a_wrong_signature_is_refused_without_a_refresh() {
    let server = server_with_a().await;
    let verifier = server.verifier(Some(Duration::ZERO));
    assert!(verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.is_ok());
    // Signed with key B but naming key A.
    let forged = sign(KEY_B, "kid-a", &claims());
    assert_eq!(verifier.verify(&forged).await, Err(AccessError::Signature));
    // Claims changed after signing.
    let token = sign(KEY_A, "kid-a", &claims());
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    parts[1] = sign(KEY_A, "kid-a", &with_claim("email", json!("admin@example.com")))
        .split('.')
        .nth(1)
        .unwrap()
        .to_owned();
    let tampered = parts.join(".");
    // Same header, other payload, old signature.
    let got = verifier.verify(&tampered).await;
    assert_eq!(got, Err(AccessError::Signature));
    assert_eq!(server.fetches(), 1, "a bad signature is not an unknown key");
}

#[tokio::test]
async fn garbage_is_refused() {
    let server = server_with_a().await;
    let verifier = server.verifier(None);
    let long = "a".repeat(20_000);
    for garbage in [
        "",
        "not-a-jwt",
        "a.b.c",
        "a.b",
        "a.b.c.d",
        "....",
        "eyJhbGciOiJSUzI1NiJ9",
        long.as_str(),
        "%%%.%%%.%%%",
    ] {
        assert_eq!(verifier.verify(garbage).await, Err(AccessError::Malformed), "{garbage:.40}");
    }
    let no_kid = unsigned(&json!({"alg": "RS256"}), &claims());
    assert_eq!(verifier.verify(&no_kid).await, Err(AccessError::NoKeyId));
    let crit = unsigned(&json!({"alg": "RS256", "kid": "kid-a", "crit": ["exp"]}), &claims());
    assert_eq!(verifier.verify(&crit).await, Err(AccessError::CriticalHeader));
    // A valid token with its signature cut off.
    let token = sign(KEY_A, "kid-a", &claims());
    let cut = &token[..token.rfind('.').unwrap() + 1];
    assert_eq!(verifier.verify(cut).await, Err(AccessError::Signature));
}

#[tokio::test]
async fn the_header_must_be_present_once() {
    let server = server_with_a().await;
    let verifier = server.verifier(None);
    let token = sign(KEY_A, "kid-a", &claims());
    let mut headers = HeaderMap::new();
    assert_eq!(verifier.verify_headers(&headers).await, Err(AccessError::Missing));
    headers.append(ACCESS_JWT_HEADER, HeaderValue::from_str(&token).unwrap());
    assert_eq!(verifier.verify_headers(&headers).await.unwrap().email, EMAIL);
    headers.append(ACCESS_JWT_HEADER, HeaderValue::from_str(&token).unwrap());
    assert_eq!(verifier.verify_headers(&headers).await, Err(AccessError::Repeated));
    let mut headers = HeaderMap::new();
    headers.insert("Cf-Access-Jwt-Assertion", HeaderValue::from_static("garbage"));
    assert_eq!(verifier.verify_headers(&headers).await, Err(AccessError::Malformed));
}

#[tokio::test]
async fn an_unknown_kid_triggers_one_refresh_and_rotation_works() {
    let server = server_with_a().await;
    let verifier = server.verifier(Some(Duration::ZERO));
    assert!(verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.is_ok());
    assert_eq!(server.fetches(), 1);

    // Cloudflare rotates: key B is current, key A stays published.
    server.rotate(jwks(vec![jwk(KEY_B, "kid-b"), jwk(KEY_A, "kid-a")]));
    let identity = verifier.verify(&sign(KEY_B, "kid-b", &claims())).await.unwrap();
    assert_eq!(identity.email, EMAIL);
    assert_eq!(server.fetches(), 2, "exactly one refresh for the new kid");
    // Both keys are cached now.
    assert!(verifier.verify(&sign(KEY_B, "kid-b", &claims())).await.is_ok());
    assert!(verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.is_ok());
    assert_eq!(server.fetches(), 2);

    // A manual rotation drops key A: after the next refresh it is gone.
    server.rotate(jwks(vec![jwk(KEY_B, "kid-b")]));
    let got = verifier.verify(&sign(KEY_A, "kid-other", &claims())).await;
    assert_eq!(got, Err(AccessError::UnknownKeyId));
    assert_eq!(server.fetches(), 3);
    let got = verifier.verify(&sign(KEY_A, "kid-a", &claims())).await;
    assert_eq!(got, Err(AccessError::UnknownKeyId), "withdrawn key no longer accepted");
}

#[tokio::test]
async fn within_the_refresh_interval_an_unknown_kid_fetches_nothing() {
    let server = server_with_a().await;
    let verifier = server.verifier(None); // the default interval, 30 s
    assert!(verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.is_ok());
    server.rotate(jwks(vec![jwk(KEY_B, "kid-b"), jwk(KEY_A, "kid-a")]));
    let got = verifier.verify(&sign(KEY_B, "kid-b", &claims())).await;
    assert_eq!(got, Err(AccessError::UnknownKeyId));
    assert_eq!(server.fetches(), 1);
}

#[tokio::test]
async fn the_refresh_happens_again_once_the_interval_has_passed() {
    let server = server_with_a().await;
    let verifier = server.verifier(Some(Duration::from_millis(300)));
    assert!(verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.is_ok());
    server.rotate(jwks(vec![jwk(KEY_B, "kid-b")]));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(verifier.verify(&sign(KEY_B, "kid-b", &claims())).await.is_ok());
    assert_eq!(server.fetches(), 2);
}

/// Concurrent verifications of `tokens`; every result.
async fn flood(verifier: &AccessJwt, tokens: Vec<String>) -> Vec<Result<(), AccessError>> {
    let mut tasks = tokio::task::JoinSet::new();
    for token in tokens {
        let verifier = verifier.clone();
        tasks.spawn(async move { verifier.verify(&token).await.map(drop) });
    }
    tasks.join_all().await
}

/// Well-formed RS256 tokens naming made-up key ids (unsigned: they are
/// refused at the key lookup, before any signature check).
fn made_up_kids(prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            unsigned(
                &json!({"alg": "RS256", "typ": "JWT", "kid": format!("{prefix}-{i}")}),
                &claims(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_unknown_kids_costs_one_fetch() {
    // The server answers slowly, so the flood arrives while the first
    // fetch is still running.
    let server =
        JwksServer::start(jwks(vec![jwk(KEY_A, "kid-a")]), Duration::from_millis(200)).await;
    let verifier = server.verifier(None);
    let results = flood(&verifier, made_up_kids("made-up", 200)).await;
    assert_eq!(results.len(), 200);
    assert!(results.iter().all(|r| *r == Err(AccessError::UnknownKeyId)));
    let fetches = server.fetches();
    eprintln!("JWKS fetches for 200 concurrent unknown kids: {fetches}");
    assert!((1..=2).contains(&fetches), "{fetches} fetches");
    // The real key still works, from the cache.
    assert!(verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.is_ok());
    assert_eq!(server.fetches(), fetches);
    // A second wave within the interval fetches nothing more.
    let results = flood(&verifier, made_up_kids("second-wave", 200)).await;
    assert!(results.iter().all(|r| *r == Err(AccessError::UnknownKeyId)));
    assert_eq!(server.fetches(), fetches);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_requests_share_one_fetch() {
    let server =
        JwksServer::start(jwks(vec![jwk(KEY_A, "kid-a")]), Duration::from_millis(200)).await;
    let verifier = server.verifier(None);
    let results = flood(&verifier, vec![sign(KEY_A, "kid-a", &claims()); 50]).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(server.fetches(), 1);
}

#[tokio::test]
async fn an_unavailable_jwks_refuses_and_recovers() {
    let server = server_with_a().await;
    server.set_status(StatusCode::SERVICE_UNAVAILABLE);
    let verifier = server.verifier(Some(Duration::ZERO));
    let token = sign(KEY_A, "kid-a", &claims());
    assert_eq!(verifier.verify(&token).await, Err(AccessError::UnknownKeyId));
    assert!(verifier.prefetch().await.is_err());
    server.set_status(StatusCode::OK);
    assert_eq!(verifier.prefetch().await, Ok(1));
    assert!(verifier.verify(&token).await.is_ok());
}

#[tokio::test]
async fn unusable_jwks_entries_are_skipped() {
    let mut rs512 = jwk(KEY_B, "kid-rs512");
    rs512["alg"] = json!("RS512");
    let mut enc = jwk(KEY_B, "kid-enc");
    enc["use"] = json!("enc");
    let mut no_kid = jwk(KEY_B, "x");
    no_kid.as_object_mut().unwrap().remove("kid");
    let document = jwks(vec![
        json!({"kty": "EC", "kid": "kid-ec", "crv": "P-256", "x": "AA", "y": "AA"}),
        json!({"kty": "RSA", "kid": "kid-broken"}),
        json!("not an object"),
        rs512,
        enc,
        no_kid,
        jwk(KEY_A, "kid-a"),
    ]);
    let server = JwksServer::start(document, Duration::ZERO).await;
    let verifier = server.verifier(None);
    assert_eq!(verifier.prefetch().await, Ok(1));
    for kid in ["kid-ec", "kid-broken", "kid-rs512", "kid-enc"] {
        let got = verifier.verify(&sign(KEY_B, kid, &claims())).await;
        assert_eq!(got, Err(AccessError::UnknownKeyId), "{kid}");
    }
    assert!(verifier.verify(&sign(KEY_A, "kid-a", &claims())).await.is_ok());
}

#[tokio::test]
async fn stale_keys_are_refetched_and_withdrawn_keys_stop_working() {
    let server = server_with_a().await;
    let config = serverfs_auth::AccessConfig::new(TEAM, &[AUD])
        .unwrap()
        .with_certs_url(&server.url)
        .unwrap()
        .with_min_refresh_interval(Duration::ZERO)
        .with_keys_max_age(Duration::ZERO); // every cached key is stale at once
    let verifier = AccessJwt::new(config).unwrap();
    let token = sign(KEY_A, "kid-a", &claims());
    assert!(verifier.verify(&token).await.is_ok());
    assert_eq!(server.fetches(), 1);
    assert!(verifier.verify(&token).await.is_ok());
    assert_eq!(server.fetches(), 2, "a stale key set is refetched");
    // If the refetch fails, the stale keys stay in use.
    server.set_status(StatusCode::SERVICE_UNAVAILABLE);
    assert!(verifier.verify(&token).await.is_ok());
    assert_eq!(server.fetches(), 3);
    // Once Cloudflare withdraws key A, the next refetch drops it.
    server.set_status(StatusCode::OK);
    server.rotate(jwks(vec![jwk(KEY_B, "kid-b")]));
    assert_eq!(verifier.verify(&token).await, Err(AccessError::UnknownKeyId));
    assert!(verifier.verify(&sign(KEY_B, "kid-b", &claims())).await.is_ok());
}
