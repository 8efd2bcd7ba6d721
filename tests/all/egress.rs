//! The programs a run starts reach the network only through moat's proxy,
//! see no process outside their run and reach no Unix socket outside its
//! grants: end to end through the real `moat` binary, with real `sh`,
//! `curl`, `python3` and `node` probing from inside the escape component's
//! `shell`.
//!
//! Each probe prints one word, so the test reads what held: `reached`, or
//! `refused:ERRNO` naming the error the system call returned; and the
//! servers the probes aim at count what arrived. The same probes without
//! containment reach every server (so each refusal can be seen to fail).

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use moat_engine::{AgentEvent, DoneStatus, EventPayload};
use moat_testkit::components::ESCAPE;
use moat_testkit::http_server::{SERVED, TestServer};
use moat_testkit::{error_codes, single_done};

use crate::cli::common::{events, moat};

/// A UDP socket on 127.0.0.1 standing for a DNS server; counts datagrams.
struct UdpSink {
    port: u16,
    received: Arc<AtomicUsize>,
}

impl UdpSink {
    fn start() -> Self {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let received = Arc::new(AtomicUsize::new(0));
        let count = received.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 512];
            while socket.recv_from(&mut buffer).is_ok() {
                count.fetch_add(1, Ordering::SeqCst);
            }
        });
        Self { port, received }
    }
}

/// A TCP listener on `::1`; counts connections.
struct Ipv6Sink {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Ipv6Sink {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("[::1]:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                count.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Self { port, accepted }
    }
}

/// A Unix socket listener (named at `path`, or abstract when `path` starts
/// with `@`); counts connections.
pub(crate) struct UnixSink {
    pub(crate) accepted: Arc<AtomicUsize>,
}

impl UnixSink {
    pub(crate) fn named(path: &Path) -> Self {
        let listener = UnixListener::bind(path).unwrap();
        // Connectable by any user: what holds a program back is moat.
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        Self::serve(listener)
    }

    fn abstract_named(name: &str) -> Self {
        use std::os::linux::net::SocketAddrExt;
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
        Self::serve(UnixListener::bind_addr(&address).unwrap())
    }

    fn serve(listener: UnixListener) -> Self {
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                count.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Self { accepted }
    }
}

/// The tests' `moat`, started through `wrapper` (e.g. `setpriv … env …`;
/// empty: directly), with the tests' environment (wrapped, its stdin
/// is empty).
pub(crate) fn moat_through(wrapper: &[&str]) -> Command {
    let moat = moat();
    if wrapper.is_empty() {
        return moat;
    }
    let mut wrapped = Command::new(wrapper[0]);
    wrapped.args(&wrapper[1..]).arg(moat.get_program());
    for (name, value) in moat.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    wrapped.stdin(std::process::Stdio::null());
    wrapped
}

/// `moat run` of `script` in `sh`, started by the escape component with
/// `--allow-run=sh` and `flags` (`wrapper` before it, to run it in
/// another setting: the wrapper gets moat's environment).
pub(crate) fn shell_command(script: &str, flags: &[String], wrapper: &[&str]) -> Command {
    let mut command = moat_through(wrapper);
    command
        .args(["run", ESCAPE, "--allow-run=sh", "--output", "ndjson"])
        .args(flags)
        // The first line of the output carries the component's prefix.
        .arg(format!("shell echo start; {script}"));
    command
}

/// Runs [`shell_command`]: the run's events and what `sh` printed.
pub(crate) fn shell(
    script: &str,
    flags: &[String],
    wrapper: &[&str],
) -> (Output, Vec<AgentEvent>, String) {
    let output = shell_command(script, flags, wrapper)
        .output()
        .expect("moat runs");
    let events = events(&output);
    let printed = printed(&events);
    (output, events, printed)
}

/// What the escape component's probes printed: the run's texts, joined.
pub(crate) fn printed(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::Text(text) => Some(text.content.clone()),
            _ => None,
        })
        .collect()
}

