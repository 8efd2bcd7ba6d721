//! `run_agent`: one adapter run as a normalized event stream (ENG-003 to
//! ENG-009).
//!
//! The stream is pulled: the adapter is asked for its next event only when
//! the consumer asks for one, so a slow consumer slows the adapter instead
//! of filling a buffer. Whatever the adapter does — fail, hang, spin, end
//! early, emit garbage, ignore an abort — the consumer sees valid events
//! ending in exactly one `done`.
//!
//! Beyond the rules of ENG-003..009, the stream is hardened at the
//! boundary:
//!
//! - every event is validated ([`validate_event`]); a broken one is
//!   dropped behind a recoverable `INVALID_EVENT` error;
//! - the run's tool policy (ENG-013, [`ToolPolicy`]) is checked on every
//!   `tool_use` and `permission_request`, before validation so that a
//!   malformed event cannot slip a forbidden tool past it; a violation kills
//!   the adapter at once and ends the run with `error`
//!   `TOOL_POLICY_VIOLATION` and `done` error, the offending event unseen —
//!   even while draining after an abort, since the consumer must learn of a
//!   breach more than of the interruption;
//! - a `tool_result` whose `toolUseId` no `tool_use` (or
//!   `permission_request`, whose denial a backend reports as a result) of
//!   the run announced is still passed on — it is the only record of what
//!   the backend did — but preceded by a recoverable `INVALID_EVENT` error
//!   naming the id, so a consumer pairing calls with results is warned;
//! - a second `init` is dropped: consumers take the first as the session's
//!   description.

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{Stream, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
// What the run reports as events (an error, then `done`) is logged at
// `info`: at the default level the user sees it once, as the event.
use tracing::{debug, info};

use super::adapter::{
    Adapter, AdapterEvent, AdapterEventKind, AdapterSession, Denial, ProgramLimitHit, RunLimits,
    RunOptions, SessionControl, SessionFailure, StartError,
};
use super::codes;
use super::dormant;
use super::event::{
    AgentEvent, DonePayload, DoneStatus, EventPayload, ExtensionPayload, InitPayload, Usage,
    new_session_id,
};
use super::names::{FieldNames, Setting, SettingNames};
use super::price::PriceTable;
use super::read_clock::ReadClock;
use super::registry::Registry;
use super::tool_policy::{ToolPolicy, ToolPolicyViolation};
use super::validate::{InvalidEvent, ValidEvent, millis, validate_event};

/// How long an aborted run may take to wrap up before it is killed.
pub const DEFAULT_DRAIN: Duration = Duration::from_millis(500);

/// Most distinct tool-call ids (of `tool_use` and `permission_request`) a
/// run remembers; a new one beyond it is dropped as INVALID_EVENT.
pub const MAX_CALL_IDS: usize = 16 * 1024;

/// How long a finished session's cleanup may take before it is killed.
const CLOSE_GRACE: Duration = Duration::from_millis(100);

/// Why a run could not be started at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// No adapter is registered under the requested name (ENG-003).
    #[error("no adapter named `{name}`; {}", known_adapters(.known))]
    UnknownAdapter {
        /// The name asked for.
        name: String,
        /// The names that are registered.
        known: Vec<String>,
    },
}

fn known_adapters(known: &[String]) -> String {
    if known.is_empty() {
        "no adapters are registered".to_owned()
    } else {
        format!("known adapters: {}", known.join(", "))
    }
}

/// What to run, and how.
///
/// `S` is the run's scope, carried untouched to [`Adapter::start`] (see
/// [`Adapter`]): `()` for native adapters, the grants and trust of the run
/// for a sandboxed component.
#[derive(Clone)]
pub struct RunRequest<S = ()> {
    /// The registered adapter name.
    pub agent: String,
    /// What the agent is asked.
    pub prompt: String,
    /// Options the adapter receives (the tool lists made effective first,
    /// ENG-013).
    pub options: RunOptions,
    /// Limits the runtime enforces.
    pub limits: RunLimits,
    /// The run's scope; the engine only passes it to the adapter.
    pub scope: S,
    /// Cancelling it aborts the run (ENG-005).
    pub abort: Option<CancellationToken>,
    /// How long an aborted adapter may take to end with its own `done`.
    pub drain: Duration,
    /// The words the run's messages use for settings and grants (the
    /// library's field names by default).
    pub names: Arc<dyn SettingNames>,
    /// Prices for a `done` that reports tokens but no cost.
    pub price_table: Option<Arc<PriceTable>>,
    /// Whether a resume the backend cannot honour (`SESSION_NOT_FOUND`
    /// before anything else happened) starts the run again as a fresh
    /// session, announced by a [`RESUME_FALLBACK_EVENT`]. On by default.
    pub resume_fallback: bool,
    /// The id under which the layer above records the run, which its
    /// `init` carries (`InitPayload::run_id`); `None` for a run recorded
    /// nowhere.
    pub run_id: Option<String>,
    /// The session id its events carry until the adapter names one; a
    /// fresh one when `None`. Given when events of the layer above (a
    /// request it holds open for an answer) may come before the run's
    /// first, so that they carry the run's session id too.
    pub session_id: Option<String>,
}

