//! A client of the real `moat serve` for the protocol tests: it speaks the
//! JSON lines over the server's stdin/stdout or its Unix socket, checks
//! every message the server sends against the protocol's JSON Schema
//! (protocol/moat-protocol.schema.json), and every result against the
//! schema of its op.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a test waits for any one message.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The protocol's schema, with its `$defs` compiled on demand.
fn validator(def: &str) -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    static VALIDATORS: OnceLock<Mutex<HashMap<String, &'static jsonschema::Validator>>> =
        OnceLock::new();
    let schema = SCHEMA.get_or_init(|| {
        let path = moat_testkit::repo_root().join("protocol/moat-protocol.schema.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    });
    let mut validators = VALIDATORS.get_or_init(Mutex::default).lock().unwrap();
    validators.entry(def.to_owned()).or_insert_with(|| {
        let mut root = schema.clone();
        assert!(
            root["$defs"].get(def).is_some(),
            "no $defs/{def} in the schema"
        );
        root["$ref"] = json!(format!("#/$defs/{def}"));
        let compiled = jsonschema::validator_for(&root)
            .unwrap_or_else(|e| panic!("the schema's {def} does not compile: {e}"));
        Box::leak(Box::new(compiled))
    })
}

/// Fails the test unless `value` is valid as `$defs/def`.
pub fn check(def: &str, value: &Value) {
    let errors: Vec<String> = validator(def)
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "not a valid {def}: {errors:?}\n{value}");
}

/// A request checked against the schema too, so the tests speak the
/// protocol as documented (malformed ones are sent with [`Client::raw`]).
fn checked_request(request: &Value) {
    check("request", request);
}

/// One connection to a server.
pub struct Client {
    input: Box<dyn Write + Send>,
    messages: Receiver<Value>,
    /// Events and responses read while waiting for another response.
    events: VecDeque<Value>,
    responses: HashMap<String, Value>,
    next_id: u64,
}

impl Client {
    fn new(input: Box<dyn Write + Send>, output: Box<dyn std::io::Read + Send>) -> Self {
        let (sender, messages) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines() {
                let Ok(line) = line else { return };
                let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("the server sent a line that is not JSON ({e}): {line}")
                });
                check("message", &message);
                if sender.send(message).is_err() {
                    return;
                }
            }
        });
        Client {
            input,
            messages,
            events: VecDeque::new(),
            responses: HashMap::new(),
            next_id: 1,
        }
    }

    /// Connects to a server's socket.
    pub fn connect(socket: &Path) -> Self {
        let stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
        let output = stream.try_clone().unwrap();
        Self::new(Box::new(stream), Box::new(output))
    }

    /// Sends a line as it is.
    pub fn raw(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).unwrap();
        self.input.write_all(b"\n").unwrap();
        self.input.flush().unwrap();
    }

    /// Sends `op` with `fields` under a fresh id; the id.
    pub fn send(&mut self, op: &str, fields: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        let mut request = fields;
        request["id"] = id.clone();
        request["op"] = json!(op);
        checked_request(&request);
        self.raw(&request.to_string());
        id
    }

    /// The response to request `id`, keeping the events that came first.
    pub fn response(&mut self, id: &Value) -> Value {
        let key = id.to_string();
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(response) = self.responses.remove(&key) {
                return response;
            }
            let message = self
                .next_message(deadline)
                .unwrap_or_else(|| panic!("no response to request {id} within {PATIENCE:?}"));
            self.sort(message);
        }
    }

    fn sort(&mut self, message: Value) {
        match message.get("event") {
            Some(_) => self.events.push_back(message),
            None => {
                self.responses.insert(message["id"].to_string(), message);
            }
        }
    }

    fn next_message(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.messages.recv_timeout(left).ok()
    }

    /// `op`'s result; fails the test on an error. The result is checked
    /// against the schema of the op.
    pub fn ok(&mut self, op: &str, fields: Value) -> Value {
        let id = self.send(op, fields);
        let response = self.response(&id);
        let result = response
            .get("result")
            .unwrap_or_else(|| panic!("{op} failed: {response}"))
            .clone();
        check(&format!("result_{op}"), &result);
        result
    }

    /// `op`'s error (code and message); fails the test on a result.
    pub fn error(&mut self, op: &str, fields: Value) -> Value {
        let id = self.send(op, fields);
        let response = self.response(&id);
        response
            .get("error")
            .unwrap_or_else(|| panic!("{op} should have failed: {response}"))
            .clone()
    }

    /// The next event, waiting at most [`PATIENCE`].
    pub fn event(&mut self) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(event) = self.events.pop_front() {
                return event;
            }
            let message = self
                .next_message(deadline)
                .unwrap_or_else(|| panic!("no event within {PATIENCE:?}"));
            self.sort(message);
        }
    }

    /// The `run_event`s of `run` until its `done` (the `lagged` events
    /// too, if any come).
    pub fn events_until_done(&mut self, run: &str) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let event = self.event();
            if event["run"] != run {
                self.events.push_back(event);
                continue;
            }
            let done = event["event"] == "lagged" || event["data"]["type"] == "done";
            events.push(event);
            if done {
                return events;
            }
        }
    }

    /// Closes the connection's sending side.
    pub fn close(self) {
        drop(self.input);
    }
}

/// A `moat serve` process of a test, with a store of its own (or a shared
/// one); killed when dropped.
pub struct Server {
    pub child: Child,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// A server on stdio with `flags`, and its one client.
    pub fn stdio(flags: &[&str]) -> (Self, Client) {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state/moat.db");
        let mut child = command(&store)
            .arg("serve")
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input: ChildStdin = child.stdin.take().unwrap();
        let output = child.stdout.take().unwrap();
        let client = Client::new(Box::new(input), Box::new(output));
        (
            Server {
                child,
                _dir: Some(dir),
            },
            client,
        )
    }

    /// A server on the socket `socket` with `flags`, recording into
    /// `store`; returns once the socket accepts.
    pub fn socket(socket: &Path, store: &Path, flags: &[&str]) -> Self {
        let child = command(store)
            .arg("serve")
            .arg("--socket")
            .arg(socket)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + PATIENCE;
        while std::os::unix::net::UnixStream::connect(socket).is_err() {
            assert!(Instant::now() < deadline, "the server never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { child, _dir: None }
    }

    /// Waits for the server to exit; its exit code.
    pub fn wait(mut self) -> Option<i32> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `moat` with the tests' shared compile cache, recording into `store`.
pub fn command(store: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_moat"));
    command
        .env("MOAT_CACHE_DIR", moat_testkit::shared_cache_dir())
        .env("MOAT_STORE", store)
        .env_remove("MOAT_LOG");
    command
}