/// The words a probe printed, `NAME=WORD` each on its own line (the escape
/// component joins the lines with `|`).
pub(crate) fn word<'a>(printed: &'a str, probe: &str) -> &'a str {
    printed
        .split(['|', '\n'])
        .find_map(|line| line.strip_prefix(&format!("{probe}=")))
        .map(|value| value.split(" err=").next().unwrap_or(value))
        .unwrap_or_else(|| panic!("no {probe}= in {printed}"))
}

/// A Python probe: prints `NAME=reached` if `code` runs without an error,
/// `NAME=refused:ERRNO` (e.g. `refused:EACCES`) if it raises an `OSError`.
/// A probe that cannot run prints nothing, which [`word`] does not take.
pub(crate) fn python(name: &str, code: &str) -> String {
    // One line (the escape component reads one command per line): an
    // uncaught error prints the refusal, through the exception hook.
    format!(
        "/usr/bin/python3 -c 'import errno, os, socket, sys; sys.excepthook = lambda kind, error, trace: print(\"{name}=refused:\" + errno.errorcode.get(getattr(error, \"errno\", None) or 0, kind.__name__)); {code}; print(\"{name}=reached\")' 2>/dev/null; "
    )
}

/// The probes of every way out, aimed at the servers given.
struct Aims<'a> {
    granted: u16,
    other: u16,
    udp: u16,
    ipv6: u16,
    unix_path: &'a Path,
    abstract_name: &'a str,
}

fn probes(aims: &Aims) -> String {
    let Aims {
        granted,
        other,
        udp,
        ipv6,
        unix_path,
        abstract_name,
    } = aims;
    let unix_path = unix_path.display();
    let mut script = String::new();
    // Through the proxy: the granted port, a plain forward and a tunnel.
    script += &format!(
        "echo proxied=$(curl -s -m5 http://127.0.0.1:{granted}/); \
         echo tunnel=$(curl -s -m5 --proxytunnel http://127.0.0.1:{granted}/); \
         echo other=$(curl -s -m5 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{other}/); \
         echo name=$(curl -s -m5 -o /dev/null -w '%{{http_code}}' http://not-granted.example/); \
         curl -s -m5 --noproxy '*' http://127.0.0.1:{granted}/ >/dev/null && echo direct=reached || echo direct=refused; \
         proxy=$(echo \"$HTTP_PROXY\" | sed 's#^http://##; s#^.*@##'); \
         echo nocred=$(curl -s -m5 -o /dev/null -w '%{{http_code}}' --noproxy '' -x \"http://$proxy\" http://127.0.0.1:{granted}/); "
    );
    script += &python(
        "udp",
        &format!(
            "s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b\"x\", (\"127.0.0.1\", {udp}))"
        ),
    );
    script += &python(
        "ipv6",
        &format!("s=socket.socket(socket.AF_INET6); s.settimeout(3); s.connect((\"::1\", {ipv6}))"),
    );
    script += &python(
        "unix",
        &format!("s=socket.socket(socket.AF_UNIX); s.connect(\"{unix_path}\")"),
    );
    script += &python(
        "abstract",
        &format!("s=socket.socket(socket.AF_UNIX); s.connect(\"\\0{abstract_name}\")"),
    );
    script += &python(
        "raw",
        "socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
    );
    script += &python("packet", "socket.socket(socket.AF_PACKET, socket.SOCK_RAW)");
    // Node ignores the proxy variables; asked to use it, it gets through.
    script += &format!(
        "node -e 'const u=new URL(process.env.HTTP_PROXY); const headers = u.username ? {{\"proxy-authorization\": \"Basic \" + Buffer.from(u.username + \":\" + u.password).toString(\"base64\")}} : {{}}; require(\"http\").get({{host:u.hostname, port:u.port, headers, path:\"http://127.0.0.1:{granted}/\"}}, r => {{ let b=\"\"; r.on(\"data\", d => b += d); r.on(\"end\", () => console.log(\"node=\" + b)); }}).on(\"error\", () => console.log(\"node=refused\"))'; \
         node -e 'require(\"net\").connect({granted}, \"127.0.0.1\").on(\"connect\", () => {{ console.log(\"nodedirect=reached\"); process.exit(0) }}).on(\"error\", () => console.log(\"nodedirect=refused\"))'; "
    );
    script
}

