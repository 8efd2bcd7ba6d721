//! Secrets by reference, end to end through the real `moat` binary: a
//! secret kept by `moat secret set` reaches the hosts it is granted for,
//! added by moat, while the component and the programs of the run hold
//! only a placeholder; it is nowhere in the store, the events or `moat
//! show`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};

use moat_engine::{DoneStatus, EventPayload};
use moat_testkit::components::ESCAPE;
use moat_testkit::single_done;

use crate::cli::common::{events, moat};

pub(crate) const VALUE: &str = "sk-moat-test-the-real-key-1234";

/// An HTTP server on 127.0.0.1 that keeps the head of every request.
struct HeadRecorder {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl HeadRecorder {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line.to_ascii_lowercase());
                }
                kept.lock().unwrap().push(head);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nreceived",
                );
            }
        });
        Self { port, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// A directory of the test's own, and in it the paths of a secrets file
/// and a run store.
pub(crate) fn scratch() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets.json");
    let store = dir.path().join("moat.db");
    (dir, secrets, store)
}

/// `moat` with the secrets file `secrets` and a run store of the test's
/// own, so the test can read every byte it holds.
pub(crate) fn moat_with(secrets: &Path, store: &Path) -> std::process::Command {
    let mut command = moat();
    command
        .env("MOAT_SECRETS", secrets)
        .env("MOAT_STORE", store);
    command
}

pub(crate) fn set_secret(secrets: &Path, store: &Path, name: &str, extra: &[&str]) {
    let mut child = moat_with(secrets, store)
        .args(["secret", "set", name])
        .args(extra)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{VALUE}\n").as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
}

/// Asserts the run of `output` ended in success; `what` names it.
fn assert_succeeded(output: &Output, what: &str) {
    assert_eq!(
        single_done(&events(output)).status,
        DoneStatus::Success,
        "{what}: {output:?}"
    );
}

fn texts(output: &Output) -> Vec<String> {
    events(output)
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::Text(text) => Some(text.content.clone()),
            _ => None,
        })
        .collect()
}

/// Nothing the run left behind holds the value: the store's files, the
/// events, `moat show` and `moat logs`.
fn assert_nowhere(dir: &Path, secrets: &Path, store: &Path, output: &Output) {
    assert!(!String::from_utf8_lossy(&output.stdout).contains(VALUE));
    assert!(!String::from_utf8_lossy(&output.stderr).contains(VALUE));
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.path() == secrets {
            continue;
        }
        let bytes = std::fs::read(entry.path()).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(VALUE),
            "{} holds the secret",
            entry.path().display()
        );
    }
    let last = moat_with(secrets, store)
        .args(["ps", "--all", "--output", "json"])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&last.stdout).unwrap();
    let id = listed[0]["id"].as_str().expect("a recorded run").to_owned();
    for command in [["show", &id], ["logs", &id]] {
        let shown = moat_with(secrets, store).args(command).output().unwrap();
        assert!(shown.status.success(), "{shown:?}");
        assert!(!String::from_utf8_lossy(&shown.stdout).contains(VALUE));
    }
}

#[test]
fn a_components_requests_carry_a_secret_it_never_holds() {
    let (dir, secrets, store) = scratch();
    set_secret(&secrets, &store, "TOKEN", &[]);
    let keyed = HeadRecorder::start();
    let other = HeadRecorder::start();
    let output = moat_with(&secrets, &store)
        .args(["run", ESCAPE, "--output", "ndjson"])
        .arg(format!(
            "--allow-net=127.0.0.1:{},127.0.0.1:{}",
            keyed.port, other.port
        ))
        .arg(format!("--secret=TOKEN@127.0.0.1:{}", keyed.port))
        .arg(format!(
            "env TOKEN\nhttp GET http://127.0.0.1:{}/v1\nhttp GET http://127.0.0.1:{}/v1",
            keyed.port, other.port
        ))
        .output()
        .unwrap();
    assert_succeeded(&output, "");
    let texts = texts(&output);
    assert_eq!(
        texts[0],
        format!("ok: {}", moat_contain::SECRET_PLACEHOLDER)
    );
    assert_eq!(keyed.heads().len(), 1);
    assert!(
        keyed.heads()[0].contains(&format!(
            "authorization: bearer {}",
            VALUE.to_ascii_lowercase()
        )),
        "{:?}",
        keyed.heads()
    );
    assert_eq!(other.heads().len(), 1);
    assert!(
        !other.heads()[0].contains("authorization"),
        "{:?}",
        other.heads()
    );
    assert_nowhere(dir.path(), &secrets, &store, &output);
}

