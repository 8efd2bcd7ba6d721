//! Capabilities end to end: the `escape` component tries to reach files,
//! environment variables and the network through the real sandbox. What is
//! not granted is refused — `/etc/passwd`, the home directory, the root,
//! writes outside the grant, escapes by `..`, by absolute path and by
//! planted symlinks, variables of the host, sockets — and what is granted
//! works, exactly as granted.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use moat_engine::DoneStatus;
use moat_grants::Grants;
use moat_testkit::components::ESCAPE;
use moat_testkit::http_server::{SERVED, TestServer};
use moat_testkit::{error_codes, error_message, run_component, single_done, texts};

/// What the `escape` adapter writes (adapters/testing/escape).
const WRITTEN: &str = "written by the escape adapter\n";
/// The content of the file outside the grant; must never reach the guest.
const SECRET: &str = "the secret outside the grant";
/// The content of the file inside the grant.
const INSIDE: &str = "a file inside the grant";

/// A scratch tree, canonical paths: `granted/inside.txt` and
/// `outside/secret.txt`, side by side.
struct Tree {
    _dir: tempfile::TempDir,
    granted: PathBuf,
    outside: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let granted = root.join("granted");
        let outside = root.join("outside");
        std::fs::create_dir(&granted).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(granted.join("inside.txt"), INSIDE).unwrap();
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        Self {
            _dir: dir,
            granted,
            outside,
        }
    }

    fn read_only(&self) -> Grants {
        Grants {
            read: vec![self.granted.clone()],
            ..Grants::none()
        }
    }

    fn read_write(&self) -> Grants {
        Grants {
            write: vec![self.granted.clone()],
            ..Grants::none()
        }
    }
}

fn show(path: &Path) -> String {
    path.to_str().expect("UTF-8 test paths").to_string()
}

/// Runs the probes (one per line) with `grants`; returns one result per
/// probe. The run itself always succeeds: a refusal is an answer to the
/// guest, not a failure of the run.
async fn probe(probes: &[String], grants: Grants) -> Vec<String> {
    let events = run_component(ESCAPE, &probes.join("\n"), |request| {
        request.scope.grants = grants;
    })
    .await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    let results: Vec<String> = texts(&events).into_iter().map(str::to_string).collect();
    assert_eq!(
        results.len(),
        probes.len(),
        "one result per probe: {results:?}"
    );
    for result in &results {
        assert!(
            !result.contains(SECRET),
            "the secret leaked to the guest: {result}"
        );
    }
    results
}

async fn probe_one(probe_line: String, grants: Grants) -> String {
    probe(&[probe_line], grants).await.remove(0)
}

fn assert_denied(result: &str) {
    assert!(
        result.starts_with("denied: "),
        "expected a refusal: {result}"
    );
}

