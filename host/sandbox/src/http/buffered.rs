//! A response body read ahead by the connection's own task.
//!
//! hyper hands a response body over one chunk at a time, and only when the
//! reader asks for the next: every chunk is a round trip between the
//! guest's thread and the connection's task, two thread wake-ups even when
//! the socket already holds the rest. A server that writes each SSE event
//! on its own (as the LLM vendors stream) made that the main cost of
//! reading it.
//!
//! Here the connection's task also reads the body ([`pump`]), into a
//! buffer of at most [`READ_AHEAD_BYTES`] that the guest's side
//! ([`BufferedBody`]) empties in one frame: whatever arrived since the last
//! read, however many chunks it came in. The guest's thread is woken only
//! when it waits on an empty buffer, the connection's task only when it
//! waits on a full one. A full buffer stops reading from the socket, so a
//! slow guest still slows the server down (TCP flow control), and holds at
//! most the bound plus one chunk.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame};
use wasmtime_wasi_http::Error as HttpError;

/// Most bytes read ahead of the guest before the connection stops reading.
pub(super) const READ_AHEAD_BYTES: usize = 64 * 1024;

/// What a response body upstream of the buffer must offer: its frames, and
/// a restart of its wait for the server after the buffer held it back.
pub(super) trait Upstream: Body<Data = Bytes, Error = HttpError> + Unpin {
    /// The buffer was full and did not ask for frames: time spent so is the
    /// guest's, not the server's, so a wait for the server starts afresh.
    fn resume(&mut self);
}

/// A buffered body: the guest's side, and the pump that fills it.
pub(super) fn buffered<B: Upstream>(upstream: B) -> (BufferedBody, impl Future<Output = ()>) {
    let shared = Arc::new(Shared::default());
    let body = BufferedBody {
        shared: shared.clone(),
        ended: false,
    };
    (body, pump(upstream, shared))
}

/// How the body ended, as the guest will read it after the data.
enum End {
    /// Every frame arrived; the trailers, if any, are still to be read.
    Finished(Option<HeaderMap>),
    /// The body failed.
    Failed(HttpError),
}

#[derive(Default)]
struct State {
    data: BytesMut,
    end: Option<End>,
    /// The guest's side waits for data.
    reader: Option<Waker>,
    /// The pump waits for room.
    pump: Option<Waker>,
    /// The pump waits for the server: woken only when the guest's side is
    /// dropped, so a stalled server does not keep the pump.
    pump_upstream: Option<Waker>,
    /// The guest dropped its side: nothing more is read.
    reader_gone: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock leaves plain data behind.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Reads `upstream` into the buffer until it ends, fails or the guest's
/// side is dropped.
async fn pump<B: Upstream>(mut upstream: B, shared: Arc<Shared>) {
    let mut held_back = false;
    std::future::poll_fn(move |cx| {
        loop {
            {
                let mut state = shared.lock();
                if state.reader_gone {
                    return Poll::Ready(());
                }
                if state.data.len() >= READ_AHEAD_BYTES {
                    state.pump = Some(cx.waker().clone());
                    held_back = true;
                    return Poll::Pending;
                }
            }
            if std::mem::take(&mut held_back) {
                upstream.resume();
            }
            let Poll::Ready(frame) = Pin::new(&mut upstream).poll_frame(cx) else {
                let mut state = shared.lock();
                if state.reader_gone {
                    return Poll::Ready(());
                }
                state.pump_upstream = Some(cx.waker().clone());
                return Poll::Pending;
            };
            let mut state = shared.lock();
            let ended = match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        state.data.extend_from_slice(&data);
                        None
                    }
                    Err(frame) => Some(End::Finished(frame.into_trailers().ok())),
                },
                None => Some(End::Finished(None)),
                Some(Err(error)) => Some(End::Failed(error)),
            };
            let done = ended.is_some();
            if done {
                state.end = ended;
            }
            if let Some(reader) = state.reader.take() {
                reader.wake();
            }
            if done {
                return Poll::Ready(());
            }
        }
    })
    .await
}

/// The guest's side of a buffered body: each frame is everything the
/// connection read since the last one.
pub(super) struct BufferedBody {
    shared: Arc<Shared>,
    /// Its end was read.
    ended: bool,
}

impl Body for BufferedBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let mut state = this.shared.lock();
        if !state.data.is_empty() {
            let data = state.data.split().freeze();
            if let Some(pump) = state.pump.take() {
                pump.wake();
            }
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        match state.end.take() {
            None => {
                state.reader = Some(cx.waker().clone());
                Poll::Pending
            }
            Some(end) => {
                this.ended = true;
                match end {
                    End::Finished(None) => Poll::Ready(None),
                    End::Finished(Some(trailers)) => {
                        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
                    }
                    End::Failed(error) => Poll::Ready(Some(Err(error))),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

impl Drop for BufferedBody {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.reader_gone = true;
        for pump in [state.pump.take(), state.pump_upstream.take()]
            .into_iter()
            .flatten()
        {
            pump.wake();
        }
    }
}

#[cfg(test)]
mod tests;
