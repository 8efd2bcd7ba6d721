//! Native, in-process adapters: [`ScriptedAdapter`], a test double that
//! plays a script of steps (good and bad behaviour alike), and
//! [`NativeEcho`], the baseline the benchmarks set beside the Wasm echo.

use std::collections::VecDeque;
use std::fmt;
use std::future::{Future, pending};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, poll_fn};
use futures::task::AtomicWaker;

use moat_engine::{
    Adapter, AdapterEvent, AdapterEventKind, AdapterInfo, AdapterSession, Denial, DoneInfo,
    DoneStatus, ErrorInfo, RunLimits, RunOptions, SessionControl, SessionFailure, StartError,
    Usage,
};

/// A callback a script runs when it reaches a [`Step::Call`].
#[derive(Clone)]
pub struct Hook(Arc<dyn Fn() + Send + Sync>);

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hook(..)")
    }
}

/// One step of a script. Each `next` call runs steps until one produces a
/// result: an event, a failure or the end of the stream.
#[derive(Debug, Clone)]
pub enum Step {
    /// Return this event.
    Emit(AdapterEvent),
    /// Fail with this failure.
    Fail(SessionFailure),
    /// Return `Ok(None)`: the stream is over.
    End,
    /// Never finish, until killed (then fail with `Killed`).
    Hang,
    /// Wait this long without blocking the thread (a kill cuts it short).
    Sleep(Duration),
    /// Busy-loop this long inside one poll, like guest code that never
    /// yields. It yields only when interrupted or killed, as a Wasm guest
    /// does when the sandbox bumps its epoch.
    Spin(Duration),
    /// Wait until interrupted (cooperative abort), then go on with the
    /// script — typically to emit a `done` interrupted with a resume token.
    WaitForInterrupt,
    /// Run a callback, then go on (e.g. to fire an abort token at an exact
    /// point of the script).
    Call(Hook),
    /// Panic with this message inside `next`, as a buggy native adapter
    /// would (a Wasm adapter traps instead).
    Panic(String),
    /// Record a refusal, as the sandbox does when the adapter asks for
    /// something not granted, then go on; the engine collects it through
    /// [`AdapterSession::take_denials`].
    Deny(Denial),
}

impl Step {
    /// Emit an event without a session id.
    pub fn emit(kind: AdapterEventKind) -> Self {
        Step::Emit(AdapterEvent::new(kind))
    }

    /// Emit an event carrying `session_id`.
    pub fn emit_in(session_id: &str, kind: AdapterEventKind) -> Self {
        Step::Emit(AdapterEvent {
            session_id: Some(session_id.to_owned()),
            kind,
        })
    }

    /// Emit a `text`.
    pub fn text(content: &str) -> Self {
        Self::emit(AdapterEventKind::Text(content.to_owned()))
    }

    /// Emit a `text_delta`.
    pub fn delta(delta: &str) -> Self {
        Self::emit(AdapterEventKind::TextDelta(delta.to_owned()))
    }

    /// Emit a `tool_use` of tool "read" with id `id` and an empty input.
    pub fn tool_use(id: &str) -> Self {
        Self::emit(AdapterEventKind::ToolUse {
            tool_name: "read".into(),
            tool_use_id: id.to_owned(),
            input: "{}".into(),
            description: None,
        })
    }

    /// Emit a `done` with `status` and nothing else known.
    pub fn done(status: DoneStatus) -> Self {
        Self::emit(AdapterEventKind::Done(done_info(status)))
    }

    /// Emit a `done` with `status` carrying `resume_token`.
    pub fn done_with_resume(status: DoneStatus, resume_token: &str) -> Self {
        Self::emit(AdapterEventKind::Done(DoneInfo {
            resume_token: Some(resume_token.to_owned()),
            ..done_info(status)
        }))
    }

    /// Run `f` when the script reaches this step.
    pub fn call(f: impl Fn() + Send + Sync + 'static) -> Self {
        Step::Call(Hook(Arc::new(f)))
    }
}

