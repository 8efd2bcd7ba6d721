//! The `acp` adapter: runs any ACP agent (Agent Client Protocol, JSON-RPC
//! 2.0 over newline-delimited stdio, protocol version 1) through moat's
//! process capability, and is its client (docs/acp.md).
//!
//! ```text
//! moat run acp "fix the test" --allow-run=gemini --allow-write=. \
//!     --extra '{"command":"gemini","args":["--acp"]}'
//! ```
//!
//! The agent's messages become the run's events ([`updates`]); its file
//! requests are served with the component's own file access, which is
//! exactly the run's grants ([`files`]); its permission requests are
//! decided by the run's tool policy or asked of the run's user
//! ([`permission`]); it gets no terminal. The conversation itself is
//! [`session`], over the agent process ([`transport`]).
//!
//! The adapter declares no program: the agent must be granted with
//! `--allow-run`, and is refused visibly otherwise.

pub mod config;
pub mod files;
pub mod permission;
pub mod rpc;
pub mod session;
pub mod transport;
pub mod updates;

use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Options};

use permission::Policy;
use session::{Session, Setup};
use transport::AgentProcess;

/// One run of an ACP agent.
pub struct Acp {
    session: Session<AgentProcess>,
}

impl Adapter for Acp {
    fn info() -> AdapterInfo {
        AdapterInfo::new(
            "acp",
            env!("CARGO_PKG_VERSION"),
            "Runs any ACP agent (Agent Client Protocol over stdio) as its client; \
             name it with --extra '{\"command\":…,\"args\":[…]}' and grant it with --allow-run",
        )
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let agent = config::agent_command(&options)?;
        // ACP sessions need an absolute working directory; the host gives
        // the run's, and an agent started without one runs in a fresh
        // empty directory, which no session could name.
        let Some(cwd) = options.cwd.clone().filter(|cwd| cwd.starts_with('/')) else {
            return Err(moat_cli_support::unsupported(
                "acp",
                "a run without a working directory",
                "give --cwd (an ACP session needs an absolute working directory)",
            ));
        };
        let policy = Policy::new(&options, moat_guest::approvals::ask_tools());
        let process = AgentProcess::spawn(&agent, Some(&cwd))?;
        let setup = Setup {
            agent: agent.command,
            prompt,
            cwd,
            resume: options.resume.clone().filter(|token| !token.is_empty()),
            policy,
            handshake_timeout: session::HANDSHAKE_TIMEOUT,
        };
        Ok(Acp {
            session: Session::start(process, setup),
        })
    }

    fn next(&mut self) -> Option<Event> {
        self.session.next_event()
    }

    fn ready(&self) -> bool {
        self.session.ready()
    }
}

moat_guest::export_adapter!(Acp);
