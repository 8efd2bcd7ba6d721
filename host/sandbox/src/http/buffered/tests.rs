use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use futures::channel::mpsc;
use http_body_util::BodyExt;

use super::*;

/// An upstream body fed by the test, frame by frame.
struct Fed {
    frames: mpsc::UnboundedReceiver<Result<Frame<Bytes>, HttpError>>,
    /// Frames handed out.
    taken: Arc<AtomicUsize>,
    resumed: Arc<AtomicUsize>,
}

impl Body for Fed {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self.get_mut();
        let frame = std::task::ready!(this.frames.poll_next_unpin(cx));
        if frame.is_some() {
            this.taken.fetch_add(1, Ordering::SeqCst);
        }
        Poll::Ready(frame)
    }
}

impl Upstream for Fed {
    fn resume(&mut self) {
        self.resumed.fetch_add(1, Ordering::SeqCst);
    }
}

struct Feed {
    sender: mpsc::UnboundedSender<Result<Frame<Bytes>, HttpError>>,
    taken: Arc<AtomicUsize>,
    resumed: Arc<AtomicUsize>,
}

impl Feed {
    fn data(&self, bytes: &[u8]) {
        self.sender
            .unbounded_send(Ok(Frame::data(Bytes::copy_from_slice(bytes))))
            .expect("the pump is running");
    }
}

fn fed() -> (Feed, Fed) {
    let (sender, frames) = mpsc::unbounded();
    let (taken, resumed) = (Arc::default(), Arc::default());
    let feed = Feed {
        sender,
        taken: Arc::clone(&taken),
        resumed: Arc::clone(&resumed),
    };
    (
        feed,
        Fed {
            frames,
            taken,
            resumed,
        },
    )
}

/// Lets the spawned pump take whatever it can.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn chunks_that_arrived_between_two_reads_are_one_frame() {
    let (feed, upstream) = fed();
    let (mut body, pump) = buffered(upstream);
    let pump = tokio::spawn(pump);
    for i in 0..100 {
        feed.data(format!("data: {i}\n\n").as_bytes());
    }
    settle().await;
    let frame = body.frame().await.expect("a frame").expect("data");
    let expected: String = (0..100).map(|i| format!("data: {i}\n\n")).collect();
    assert_eq!(frame.into_data().ok(), Some(Bytes::from(expected)));

    feed.data(b"last");
    drop(feed);
    let frame = body.frame().await.expect("a frame").expect("data");
    assert_eq!(frame.into_data().ok(), Some(Bytes::from_static(b"last")));
    assert!(body.frame().await.is_none(), "then the end");
    assert!(body.is_end_stream());
    pump.await.expect("the pump ends with the body");
}

#[tokio::test]
async fn a_full_buffer_stops_reading_until_the_guest_reads() {
    let (feed, upstream) = fed();
    let (taken, resumed) = (feed.taken.clone(), feed.resumed.clone());
    let (mut body, pump) = buffered(upstream);
    tokio::spawn(pump);
    let chunk = vec![b'x'; 1000];
    let chunks = 4 * READ_AHEAD_BYTES / chunk.len();
    for _ in 0..chunks {
        feed.data(&chunk);
    }
    settle().await;
    // It stops at the first chunk that fills the buffer.
    let held = taken.load(Ordering::SeqCst);
    assert_eq!(held, READ_AHEAD_BYTES.div_ceil(chunk.len()));
    assert_eq!(resumed.load(Ordering::SeqCst), 0);

    let mut read = 0;
    while read < chunks * chunk.len() {
        let frame = body.frame().await.expect("a frame").expect("data");
        let data = frame.into_data().expect("data");
        assert!(
            data.len() <= READ_AHEAD_BYTES + chunk.len(),
            "{}",
            data.len()
        );
        read += data.len();
    }
    assert_eq!(read, chunks * chunk.len(), "nothing lost");
    assert!(
        resumed.load(Ordering::SeqCst) >= 1,
        "the wait for the server restarts after the buffer held it back"
    );
}

#[tokio::test]
async fn trailers_and_failures_come_after_the_data() {
    let (feed, upstream) = fed();
    let (mut body, pump) = buffered(upstream);
    tokio::spawn(pump);
    feed.data(b"some");
    let mut trailers = HeaderMap::new();
    trailers.insert("x-end", "1".parse().expect("a header value"));
    feed.sender
        .unbounded_send(Ok(Frame::trailers(trailers.clone())))
        .expect("running");
    settle().await;
    let data = body.frame().await.expect("a frame").expect("data");
    assert_eq!(data.into_data().ok(), Some(Bytes::from_static(b"some")));
    let end = body.frame().await.expect("a frame").expect("trailers");
    assert_eq!(end.into_trailers().ok(), Some(trailers));
    assert!(body.frame().await.is_none());

    let (feed, upstream) = fed();
    let (mut body, pump) = buffered(upstream);
    tokio::spawn(pump);
    feed.data(b"partial");
    feed.sender
        .unbounded_send(Err(HttpError::ConnectionReadTimeout))
        .expect("running");
    settle().await;
    let data = body.frame().await.expect("a frame").expect("data");
    assert_eq!(data.into_data().ok(), Some(Bytes::from_static(b"partial")));
    let failed = body.frame().await.expect("the failure");
    assert!(
        matches!(failed, Err(HttpError::ConnectionReadTimeout)),
        "{failed:?}"
    );
    assert!(body.frame().await.is_none(), "nothing after a failure");
}

#[tokio::test]
async fn dropping_the_guests_side_ends_the_pump_even_while_the_server_is_silent() {
    for full in [false, true] {
        let (feed, upstream) = fed();
        let (body, pump) = buffered(upstream);
        let pump = tokio::spawn(pump);
        if full {
            for _ in 0..READ_AHEAD_BYTES / 1000 + 1 {
                feed.data(&[b'x'; 1000]);
            }
        }
        settle().await;
        drop(body);
        tokio::time::timeout(std::time::Duration::from_secs(5), pump)
            .await
            .expect("the pump ends")
            .expect("without a panic");
        assert!(
            feed.sender.is_closed(),
            "the upstream body is dropped with the pump"
        );
    }
}