/// A `done` payload with only its status.
pub fn done_info(status: DoneStatus) -> DoneInfo {
    DoneInfo {
        status,
        result: None,
        resume_token: None,
        usage: Usage::default(),
        duration_ms: None,
        metadata: None,
    }
}

/// What [`ScriptedAdapter::start`](Adapter::start) does.
#[derive(Debug, Clone, Default)]
pub enum StartBehaviour {
    /// Start a session that plays the script.
    #[default]
    Run,
    /// Refuse the run.
    Refuse(ErrorInfo),
    /// Fail while starting.
    Fail(SessionFailure),
    /// Never finish starting.
    Hang,
}

/// Counters of what the engine did to a [`ScriptedAdapter`] and its
/// sessions, for tests to assert on.
#[derive(Debug, Default)]
pub struct Probe {
    starts: AtomicUsize,
    nexts: AtomicUsize,
    interrupts: AtomicUsize,
    kills: AtomicUsize,
    closes: AtomicUsize,
    options: Mutex<Option<RunOptions>>,
}

impl Probe {
    /// Calls to `start`.
    pub fn starts(&self) -> usize {
        self.starts.load(Ordering::SeqCst)
    }
    /// Calls to `next`.
    pub fn nexts(&self) -> usize {
        self.nexts.load(Ordering::SeqCst)
    }
    /// Calls to `interrupt`.
    pub fn interrupts(&self) -> usize {
        self.interrupts.load(Ordering::SeqCst)
    }
    /// Calls to `kill`.
    pub fn kills(&self) -> usize {
        self.kills.load(Ordering::SeqCst)
    }
    /// Calls to `close`.
    pub fn closes(&self) -> usize {
        self.closes.load(Ordering::SeqCst)
    }
    /// The options of the last `start`.
    pub fn last_options(&self) -> Option<RunOptions> {
        self.options
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn bump(counter: &AtomicUsize) {
    counter.fetch_add(1, Ordering::SeqCst);
}

/// A native adapter that plays a fixed script, for tests and benchmarks.
#[derive(Debug)]
pub struct ScriptedAdapter {
    info: AdapterInfo,
    steps: Vec<Step>,
    start: StartBehaviour,
    close_hangs: bool,
    held: bool,
    probe: Arc<Probe>,
}

impl ScriptedAdapter {
    /// An adapter named `name` whose every session plays `steps`.
    pub fn new(name: &str, steps: Vec<Step>) -> Self {
        Self {
            info: AdapterInfo {
                name: name.to_owned(),
                version: "0.0.0".into(),
                description: "a scripted test double".into(),
                ..AdapterInfo::default()
            },
            steps,
            start: StartBehaviour::Run,
            close_hangs: false,
            held: false,
            probe: Arc::default(),
        }
    }

    /// Sets what `start` does.
    pub fn with_start(mut self, start: StartBehaviour) -> Self {
        self.start = start;
        self
    }

    /// Declares that its tool lists may hold patterns
    /// (`info().tool_patterns`).
    pub fn with_tool_patterns(mut self) -> Self {
        self.info.tool_patterns = true;
        self
    }

    /// Hands the events of consecutive `Emit` steps over as held events
    /// ([`AdapterSession::ready`]), as a session that pulls batches does,
    /// when `held`; otherwise every event comes from `next`.
    pub fn holding_events(mut self, held: bool) -> Self {
        self.held = held;
        self
    }

    /// Makes `close` never finish until killed.
    pub fn with_hanging_close(mut self) -> Self {
        self.close_hangs = true;
        self
    }

    /// The counters shared by this adapter and its sessions.
    pub fn probe(&self) -> Arc<Probe> {
        Arc::clone(&self.probe)
    }
}

/// A native adapter runs within any scope: it is trusted code of the
/// host process and ignores it.
impl<S: Send + Sync> Adapter<S> for ScriptedAdapter {
    fn info(&self) -> &AdapterInfo {
        &self.info
    }

    fn start<'a>(
        &'a self,
        _prompt: &'a str,
        options: &'a RunOptions,
        _limits: &'a RunLimits,
        _scope: &'a S,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
        Box::pin(async move {
            bump(&self.probe.starts);
            *self
                .probe
                .options
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(options.clone());
            match &self.start {
                StartBehaviour::Run => {
                    let session: Box<dyn AdapterSession> = Box::new(ScriptedSession {
                        steps: self.steps.iter().cloned().collect(),
                        control: Arc::new(ScriptedControl {
                            probe: Arc::clone(&self.probe),
                            ..ScriptedControl::default()
                        }),
                        close_hangs: self.close_hangs,
                        held: self.held,
                        denials: Vec::new(),
                    });
                    Ok(session)
                }
                StartBehaviour::Refuse(info) => Err(StartError::refused(info.clone())),
                StartBehaviour::Fail(failure) => Err(StartError::Failed(failure.clone())),
                StartBehaviour::Hang => pending().await,
            }
        })
    }
}

/// Interrupt and kill flags of one scripted session, with a waker so a
/// waiting step notices them at once.
#[derive(Default)]
struct ScriptedControl {
    interrupted: AtomicBool,
    killed: AtomicBool,
    /// Bumped on every interrupt and kill, so a spinning step can tell it
    /// was poked since it last looked.
    pokes: AtomicU64,
    waker: AtomicWaker,
    probe: Arc<Probe>,
}

impl ScriptedControl {
    fn killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    fn poke(&self) {
        self.pokes.fetch_add(1, Ordering::SeqCst);
        self.waker.wake();
    }