#[test]
fn a_program_reaches_the_secrets_host_on_its_route_holding_only_the_placeholder() {
    let (dir, secrets, store) = scratch();
    set_secret(
        &secrets,
        &store,
        "ANTHROPIC_API_KEY",
        &["--header", "x-api-key"],
    );
    let api = HeadRecorder::start();
    // The prompt is recorded: the value is searched for by a form of it
    // that is not the value (reversed), turned back by the shell.
    let reversed: String = VALUE.chars().rev().collect();
    // The adapter itself sees the route and the placeholder (an adapter
    // whose CLI ignores the variable passes the route on: Codex's).
    let script = format!(
        "env ANTHROPIC_BASE_URL\nenv ANTHROPIC_API_KEY\n\
         shell printenv ANTHROPIC_API_KEY; \
         curl -s \"$ANTHROPIC_BASE_URL/v1/messages\" -H \"x-api-key: $ANTHROPIC_API_KEY\"; echo; \
         v=$(echo {reversed} | rev); \
         env | grep -c \"$v\"; grep -c \"$v\" /proc/self/environ; \
         cat /proc/*/environ 2>/dev/null | grep -c \"$v\""
    );
    let output = moat_with(&secrets, &store)
        .args(["run", ESCAPE, "--output", "ndjson", "--allow-run=sh"])
        .arg(format!("--allow-net=127.0.0.1:{}", api.port))
        .arg(format!(
            "--secret=ANTHROPIC_API_KEY@http://127.0.0.1:{}",
            api.port
        ))
        .arg(script)
        .output()
        .unwrap();
    assert_succeeded(&output, "");
    let printed = texts(&output).concat();
    assert!(
        printed.contains(&format!(
            "out={}|received|0|0|0",
            moat_contain::SECRET_PLACEHOLDER
        )),
        "{printed}"
    );
    let shown = texts(&output);
    assert!(
        shown[0].starts_with("ok: http://127.0.0.1:")
            && shown[0].ends_with("/moat-secret/ANTHROPIC_API_KEY"),
        "the adapter's route: {shown:?}"
    );
    assert_eq!(
        shown[1],
        format!("ok: {}", moat_contain::SECRET_PLACEHOLDER),
        "{shown:?}"
    );
    let heads = api.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(heads[0].starts_with("post /v1/messages") || heads[0].starts_with("get /v1/messages"));
    assert!(
        heads[0].contains(&format!("x-api-key: {}", VALUE.to_ascii_lowercase())),
        "{heads:?}"
    );
    assert_nowhere(dir.path(), &secrets, &store, &output);
}