struct Sinks {
    _dir: tempfile::TempDir,
    granted: TestServer,
    other: TestServer,
    udp: UdpSink,
    ipv6: Ipv6Sink,
    unix: UnixSink,
    abstract_sink: UnixSink,
    unix_path: std::path::PathBuf,
    abstract_name: String,
}

fn sinks() -> Sinks {
    let dir = tempfile::tempdir().unwrap();
    let unix_path = dir.path().join("agent.sock");
    static SINKS: AtomicUsize = AtomicUsize::new(0);
    let abstract_name = format!(
        "moat-test-{}-{}",
        std::process::id(),
        SINKS.fetch_add(1, Ordering::SeqCst)
    );
    Sinks {
        granted: TestServer::answering(),
        other: TestServer::answering(),
        udp: UdpSink::start(),
        ipv6: Ipv6Sink::start(),
        unix: UnixSink::named(&unix_path),
        abstract_sink: UnixSink::abstract_named(&abstract_name),
        unix_path,
        abstract_name,
        _dir: dir,
    }
}

/// The network the probes ran in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Network {
    /// A namespace of the run's own: its loopback is its programs'.
    Own,
    /// The host's, held by Landlock and the socket filter.
    Hosts,
}

/// Checks what every probe found: only the granted port, only through the
/// proxy, each refusal by its error; and that nothing arrived where it
/// was refused.
fn assert_only_the_proxy(
    sinks: &Sinks,
    output: &Output,
    events: &[AgentEvent],
    printed: &str,
    network: Network,
) {
    let said = format!(
        "printed: {printed}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(single_done(events).status, DoneStatus::Success, "{said}");
    assert_eq!(word(printed, "proxied"), SERVED, "{said}");
    assert_eq!(word(printed, "tunnel"), SERVED, "{said}");
    assert_eq!(word(printed, "other"), "403", "{said}");
    assert_eq!(word(printed, "name"), "403", "{said}");
    assert_eq!(word(printed, "node"), SERVED, "{said}");
    for probe in ["direct", "nodedirect"] {
        assert_eq!(word(printed, probe), "refused", "{probe}: {said}");
    }
    // What each refusal is: in the run's own network, its loopback has
    // nothing on it (the host's servers are elsewhere) and a Unix socket
    // outside its grants is refused by moat; in the host's, Landlock and
    // the socket filter refuse.
    let expected: &[(&str, &str)] = match network {
        Network::Own => &[
            // Sent, to the run's own loopback: nothing arrives (below).
            ("udp", "reached"),
            ("ipv6", "refused:ECONNREFUSED"),
            ("unix", "refused:EACCES"),
            ("abstract", "refused:ECONNREFUSED"),
            ("raw", "refused:EACCES"),
            ("packet", "refused:EACCES"),
        ],
        Network::Hosts => &[
            ("udp", "refused:EACCES"),
            ("ipv6", "refused:EACCES"),
            ("unix", "refused:EACCES"),
            ("abstract", "refused:EACCES"),
            ("raw", "refused:EACCES"),
            ("packet", "refused:EACCES"),
        ],
    };
    for (probe, outcome) in expected {
        assert_eq!(word(printed, probe), *outcome, "{probe}: {said}");
    }
    // The refusals of the proxy are the run's events, naming the grant.
    assert!(
        error_codes(events)
            .iter()
            .filter(|code| *code == "CAPABILITY_DENIED")
            .count()
            >= 2,
        "{said}"
    );
    let denied = describe_errors(events);
    assert!(
        denied.contains(&format!("127.0.0.1:{}", sinks.other.port)),
        "{denied}"
    );
    assert!(denied.contains("not-granted.example"), "{denied}");
    // Nothing arrived where it was refused: the other port, the DNS
    // stand-in, the sockets. (Two connections to the granted port: the
    // forward and the tunnel, and one from node.)
    assert_eq!(sinks.other.connections(), 0, "{said}");
    // (And one more for the probe without the proxy's credential where the
    // proxy takes none: in a namespace of the run's own.)
    let uncredentialed = usize::from(word(printed, "nocred") == "200");
    assert_eq!(sinks.granted.connections(), 3 + uncredentialed, "{said}");
    assert_eq!(sinks.udp.received.load(Ordering::SeqCst), 0, "{said}");
    assert_eq!(sinks.ipv6.accepted.load(Ordering::SeqCst), 0, "{said}");
    assert_eq!(sinks.unix.accepted.load(Ordering::SeqCst), 0, "{said}");
    assert_eq!(
        sinks.abstract_sink.accepted.load(Ordering::SeqCst),
        0,
        "{said}"
    );
}

fn describe_errors(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::Error(error) => Some(error.message.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn aims(sinks: &Sinks) -> Aims<'_> {
    Aims {
        granted: sinks.granted.port,
        other: sinks.other.port,
        udp: sinks.udp.port,
        ipv6: sinks.ipv6.port,
        unix_path: &sinks.unix_path,
        abstract_name: &sinks.abstract_name,
    }
}

/// As this user and, when root, as an unprivileged one too (whose
/// namespaces are made through a user namespace).
#[test]
fn a_spawned_program_reaches_the_network_only_through_the_proxy_and_its_grants() {
    for setting in crate::own_network::settings() {
        let sinks = sinks();
        let flags = vec![format!("--allow-net=127.0.0.1:{}", sinks.granted.port)];
        let (output, events, printed) = shell(&probes(&aims(&sinks)), &flags, &setting.wrapper());
        let printed = format!("{}: {printed}", setting.who());
        assert_only_the_proxy(&sinks, &output, &events, &printed, Network::Own);
    }
}

/// The same probes, without containment: every one reaches its server, so
/// each refusal above is containment's doing.
#[test]
fn without_containment_every_probe_reaches_its_server() {
    let sinks = sinks();
    let flags = vec![
        "--no-contain".to_owned(),
        format!("--allow-net=127.0.0.1:{}", sinks.granted.port),
    ];
    let (output, events, printed) = shell(&probes(&aims(&sinks)), &flags, &[]);
    let said = format!(
        "printed: {printed}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");
    for probe in ["direct", "nodedirect", "udp", "ipv6", "unix", "abstract"] {
        assert_eq!(word(&printed, probe), "reached", "{probe}: {said}");
    }
    // Raw and packet sockets need CAP_NET_RAW, which only root has here.
    if unsafe { libc::geteuid() } == 0 {
        for probe in ["raw", "packet"] {
            assert_eq!(word(&printed, probe), "reached", "{probe}: {said}");
        }
    }
    // The other port and an ungranted name are reached too: no proxy.
    assert_eq!(word(&printed, "other"), "200", "{said}");
    assert!(sinks.other.connections() >= 1, "{said}");
    assert!(sinks.udp.received.load(Ordering::SeqCst) >= 1, "{said}");
    assert!(sinks.ipv6.accepted.load(Ordering::SeqCst) >= 1, "{said}");
    assert!(sinks.unix.accepted.load(Ordering::SeqCst) >= 1, "{said}");
    assert!(
        sinks.abstract_sink.accepted.load(Ordering::SeqCst) >= 1,
        "{said}"
    );
}

/// What `moat` is started through to find no namespace it may make: a
/// user namespace of its own whose limit of network namespaces is 0.
pub(crate) const NO_NAMESPACES: [&str; 6] = [
    "unshare",
    "--user",
    "--map-root-user",
    "sh",
    "-c",
    "echo 0 > /proc/sys/user/max_net_namespaces && exec \"$0\" \"$@\"",
];

/// A kernel that allows no namespace (here: a user namespace whose limit
/// of network namespaces is 0): Landlock's TCP rules and the seccomp
/// filter hold the same line, and `moat inspect` says which holds.
#[test]
fn without_namespaces_landlock_and_seccomp_hold_the_same_line() {
    let no_namespaces = NO_NAMESPACES;
    // As this user, and as an unprivileged one (its own user namespace
    // made by itself, inside which no network namespace may be made).
    for setting in crate::own_network::settings() {
        let mut wrapper = setting.wrapper();
        wrapper.extend(no_namespaces);
        let sinks = sinks();
        let flags = vec![format!("--allow-net=127.0.0.1:{}", sinks.granted.port)];
        let (output, events, printed) = shell(&probes(&aims(&sinks)), &flags, &wrapper);
        let printed = format!("{}: {printed}", setting.who());
        assert_only_the_proxy(&sinks, &output, &events, &printed, Network::Hosts);
        // On the host's loopback, the proxy serves only its run: a request
        // without the run's credential (as any other local process would
        // send) is refused.
        assert_eq!(
            word(&printed, "nocred"),
            "407",
            "{printed}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let inspect = |wrapper: &[&str]| -> serde_json::Value {
        let moat = moat();
        let mut command = std::process::Command::new(if wrapper.is_empty() {
            moat.get_program()
        } else {
            std::ffi::OsStr::new(wrapper[0])
        });
        if !wrapper.is_empty() {
            command.args(&wrapper[1..]).arg(moat.get_program());
        }
        let output = command
            .args(["inspect", "claude-code", "--json"])
            .env("MOAT_CACHE_DIR", moat_testkit::shared_cache_dir())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice(&output.stdout).unwrap()
    };
    assert_eq!(
        inspect(&[])["containment"]["network"],
        "namespaces",
        "this machine allows namespaces"
    );
    assert_eq!(
        inspect(&no_namespaces)["containment"]["network"],
        "landlock+seccomp"
    );
    // Only a network of the run's own has a loopback to serve on.
    assert_eq!(inspect(&[])["containment"]["ownLoopback"], true);
    assert_eq!(inspect(&no_namespaces)["containment"]["ownLoopback"], false);
}

/// Without namespaces Landlock holds only TCP: a stream socket of another
/// protocol (MPTCP, which this kernel has) is refused by the filter with
/// `EACCES`, as this user and an unprivileged one; uncontained, the same
/// program opens it. TCP's own (protocol 0 and 6) stay open.
#[test]
fn without_namespaces_a_stream_socket_of_another_protocol_than_tcp_is_refused() {
    let script = [
        (0, "tcpdefault"),
        (libc::IPPROTO_TCP, "tcp"),
        (262, "mptcp"),
    ]
    .map(|(protocol, name)| {
        python(
            name,
            &format!("socket.socket(socket.AF_INET, socket.SOCK_STREAM, {protocol})"),
        )
    })
    .concat();
    let flags = ["--allow-run=python3".to_owned()];
    for setting in crate::own_network::settings() {
        let mut wrapper = setting.wrapper();
        wrapper.extend(NO_NAMESPACES);
        let (output, _, printed) = shell(&script, &flags, &wrapper);
        let who = setting.who();
        assert_eq!(
            word(&printed, "mptcp"),
            "refused:EACCES",
            "{who}: {printed} {output:?}"
        );
        assert_eq!(word(&printed, "tcpdefault"), "reached", "{who}: {printed}");
        assert_eq!(word(&printed, "tcp"), "reached", "{who}: {printed}");
    }
    // Uncontained, the same program opens it: the refusal is the filter's.
    let uncontained = ["--allow-run=python3".to_owned(), "--no-contain".to_owned()];
    let (_, _, printed) = shell(&script, &uncontained, &NO_NAMESPACES);
    assert_eq!(word(&printed, "mptcp"), "reached", "{printed}");
}

/// No other process is visible: not moat's environment, not an unrelated
/// process holding a secret in its environment; and another session's
/// `moat serve` socket cannot be reached.
#[test]
fn a_spawned_program_sees_no_process_outside_its_run_and_no_server_socket() {
    const SECRET: &str = "moat-test-secret-in-an-environment";
    let mut unrelated = std::process::Command::new("sleep")
        .arg("120")
        .env("UNRELATED_SECRET", SECRET)
        .spawn()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("serve.sock");
    let mut server = moat()
        .args(["serve", "--socket"])
        .arg(&socket)
        .args(["--allow-run=sh", "--trust", "unrestricted"])
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if socket.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(socket.exists(), "moat serve did not listen");

    let pid = unrelated.id();
    let script = format!(
        "echo pids=$(ls /proc | grep -c '^[0-9]'); \
         cat /proc/{pid}/environ >/dev/null 2>&1 && echo unrelated=reached || echo unrelated=refused; \
         cat /proc/1/environ >/dev/null 2>&1 && echo init=reached || echo init=refused; \
         echo init-name=$(cat /proc/1/comm); echo init-cmdline=$(tr -d '\\0' < /proc/1/cmdline | wc -c); \
         cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -e {SECRET} -e MOAT_STORE | sed 's/^/found=/'; \
         {}",
        python(
            "serve",
            &format!(
                "import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\")",
                socket.display()
            )
        )
    );
    let (output, events, printed) = shell(&script, &[], &[]);
    // The same without containment: every probe finds what it looks for.
    let (_, open_events, open_printed) = shell(&script, &["--no-contain".to_owned()], &[]);
    for process in [&mut unrelated, &mut server] {
        let _ = process.kill();
        let _ = process.wait();
    }
    let open_said = format!("without containment: {open_printed}");
    assert_eq!(
        single_done(&open_events).status,
        DoneStatus::Success,
        "{open_said}"
    );
    let open_pids: usize = word(&open_printed, "pids").parse().unwrap();
    assert!(open_pids > 6, "{open_said}");
    assert_eq!(word(&open_printed, "unrelated"), "reached", "{open_said}");
    let found: usize = word(&open_printed, "found").parse().unwrap();
    assert!(found >= 1, "{open_said}");
    assert_eq!(word(&open_printed, "serve"), "reached", "{open_said}");
    let said = format!(
        "printed: {printed}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(single_done(&events).status, DoneStatus::Success, "{said}");
    // The run's own: the namespace's init, sh, and what sh runs now.
    let pids: usize = word(&printed, "pids").parse().unwrap();
    assert!(pids <= 6, "{said}");
    assert_eq!(word(&printed, "unrelated"), "refused", "{said}");
    assert_eq!(word(&printed, "init"), "refused", "{said}");
    // The init, a copy of moat, shows nothing of moat's command line.
    assert_eq!(word(&printed, "init-name"), "moat-init", "{said}");
    assert_eq!(word(&printed, "init-cmdline"), "0", "{said}");
    assert_eq!(word(&printed, "found"), "0", "{said}");
    assert_eq!(word(&printed, "serve"), "refused:EACCES", "{said}");
    // The secret is nowhere in what the run recorded either.
    assert!(!String::from_utf8_lossy(&output.stdout).contains(SECRET));
}

/// The proxy's refusal reaches the run's event stream while the program
/// goes on; the run ends once, normally.
#[test]
fn a_refused_connection_is_an_event_and_the_run_ends_normally() {
    let server = TestServer::answering();
    // (Asked through the proxy: the loopback is the run's own otherwise.)
    let script = format!(
        "curl -s -m5 --noproxy '' http://127.0.0.1:{}/ ; echo after=yes",
        server.port
    );
    let (output, events, printed) = shell(&script, &[], &[]);
    assert_eq!(
        single_done(&events).status,
        DoneStatus::Success,
        "{output:?}"
    );
    assert_eq!(word(&printed, "after"), "yes");
    assert!(error_codes(&events).contains(&"CAPABILITY_DENIED".to_string()));
    assert_eq!(server.connections(), 0);
}