    /// Resolves once `cond` holds; rechecked whenever the session is poked.
    async fn until(&self, cond: impl Fn(&Self) -> bool) {
        poll_fn(|cx| {
            if cond(self) {
                return Poll::Ready(());
            }
            self.waker.register(cx.waker());
            // Checked again after registering, so a poke in between is
            // not lost.
            if cond(self) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

impl SessionControl for ScriptedControl {
    fn interrupt(&self) {
        bump(&self.probe.interrupts);
        self.interrupted.store(true, Ordering::SeqCst);
        self.poke();
    }

    fn kill(&self) {
        bump(&self.probe.kills);
        self.killed.store(true, Ordering::SeqCst);
        self.poke();
    }
}

struct ScriptedSession {
    steps: VecDeque<Step>,
    control: Arc<ScriptedControl>,
    close_hangs: bool,
    held: bool,
    denials: Vec<Denial>,
}

impl ScriptedSession {
    async fn run(&mut self) -> Result<Option<AdapterEvent>, SessionFailure> {
        let control = &*self.control;
        loop {
            if control.killed() {
                return Err(SessionFailure::Killed);
            }
            let Some(step) = self.steps.pop_front() else {
                return Ok(None);
            };
            match step {
                Step::Emit(event) => return Ok(Some(event)),
                Step::Fail(failure) => return Err(failure),
                Step::End => return Ok(None),
                Step::Hang => control.until(ScriptedControl::killed).await,
                Step::Sleep(d) => {
                    tokio::select! {
                        () = tokio::time::sleep(d) => {}
                        () = control.until(ScriptedControl::killed) => {}
                    }
                }
                Step::Spin(d) => {
                    Spin {
                        control,
                        until: Instant::now() + d,
                        seen: control.pokes.load(Ordering::SeqCst),
                    }
                    .await?
                }
                Step::WaitForInterrupt => {
                    control.until(|c| c.interrupted() || c.killed()).await;
                }
                Step::Call(hook) => (hook.0)(),
                Step::Panic(message) => panic!("{message}"),
                Step::Deny(denial) => self.denials.push(denial),
            }
        }
    }
}

impl AdapterSession for ScriptedSession {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<AdapterEvent>, SessionFailure>> {
        bump(&self.control.probe.nexts);
        Box::pin(self.run())
    }

    fn ready(&mut self) -> Option<AdapterEvent> {
        if !self.held || self.control.killed() {
            return None;
        }
        match self.steps.pop_front() {
            Some(Step::Emit(event)) => Some(event),
            Some(other) => {
                self.steps.push_front(other);
                None
            }
            None => None,
        }
    }

    fn control(&self) -> Arc<dyn SessionControl> {
        Arc::clone(&self.control) as Arc<dyn SessionControl>
    }

    fn take_denials(&mut self) -> Vec<Denial> {
        std::mem::take(&mut self.denials)
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        bump(&self.control.probe.closes);
        let control = Arc::clone(&self.control);
        let hangs = self.close_hangs;
        Box::pin(async move {
            if hangs {
                control.until(ScriptedControl::killed).await;
            }
        })
    }
}

/// A busy loop that holds the thread, except that it yields once each time
/// the session is poked and fails once it is killed.
struct Spin<'a> {
    control: &'a ScriptedControl,
    until: Instant,
    seen: u64,
}

impl Future for Spin<'_> {
    type Output = Result<(), SessionFailure>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            if self.control.killed() {
                return Poll::Ready(Err(SessionFailure::Killed));
            }
            let pokes = self.control.pokes.load(Ordering::SeqCst);
            if pokes != self.seen {
                self.seen = pokes;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if Instant::now() >= self.until {
                return Poll::Ready(Ok(()));
            }
            std::hint::spin_loop();
        }
    }
}

/// The echo adapter, natively: the in-process baseline for benchmarks.
///
/// Its stream matches the Wasm `echo` adapter's: `init` (the requested
/// model and cwd, no tools), one `text_delta` per word (each keeping its
/// trailing space, so the deltas concatenate to the prompt), `text` with
/// the whole prompt, and `done` success with the prompt as result and zero
/// tool uses. Interrupted, it ends at once with `done` interrupted.
#[derive(Debug, Clone)]
pub struct NativeEcho {
    info: AdapterInfo,
}

impl Default for NativeEcho {
    fn default() -> Self {
        Self::new()
    }
}

impl NativeEcho {
    /// The echo adapter under the name `echo`.
    pub fn new() -> Self {
        Self::named("echo")
    }