#[test]
fn a_secret_nobody_set_or_a_file_others_may_read_is_refused_with_the_fix() {
    let (_dir, secrets, store) = scratch();
    let output = moat_with(&secrets, &store)
        .args(["run", "echo", "hi", "--secret=NOPE@api.example.com"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("moat secret set NOPE"), "{said}");

    set_secret(&secrets, &store, "KEPT", &[]);
    let listed = moat_with(&secrets, &store)
        .args(["secret", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("KEPT") && !listed.contains(VALUE),
        "{listed}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&secrets).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = moat_with(&secrets, &store)
        .args(["secret", "list"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("chmod 600"));
}

/// The built-in `openai` and `anthropic` components, given their key as a
/// secret: the request carries it, in each vendor's header, and the
/// component held the placeholder only (its environment has no key).
#[test]
fn the_llm_adapters_send_the_key_moat_adds() {
    use moat_testkit::llm_server::{LlmServer, Reply};

    for (adapter, key, header, base, sse, expected) in [
        (
            "openai",
            "OPENAI_API_KEY",
            None,
            "OPENAI_BASE_URL",
            include_bytes!("../../adapters/openai/fixtures/text_usage.sse").as_slice(),
            ("authorization", format!("Bearer {VALUE}")),
        ),
        (
            "anthropic",
            "ANTHROPIC_API_KEY",
            Some("x-api-key"),
            "ANTHROPIC_BASE_URL",
            include_bytes!("../../adapters/anthropic/fixtures/thinking_text.sse").as_slice(),
            ("x-api-key", VALUE.to_owned()),
        ),
    ] {
        let (dir, secrets, store) = scratch();
        let header_flag: Vec<&str> = header.map(|h| vec!["--header", h]).unwrap_or_default();
        set_secret(&secrets, &store, key, &header_flag);
        let server = LlmServer::start(Reply::sse(sse));
        let base_url = match adapter {
            "openai" => format!("{}/v1", server.url()),
            _ => server.url(),
        };
        let output = moat_with(&secrets, &store)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env(base, base_url)
            .args(["run", adapter, "hi", "--model", "m", "--output", "ndjson"])
            .arg(format!("--allow-net={}", server.grant()))
            .arg(format!("--secret={key}@{}", server.grant()))
            .output()
            .unwrap();
        assert_succeeded(&output, adapter);
        let request = server.single_request();
        assert_eq!(
            request.header(expected.0),
            Some(expected.1.as_str()),
            "{adapter}"
        );
        assert_nowhere(dir.path(), &secrets, &store, &output);
    }
}

/// A secret's route goes to its host over TLS unless the grant says
/// `http://`: a server that is not TLS receives a TLS handshake, never the
/// request (nor the key) in the clear, and the program gets a 502.
#[test]
fn a_secrets_route_speaks_tls_to_its_host() {
    use std::io::Read;

    let (_dir, secrets, store) = scratch();
    set_secret(&secrets, &store, "ANTHROPIC_API_KEY", &[]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let first_bytes = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut bytes = [0u8; 3];
        stream.read_exact(&mut bytes).unwrap();
        bytes
    });
    let output = moat_with(&secrets, &store)
        .args(["run", ESCAPE, "--output", "ndjson", "--allow-run=sh"])
        .arg(format!("--allow-net=127.0.0.1:{port}"))
        .arg(format!("--secret=ANTHROPIC_API_KEY@127.0.0.1:{port}"))
        .arg("shell curl -s -o /dev/null -w '%{http_code}' \"$ANTHROPIC_BASE_URL/v1/messages\"")
        .output()
        .unwrap();
    assert_succeeded(&output, "");
    // A TLS record: a handshake (22), TLS 1.x.
    let bytes = first_bytes.join().unwrap();
    assert_eq!(bytes[0], 22, "{bytes:?}");
    assert_eq!(bytes[1], 3, "{bytes:?}");
    assert!(
        texts(&output).concat().contains("out=502"),
        "{:?}",
        texts(&output)
    );
}

/// A built-in's own key by reference: with `ANTHROPIC_API_KEY` kept as a
/// secret, `moat run claude-code` — no `--secret` flag — gives the CLI the
/// placeholder and the route, not the key in moat's environment; without
/// it kept, the CLI gets the variable as before.
#[test]
fn a_built_in_uses_its_vendor_key_by_reference_when_it_is_kept() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let secrets = root.join("secrets.json");
    let store = root.join("moat.db");
    let bin = root.join("bin");
    let out = root.join("out");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    // A stand-in for `claude` that keeps its environment and stops.
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        format!("#!/bin/sh\nenv > '{}/env'\nexit 1\n", out.display()),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = || {
        let output = moat_with(&secrets, &store)
            .env("ANTHROPIC_API_KEY", "key-in-moats-environment")
            .args(["run", "claude-code", "hi", "--output", "ndjson"])
            .arg(format!("--allow-run={}", claude.display()))
            .arg(format!("--allow-write={}", out.display()))
            .arg("--extra")
            .arg(format!("{{\"program\": \"{}\"}}", claude.display()))
            .output()
            .unwrap();
        let env = std::fs::read_to_string(out.join("env")).unwrap_or_else(|_| panic!("{output:?}"));
        let var = |name: &str| {
            env.lines()
                .find_map(|line| line.strip_prefix(&format!("{name}=")))
                .map(str::to_owned)
        };
        (var("ANTHROPIC_API_KEY"), var("ANTHROPIC_BASE_URL"))
    };

    let (key, _) = run();
    assert_eq!(key.as_deref(), Some("key-in-moats-environment"));

    set_secret(&secrets, &store, "ANTHROPIC_API_KEY", &[]);
    let (key, base_url) = run();
    assert_eq!(key.as_deref(), Some(moat_contain::SECRET_PLACEHOLDER));
    let base_url = base_url.expect("a base URL");
    assert!(
        base_url.starts_with("http://127.0.0.1:")
            && base_url.ends_with("/moat-secret/ANTHROPIC_API_KEY"),
        "{base_url}"
    );
    let inspect = moat_with(&secrets, &store)
        .args(["inspect", "claude-code", "--json"])
        .output()
        .unwrap();
    let inspect: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    assert_eq!(
        inspect["grants"]["secrets"],
        serde_json::json!(["ANTHROPIC_API_KEY@api.anthropic.com:443"])
    );
}

/// As this user and as an unprivileged one (`setpriv`), with namespaces
/// and without: a contained
/// program reaches the secret's host on its route, the value added by
/// moat, and is refused the secrets file itself (`EACCES`); the same
/// program with `--no-contain`, as the same user, reads the file — the
/// value is there for anything that runs with the user's rights.
#[test]
fn as_any_user_a_contained_program_gets_the_route_and_never_the_secrets_file() {
    use crate::egress::{moat_through, python, shell, word};
    use crate::own_network::settings;

    for setting in settings() {
        let secrets = setting.dir().join("secrets.json");
        let mut wrapper = setting.wrapper();
        if wrapper.is_empty() {
            wrapper.push("env");
        }
        let keep = format!("MOAT_SECRETS={}", secrets.display());
        wrapper.push(&keep);
        let mut set = moat_through(&wrapper)
            .args([
                "secret",
                "set",
                "ANTHROPIC_API_KEY",
                "--header",
                "x-api-key",
            ])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        set.stdin
            .take()
            .unwrap()
            .write_all(format!("{VALUE}\n").as_bytes())
            .unwrap();
        let set = set.wait_with_output().unwrap();
        assert!(set.status.success(), "{}: {set:?}", setting.who());

        let api = HeadRecorder::start();
        let script = python(
            "file",
            &format!(
                "assert \"{VALUE}\" in open(\"{}\").read()",
                secrets.display()
            ),
        ) + "curl -s -m5 \"$ANTHROPIC_BASE_URL/v1/messages\" -H \"x-api-key: $ANTHROPIC_API_KEY\"; echo; ";
        let mut shared = wrapper.clone();
        shared.extend(crate::egress::NO_NAMESPACES);
        for (contained, wrapper) in [
            (true, wrapper.clone()),
            (true, shared.clone()),
            (false, wrapper.clone()),
        ] {
            let before = api.heads().len();
            let mut extra = vec![
                format!("--allow-net=127.0.0.1:{}", api.port),
                format!("--secret=ANTHROPIC_API_KEY@http://127.0.0.1:{}", api.port),
            ];
            if !contained {
                extra.push("--no-contain".into());
            }
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let (output, events, printed) = shell(&script, &setting.flags(&extra), &wrapper);
            let said = format!(
                "{}, contained: {contained}: printed: {printed}\nstderr: {}",
                setting.who(),
                String::from_utf8_lossy(&output.stderr)
            );
            assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");
            if contained {
                assert_eq!(word(&printed, "file"), "refused:EACCES", "{said}");
                assert!(printed.contains("received"), "{said}");
                let heads = api.heads();
                assert_eq!(heads.len(), before + 1, "{said}: {heads:?}");
                assert!(
                    heads[before].contains(&format!("x-api-key: {}", VALUE.to_ascii_lowercase())),
                    "{heads:?}"
                );
            } else {
                assert_eq!(word(&printed, "file"), "reached", "{said}");
            }
        }
    }
}
