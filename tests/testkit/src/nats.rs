//! Real `nats-server` processes on loopback ports with temporary storage,
//! for the cluster's tests and benchmark: one server, or a three-node
//! JetStream cluster. Each is killed when dropped.
//!
//! Without `nats-server` on PATH (Debian: `apt-get install nats-server`)
//! [`available`] says so and the tests skip; with `MOAT_REQUIRE_NATS=1`
//! (CI) they fail instead.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to be ready (JetStream up, a cluster's
/// leader elected).
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Whether `nats-server` can be run here. When it cannot, prints why
/// (and fails when `MOAT_REQUIRE_NATS=1`).
pub fn available() -> bool {
    let found = Command::new("nats-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        let line = "nats-server is not on PATH (apt-get install nats-server): the cluster tests are skipped";
        assert!(
            std::env::var("MOAT_REQUIRE_NATS").as_deref() != Ok("1"),
            "MOAT_REQUIRE_NATS=1 but {line}"
        );
        eprintln!("{line}");
    }
    found
}

/// One running `nats-server`.
pub struct NatsServer {
    child: Option<Child>,
    /// Its client port on 127.0.0.1.
    pub port: u16,
    monitor: u16,
    _dir: tempfile::TempDir,
}

impl NatsServer {
    /// Its client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// What its JetStream says of itself, for a failing test's message:
    /// its meta group's leader, and each stream's leader and replicas
    /// (current or not); `None` once it is killed or when it does not
    /// answer.
    pub fn jetstream_state(&self) -> Option<String> {
        self.child.as_ref()?;
        let body = http_get(self.monitor, "/jsz?streams=true")?;
        let jsz: serde_json::Value = serde_json::from_str(&body).ok()?;
        let mut state = format!(
            "the server on port {}: meta leader {}",
            self.port,
            jsz["meta_cluster"]["leader"].as_str().unwrap_or("none")
        );
        let streams = jsz["account_details"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|account| account["stream_detail"].as_array().into_iter().flatten());
        for stream in streams {
            let replicas: Vec<String> = stream["cluster"]["replicas"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    let name = r["name"].as_str().unwrap_or("?");
                    match r["current"].as_bool() {
                        Some(true) => name.to_owned(),
                        _ => format!("{name} (behind)"),
                    }
                })
                .collect();
            state.push_str(&format!(
                "; {} leader {} replicas [{}]",
                stream["name"].as_str().unwrap_or("?"),
                stream["cluster"]["leader"].as_str().unwrap_or("none"),
                replicas.join(", ")
            ));
        }
        Some(state)
    }

    /// Kills it at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until it is healthy; `Err` when it exited (a port it was
    /// given was taken meanwhile by another test: the caller tries again
    /// with fresh ports).
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            // In a cluster, healthy means JetStream has its leader too.
            if let Some(body) = http_get(self.monitor, "/healthz")
                && body.contains("\"ok\"")
            {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "nats-server on port {} exited: {status}",
                    self.port
                ));
            }
            assert!(
                Instant::now() < deadline,
                "nats-server on port {} not ready within {READY_WITHIN:?}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How many times servers are started with fresh ports: a free port is
/// found by binding and closing it, so a test running beside may take it
/// before the server does.
const START_TRIES: usize = 3;

/// `start` tried up to [`START_TRIES`] times while a server exits at once.
fn started<T>(mut start: impl FnMut() -> Result<T, String>) -> T {
    let mut tries = 1;
    loop {
        match start() {
            Ok(started) => return started,
            Err(why) if tries < START_TRIES => {
                eprintln!("{why}; trying again with other ports");
                tries += 1;
            }
            Err(why) => panic!("{why}"),
        }
    }
}

/// One server with JetStream, as `nats-server -js` runs it. `extra`
/// arguments are added (e.g. `--auth TOKEN`).
pub fn server(extra: &[&str]) -> NatsServer {
    started(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (port, monitor) = (free_port(), free_port());
        let mut command = base_command(&dir, port, monitor);
        command.args(extra);
        let mut server = NatsServer {
            child: Some(command.spawn().expect("nats-server starts")),
            port,
            monitor,
            _dir: dir,
        };
        server.wait_ready()?;
        Ok(server)
    })
}

/// A JetStream cluster of three servers on loopback, routes between all.
pub fn cluster() -> Vec<NatsServer> {
    started(start_cluster)
}

fn start_cluster() -> Result<Vec<NatsServer>, String> {
    let route_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let routes = route_ports
        .iter()
        .map(|port| format!("nats://127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut servers: Vec<NatsServer> = route_ports
        .iter()
        .enumerate()
        .map(|(index, route_port)| {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let (port, monitor) = (free_port(), free_port());
            let mut command = base_command(&dir, port, monitor);
            command.args([
                "--server_name",
                &format!("n{index}"),
                "--cluster_name",
                "moat-test",
                "--cluster",
                &format!("nats://127.0.0.1:{route_port}"),
                "--routes",
                &routes,
            ]);
            NatsServer {
                child: Some(command.spawn().expect("nats-server starts")),
                port,
                monitor,
                _dir: dir,
            }
        })
        .collect();
    for server in &mut servers {
        server.wait_ready()?;
    }
    Ok(servers)
}

/// The URLs of `servers`, comma-separated, as `--nats` takes them.
pub fn urls(servers: &[NatsServer]) -> String {
    servers
        .iter()
        .map(NatsServer::url)
        .collect::<Vec<_>>()
        .join(",")
}

fn base_command(dir: &tempfile::TempDir, port: u16, monitor: u16) -> Command {
    let store: PathBuf = dir.path().join("jetstream");
    let mut command = Command::new("nats-server");
    command
        .args(["-js", "-a", "127.0.0.1"])
        .args(["-p", &port.to_string(), "-m", &monitor.to_string()])
        .arg("-sd")
        .arg(store)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // The servers' own logs, when a failure needs them (a directory).
    if let Ok(logs) = std::env::var("MOAT_NATS_LOGS") {
        command.arg("-l").arg(format!("{logs}/nats-{port}.log"));
    }
    command
}

/// What the servers still running say of JetStream, a line each.
pub fn jetstream_state(servers: &[NatsServer]) -> String {
    servers
        .iter()
        .filter_map(NatsServer::jetstream_state)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// The body of `GET path` on 127.0.0.1:`port`, if it answers.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}