    /// The echo adapter under another name (to sit beside the Wasm one).
    pub fn named(name: &str) -> Self {
        Self {
            info: AdapterInfo {
                name: name.to_owned(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "Streams the prompt back (native, in-process)".into(),
                ..AdapterInfo::default()
            },
        }
    }
}

/// A native adapter runs within any scope: it is trusted code of the
/// host process and ignores it.
impl<S: Send + Sync> Adapter<S> for NativeEcho {
    fn info(&self) -> &AdapterInfo {
        &self.info
    }

    fn start<'a>(
        &'a self,
        prompt: &'a str,
        options: &'a RunOptions,
        _limits: &'a RunLimits,
        _scope: &'a S,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
        let mut events = VecDeque::new();
        events.push_back(AdapterEventKind::Init {
            model: options.model.clone(),
            cwd: options.cwd.clone(),
            tools: vec![],
            capabilities: None,
        });
        events.extend(
            prompt
                .split_inclusive(' ')
                .map(|word| AdapterEventKind::TextDelta(word.to_owned())),
        );
        events.push_back(AdapterEventKind::Text(prompt.to_owned()));
        events.push_back(AdapterEventKind::Done(DoneInfo {
            result: Some(prompt.to_owned()),
            ..done_info(DoneStatus::Success)
        }));
        let session: Box<dyn AdapterSession> = Box::new(EchoSession {
            events,
            control: Arc::default(),
        });
        Box::pin(std::future::ready(Ok(session)))
    }
}

#[derive(Default)]
struct EchoControl {
    interrupted: AtomicBool,
    killed: AtomicBool,
}

impl SessionControl for EchoControl {
    fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
    }

    fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }
}

struct EchoSession {
    events: VecDeque<AdapterEventKind>,
    control: Arc<EchoControl>,
}

impl AdapterSession for EchoSession {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<AdapterEvent>, SessionFailure>> {
        let result = if self.control.killed.load(Ordering::SeqCst) {
            Err(SessionFailure::Killed)
        } else if self.control.interrupted.load(Ordering::SeqCst) && !self.events.is_empty() {
            self.events.clear();
            Ok(Some(AdapterEvent::new(AdapterEventKind::Done(done_info(
                DoneStatus::Interrupted,
            )))))
        } else {
            Ok(self.events.pop_front().map(AdapterEvent::new))
        };
        Box::pin(std::future::ready(result))
    }

    fn control(&self) -> Arc<dyn SessionControl> {
        Arc::clone(&self.control) as Arc<dyn SessionControl>
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// What each [`NativeFlood`] event carries, as the `flood` testing
/// component's do (adapters/testing/flood).
const FLOOD_DELTA: &str = "x";

/// The native twin of the `flood` testing component: N `text_delta` "x"
/// events, then `done` success. Events are made one at a time in `next`,
/// as the component makes them, so the baseline holds only the engine's
/// own per-event work (a scripted adapter would add cloning its script).
pub struct NativeFlood {
    info: AdapterInfo,
}

impl Default for NativeFlood {
    fn default() -> Self {
        Self::new()
    }
}

impl NativeFlood {
    /// The flood adapter, named `native-flood`.
    pub fn new() -> Self {
        Self {
            info: AdapterInfo {
                name: "native-flood".into(),
                version: "0.0.0".into(),
                description: "Emits N text deltas (N = prompt), natively".into(),
                ..AdapterInfo::default()
            },
        }
    }
}

impl<S: Send + Sync> Adapter<S> for NativeFlood {
    fn info(&self) -> &AdapterInfo {
        &self.info
    }

    fn start<'a>(
        &'a self,
        prompt: &'a str,
        _options: &'a RunOptions,
        _limits: &'a RunLimits,
        _scope: &'a S,
    ) -> BoxFuture<'a, Result<Box<dyn AdapterSession>, StartError>> {
        let started = match prompt.trim().parse() {
            Ok(remaining) => {
                let session: Box<dyn AdapterSession> = Box::new(FloodSession {
                    remaining,
                    done: false,
                    control: Arc::default(),
                });
                Ok(session)
            }
            Err(_) => Err(StartError::refused(ErrorInfo {
                code: None,
                message: format!("the prompt must be a number of events, not {prompt:?}"),
                recoverable: false,
            })),
        };
        Box::pin(std::future::ready(started))
    }
}

struct FloodSession {
    remaining: u64,
    done: bool,
    control: Arc<FloodControl>,
}

/// Only `kill` matters: the engine kills a session whose run is dropped.
#[derive(Default)]
struct FloodControl {
    killed: AtomicBool,
}

impl SessionControl for FloodControl {
    fn interrupt(&self) {}

    fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }
}

impl AdapterSession for FloodSession {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<AdapterEvent>, SessionFailure>> {
        let result = if self.control.killed.load(Ordering::SeqCst) {
            Err(SessionFailure::Killed)
        } else if self.remaining > 0 {
            self.remaining -= 1;
            let delta = AdapterEventKind::TextDelta(FLOOD_DELTA.to_owned());
            Ok(Some(AdapterEvent::new(delta)))
        } else if !self.done {
            self.done = true;
            let done = AdapterEventKind::Done(done_info(DoneStatus::Success));
            Ok(Some(AdapterEvent::new(done)))
        } else {
            Ok(None)
        };
        Box::pin(std::future::ready(result))
    }

    fn control(&self) -> Arc<dyn SessionControl> {
        Arc::clone(&self.control) as Arc<dyn SessionControl>
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }
}