/// The model an `init` names when neither the backend nor the caller
/// named one.
pub const UNKNOWN_MODEL: &str = "unknown";

/// The extension event that says a run fell back from a resume the
/// backend could not honour to a fresh session: `{"reason", "resume"}`.
pub const RESUME_FALLBACK_EVENT: &str = "moat:resume_fallback";

impl<S: std::fmt::Debug> std::fmt::Debug for RunRequest<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("agent", &self.agent)
            .field("prompt", &self.prompt)
            .field("options", &self.options)
            .field("limits", &self.limits)
            .field("scope", &self.scope)
            .field("abort", &self.abort)
            .field("drain", &self.drain)
            .finish_non_exhaustive()
    }
}

impl RunRequest {
    /// A run of `agent` on `prompt` with default options and limits, an
    /// empty scope, no abort token and the default drain.
    pub fn new(agent: impl Into<String>, prompt: impl Into<String>) -> Self {
        Self {
            agent: agent.into(),
            prompt: prompt.into(),
            options: RunOptions::default(),
            limits: RunLimits::default(),
            scope: (),
            abort: None,
            drain: DEFAULT_DRAIN,
            names: Arc::new(FieldNames),
            price_table: None,
            resume_fallback: true,
            run_id: None,
            session_id: None,
        }
    }
}

impl<S> RunRequest<S> {
    /// The same request within `scope` (for the sandbox: what the run may
    /// reach).
    pub fn with_scope<T>(self, scope: T) -> RunRequest<T> {
        RunRequest {
            agent: self.agent,
            prompt: self.prompt,
            options: self.options,
            limits: self.limits,
            scope,
            abort: self.abort,
            drain: self.drain,
            names: self.names,
            price_table: self.price_table,
            resume_fallback: self.resume_fallback,
            run_id: self.run_id,
            session_id: self.session_id,
        }
    }

    /// Sets the options.
    pub fn with_options(mut self, options: RunOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: RunLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the abort token.
    pub fn with_abort(mut self, abort: CancellationToken) -> Self {
        self.abort = Some(abort);
        self
    }

    /// Sets the drain period.
    pub fn with_drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Sets the words messages use for settings and grants.
    pub fn with_names(mut self, names: Arc<dyn SettingNames>) -> Self {
        self.names = names;
        self
    }
}

/// Starts a run of the adapter `request.agent` names.
///
/// Nothing runs until the first event is pulled; an unknown name is an
/// error here, not an event (ENG-003). Pulling needs a tokio runtime.
pub fn run_agent<S: Send + Sync + 'static>(
    registry: &Registry<S>,
    request: RunRequest<S>,
) -> Result<AgentRun, EngineError> {
    let adapter = registry
        .get(&request.agent)
        .ok_or_else(|| EngineError::UnknownAdapter {
            name: request.agent.clone(),
            known: registry.list(),
        })?;
    Ok(AgentRun::new(adapter, request))
}

/// The events of one run, ending with exactly one `done`.
///
/// Dropping it mid-run kills the adapter.
pub struct AgentRun {
    state: Pulling,
}

/// Where a run's stream stands. The driver stays boxed in one place: an
/// event that needs no waiting (queued, or held by the session) is taken
/// straight from it, and only a pull that may wait becomes a future, which
/// owns the driver until it hands it back. (Moving the driver through a
/// future per event cost more than everything else an event costs.)
enum Pulling {
    Ready(Box<dyn Drive>),
    /// Kept here, so a consumer that drops a `next()` future (say, in a
    /// `select!`) loses nothing: the next call resumes it.
    InFlight(BoxFuture<'static, (Option<AgentEvent>, Box<dyn Drive>)>),
    Ended,
}

/// A [`Driver`] of any scope type.
trait Drive: Send {
    /// The next event when it needs no waiting (see [`Driver::now`]).
    fn now(&mut self) -> Option<AgentEvent>;
    /// The next event, waiting as the rules say; `None` after the `done`.
    fn pull(self: Box<Self>) -> BoxFuture<'static, (Option<AgentEvent>, Box<dyn Drive>)>;
}

impl<S: Send + Sync + 'static> Drive for Driver<S> {
    fn now(&mut self) -> Option<AgentEvent> {
        Driver::now(self)
    }

    fn pull(mut self: Box<Self>) -> BoxFuture<'static, (Option<AgentEvent>, Box<dyn Drive>)> {
        Box::pin(async move {
            let event = Driver::pull(&mut self).await;
            (event, self as Box<dyn Drive>)
        })
    }
}

impl AgentRun {
    /// Starts a run of `adapter` itself, without a registry (the request's
    /// `agent` names the run's events). Nothing runs until the first event
    /// is pulled.
    pub fn new<S: Send + Sync + 'static>(
        adapter: Arc<dyn Adapter<S>>,
        request: RunRequest<S>,
    ) -> Self {
        Self {
            state: Pulling::Ready(Box::new(Driver::new(adapter, request))),
        }
    }

    /// The next event, `None` after the `done`.
    pub async fn next(&mut self) -> Option<AgentEvent> {
        StreamExt::next(self).await
    }

    /// The events as a stream.
    pub fn into_stream(self) -> impl Stream<Item = AgentEvent> + Send + 'static {
        self
    }
}