// ---- what is not granted is refused ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_etc_passwd_is_denied() {
    let tree = Tree::new();
    for grants in [Grants::none(), tree.read_write()] {
        let result = probe_one("read /etc/passwd".into(), grants).await;
        assert_denied(&result);
        assert!(!result.contains("root:"), "{result}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_the_home_directory_is_denied() {
    let tree = Tree::new();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let results = probe(
        &[format!("list {home}"), format!("read {home}/.bashrc")],
        tree.read_write(),
    )
    .await;
    assert_denied(&results[0]);
    assert_denied(&results[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_outside_the_granted_directory_is_denied() {
    let tree = Tree::new();
    let target = tree.outside.join("planted.txt");
    let result = probe_one(format!("write {}", show(&target)), tree.read_write()).await;
    assert_denied(&result);
    assert!(!target.exists(), "nothing was written outside the grant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escaping_with_dot_dot_is_denied() {
    let tree = Tree::new();
    // A real subdirectory, so the walk up is resolved and not cut short.
    std::fs::create_dir(tree.granted.join("sub")).unwrap();
    let granted = show(&tree.granted);
    let results = probe(
        &[
            format!("read {granted}/../outside/secret.txt"),
            format!("read {granted}/sub/../../outside/secret.txt"),
            format!("list {granted}/.."),
            format!("write {granted}/../outside/planted.txt"),
        ],
        tree.read_write(),
    )
    .await;
    for result in &results {
        assert_denied(result);
    }
    assert!(!tree.outside.join("planted.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_path_outside_the_grant_is_denied() {
    let tree = Tree::new();
    let results = probe(
        &[
            format!("read {}", show(&tree.outside.join("secret.txt"))),
            format!("list {}", show(&tree.outside)),
        ],
        tree.read_write(),
    )
    .await;
    assert_denied(&results[0]);
    assert_denied(&results[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_planted_inside_the_grant_pointing_outside_is_denied() {
    use std::os::unix::fs::symlink;
    let tree = Tree::new();
    let secret = tree.outside.join("secret.txt");
    // Absolute and relative links to the secret, a link to the directory
    // outside, and a link through which a write would land outside.
    symlink(&secret, tree.granted.join("absolute")).unwrap();
    symlink("../outside/secret.txt", tree.granted.join("relative")).unwrap();
    symlink(&tree.outside, tree.granted.join("dir")).unwrap();
    symlink("/etc/passwd", tree.granted.join("passwd")).unwrap();
    symlink(
        tree.outside.join("planted.txt"),
        tree.granted.join("write-through"),
    )
    .unwrap();
    let granted = show(&tree.granted);
    let results = probe(
        &[
            format!("read {granted}/absolute"),
            format!("read {granted}/relative"),
            format!("read {granted}/dir/secret.txt"),
            format!("list {granted}/dir"),
            format!("read {granted}/passwd"),
            format!("write {granted}/write-through"),
        ],
        tree.read_write(),
    )
    .await;
    for result in &results {
        assert_denied(result);
    }
    assert!(!tree.outside.join("planted.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_the_root_is_denied() {
    let tree = Tree::new();
    for grants in [Grants::none(), tree.read_write()] {
        assert_denied(&probe_one("list /".into(), grants).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_directory_is_out_of_reach_when_the_run_is_granted_nothing() {
    let tree = Tree::new();
    let result = probe_one(
        format!("read {}", show(&tree.granted.join("inside.txt"))),
        Grants::none(),
    )
    .await;
    assert_denied(&result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_variables_not_granted_are_invisible() {
    // Cargo sets CARGO_PKG_NAME for the test process; HOME and PATH are
    // the host's own. None is granted, so the guest sees no variable.
    assert_eq!(std::env::var("CARGO_PKG_NAME").as_deref(), Ok("moat"));
    let tree = Tree::new();
    let results = probe(
        &[
            "env CARGO_PKG_NAME".into(),
            "env PATH".into(),
            "env HOME".into(),
            "envs".into(),
        ],
        tree.read_write(),
    )
    .await;
    for result in &results[..3] {
        assert_denied(result);
    }
    assert_eq!(results[3], "ok: ", "no variable at all is visible");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_sockets_and_name_lookups_are_refused_even_when_the_host_is_granted() {
    // A listener the test started: the guest must not reach it by a raw
    // socket, granted or not: the network is `wasi:http` only.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let granted = Grants {
        net: vec![moat_grants::NetRule::parse(&address.to_string()).unwrap()],
        ..Grants::none()
    };
    for grants in [Grants::none(), granted] {
        let results = probe(
            &[format!("connect {address}"), "lookup localhost".into()],
            grants,
        )
        .await;
        assert_denied(&results[0]);
        assert_denied(&results[1]);
    }
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "no connection ever reached the listener"
    );
}

// ---- what is granted works, exactly as granted ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_in_a_granted_directory_can_be_read_and_listed() {
    let tree = Tree::new();
    std::fs::create_dir(tree.granted.join("sub")).unwrap();
    let granted = show(&tree.granted);
    let results = probe(
        &[
            format!("read {granted}/inside.txt"),
            format!("list {granted}"),
            format!("read {granted}/./sub/../inside.txt"),
        ],
        tree.read_only(),
    )
    .await;
    assert_eq!(results[0], format!("ok: {INSIDE}"));
    assert_eq!(results[1], "ok: inside.txt,sub");
    // `..` that stays inside the grant is fine.
    assert_eq!(results[2], format!("ok: {INSIDE}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_granted_directory_can_be_written() {
    let tree = Tree::new();
    let target = tree.granted.join("new.txt");
    let result = probe_one(format!("write {}", show(&target)), tree.read_write()).await;
    assert_eq!(result, format!("ok: wrote {} bytes", WRITTEN.len()));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), WRITTEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_directory_refuses_writes() {
    let tree = Tree::new();
    let granted = show(&tree.granted);
    let results = probe(
        &[
            format!("write {granted}/new.txt"),
            format!("write {granted}/inside.txt"),
        ],
        tree.read_only(),
    )
    .await;
    assert_denied(&results[0]);
    assert_denied(&results[1]);
    assert!(!tree.granted.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(tree.granted.join("inside.txt")).unwrap(),
        INSIDE,
        "the existing file is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_inside_the_grant_pointing_inside_works() {
    let tree = Tree::new();
    std::os::unix::fs::symlink("inside.txt", tree.granted.join("alias")).unwrap();
    let result = probe_one(
        format!("read {}", show(&tree.granted.join("alias"))),
        tree.read_only(),
    )
    .await;
    assert_eq!(result, format!("ok: {INSIDE}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_make_a_link_that_leads_out_of_its_write_grant() {
    let tree = Tree::new();
    let granted = show(&tree.granted);
    std::fs::create_dir(tree.granted.join("sub")).unwrap();
    let events = run_component(
        ESCAPE,
        &[
            format!("symlink {granted}/up ../outside/secret.txt"),
            format!("symlink {granted}/sub/up2 ../../outside"),
            format!("symlink {granted}/abs /etc/passwd"),
            format!("symlink {granted}/sub/../trick a/../../outside"),
            format!("symlink {granted}/alias inside.txt"),
            format!("symlink {granted}/sub/back ../inside.txt"),
        ]
        .join("\n"),
        |request| request.scope.grants = tree.read_write(),
    )
    .await;
    let results = texts(&events);
    for (i, result) in results[..4].iter().enumerate() {
        assert_denied(result);
        assert!(!result.contains("linked"), "probe {i}: {result}");
    }
    assert!(results[4].starts_with("ok: linked"), "{results:?}");
    assert!(results[5].starts_with("ok: linked"), "{results:?}");
    // Nothing that leads out was made, for the host or a program to follow.
    for name in ["up", "sub/up2", "abs", "trick"] {
        assert!(
            std::fs::symlink_metadata(tree.granted.join(name)).is_err(),
            "{name} exists"
        );
    }
    // Refused visibly: one CAPABILITY_DENIED per refusal, naming the link.
    let denied = moat_testkit::error_messages(&events, "CAPABILITY_DENIED");
    assert_eq!(denied.len(), 4, "{denied:?}");
    assert!(denied[0].contains("../outside/secret.txt"), "{denied:?}");
    assert_eq!(single_done(&events).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_environment_variable_is_visible_and_only_it() {
    let grants = Grants {
        env: vec!["CARGO_PKG_NAME".into(), "MOAT_E2E_CERTAINLY_UNSET".into()],
        ..Grants::none()
    };
    let results = probe(
        &[
            "env CARGO_PKG_NAME".into(),
            "env MOAT_E2E_CERTAINLY_UNSET".into(),
            "env PATH".into(),
            "envs".into(),
        ],
        grants,
    )
    .await;
    assert_eq!(results[0], "ok: moat");
    // Granted but unset on the host: simply absent.
    assert_denied(&results[1]);
    assert_denied(&results[2]);
    assert_eq!(results[3], "ok: CARGO_PKG_NAME");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_that_are_not_absolute_directories_fail_the_run_before_it_starts() {
    let events = run_component(ESCAPE, "envs", |request| {
        request.scope.grants.read = vec![PathBuf::from("relative/dir")];
    })
    .await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(error_message(&events, "ADAPTER_ERROR").contains("absolute"));
    assert!(texts(&events).is_empty(), "the adapter never ran");
}

// ---- HTTP through wasi:http, exactly as granted ----

fn net(rules: &[String]) -> Grants {
    Grants {
        net: rules
            .iter()
            .map(|rule| moat_grants::NetRule::parse(rule).unwrap())
            .collect(),
        ..Grants::none()
    }
}

/// Runs one `http` probe; returns its result and the run's events.
async fn http_probe(url: &str, grants: Grants) -> (String, Vec<moat_engine::AgentEvent>) {
    http_line(&format!("http GET {url}"), grants).await
}

/// Runs one probe line; returns its result and the run's events.
async fn http_line(line: &str, grants: Grants) -> (String, Vec<moat_engine::AgentEvent>) {
    let events = run_component(ESCAPE, line, |request| {
        request.scope.grants = grants;
    })
    .await;
    assert_eq!(single_done(&events).status, DoneStatus::Success);
    let results = texts(&events);
    assert_eq!(results.len(), 1, "one result: {results:?}");
    (results[0].to_string(), events)
}

/// The CAPABILITY_DENIED event names the destination and the flag.
fn assert_capability_denied(events: &[moat_engine::AgentEvent], target: &str, remedy: &str) {
    assert!(
        error_codes(events).contains(&"CAPABILITY_DENIED".to_string()),
        "{:?}",
        error_codes(events)
    );
    let error = events
        .iter()
        .filter_map(|e| e.as_error())
        .find(|e| e.code.as_deref() == Some("CAPABILITY_DENIED"))
        .unwrap();
    assert!(error.recoverable, "a refusal does not end the run");
    assert!(error.message.contains(target), "{}", error.message);
    assert!(error.message.contains(remedy), "{}", error.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_a_host_not_granted_is_denied_and_reported() {
    let server = TestServer::answering();
    let port = server.port;
    let (result, events) = http_probe(&format!("http://127.0.0.1:{port}/"), Grants::none()).await;
    assert_denied(&result);
    assert!(result.contains("HTTP request denied"), "{result}");
    assert_capability_denied(
        &events,
        &format!("127.0.0.1:{port}"),
        &format!("to allow it, grant net access to 127.0.0.1:{port}"),
    );
    assert_eq!(server.connections(), 0, "nothing reached the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_a_granted_address_works() {
    let server = TestServer::answering();
    let port = server.port;
    let (result, events) = http_probe(
        &format!("http://127.0.0.1:{port}/hello"),
        net(&[format!("127.0.0.1:{port}")]),
    )
    .await;
    assert_eq!(result, format!("ok: 200 {SERVED}"));
    assert!(
        error_codes(&events).is_empty(),
        "{:?}",
        error_codes(&events)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_request_carries_its_body() {
    let server = TestServer::answering();
    let port = server.port;
    let (result, _) = http_line(
        &format!("http POST http://127.0.0.1:{port}/echo a body from the guest"),
        net(&[format!("http://127.0.0.1:{port}")]),
    )
    .await;
    assert_eq!(result, "ok: 200 got: a body from the guest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_localhost_granted_by_name_works() {
    let server = TestServer::answering();
    let port = server.port;
    let (result, _) = http_probe(
        &format!("http://localhost:{port}/"),
        net(&[format!("localhost:{port}")]),
    )
    .await;
    assert_eq!(result, format!("ok: 200 {SERVED}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_for_another_port_or_scheme_does_not_match() {
    let server = TestServer::answering();
    let port = server.port;
    let other = port.wrapping_add(1).max(1);
    for grants in [
        net(&[format!("127.0.0.1:{other}")]),
        net(&[format!("https://127.0.0.1:{port}")]),
    ] {
        let (result, _) = http_probe(&format!("http://127.0.0.1:{port}/"), grants).await;
        assert_denied(&result);
    }
    assert_eq!(server.connections(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_grant_does_not_open_loopback() {
    let server = TestServer::answering();
    let port = server.port;
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://[::1]:{port}/"),
    ] {
        let (result, _) = http_probe(&url, net(&["*.example.com".into()])).await;
        assert_denied(&result);
    }
    assert_eq!(server.connections(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_not_granted_is_refused_before_any_lookup() {
    // `.invalid` never resolves: had the host looked it up, the guest would
    // see a DNS error, not a denial.
    let (result, events) = http_probe("http://example.invalid/", Grants::none()).await;
    assert_denied(&result);
    assert!(result.contains("HTTP request denied"), "{result}");
    assert_capability_denied(
        &events,
        "http://example.invalid:80",
        "to allow it, grant net access to example.invalid:80",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_loopback_without_a_grant_is_denied() {
    let (result, events) = http_probe("http://[::1]:9/", Grants::none()).await;
    assert_denied(&result);
    assert_capability_denied(
        &events,
        "[::1]:9",
        "to allow it, grant net access to [::1]:9",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_hangs_ends_with_the_runs_timeout() {
    let server = TestServer::silent();
    let port = server.port;
    let started = std::time::Instant::now();
    let events = run_component(
        ESCAPE,
        &format!("http GET http://127.0.0.1:{port}/"),
        |request| {
            request.scope.grants = net(&[format!("127.0.0.1:{port}")]);
            request.limits.timeout = Some(Duration::from_millis(500));
        },
    )
    .await;
    assert_eq!(single_done(&events).status, DoneStatus::Error);
    assert!(
        error_codes(&events).contains(&"TIMEOUT".to_string()),
        "{:?}",
        error_codes(&events)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(server.connections(), 1, "the request did reach the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_does_tls_to_the_checked_address_with_the_name_as_sni() {
    // A server that records the first bytes it receives (the TLS
    // ClientHello) and hangs up: the handshake fails, but what reached it
    // shows the connection went to 127.0.0.1 with the name in SNI.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = received.clone();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut buffer = [0u8; 4096];
            if let Ok(n) = stream.read(&mut buffer) {
                seen.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        }
    });
    let (result, events) = http_probe(
        &format!("https://localhost:{port}/"),
        net(&[format!("https://localhost:{port}")]),
    )
    .await;
    assert_denied(&result);
    assert!(
        error_codes(&events).is_empty(),
        "a TLS failure is no denial"
    );
    let hello = received.lock().unwrap().clone();
    assert_eq!(hello.first(), Some(&0x16), "a TLS handshake record");
    assert!(
        hello.windows(b"localhost".len()).any(|w| w == b"localhost"),
        "the name travels as SNI"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_holds_at_most_its_share_of_open_connections() {
    // Every response stays open (its body never ends) while the guest
    // keeps it.
    let server = TestServer::holding();
    let port = server.port;
    let events = run_component(
        ESCAPE,
        &format!("connections 10 http://127.0.0.1:{port}/"),
        |request| {
            request.scope.grants = net(&[format!("127.0.0.1:{port}")]);
            request.limits.max_connections = 4;
        },
    )
    .await;
    assert_eq!(
        texts(&events),
        ["ok: 4 answered, 6 refused: ErrorCode::ConnectionLimitReached"]
    );
    assert_eq!(server.connections(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_holds_at_most_its_share_of_open_files_and_closing_makes_room() {
    let tree = Tree::new();
    let dir = show(&tree.granted);
    let events = run_component(ESCAPE, &format!("open 20 {dir}\nopen 5 {dir}"), |request| {
        request.scope.grants = tree.read_write();
        request.limits.max_open_files = 8;
    })
    .await;
    let results = texts(&events);
    assert!(
        results[0].starts_with("denied: kept 8, then"),
        "{results:?}"
    );
    // The first probe's files were closed when it returned.
    assert_eq!(results[1], "ok: kept 5", "{results:?}");
    assert_eq!(single_done(&events).status, DoneStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_a_request_url_never_reach_the_host_header() {
    let server = TestServer::answering();
    let port = server.port;
    let (result, _) = http_probe(
        &format!("http://user:secret@127.0.0.1:{port}/echo-host"),
        net(&[format!("127.0.0.1:{port}")]),
    )
    .await;
    assert_eq!(result, format!("ok: 200 host: 127.0.0.1:{port}"));
}
