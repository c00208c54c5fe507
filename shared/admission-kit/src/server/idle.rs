//! Closes connections that stay silent, and HTTP/1.1 connections whose request head is slow.
//! After the TLS handshake a client has `first` to send its first byte, then the connection may
//! rest at most `idle` between reads and writes: without this a client that completes the
//! handshake and sends nothing holds a connection (and a file descriptor) for ever; enough of
//! them stop the server accepting.
//!
//! Only a read that is waiting can time out: while a review is being decided hyper reads nothing,
//! and the answer's write counts as activity, so slow rules never cut a connection. `idle` should
//! exceed the clients' own idle timeout (the API server's is 90 s), so that the client closes a
//! resting connection first and never sends on one we are closing.
//!
//! On HTTP/1.1 a [`HeadDeadline`] gives each request's head `limit` from its first byte (the
//! slow-header protection). It replaces hyper's header timeout, whose timer also runs while a
//! keep-alive connection waits for its next request, so hyper closed every HTTP/1.1 connection
//! resting longer than the header timeout (10 s), racing the API server, which reuses a resting
//! connection for 90 s.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A connection that fails its pending read once silent for too long.
///
/// Activity only records the time (every read and write of a review pays one clock read); the
/// timer is moved to the real deadline when it fires early, not on each byte.
#[derive(Debug)]
pub struct IdleTimeout<T> {
    inner: T,
    idle: Duration,
    /// When the first byte is due.
    first: Instant,
    /// The last read or write; `None` until the first.
    last: Option<Instant>,
    head: Option<HeadDeadline>,
    deadline: Pin<Box<Sleep>>,
}

/// The time an HTTP/1.1 request head may take from its first byte until the request reaches
/// the service. A byte read while no request is being answered starts a head; the service
/// counts each request it starts ([`HeadDeadline::started`]), which ends the head.
#[derive(Debug)]
pub struct HeadDeadline {
    limit: Duration,
    busy: Arc<AtomicUsize>,
    started: Arc<AtomicU64>,
    /// When the head began being read is due, and the count of requests started then.
    armed: Option<(Instant, u64)>,
}

impl HeadDeadline {
    /// Heads of `limit`, on the connection whose in-flight requests `busy` counts.
    pub fn new(limit: Duration, busy: Arc<AtomicUsize>) -> Self {
        Self {
            limit,
            busy,
            started: Arc::new(AtomicU64::new(0)),
            armed: None,
        }
    }

    /// The counter the service increments as each request starts.
    pub fn started(&self) -> Arc<AtomicU64> {
        self.started.clone()
    }

    /// The deadline of the head being read, if one is.
    fn due(&self) -> Option<Instant> {
        self.armed
            .filter(|(_, n)| *n == self.started.load(Ordering::Acquire))
            .map(|(t, _)| t)
    }

    /// Bytes arrived: they start a head unless a request is being answered or a head is
    /// already being read. Returns the new deadline.
    fn on_bytes(&mut self, now: Instant) -> Option<Instant> {
        if self.busy.load(Ordering::Acquire) > 0 || self.due().is_some() {
            return None;
        }
        let due = now + self.limit;
        self.armed = Some((due, self.started.load(Ordering::Acquire)));
        Some(due)
    }
}

impl<T> IdleTimeout<T> {
    /// `first` for the first byte, then `idle` after each read or write.
    pub fn new(inner: T, first: Duration, idle: Duration) -> Self {
        let due = Instant::now() + first;
        Self {
            inner,
            idle,
            first: due,
            last: None,
            head: None,
            deadline: Box::pin(tokio::time::sleep_until(due)),
        }
    }

    /// Also bounds each HTTP/1.1 request head (see [`HeadDeadline`]).
    pub fn with_head_deadline(mut self, head: HeadDeadline) -> Self {
        self.head = Some(head);
        self
    }

    fn touch(&mut self) {
        self.last = Some(Instant::now());
    }

