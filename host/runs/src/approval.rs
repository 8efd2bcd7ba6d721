//! What a run asks for mid-run and how it was answered: a run that needs
//! something it was not granted (a host, a program, a tool under `ask`)
//! may ask instead of failing; its request is recorded with the run, the
//! run is `waiting` until someone answers it (`moat approve` / `moat
//! deny`, the protocol, a terminal prompt) or its approval timeout
//! passes, and the answer — who, when, what — is recorded beside it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Requested {
    /// A call of a tool the run's policy puts under `ask`.
    Tool {
        /// The tool's name.
        name: String,
        /// The call's id, as its `tool_use` names it.
        #[serde(rename = "toolUseId")]
        tool_use_id: String,
        /// The call's arguments (a JSON object).
        input: serde_json::Value,
    },
    /// Outgoing HTTP(S) to a host and port.
    Net {
        /// The host, as the run named it.
        host: String,
        /// The port.
        port: u16,
    },
    /// Starting a program.
    Run {
        /// The program, as the run named it.
        program: String,
    },
    /// Reading a directory.
    Read {
        /// The directory.
        dir: String,
    },
    /// Writing a directory.
    Write {
        /// The directory.
        dir: String,
    },
    /// A secret, added by the host to requests for its host.
    Secret {
        /// The secret's name.
        name: String,
    },
}

impl Requested {
    /// The kind of request: `tool`, `net`, `run`, `read`, `write` or
    /// `secret`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Tool { .. } => "tool",
            Self::Net { .. } => "net",
            Self::Run { .. } => "run",
            Self::Read { .. } => "read",
            Self::Write { .. } => "write",
            Self::Secret { .. } => "secret",
        }
    }

    /// The name a `permission_request` event gives it as `toolName`: the
    /// tool's own, or `moat:KIND` for a grant (a name no tool has).
    pub fn tool_name(&self) -> String {
        match self {
            Self::Tool { name, .. } => name.clone(),
            other => format!("moat:{}", other.kind()),
        }
    }

    /// Whether an `--always` answer to `self` also answers `later`: the
    /// same tool, host and port, program, secret; or a directory within
    /// the approved one (writing one approved covers reading it too).
    pub fn covers(&self, later: &Requested) -> bool {
        match (self, later) {
            (Self::Tool { name: a, .. }, Self::Tool { name: b, .. }) => a == b,
            (Self::Net { host: a, port: p }, Self::Net { host: b, port: q }) => {
                a.eq_ignore_ascii_case(b) && p == q
            }
            (Self::Run { program: a }, Self::Run { program: b }) => a == b,
            (Self::Secret { name: a }, Self::Secret { name: b }) => a == b,
            (Self::Write { dir: a }, Self::Write { dir: b } | Self::Read { dir: b })
            | (Self::Read { dir: a }, Self::Read { dir: b }) => {
                std::path::Path::new(b).starts_with(a)
            }
            _ => false,
        }
    }
}

impl fmt::Display for Requested {
    /// As people read it: `net example.com:443`, `write /tmp/x`,
    /// `run git`, `secret OPENAI`, `tool Bash`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tool { name, .. } => write!(f, "tool {name}"),
            Self::Net { host, port } => write!(f, "net {host}:{port}"),
            Self::Run { program } => write!(f, "run {program}"),
            Self::Read { dir } => write!(f, "read {dir}"),
            Self::Write { dir } => write!(f, "write {dir}"),
            Self::Secret { name } => write!(f, "secret {name}"),
        }
    }
}

/// A request as a run makes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// What it asks for.
    #[serde(flatten)]
    pub what: Requested,
    /// Why it asks, in the words of whoever raised it.
    pub reason: String,
}

/// How a request was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// Approved or denied.
    pub approved: bool,
    /// Approved for this request and every later one it covers
    /// ([`Requested::covers`]) in the same run.
    #[serde(default)]
    pub always: bool,
    /// Why, as the one who answered said it (a denial's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who or what answered: `moat approve (pid 123)`, `a protocol
    /// client`, `the approval timeout (10m)`, `the ceiling of this
    /// server`.
    pub by: String,
    /// When (ms since the Unix epoch).
    pub at_ms: u64,
}

impl Answer {
    /// An approval by `by`, now.
    pub fn approve(by: impl Into<String>, always: bool) -> Self {
        Self {
            approved: true,
            always,
            reason: None,
            by: by.into(),
            at_ms: moat_engine::now_ms(),
        }
    }

    /// The answer a request gets when its run stops waiting for it (it
    /// ended, was cancelled, or gave up) before anyone answered: denied
    /// by moat. Written by whoever closes it first — the run's desk as the
    /// call that asked is dropped, or the store as the run ends.
    pub fn closed() -> Self {
        Self::deny("moat", Some("the run stopped waiting for it".into()))
    }

    /// A denial by `by`, now, for `reason` (cut to [`MAX_REASON_BYTES`]:
    /// it may come from any client, and goes to the run's adapter).
    pub fn deny(by: impl Into<String>, reason: Option<String>) -> Self {
        let reason = reason.map(|mut reason| {
            reason.truncate(reason.floor_char_boundary(MAX_REASON_BYTES));
            reason
        });
        Self {
            approved: false,
            always: false,
            reason,
            by: by.into(),
            at_ms: moat_engine::now_ms(),
        }
    }