impl Stream for AgentRun {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        loop {
            match &mut self.state {
                Pulling::Ready(driver) => {
                    if let Some(event) = driver.now() {
                        return Poll::Ready(Some(event));
                    }
                    if let Pulling::Ready(driver) =
                        std::mem::replace(&mut self.state, Pulling::Ended)
                    {
                        self.state = Pulling::InFlight(driver.pull());
                    }
                }
                Pulling::InFlight(pull) => {
                    let (event, driver) = std::task::ready!(pull.as_mut().poll(cx));
                    self.state = match event {
                        Some(_) => Pulling::Ready(driver),
                        None => Pulling::Ended,
                    };
                    return Poll::Ready(event);
                }
                Pulling::Ended => return Poll::Ready(None),
            }
        }
    }
}

impl std::fmt::Debug for AgentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRun").finish_non_exhaustive()
    }
}

/// A started session. Dropping it kills the adapter first, so an abandoned
/// run never leaves a backend running.
struct Live {
    // Declared first so it is dropped (and kills) before the session is.
    guard: KillOnDrop,
    session: Box<dyn AdapterSession>,
    control: Arc<dyn SessionControl>,
}

struct KillOnDrop(Option<Arc<dyn SessionControl>>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(control) = self.0.take() {
            control.kill();
        }
    }
}

impl Live {
    fn new(session: Box<dyn AdapterSession>) -> Self {
        let control = session.control();
        Self {
            guard: KillOnDrop(Some(Arc::clone(&control))),
            session,
            control,
        }
    }

    /// Lets the adapter clean up after its stream ended, without holding
    /// up the consumer; cleanup that overstays [`CLOSE_GRACE`] is killed.
    fn close_in_background(self) {
        let Live {
            mut guard,
            session,
            control,
        } = self;
        guard.0 = None;
        tokio::spawn(async move {
            tokio::select! {
                () = session.close() => {}
                () = tokio::time::sleep(CLOSE_GRACE) => {
                    debug!("adapter cleanup overstayed {CLOSE_GRACE:?}; killing it");
                    control.kill();
                }
            }
        });
    }
}

enum Phase {
    /// Not started yet: the first pull starts the adapter.
    Idle,
    Running(Live),
    /// A `done` has been queued; nothing more comes from the adapter.
    Finished,
}

/// The watcher task's link to the run (see [`watch_session`]).
struct Watch {
    /// Set by the watcher before it kills the session at the deadline.
    timed_out: Arc<AtomicBool>,
    /// The watcher while it was never woken: dropped first, it is dropped
    /// unrun, and the stop below wakes nothing.
    _watcher: dormant::Dormant,
    /// Stops the watcher (once it is a task) when the run ends or is
    /// dropped.
    _stop: DropGuard,
}

/// Why a read was given up before the adapter answered.
enum Stop {
    /// Aborted with no drain allowed.
    AbortNow,
    /// The drain period (or the run's time) ran out.
    DrainOver,
    TimedOut,
}

/// What became of an event the session already held.
enum Held {
    /// It held none: reading it means calling the adapter.
    Nothing(Live),
    /// The event was dropped (while draining, say); reading goes on.
    Dropped(Live),
    /// Something is queued for the consumer, or the run ended.
    Taken,
}

enum Started {
    Result(Result<Box<dyn AdapterSession>, StartError>),
    Aborted,
    TimedOut,
}

/// The run's state machine; each `pull` yields the next event.
struct Driver<S> {
    adapter: Arc<dyn Adapter<S>>,
    agent: String,
    prompt: String,
    /// The options as the adapter receives them (ENG-013: the effective
    /// tool list).
    options: RunOptions,
    limits: RunLimits,
    scope: S,
    names: Arc<dyn SettingNames>,
    policy: ToolPolicy,
    abort: Option<CancellationToken>,
    drain: Duration,
    phase: Phase,
    /// Events decided but not yet handed out (e.g. an error and its done).
    queue: VecDeque<AgentEvent>,
    started_at: Option<Instant>,
    deadline: Option<Instant>,
    /// The time of the last read: the time of the events it brought.
    clock: ReadClock,
    /// The adapter's last session id, or the fresh one made for the run.
    session_id: Option<String>,
    tool_use_ids: HashSet<String>,
    /// Ids of `permission_request`s, which a `tool_result` may answer too.
    permission_ids: HashSet<String>,
    /// Whether an `init` has been handed out.
    seen_init: bool,
    /// The model the backend named in its `init`.
    model: Option<String>,
    price_table: Option<Arc<PriceTable>>,
    resume_fallback: bool,
    run_id: Option<String>,
    /// The backend said the session to resume is gone: why, until the
    /// attempt's `done` arrives and the run starts again afresh.
    session_gone: Option<String>,
    /// Whether this attempt produced anything but `init` and errors.
    output_seen: bool,
    watch: Option<Watch>,
}

