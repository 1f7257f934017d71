//! File transfer end to end: the real binary over HTTP on 127.0.0.1:0,
//! file_link through the real rmcp client, `/files` with reqwest and, for
//! what a client library hides (`..` in the request line, chunked bodies,
//! `Expect: 100-continue`, a body cut off midway), raw TCP.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Client, HttpServer, Project, call, ok};
use serde_json::{Value, json};

const TOKEN: &str = "links-test-token-0123456789abcdef";

/// serverfs-dev over HTTP with extra flags and, optionally, a token.
struct Server {
    addr: String,
    http: HttpServer,
}

impl Server {
    fn start(p: &Project, args: &[&str], token: Option<&str>) -> Self {
        let mut cmd = p.command();
        cmd.args(args);
        if let Some(token) = token {
            cmd.env("SERVERFS_TOKEN", token);
        }
        let http = HttpServer::start_with(cmd);
        Self { addr: http.addr.clone(), http }
    }

    fn url(&self, path_and_query: &str) -> String {
        format!("http://{}{path_and_query}", self.addr)
    }

    async fn client(&self) -> Client {
        self.http.client().await
    }

    /// A signed link's path and query.
    async fn link(&self, client: &Client, path: &str, method: &str) -> String {
        let v = ok(client, "file_link", json!({"path": path, "method": method})).await;
        assert_eq!(v["method"], method);
        v["url"].as_str().unwrap().to_owned()
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap()
}

/// One request over a fresh TCP connection (`Connection: close`); the
/// status, the head and the body of the final response.
fn raw(addr: &str, request: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    split_response(&out)
}

fn split_response(out: &[u8]) -> (u16, String, Vec<u8>) {
    let end = out.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head") + 4;
    let head = String::from_utf8_lossy(&out[..end]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head, out[end..].to_vec())
}

/// `.serverfs-tmp-*` / `.serverfs-bak-*` anywhere under `dir`, and journals.
fn leftovers(p: &Project) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".serverfs-tmp-")
                || name.starts_with(".serverfs-bak-")
                || name.ends_with(".json")
            {
                out.push(e.path().display().to_string());
            }
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(p.dir.path(), &mut out);
    walk(p.private.path(), &mut out);
    out
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn download_whole_ranges_and_head() {
    let p = Project::new();
    let data = pattern(1000);
    std::fs::write(p.path("data.bin"), &data).unwrap();
    let server = Server::start(&p, &[], None);
    let client = server.client().await;
    let v = ok(&client, "file_link", json!({"path": "./src/../data.bin"})).await;
    let link = v["url"].as_str().unwrap().to_owned();
    assert!(link.starts_with("/files/data.bin?method=GET&expires="), "{link}");
    assert!(v["expires_at"].as_str().unwrap().ends_with('Z'), "{v}");
    let url = server.url(&link);
    let r = http().get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-length"], "1000");
    assert_eq!(r.headers()["accept-ranges"], "bytes");
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    assert_eq!(r.bytes().await.unwrap(), data);

    for (range, first, last) in [
        ("bytes=0-9", 0, 9),
        ("bytes=0-0", 0, 0),
        ("bytes=100-199", 100, 199),
        ("bytes=-10", 990, 999),
        ("bytes=990-", 990, 999),
        ("bytes=999-999", 999, 999),
        ("bytes=500-5000", 500, 999),
        ("bytes=-5000", 0, 999),
    ] {
        let r = http().get(&url).header("range", range).send().await.unwrap();
        assert_eq!(r.status(), 206, "{range}");
        assert_eq!(r.headers()["content-range"], format!("bytes {first}-{last}/1000"), "{range}");
        assert_eq!(r.headers()["content-length"], (last - first + 1).to_string(), "{range}");
        assert_eq!(r.bytes().await.unwrap(), &data[first..=last], "{range}");
    }
    for range in ["bytes=1000-", "bytes=1000-1001", "bytes=-0"] {
        let r = http().get(&url).header("range", range).send().await.unwrap();
        assert_eq!(r.status(), 416, "{range}");
        assert_eq!(r.headers()["content-range"], "bytes */1000", "{range}");
    }
    // Several ranges: the whole file.
    let r = http().get(&url).header("range", "bytes=0-1,5-6").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap(), data);

    // HEAD with a GET link: the headers, no body.
    let r = http().head(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-length"], "1000");
    assert_eq!(r.headers()["accept-ranges"], "bytes");
    assert!(r.bytes().await.unwrap().is_empty());
    let r = http().head(&url).header("range", "bytes=-10").send().await.unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(r.headers()["content-range"], "bytes 990-999/1000");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn refused_signatures_are_403_and_no_credentials_401() {
    let p = Project::new();
    std::fs::write(p.path("a.txt"), "a\n").unwrap();
    std::fs::write(p.path("b.txt"), "b\n").unwrap();
    let server = Server::start(&p, &[], None);
    let client = server.client().await;
    let get = server.link(&client, "a.txt", "GET").await;
    let put = server.link(&client, "a.txt", "PUT").await;
    let short = ok(&client, "file_link", json!({"path": "a.txt", "ttl_seconds": 1})).await;
    let short = short["url"].as_str().unwrap().to_owned();
    let status = |r: reqwest::Response| r.status().as_u16();
    let h = http();
    assert_eq!(status(h.get(server.url(&get)).send().await.unwrap()), 200);

    // No credentials at all.
    for path in ["/files/a.txt", "/files/a.txt?x=1", "/files/missing.txt"] {
        assert_eq!(status(h.get(server.url(path)).send().await.unwrap()), 401, "{path}");
        assert_eq!(status(h.put(server.url(path)).body("x").send().await.unwrap()), 401);
    }
    // A bearer token where none is configured is no credential either.
    let r = h.get(server.url("/files/a.txt")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(status(r), 401);

    let sig_of = |url: &str| url.rsplit_once("sig=").unwrap().1.to_owned();
    let mut tampered_sig = sig_of(&get).into_bytes();
    tampered_sig[5] = if tampered_sig[5] == b'A' { b'B' } else { b'A' };
    let tampered_sig = String::from_utf8(tampered_sig).unwrap();
    let expires = get.split("expires=").nth(1).unwrap().split('&').next().unwrap().to_owned();
    let later: u64 = expires.parse::<u64>().unwrap() + 1000;
    let forbidden = [
        ("tampered signature", get.replace(&sig_of(&get), &tampered_sig)),
        ("tampered path", get.replace("/files/a.txt", "/files/b.txt")),
        (
            "tampered expiry",
            get.replace(&format!("expires={expires}"), &format!("expires={later}")),
        ),
        ("stripped signature", get.split("&sig=").next().unwrap().to_owned()),
        ("signature alone", format!("/files/a.txt?sig={}", sig_of(&get))),
        ("method swapped in the query", get.replace("method=GET", "method=PUT")),
        ("PUT link used for GET", put.clone()),
    ];
    for (what, link) in &forbidden {
        let r = h.get(server.url(link)).send().await.unwrap();
        assert_eq!(r.status(), 403, "{what}: {link}");
        assert!(r.text().await.unwrap().starts_with("403 Forbidden"), "{what}");
    }
    // A GET link used for PUT: refused before anything is written.
    let r = h.put(server.url(&get)).body("overwritten").send().await.unwrap();
    assert_eq!(status(r), 403);
    assert_eq!(p.read("a.txt"), "a\n");
    // HEAD counts as GET: the PUT link does not do for HEAD.
    assert_eq!(status(h.head(server.url(&put)).send().await.unwrap()), 403);

    // Expired (valid until the second after it was made).
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let r = h.get(server.url(&short)).send().await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains("expired"));
    assert!(leftovers(&p).is_empty(), "{:?}", leftovers(&p));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_bearer_token_authorises_files_when_configured() {
    let p = Project::new();
    std::fs::write(p.path("a.txt"), "a\n").unwrap();
    let server = Server::start(&p, &[], Some(TOKEN));
    let h = http();
    let r = h.get(server.url("/files/a.txt")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "a\n");
    let r = h.put(server.url("/files/up/b.txt")).bearer_auth(TOKEN).body("b\n").send();
    let r = r.await.unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(p.read("up/b.txt"), "b\n");
    let wrong = h.get(server.url("/files/a.txt")).bearer_auth("wrong-token").send().await;
    assert_eq!(wrong.unwrap().status(), 401);
    assert_eq!(h.get(server.url("/files/a.txt")).send().await.unwrap().status(), 401);
    // A forged signature does not get past a server with a token either.
    let forged = "/files/a.txt?method=GET&expires=99999999999&sig=AAAA";
    assert_eq!(h.get(server.url(forged)).send().await.unwrap().status(), 403);
}

#[tokio::test]
async fn traversal_credentials_and_link_escapes_are_refused() {
    let p = Project::new();
    let host = p.dir.path().to_string_lossy().into_owned();
    symlink("../outside/secret.txt", p.path("leak")).unwrap();
    symlink(p.dir.path().join("outside"), p.path("outdir")).unwrap();
    symlink("src/lib.rs", p.path("inside-link")).unwrap();
    let server = Server::start(&p, &[], Some(TOKEN));
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    for (target, code) in [
        ("/files/../outside/secret.txt", "PATH_OUTSIDE_WORKDIR"),
        ("/files/src/../../outside/secret.txt", "PATH_OUTSIDE_WORKDIR"),
        ("/files/%2e%2e/outside/secret.txt", "PATH_OUTSIDE_WORKDIR"),
        ("/files/%2E%2E%2Foutside%2Fsecret.txt", "PATH_OUTSIDE_WORKDIR"),
        ("/files//etc/passwd", "PATH_OUTSIDE_WORKDIR"),
        ("/files/%2Fetc%2Fpasswd", "PATH_OUTSIDE_WORKDIR"),
        ("/files/leak", ""),
        ("/files/outdir/secret.txt", ""),
        ("/files/.env", "DENIED_PATH"),
        ("/files/.git/config", "DENIED_PATH"),
    ] {
        for method in ["GET", "PUT"] {
            let req = format!(
                "{method} {target} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 3\r\nConnection: close\r\n\r\nbad"
            );
            let (status, _, body) = raw(&server.addr, req.as_bytes());
            let body = String::from_utf8_lossy(&body);
            assert!((400..500).contains(&status), "{method} {target}: {status} {body}");
            assert!(body.starts_with(code), "{method} {target}: {body}");
            assert!(!body.contains(&host), "{method} {target}: host path in {body}");
            assert!(!body.contains("outside\n"), "{method} {target}: content leaked");
        }
    }
    assert_eq!(
        std::fs::read_to_string(p.dir.path().join("outside/secret.txt")).unwrap(),
        "outside\n"
    );
    assert_eq!(std::fs::read_dir(p.dir.path().join("outside")).unwrap().count(), 1);
    assert_eq!(p.read(".env"), "SECRET=1\n");
    // A link that stays inside the root is followed for reads, never
    // written through.
    let r = http().get(server.url("/files/inside-link")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = http().put(server.url("/files/inside-link")).bearer_auth(TOKEN).body("x").send();
    let r = r.await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().starts_with("SYMLINK_NOT_ALLOWED"));
    assert_eq!(p.read("src/lib.rs"), "fn one() -> u32 {\n    1\n}\n");
    assert!(leftovers(&p).is_empty(), "{:?}", leftovers(&p));
}

#[tokio::test]
async fn file_link_checks_the_path_first() {
    let p = Project::new();
    symlink("../outside/secret.txt", p.path("leak")).unwrap();
    symlink("src", p.path("srclink")).unwrap();
    let server = Server::start(&p, &["--public-url", "https://dev.example.com/sfs/"], None);
    let client = server.client().await;
    let host = p.dir.path();
    let v = ok(&client, "file_link", json!({"path": "src/lib.rs", "ttl_seconds": 86400})).await;
    assert!(
        v["url"].as_str().unwrap().starts_with("https://dev.example.com/sfs/files/src/lib.rs?")
    );
    let v = ok(&client, "file_link", json!({"path": "new dir/ü#?.txt", "method": "PUT"})).await;
    assert!(
        v["url"].as_str().unwrap().contains("/files/new%20dir/%C3%BC%23%3F.txt?method=PUT&"),
        "{v}"
    );
    for (args, code) in [
        (json!({"path": "missing.txt"}), "PATH_NOT_FOUND"),
        (json!({"path": "src"}), "NOT_A_FILE"),
        (json!({"path": ".env"}), "DENIED_PATH"),
        (json!({"path": ".env", "method": "PUT"}), "DENIED_PATH"),
        (json!({"path": "../outside/secret.txt"}), "PATH_OUTSIDE_WORKDIR"),
        (json!({"path": "leak"}), ""),
        (json!({"path": "leak", "method": "PUT"}), "SYMLINK_NOT_ALLOWED"),
        (json!({"path": "srclink/x", "method": "PUT"}), "SYMLINK_NOT_ALLOWED"),
        (json!({"path": "src/lib.rs", "ttl_seconds": 0}), "INVALID_ARGUMENT"),
        (json!({"path": "src/lib.rs", "ttl_seconds": 86401}), "INVALID_ARGUMENT"),
        (json!({"path": "src/lib.rs", "method": "DELETE"}), "INVALID_ARGUMENT"),
    ] {
        let (is_error, v) = call(&client, "file_link", args.clone()).await;
        assert!(is_error, "{args}: {v}");
        let text = v.as_str().unwrap();
        assert!(text.starts_with(code), "{args}: {text}");
        assert!(!text.contains(&*host.to_string_lossy()), "{text}");
    }
    client.cancel().await.unwrap();
    // (One writer per root and state dir: the HTTP server goes first.)
    drop(server);
    // Over stdio there is no /files to serve a link: the tool is not listed.
    let stdio = p.stdio_client().await;
    let tools = stdio.list_all_tools().await.unwrap();
    assert!(tools.iter().all(|t| t.name != "file_link"));
    let args = json!({"path": "src/lib.rs"}).as_object().unwrap().clone();
    let params = rmcp::model::CallToolRequestParams::new("file_link").with_arguments(args);
    match stdio.call_tool(params).await {
        Err(_) => {}
        Ok(r) => assert!(r.is_error.unwrap_or(false), "{r:?}"),
    }
    stdio.cancel().await.unwrap();
}

#[tokio::test]
async fn uploads_create_parents_replace_keeping_the_mode_and_report() {
    let p = Project::new();
    let server = Server::start(&p, &[], None);
    let client = server.client().await;
    let data = pattern(300_000);
    let link = server.link(&client, "new/deep/blob.bin", "PUT").await;
    let r = http().put(server.url(&link)).body(data.clone()).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v,
        json!({"path": "new/deep/blob.bin", "size": 300_000, "sha256": sha256_hex(&data)})
    );
    assert_eq!(std::fs::read(p.path("new/deep/blob.bin")).unwrap(), data);
    // Replace (a file over the 256 KiB patch cap), mode kept.
    std::fs::set_permissions(p.path("new/deep/blob.bin"), std::fs::Permissions::from_mode(0o751))
        .unwrap();
    let link = server.link(&client, "new/deep/blob.bin", "PUT").await;
    let r = http().put(server.url(&link)).body(b"short".to_vec()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(std::fs::read(p.path("new/deep/blob.bin")).unwrap(), b"short");
    let mode = std::fs::metadata(p.path("new/deep/blob.bin")).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o751);
    // If-None-Match: * is create-only.
    let r = http().put(server.url(&link)).header("if-none-match", "*").body("x").send();
    assert_eq!(r.await.unwrap().status(), 412);
    assert_eq!(std::fs::read(p.path("new/deep/blob.bin")).unwrap(), b"short");
    // The link is reusable until it expires, and an empty body is a file.
    let r = http().put(server.url(&link)).body(Vec::new()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(std::fs::read(p.path("new/deep/blob.bin")).unwrap(), b"");
    assert!(leftovers(&p).is_empty(), "{:?}", leftovers(&p));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn chunked_and_100_continue_uploads() {
    let p = Project::new();
    let server = Server::start(&p, &[], None);
    let client = server.client().await;
    let link = server.link(&client, "chunked.bin", "PUT").await;
    let mut req = format!(
        "PUT {link} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    let mut all = Vec::new();
    for i in 0..40u8 {
        let piece = vec![i; 1000 + usize::from(i)];
        req.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        req.extend_from_slice(&piece);
        req.extend_from_slice(b"\r\n");
        all.extend_from_slice(&piece);
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let (status, _, body) = raw(&server.addr, &req);
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["size"], all.len());
    assert_eq!(v["sha256"], sha256_hex(&all));
    assert_eq!(std::fs::read(p.path("chunked.bin")).unwrap(), all);

    // Expect: 100-continue: the interim answer comes before the body is
    // sent, then the final one.
    let link = server.link(&client, "continued.bin", "PUT").await;
    let data = pattern(70_000);
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "PUT {link} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
        data.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut interim = [0u8; 25];
    s.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(&data).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let (status, _, _) = split_response(&out);
    assert_eq!(status, 201);
    assert_eq!(std::fs::read(p.path("continued.bin")).unwrap(), data);

    // A refused upload gets its final answer without a 100 Continue.
    let bad = link.replace("continued.bin", "other.bin");
    let head = format!(
        "PUT {bad} HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    );
    let (status, head, _) = raw(&server.addr, head.as_bytes());
    assert_eq!(status, 403, "{head}");
    assert!(!p.path("other.bin").exists());
    assert!(leftovers(&p).is_empty(), "{:?}", leftovers(&p));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn over_the_cap_or_cut_off_nothing_is_left_and_the_old_file_stays() {
    let p = Project::new();
    std::fs::write(p.path("keep.bin"), "old\n").unwrap();
    let server = Server::start(&p, &["--max-upload", "100000"], None);
    let client = server.client().await;
    let link = server.link(&client, "keep.bin", "PUT").await;
    let nothing_left = |p: &Project| {
        assert_eq!(p.read("keep.bin"), "old\n");
        assert!(leftovers(p).is_empty(), "{:?}", leftovers(p));
    };

    // Declared too large: 413 before a byte is read (no 100 Continue).
    let head = format!(
        "PUT {link} HTTP/1.1\r\nHost: x\r\nContent-Length: 100001\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    );
    let (status, head, _) = raw(&server.addr, head.as_bytes());
    assert_eq!(status, 413, "{head}");
    nothing_left(&p);

    // Chunked past the cap: 413 as the count passes it.
    let mut req = format!(
        "PUT {link} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    for _ in 0..30 {
        req.extend_from_slice(b"1000\r\n");
        req.extend_from_slice(&[b'z'; 0x1000]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The server may close before taking the whole body.
    let _ = s.write_all(&req);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert_eq!(split_response(&out).0, 413);
    nothing_left(&p);

    // Exactly the cap is fine.
    let r = http().put(server.url(&link)).body(vec![b'y'; 100_000]).send().await.unwrap();
    assert_eq!(r.status(), 200);
    std::fs::write(p.path("keep.bin"), "old\n").unwrap();

    // Cut off midway: half the declared body, then the connection closes.
    let mut s = TcpStream::connect(&server.addr).unwrap();
    let head = format!("PUT {link} HTTP/1.1\r\nHost: x\r\nContent-Length: 90000\r\n\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&[b'h'; 45_000]).unwrap();
    // Wait until the temporary exists, so the cut comes mid-upload.
    let deadline = Instant::now() + Duration::from_secs(10);
    while leftovers(&p).is_empty() {
        assert!(Instant::now() < deadline, "the upload never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !leftovers(&p).is_empty() {
        assert!(Instant::now() < deadline, "left behind: {:?}", leftovers(&p));
        std::thread::sleep(Duration::from_millis(20));
    }
    nothing_left(&p);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_killed_server_leaves_the_old_file_and_the_next_start_sweeps_the_temporary() {
    let p = Project::new();
    std::fs::write(p.path("keep.bin"), "old\n").unwrap();
    let mut server = Server::start(&p, &[], Some(TOKEN));
    let mut s = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "PUT /files/deep/er/keep.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 90000\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&[b'h'; 45_000]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while leftovers(&p).len() < 2 {
        assert!(Instant::now() < deadline, "the upload never started: {:?}", leftovers(&p));
        std::thread::sleep(Duration::from_millis(20));
    }
    server.http.kill();
    drop(s);
    assert!(!leftovers(&p).is_empty());
    let _again = Server::start(&p, &[], Some(TOKEN));
    assert!(leftovers(&p).is_empty(), "{:?}", leftovers(&p));
    assert!(!p.path("deep").exists());
    assert_eq!(p.read("keep.bin"), "old\n");
}

#[tokio::test]
async fn an_upload_slower_than_the_timeout_is_408_and_leaves_nothing() {
    let p = Project::new();
    std::fs::write(p.path("keep.bin"), "old\n").unwrap();
    let server = Server::start(&p, &["--upload-timeout", "1"], Some(TOKEN));
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "PUT /files/keep.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&[b't'; 10]).unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert_eq!(split_response(&out).0, 408);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(p.read("keep.bin"), "old\n");
    assert!(leftovers(&p).is_empty(), "{:?}", leftovers(&p));
}

#[test]
fn bad_transfer_settings_are_refused_at_start() {
    let p = Project::new();
    for (args, setting) in [
        (&["--public-url", "ftp://x"][..], "SERVERFS_PUBLIC_URL"),
        (&["--public-url", "https://x/?q=1"][..], "SERVERFS_PUBLIC_URL"),
        (&["--upload-timeout", "0"][..], "SERVERFS_UPLOAD_TIMEOUT_SECONDS"),
        (&["--max-upload", "lots"][..], "SERVERFS_MAX_UPLOAD_BYTES"),
    ] {
        let out = p.command().args(["--listen", "127.0.0.1:0"]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(setting), "{args:?}: {stderr}");
    }
}

/// Uploads are bounded (serverfs-transfer's MAX_UPLOADS, 16): with 16
/// slow uploads holding their slots, the next one is refused before its
/// body is read, and a slot freed is a slot usable again.
#[tokio::test]
async fn uploads_beyond_the_bound_are_refused_busy() {
    const MAX_UPLOADS: usize = 16;
    let p = Project::new();
    let server = Server::start(&p, &[], Some(TOKEN));
    let put = |path: &str, len: usize| {
        format!(
            "PUT /files/{path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        )
    };
    // Slow clients: half a body each, then silence. Each has started once
    // its temporary exists.
    let mut slow = Vec::new();
    for i in 0..MAX_UPLOADS {
        let mut s = TcpStream::connect(&server.addr).unwrap();
        s.write_all(put(&format!("slow/{i}.bin"), 2000).as_bytes()).unwrap();
        s.write_all(&[b's'; 1000]).unwrap();
        slow.push(s);
    }
    let started = Instant::now();
    while leftovers(&p).len() < MAX_UPLOADS {
        assert!(started.elapsed() < Duration::from_secs(60), "started: {:?}", leftovers(&p));
        std::thread::sleep(Duration::from_millis(20));
    }

    let (status, head, body) = raw(&server.addr, put("extra.bin", 3).as_bytes());
    assert_eq!(status, 503, "{head}");
    assert!(String::from_utf8_lossy(&body).starts_with("SERVER_BUSY: "), "{head}");
    assert!(!p.path("extra.bin").exists());

    // One slow client gives up: its upload is aborted and its slot comes
    // back (retried only while the abort is still finishing).
    drop(slow.pop());
    let started = Instant::now();
    let status = loop {
        let mut request = put("extra.bin", 3).into_bytes();
        request.extend_from_slice(b"abc");
        let (status, _, _) = raw(&server.addr, &request);
        if status != 503 || started.elapsed() > Duration::from_secs(60) {
            break status;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status, 201);
    assert_eq!(p.read("extra.bin"), "abc");
    drop(slow);
}

/// Each `/files` request has one log line naming who made it: the bearer
/// token's holder, `link` for a signed link, none for a refusal.
#[tokio::test]
async fn the_transfer_line_names_the_principal() {
    let p = Project::new();
    std::fs::write(p.path("a.txt"), "a\n").unwrap();
    let mut cmd = p.command();
    cmd.env("SERVERFS_TOKEN", TOKEN);
    let serverfs_test_support::Listening { child: _child, addr, log, .. } =
        serverfs_test_support::listen(cmd, Duration::from_secs(30));
    let (lines, transfers) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in log.map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v["event"] == "file_transfer"
            {
                let _ = lines.send(v);
            }
        }
    });
    let h = http();
    let url = format!("http://{addr}/files/a.txt");
    assert_eq!(h.get(&url).bearer_auth(TOKEN).send().await.unwrap().status(), 200);
    assert_eq!(h.get(&url).send().await.unwrap().status(), 401);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "file_link", "arguments": {"path": "a.txt", "method": "GET"}}});
    let answer: Value = h
        .post(format!("http://{addr}/mcp"))
        .bearer_auth(TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("Mcp-Protocol-Version", "2025-11-25")
        .body(call.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let link = answer["result"]["structuredContent"]["url"].as_str().unwrap();
    let link = format!("http://{addr}{link}");
    assert_eq!(h.get(&link).bearer_auth("not-the-token").send().await.unwrap().status(), 200);
    let principals: Vec<Value> = (0..3)
        .map(|_| transfers.recv_timeout(Duration::from_secs(30)).unwrap()["principal"].clone())
        .collect();
    assert_eq!(principals, [json!("token"), Value::Null, json!("link")]);
}
