//! Closes connections that stay silent. After the TLS handshake a client has `first` to send its
//! first byte, then the connection may rest at most `idle` between reads and writes. hyper's
//! header timeout starts only at a request's first byte, so without this a client that completes
//! the handshake and sends nothing holds a connection (and a file descriptor) for ever; enough of
//! them stop the server accepting.
//!
//! Only a read that is waiting can time out: while a review is being decided hyper reads nothing,
//! and the answer's write counts as activity, so slow rules never cut a connection. `idle` should
//! exceed the clients' own idle timeout (the API server's is 90 s), so that the client closes a
//! resting connection first and never sends on one we are closing. (HTTP/1.1 keep-alive
//! connections are closed sooner by hyper, whose header timer runs while a connection waits for
//! its next request.)

use std::io;
use std::pin::Pin;
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
    /// The last read or write; `None` until the first.
    last: Option<Instant>,
    deadline: Pin<Box<Sleep>>,
}

impl<T> IdleTimeout<T> {
    /// `first` for the first byte, then `idle` after each read or write.
    pub fn new(inner: T, first: Duration, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            last: None,
            deadline: Box::pin(tokio::time::sleep(first)),
        }
    }

    fn touch(&mut self) {
        self.last = Some(Instant::now());
    }

    /// Ready once the connection has been silent too long; re-arms the timer when activity
    /// since it was set moved the deadline.
    fn poll_silent(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            match self.last.map(|t| t + self.idle) {
                Some(due) if due > self.deadline.deadline() => self.deadline.as_mut().reset(due),
                _ => return Poll::Ready(()),
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
                    self.touch();
                }
                Poll::Ready(r)
            }
            Poll::Pending => match self.poll_silent(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection silent for too long",
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