    /// Bytes were read: records the activity and starts a request head's deadline if one
    /// begins (moving the timer earlier when it falls before it).
    fn on_read(&mut self) {
        let now = Instant::now();
        self.last = Some(now);
        if let Some(due) = self.head.as_mut().and_then(|h| h.on_bytes(now))
            && due < self.deadline.deadline()
        {
            self.deadline.as_mut().reset(due);
        }
    }

    /// The earliest of the idle deadline and the deadline of a head being read.
    fn due(&self) -> Instant {
        let quiet = self.last.map_or(self.first, |t| t + self.idle);
        match self.head.as_ref().and_then(HeadDeadline::due) {
            Some(head) => quiet.min(head),
            None => quiet,
        }
    }

    /// Ready once the connection has been silent too long or a head took too long; re-arms
    /// the timer when activity since it was set moved the deadline.
    fn poll_silent(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let due = self.due();
            if due > self.deadline.deadline() {
                self.deadline.as_mut().reset(due);
            } else {
                return Poll::Ready(());
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.on_read();
                }
                Poll::Ready(r)
            }
            Poll::Pending => match self.poll_silent(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection silent, or a request head slow, for too long",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_fails_its_read_and_activity_keeps_it() {
        let (client, server) = tokio::io::duplex(64);
        let mut conn = IdleTimeout::new(server, Duration::from_secs(10), Duration::from_secs(120));
        let mut client = client;
        client.write_all(b"a").await.unwrap();
        let mut buf = [0u8; 1];
        conn.read_exact(&mut buf).await.unwrap();
        // Activity moved the deadline to 120 s: a byte at 100 s is still read.
        tokio::time::sleep(Duration::from_secs(100)).await;
        client.write_all(b"b").await.unwrap();
        conn.read_exact(&mut buf).await.unwrap();
        // Then silence: the waiting read fails after 120 s.
        let started = Instant::now();
        let err = conn.read_exact(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(120));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_head_has_its_limit_from_its_first_byte_and_resting_is_not_a_head() {
        let (mut client, server) = tokio::io::duplex(64);
        let busy = Arc::new(AtomicUsize::new(0));
        let head = HeadDeadline::new(Duration::from_secs(10), busy.clone());
        let started = head.started();
        let mut conn = IdleTimeout::new(server, Duration::from_secs(10), Duration::from_secs(120))
            .with_head_deadline(head);
        let mut buf = [0u8; 1];
        // A request whose head completes in time: the service starts it and answers.
        client.write_all(b"a").await.unwrap();
        conn.read_exact(&mut buf).await.unwrap();
        tokio::time::sleep(Duration::from_secs(9)).await;
        client.write_all(b"b").await.unwrap();
        conn.read_exact(&mut buf).await.unwrap();
        started.fetch_add(1, Ordering::AcqRel);
        // Resting 60 s between requests (beyond the head limit) keeps the connection.
        tokio::time::sleep(Duration::from_secs(60)).await;
        client.write_all(b"c").await.unwrap();
        conn.read_exact(&mut buf).await.unwrap();
        // The next head never completes: its read fails 10 s after its first byte.
        let began = Instant::now();
        let err = conn.read_exact(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(began.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_read_while_a_request_is_answered_start_no_head() {
        let (mut client, server) = tokio::io::duplex(64);
        let busy = Arc::new(AtomicUsize::new(1));
        let head = HeadDeadline::new(Duration::from_secs(10), busy.clone());
        let mut conn = IdleTimeout::new(server, Duration::from_secs(10), Duration::from_secs(120))
            .with_head_deadline(head);
        let mut buf = [0u8; 1];
        client.write_all(b"a").await.unwrap();
        conn.read_exact(&mut buf).await.unwrap();
        // A body read slowly inside a request is the handler's to bound: only idleness here.
        let began = Instant::now();
        let err = conn.read_exact(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(began.elapsed(), Duration::from_secs(120));
    }

    #[tokio::test(start_paused = true)]
    async fn no_first_byte_within_the_first_timeout() {
        let (_client, server) = tokio::io::duplex(64);
        let mut conn = IdleTimeout::new(server, Duration::from_secs(10), Duration::from_secs(120));
        let started = Instant::now();
        let mut buf = [0u8; 1];
        let err = conn.read_exact(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }
}