impl<S: Send + Sync + 'static> Driver<S> {
    fn new(adapter: Arc<dyn Adapter<S>>, request: RunRequest<S>) -> Self {
        let policy = ToolPolicy::from_options(&request.options, adapter.info().tool_patterns);
        let options = policy.adapter_options(&request.options);
        Self {
            adapter,
            agent: request.agent,
            prompt: request.prompt,
            options,
            limits: request.limits,
            scope: request.scope,
            names: request.names,
            policy,
            abort: request.abort,
            drain: request.drain,
            phase: Phase::Idle,
            queue: VecDeque::new(),
            started_at: None,
            deadline: None,
            clock: ReadClock::new(),
            session_id: request.session_id,
            tool_use_ids: HashSet::new(),
            permission_ids: HashSet::new(),
            seen_init: false,
            model: None,
            price_table: request.price_table,
            resume_fallback: request.resume_fallback,
            run_id: request.run_id,
            session_gone: None,
            output_seen: false,
            watch: None,
        }
    }

    /// The next event when it needs no waiting: one already queued, or
    /// one the session holds, taken under the engine's rules. `None` when
    /// getting one may wait, or when an abort or a passed deadline is due
    /// (their rules live in [`read`](Self::read)): the caller then pulls.
    fn now(&mut self) -> Option<AgentEvent> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if is_cancelled(self.abort.as_ref()) || self.timed_out() {
                return None;
            }
            let live = match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Running(live) => live,
                other => {
                    self.phase = other;
                    return None;
                }
            };
            match self.take_held(live, false) {
                Held::Nothing(live) => {
                    self.phase = Phase::Running(live);
                    return None;
                }
                Held::Dropped(live) => self.phase = Phase::Running(live),
                Held::Taken => {}
            }
        }
    }

    async fn pull(&mut self) -> Option<AgentEvent> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Idle => self.start().await,
                Phase::Running(live) => self.read(live).await,
            }
        }
    }

    async fn start(&mut self) {
        if is_cancelled(self.abort.as_ref()) {
            debug!(agent = %self.agent, "aborted before start; the adapter is not started");
            return self.interrupted();
        }
        // A fresh session after a failed resume runs under the limits of
        // the run's first start.
        let started = *self.started_at.get_or_insert_with(|| self.clock.tick());
        self.deadline = self.limits.timeout.map(|t| started + t);
        debug!(agent = %self.agent, "starting the adapter");
        let outcome = {
            let start = self
                .adapter
                .start(&self.prompt, &self.options, &self.limits, &self.scope);
            tokio::select! {
                biased;
                result = start => Started::Result(result),
                () = cancelled(self.abort.as_ref()) => Started::Aborted,
                () = sleep_until(self.deadline) => Started::TimedOut,
            }
        };
        self.clock.tick();
        match outcome {
            Started::Result(Ok(session)) => {
                let live = Live::new(session);
                self.start_watcher(&live.control);
                self.phase = Phase::Running(live);
            }
            Started::Result(Err(StartError::Refused {
                refusal: info,
                denials,
            })) => {
                info!(agent = %self.agent, message = %info.message, "the adapter refused the run");
                for denial in denials {
                    self.emit_denial(&denial);
                }
                let code = info
                    .code
                    .filter(|c| !c.is_empty())
                    .unwrap_or_else(|| codes::RUN_REFUSED.to_owned());
                self.fail(code, info.message);
            }
            // The runtime may have stopped a start that overran the limit.
            Started::Result(Err(StartError::Failed(_))) if self.timed_out() => self.time_out(None),
            Started::Result(Err(StartError::Failed(failure))) => self.failed(&failure),
            Started::Aborted => {
                debug!(agent = %self.agent, "aborted while starting");
                self.interrupted();
            }
            Started::TimedOut => self.time_out(None),
        }
    }

    /// Reads until there is something for the consumer, applying the abort,
    /// drain and timeout rules.
    async fn read(&mut self, mut live: Live) {
        // Set while draining after an abort: when to give up on the adapter.
        let mut drain_until: Option<Instant> = None;
        loop {
            if drain_until.is_none() && is_cancelled(self.abort.as_ref()) {
                match self.begin_drain(&live.control) {
                    Some(until) => drain_until = Some(until),
                    None => return self.abort_now(live),
                }
            }
            match drain_until {
                Some(until) if Instant::now() >= until => return self.abort_now(live),
                None if self.timed_out() => return self.time_out(Some(live)),
                _ => {}
            }

            live = match self.take_held(live, drain_until.is_some()) {
                Held::Nothing(live) => live,
                Held::Dropped(back) => {
                    live = back;
                    continue;
                }
                Held::Taken => return,
            };
            // A read: the clock moves on, and the deadline is looked at
            // anew (above, the time of the last read judged the events it
            // brought).
            self.clock.tick();
            if drain_until.is_none() && self.timed_out() {
                return self.time_out(Some(live));
            }
            let outcome = {
                let next = live.session.next();
                tokio::pin!(next);
                loop {
                    // Biased: an abort is seen before the read is resumed,
                    // and a completed read wins over a deadline beside it.
                    tokio::select! {
                        biased;
                        // The abort is looked at before the read is polled
                        // again: polling resumes a guest paused at a yield,
                        // and a spinning one would then run until the next
                        // epoch tick before it noticed being stopped.
                        () = cancelled(self.abort.as_ref()), if drain_until.is_none() => {
                            // Keep polling the same read: dropping it would
                            // abandon the session, and it may yet bring a done.
                            match self.begin_drain(&live.control) {
                                Some(until) => drain_until = Some(until),
                                None => break Err(Stop::AbortNow),
                            }
                        }
                        result = &mut next => break Ok(result),
                        () = sleep_until(drain_until), if drain_until.is_some() => break Err(Stop::DrainOver),
                        () = sleep_until(self.deadline), if drain_until.is_none() => break Err(Stop::TimedOut),
                    }
                }
            };
            self.clock.tick();

            // What the sandbox refused during that read comes first: the
            // adapter's event may be its reaction to the refusal. Even a read
            // cut short by the deadline or an abort reports its refusals.
            self.report_denials(&mut live);
            let result = match outcome {
                Ok(result) => result,
                Err(Stop::AbortNow | Stop::DrainOver) => return self.abort_now(live),
                Err(Stop::TimedOut) => return self.time_out(Some(live)),
            };
            // An abort that fired while the read was in flight puts what it
            // returned under the drain rules (a done still goes through).
            let mut drain_now = false;
            if drain_until.is_none() && is_cancelled(self.abort.as_ref()) {
                match self.begin_drain(&live.control) {
                    Some(until) => drain_until = Some(until),
                    None => drain_now = true,
                }
            }
            let aborting = drain_until.is_some() || drain_now;

            let event = match result {
                Ok(Some(event)) => event,
                Ok(None) if aborting => return self.abort_now(live),
                Ok(None) => {
                    info!(agent = %self.agent, "the adapter's stream ended without a done");
                    live.close_in_background();
                    return self.fail(
                        codes::MISSING_DONE.to_owned(),
                        "the adapter's stream ended without a `done` event".to_owned(),
                    );
                }
                Err(_) if aborting => return self.abort_now(live),
                Err(_) if self.timed_out() => return self.time_out(Some(live)),
                Err(failure) => {
                    drop(live);
                    return self.failed(&failure);
                }
            };

            match self.take(live, event, aborting) {
                Some(back) if drain_now => return self.abort_now(back),
                Some(back) => live = back,
                None => return,
            }
        }
    }

    /// Takes an event the session already holds, under the engine's rules.
    /// Such an event needs no read: no adapter code runs to hand it over,
    /// so there is nothing to wait for and no refusal to report.
    fn take_held(&mut self, mut live: Live, aborting: bool) -> Held {
        let Some(event) = live.session.ready() else {
            return Held::Nothing(live);
        };
        match self.take(live, event, aborting) {
            Some(live) => Held::Dropped(live),
            None => Held::Taken,
        }
    }

    /// Applies the engine's rules to one event the adapter gave: the event
    /// (or what replaces it) is queued for the consumer, or the run ends.
    /// Returns the session when the event was dropped and reading goes on
    /// (while draining, or an invalid event while aborting); `None` once
    /// the phase is set (something to hand over, or the end).
    fn take(&mut self, live: Live, event: AdapterEvent, aborting: bool) -> Option<Live> {
        if let Err(violation) = self.check_tool(&event) {
            // Fail closed: the backend is stopped before anything else
            // happens, and the event that broke the policy goes nowhere.
            drop(live);
            self.violated(&violation);
            return None;
        }

        let checked = validate_event(event, self.limits.max_event_bytes, || self.elapsed())
            .and_then(|valid| self.within_capacity(valid));
        match checked {
            Ok(mut valid) => {
                let unmatched = self.unmatched_result(&valid.payload);
                self.observe(&valid);
                if let EventPayload::Init(init) = &mut valid.payload {
                    self.complete_init(init, live.session.containment());
                }
                if !aborting && let Some(reason) = self.resume_gone(&valid.payload) {
                    // Held back: the attempt's done comes next, and a
                    // fresh session after it.
                    debug!(agent = %self.agent, %reason, "the session to resume is gone");
                    self.session_gone = Some(reason);
                    self.phase = Phase::Running(live);
                    return None;
                }
                if let EventPayload::Done(mut done) = valid.payload {
                    if let Some(reason) = self.session_gone.take() {
                        live.close_in_background();
                        self.start_afresh(reason);
                        return None;
                    }
                    debug!(agent = %self.agent, "the adapter is done");
                    self.price(&mut done);
                    self.pass_on(EventPayload::Done(done));
                    live.close_in_background();
                    self.end();
                    return None;
                }
                if aborting {
                    debug!(agent = %self.agent, kind = valid.payload.type_name(), "dropped while draining");
                } else if matches!(valid.payload, EventPayload::Init(_)) && self.seen_init {
                    debug!(agent = %self.agent, "dropped a second init");
                } else {
                    if let Some(id) = unmatched {
                        info!(agent = %self.agent, tool_use_id = %id, "a tool_result answers no tool_use");
                        self.pass_on(EventPayload::error(
                            codes::INVALID_EVENT,
                            format!(
                                "`tool_result` for `{id}`, which no `tool_use` of this run announced; passed on as it is"
                            ),
                            true,
                        ));
                    }
                    self.seen_init |= matches!(valid.payload, EventPayload::Init(_));
                    self.pass_on(valid.payload);
                    self.phase = Phase::Running(live);
                    return None;
                }
            }
            Err(invalid) => {
                info!(agent = %self.agent, %invalid, "dropped an invalid event");
                if !aborting {
                    self.pass_on(EventPayload::error(
                        codes::INVALID_EVENT,
                        invalid.to_string(),
                        true,
                    ));
                    self.phase = Phase::Running(live);
                    return None;
                }
            }
        }
        Some(live)
    }

    /// Queues a recoverable `CAPABILITY_DENIED` error for each refusal the
    /// session recorded.
    fn report_denials(&mut self, live: &mut Live) {
        for denial in live.session.take_denials() {
            self.emit_denial(&denial);
        }
        for hit in live.session.take_limits_hit() {
            let (code, message) = match hit {
                ProgramLimitHit::Processes(most) => (
                    codes::PROCESS_LIMIT,
                    format!(
                        "a program of the run was refused a new process: its programs may have {most} processes and threads at once; raise it with {}",
                        self.names.setting(Setting::MaxProcesses)
                    ),
                ),
                ProgramLimitHit::Memory(most) => (
                    codes::MEMORY_LIMIT,
                    format!(
                        "the kernel killed a program of the run for memory: its programs may use {} together; raise it with {}",
                        words_of_bytes(most),
                        self.names.setting(Setting::MaxMemory)
                    ),
                ),
            };
            info!(agent = %self.agent, code, "a program hit a limit of the run");
            self.emit(EventPayload::error(code, message, true));
        }
    }

    fn emit_denial(&mut self, denial: &Denial) {
        // The error event is the report; a log line would say it twice.
        debug!(agent = %self.agent, capability = denial.request.capability(), target = %denial.request, "capability denied");
        let message = denial.message(self.names.as_ref());
        self.emit(EventPayload::error(codes::CAPABILITY_DENIED, message, true));
    }

    /// Asks the adapter to wrap up; when it may take until, or `None` when
    /// no drain is allowed. The watcher interrupts too; asking again is
    /// harmless and does not depend on which task ran first.
    fn begin_drain(&self, control: &Arc<dyn SessionControl>) -> Option<Instant> {
        debug!(agent = %self.agent, drain = ?self.drain, "aborted; draining");
        control.interrupt();
        if self.drain.is_zero() {
            return None;
        }
        let until = Instant::now() + self.drain;
        Some(self.deadline.map_or(until, |deadline| deadline.min(until)))
    }

    /// Starts what reaches the session from outside the driving task: a
    /// guest spinning inside our poll cannot see a timer of ours fire, but
    /// it is woken by `interrupt` and stopped by `kill`. None is needed
    /// without an abort or a time limit.
    fn start_watcher(&mut self, control: &Arc<dyn SessionControl>) {
        if self.abort.is_none() && self.deadline.is_none() {
            return;
        }
        let stop = CancellationToken::new();
        let timed_out = Arc::new(AtomicBool::new(false));
        // Dormant until the abort or the deadline wakes it, then a task of
        // its own: it acts whether or not anyone reads the run, and on
        // another worker than a guest spinning on this one.
        let watcher = dormant::start(watch_session(
            Arc::clone(control),
            self.abort.clone(),
            self.drain,
            self.deadline,
            Arc::clone(&timed_out),
            stop.clone(),
        ));
        self.watch = Some(Watch {
            timed_out,
            _watcher: watcher,
            _stop: stop.drop_guard(),
        });
    }

    fn timed_out(&self) -> bool {
        self.watch
            .as_ref()
            .is_some_and(|w| w.timed_out.load(Ordering::SeqCst))
            || self.deadline.is_some_and(|d| self.clock.at() >= d)
    }

    fn elapsed(&self) -> Duration {
        self.started_at.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Notes what synthesized events need (the session id and tool uses)
    /// and the ids a `tool_result` may answer.
    fn observe(&mut self, event: &ValidEvent) {
        if let Some(id) = &event.session_id {
            self.session_id = Some(id.clone());
        }
        self.output_seen |= !matches!(
            event.payload,
            EventPayload::Init(_) | EventPayload::Error(_) | EventPayload::Done(_)
        );
        match &event.payload {
            EventPayload::Init(init) if self.model.is_none() => {
                self.model.clone_from(&init.model);
            }
            EventPayload::ToolUse(tool_use) => {
                self.tool_use_ids.insert(tool_use.tool_use_id.clone());
            }
            EventPayload::PermissionRequest(request) => {
                self.permission_ids.insert(request.tool_use_id.clone());
            }
            _ => {}
        }
    }

    /// The backend's reason, when `payload` says the session this run
    /// resumes is gone and the run may still start afresh: the fallback is
    /// on, it has not been used, and nothing but `init` came before.
    fn resume_gone(&self, payload: &EventPayload) -> Option<String> {
        let EventPayload::Error(error) = payload else {
            return None;
        };
        let eligible = error.code.as_deref() == Some(codes::SESSION_NOT_FOUND)
            && self.resume_fallback
            && self.options.resume.is_some()
            && !self.output_seen;
        eligible.then(|| error.message.clone())
    }

    /// Starts the run again without its resume token, saying so first.
    fn start_afresh(&mut self, reason: String) {
        let resume = self.options.resume.take();
        info!(agent = %self.agent, %reason, "resuming failed; starting a fresh session");
        self.emit(EventPayload::Extension(Box::new(ExtensionPayload {
            name: RESUME_FALLBACK_EVENT.to_owned(),
            payload: serde_json::json!({"reason": reason, "resume": resume}),
        })));
        // The fresh session's own init and calls are its first.
        self.seen_init = false;
        self.tool_use_ids.clear();
        self.permission_ids.clear();
        self.phase = Phase::Idle;
    }

    /// Gives an `init` the host's facts about the run — its id, how its
    /// programs are contained (the host's word, whatever the adapter
    /// claimed) — and what cligent's shape requires where the adapter named
    /// none: the model asked for (else [`UNKNOWN_MODEL`], as cligent's own
    /// adapters say) and the working directory asked for (else moat's own,
    /// where a run without one starts).
    fn complete_init(&self, init: &mut InitPayload, containment: Option<String>) {
        init.containment = containment;
        init.run_id.clone_from(&self.run_id);
        if init.model.is_none() {
            init.model = Some(
                self.options
                    .model
                    .clone()
                    .unwrap_or_else(|| UNKNOWN_MODEL.to_owned()),
            );
        }
        if init.cwd.is_none() {
            init.cwd = Some(self.options.cwd.clone().unwrap_or_else(|| {
                std::env::current_dir()
                    .map_or_else(|_| ".".to_owned(), |dir| dir.to_string_lossy().into_owned())
            }));
        }
    }

    /// Gives a `done` that reports tokens but no cost the cost the price
    /// table says, for the model the backend named, else the one asked for.
    fn price(&self, done: &mut DonePayload) {
        let (Some(table), Some(tokens), None) =
            (&self.price_table, &done.usage.tokens, &done.usage.cost)
        else {
            return;
        };
        let model = self.model.as_deref().or(self.options.model.as_deref());
        done.usage.cost = model.and_then(|model| table.cost(model, tokens));
    }

    /// Refuses a call id the run has no room left to remember: the ids a
    /// run keeps (to pair results with calls and count tool uses) are
    /// bounded, so an adapter cannot grow the host's memory with them.
    fn within_capacity(&self, valid: ValidEvent) -> Result<ValidEvent, InvalidEvent> {
        let (event, id) = match &valid.payload {
            EventPayload::ToolUse(call) => ("tool_use", &call.tool_use_id),
            EventPayload::PermissionRequest(request) => {
                ("permission_request", &request.tool_use_id)
            }
            _ => return Ok(valid),
        };
        let known = self.tool_use_ids.contains(id) || self.permission_ids.contains(id);
        if !known && self.tool_use_ids.len() + self.permission_ids.len() >= MAX_CALL_IDS {
            return Err(InvalidEvent::Field {
                event,
                field: "toolUseId",
                problem: format!(
                    "is a new call beyond the {MAX_CALL_IDS} distinct calls a run may make; the event was dropped"
                ),
            });
        }
        Ok(valid)
    }

    /// The id of a `tool_result` that answers no call the run has seen.
    fn unmatched_result(&self, payload: &EventPayload) -> Option<String> {
        match payload {
            EventPayload::ToolResult(result)
                if !self.tool_use_ids.contains(&result.tool_use_id)
                    && !self.permission_ids.contains(&result.tool_use_id) =>
            {
                Some(result.tool_use_id.clone())
            }
            _ => None,
        }
    }

    /// Checks a tool the adapter used or asks to use against the policy.
    fn check_tool(&self, event: &AdapterEvent) -> Result<(), ToolPolicyViolation> {
        match &event.kind {
            AdapterEventKind::ToolUse { tool_name, .. }
            | AdapterEventKind::PermissionRequest { tool_name, .. } => self.policy.check(tool_name),
            _ => Ok(()),
        }
    }

    /// Ends the run after a tool policy violation (the adapter is already
    /// stopped).
    fn violated(&mut self, violation: &ToolPolicyViolation) {
        info!(agent = %self.agent, tool = violation.tool(), "tool policy violation; the adapter was stopped");
        let message = violation.message(self.names.as_ref());
        self.fail(codes::TOOL_POLICY_VIOLATION.to_owned(), message);
    }

    /// Queues an event the host makes, stamped now.
    fn emit(&mut self, payload: EventPayload) {
        self.clock.tick();
        self.pass_on(payload);
    }

    /// Queues an event of the adapter's last read, or the host's answer to
    /// it, under the run's current session id, stamped with that read's
    /// time.
    fn pass_on(&mut self, payload: EventPayload) {
        let session_id = self.session_id.get_or_insert_with(new_session_id).clone();
        self.queue.push_back(AgentEvent {
            agent: self.agent.clone(),
            timestamp: self.clock.stamp(),
            session_id,
            role: None,
            payload,
        });
    }

    fn end(&mut self) {
        self.phase = Phase::Finished;
        self.watch = None;
    }

    /// A synthesized done: authentic usage only (distinct tool uses; tokens
    /// and cost unknown).
    fn synthesize_done(&mut self, status: DoneStatus, resume_token: Option<String>) {
        let done = synthesized_done(
            status,
            resume_token,
            self.tool_use_ids.len(),
            self.elapsed(),
        );
        self.emit(EventPayload::Done(Box::new(done)));
        self.end();
    }

    /// `done` interrupted, carrying the inbound resume token so the caller
    /// can still continue the session.
    fn interrupted(&mut self) {
        let resume = self.options.resume.clone().filter(|r| !r.is_empty());
        self.synthesize_done(DoneStatus::Interrupted, resume);
    }

    /// Stops the adapter hard and ends the run as interrupted.
    fn abort_now(&mut self, live: Live) {
        debug!(agent = %self.agent, "stopping the aborted adapter");
        drop(live);
        self.interrupted();
    }

    fn time_out(&mut self, live: Option<Live>) {
        drop(live);
        let limit = self.limits.timeout.unwrap_or_default();
        info!(agent = %self.agent, ?limit, "the run timed out");
        let message = format!(
            "the run took longer than its time limit of {}; raise it with {}",
            humantime::format_duration(limit),
            self.names.setting(Setting::Timeout)
        );
        self.fail(codes::TIMEOUT.to_owned(), message);
    }

    fn failed(&mut self, failure: &SessionFailure) {
        info!(agent = %self.agent, %failure, "the adapter failed");
        let code = match failure {
            SessionFailure::FuelExhausted { .. } => codes::FUEL_EXHAUSTED,
            SessionFailure::MemoryLimit { .. } | SessionFailure::ResourceLimit { .. } => {
                codes::MEMORY_LIMIT
            }
            SessionFailure::Crashed { .. } | SessionFailure::Killed => codes::ADAPTER_ERROR,
        };
        let message = match failure.limit() {
            Some(limit) => format!("{failure}; raise it with {}", self.names.setting(limit)),
            None => failure.to_string(),
        };
        self.fail(code.to_owned(), message);
    }

    /// `error` (not recoverable) then `done` error.
    fn fail(&mut self, code: String, message: String) {
        self.emit(EventPayload::Error(Box::new(super::event::ErrorPayload {
            code: Some(code),
            message,
            recoverable: false,
        })));
        self.synthesize_done(DoneStatus::Error, None);
    }
}

