//! The [`Adapter`] implementation the CLI adapters share: describing the
//! adapter, starting the CLI and handing its events on are the same for
//! every CLI; only the constants and the option mapping differ ([`Cli`]).

use std::marker::PhantomData;

use moat_guest::{Adapter, AdapterInfo, ErrorInfo, Event, Needs, Options};

use crate::{ChildProcess, CliSession, Invocation, Translator, spawn};

/// What sets one agent CLI apart; [`CliAdapter`] does the rest.
pub trait Cli: 'static {
    /// The adapter's name (`claude-code`, `codex`, `gemini`).
    const NAME: &'static str;
    /// The adapter's version: the adapter crate's, so it is passed in.
    const VERSION: &'static str;
    /// The one-line description [`Adapter::info`] gives.
    const DESCRIPTION: &'static str;
    /// The program run (also the name the host must allow).
    const PROGRAM: &'static str;
    /// How to install the CLI, for the error when it is missing.
    const INSTALL: &'static str;
    /// The environment variables the CLI is given.
    const ENV: &'static [&'static str];
    /// The hosts the CLI talks to (its vendor's API and sign-in), as
    /// `host:port`: declared, so a run reaches them through moat's proxy;
    /// nothing else is reachable unless granted.
    const HOSTS: &'static [&'static str];

    /// The translator of the CLI's output.
    type Translator: Translator + 'static;

    /// Maps the run to the CLI's command line and the translator for it,
    /// refusing options the CLI cannot honour (before anything is started).
    fn prepare(
        prompt: &str,
        options: &Options,
    ) -> Result<(Invocation, Self::Translator), ErrorInfo>;
}

/// One run of the CLI `C`: the adapter type each CLI adapter exports.
pub struct CliAdapter<C: Cli> {
    session: CliSession<ChildProcess, C::Translator>,
    cli: PhantomData<C>,
}

impl<C: Cli> Adapter for CliAdapter<C> {
    fn info() -> AdapterInfo {
        AdapterInfo::new(C::NAME, C::VERSION, C::DESCRIPTION).with_needs(
            Needs::default()
                .with_programs([C::PROGRAM])
                .with_env(C::ENV.iter().copied())
                .with_hosts(C::HOSTS.iter().copied()),
        )
    }

    fn start(prompt: String, options: Options) -> Result<Self, ErrorInfo> {
        let (invocation, translator) = C::prepare(&prompt, &options)?;
        let child = spawn(&invocation, C::INSTALL)?;
        Ok(CliAdapter {
            session: CliSession::new(C::PROGRAM, child, translator),
            cli: PhantomData,
        })
    }

    fn next(&mut self) -> Option<Event> {
        self.session.next_event()
    }

    fn ready(&self) -> bool {
        self.session.ready()
    }
}