    /// The decision in a word: `approved`, `approved always` or `denied`.
    pub fn decision(&self) -> &'static str {
        match (self.approved, self.always) {
            (true, true) => "approved always",
            (true, false) => "approved",
            (false, _) => "denied",
        }
    }
}

/// Most requests one run may make, wherever it is kept: a guest asking in
/// a loop must not grow the store without end (each is a record someone
/// would have to answer).
pub const MAX_REQUESTS: u32 = 1_000;

/// How often a run waiting for an answer from another process looks for
/// it (one small read).
pub const ANSWER_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The longest reason a denial keeps, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// One request of a run, and its answer once it has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// Its number in its run, from 1: how `moat approve RUN N` names it.
    pub number: u32,
    /// What was asked.
    pub request: ApprovalRequest,
    /// When (ms since the Unix epoch).
    pub asked_ms: u64,
    /// Its answer; `None` while it is open.
    pub answer: Option<Answer>,
}

impl Approval {
    /// Whether it still waits for an answer.
    pub fn is_open(&self) -> bool {
        self.answer.is_none()
    }

    /// The approval as JSON, as `moat show --json` and the protocol give
    /// it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Which open request of a run an answer is for, from what the user
/// named (`None`: the run's only open one).
pub fn pick_open(
    run: &str,
    approvals: &[Approval],
    number: Option<u32>,
) -> Result<u32, crate::RunsError> {
    let open: Vec<u32> = approvals
        .iter()
        .filter(|a| a.is_open())
        .map(|a| a.number)
        .collect();
    match number {
        Some(number) => match approvals.iter().find(|a| a.number == number) {
            None => Err(crate::RunsError::Invalid(format!(
                "{run} has no request {number} (its requests: {})",
                listed(approvals.iter().map(|a| a.number))
            ))),
            Some(Approval {
                answer: Some(answer),
                ..
            }) => Err(crate::RunsError::Invalid(format!(
                "request {number} of {run} was {} already, by {}",
                answer.decision(),
                answer.by
            ))),
            Some(_) => Ok(number),
        },
        None => match open.as_slice() {
            [one] => Ok(*one),
            [] => Err(crate::RunsError::Invalid(format!(
                "{run} has no open request; `moat show {run}` lists its requests"
            ))),
            several => Err(crate::RunsError::Invalid(format!(
                "{run} has {} open requests ({}); name one, as in `moat approve {run} {}`",
                several.len(),
                listed(several.iter().copied()),
                several[0]
            ))),
        },
    }
}

fn listed(numbers: impl Iterator<Item = u32>) -> String {
    let numbers: Vec<String> = numbers.map(|n| n.to_string()).collect();
    if numbers.is_empty() {
        "none".into()
    } else {
        numbers.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(number: u32, answer: Option<Answer>) -> Approval {
        Approval {
            number,
            request: ApprovalRequest {
                what: Requested::Net {
                    host: "example.com".into(),
                    port: 443,
                },
                reason: "not granted".into(),
            },
            asked_ms: 1,
            answer,
        }
    }

    #[test]
    fn an_always_answer_covers_the_same_grant_and_directories_within() {
        let net = |host: &str, port| Requested::Net {
            host: host.into(),
            port,
        };
        assert!(net("Example.com", 443).covers(&net("example.com", 443)));
        assert!(!net("example.com", 443).covers(&net("example.com", 80)));
        let write = Requested::Write { dir: "/a/b".into() };
        assert!(write.covers(&Requested::Read {
            dir: "/a/b/c".into()
        }));
        assert!(!write.covers(&Requested::Write {
            dir: "/a/bc".into()
        }));
        assert!(
            !Requested::Read { dir: "/a".into() }.covers(&Requested::Write { dir: "/a".into() })
        );
    }

    #[test]
    fn the_request_answered_is_the_one_named_or_the_only_open_one() {
        let answered = Answer::deny("test", None);
        let approvals = [approval(1, Some(answered)), approval(2, None)];
        assert_eq!(pick_open("r", &approvals, None), Ok(2));
        assert_eq!(pick_open("r", &approvals, Some(2)), Ok(2));
        let again = pick_open("r", &approvals, Some(1)).unwrap_err().to_string();
        assert!(again.contains("denied already, by test"), "{again}");
        let unknown = pick_open("r", &approvals, Some(7)).unwrap_err().to_string();
        assert!(
            unknown.contains("no request 7 (its requests: 1, 2)"),
            "{unknown}"
        );
        let several = [approval(1, None), approval(3, None)];
        let message = pick_open("r", &several, None).unwrap_err().to_string();
        assert!(message.contains("2 open requests (1, 3)"), "{message}");
        let none = pick_open("r", &[], None).unwrap_err().to_string();
        assert!(none.contains("no open request"), "{none}");
    }

    #[test]
    fn a_request_reads_back_as_it_was_written() {
        let request = approval(1, Some(Answer::approve("me", true)));
        let json = serde_json::to_string(&request).unwrap();
        assert!(json.contains(r#""kind":"net""#), "{json}");
        assert_eq!(serde_json::from_str::<Approval>(&json).unwrap(), request);
    }
}