/// A `done` the engine makes: authentic usage only (the distinct tool uses
/// seen; tokens and cost unknown).
pub(super) fn synthesized_done(
    status: DoneStatus,
    resume_token: Option<String>,
    tool_uses: usize,
    elapsed: Duration,
) -> DonePayload {
    DonePayload {
        status,
        result: None,
        resume_token,
        usage: Usage {
            tool_uses: u32::try_from(tool_uses).unwrap_or(u32::MAX),
            tokens: None,
            cost: None,
        },
        duration_ms: millis(elapsed),
        metadata: None,
    }
}

/// Interrupts the session when the run is aborted and kills it when the
/// drain or the run's time is up, from outside the driving task.
async fn watch_session(
    control: Arc<dyn SessionControl>,
    abort: Option<CancellationToken>,
    drain: Duration,
    deadline: Option<Instant>,
    timed_out: Arc<AtomicBool>,
    stop: CancellationToken,
) {
    let deadline = sleep_until(deadline);
    tokio::pin!(deadline);
    tokio::select! {
        biased;
        () = stop.cancelled() => return,
        () = &mut deadline => {
            timed_out.store(true, Ordering::SeqCst);
            control.kill();
            return;
        }
        () = cancelled(abort.as_ref()) => control.interrupt(),
    }
    tokio::select! {
        biased;
        () = stop.cancelled() => {}
        () = tokio::time::sleep(drain) => control.kill(),
        () = &mut deadline => control.kill(),
    }
}

fn is_cancelled(token: Option<&CancellationToken>) -> bool {
    token.is_some_and(CancellationToken::is_cancelled)
}

/// Resolves when `token` is cancelled; never without one.
async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

/// Resolves at `at`; never without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `bytes` in words: `256 MiB`, `1.5 GiB`, else bytes.
fn words_of_bytes(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * MIB;
    if bytes >= GIB {
        format!("{} GiB", (bytes as f64 / GIB as f64 * 10.0).round() / 10.0)
    } else if bytes >= MIB {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}
