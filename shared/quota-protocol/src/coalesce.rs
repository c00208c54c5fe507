//! One write per gRPC call on the client's connection to quota-state.
//!
//! h2 writes a client call's frames as they become ready, flushing after each: the HEADERS
//! frame, then (once the stream has flow-control capacity, which h2 assigns only after HEADERS
//! left its queue) the DATA frame, then often an empty DATA frame carrying END_STREAM. On
//! loopback in the bench that was 2 to 3 `writev`s per `AdmitPods` call, each running the
//! receiver's network stack and waking it (`strace` of the webhook under the suite's load); on
//! this VM a send is the dearest step of the hop. [`Coalesced`] buffers what h2 writes and,
//! when h2 flushes, first lets every task that is already ready run, twice over (as
//! [`tokio::task::yield_now`] does), so that the call's remaining frames join the buffer and
//! leave in one write: after one turn the DATA frame has joined, and the END_STREAM frame of a
//! batch of several pods came one turn later still (1.5 sends a call with one turn, 1.0 with
//! two). Nothing waits on a timer: a lone frame goes out two scheduler turns later.
//!
//! Hand-written because tokio's `BufWriter` (which does the buffering here) flushes when asked,
//! and neither h2, hyper nor tonic has a setting to hold frames back until the call is whole.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, BufWriter, ReadBuf};

/// Room for a batch of 64 pods' frames: an `AdmitPods` call stays one write.
const CAPACITY: usize = 32 * 1024;

/// Scheduler turns a flush waits for more frames (see the module's note).
const TURNS: u8 = 2;

/// A connection whose writes are held until a flush, and whose flushes wait for the tasks
/// already ready ([`TURNS`] scheduler turns).
#[derive(Debug)]
pub struct Coalesced<IO> {
    io: BufWriter<IO>,
    /// Turns this flush has let the ready tasks run.
    yielded: u8,
}

impl<IO: AsyncWrite> Coalesced<IO> {
    /// Wraps a connection.
    pub fn new(io: IO) -> Self {
        Self {
            io: BufWriter::with_capacity(CAPACITY, io),
            yielded: 0,
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Coalesced<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Coalesced<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.yielded < TURNS && !self.io.buffer().is_empty() {
            self.yielded += 1;
            // Polled once, yield_now defers this task's wake until the tasks already ready
            // have run, and answers Pending; the future itself holds nothing.
            if std::pin::pin!(tokio::task::yield_now())
                .poll(cx)
                .is_pending()
            {
                return Poll::Pending;
            }
        }
        ready!(Pin::new(&mut self.io).poll_flush(cx))?;
        self.yielded = 0;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::io::AsyncWriteExt;

    /// Records each write it is given, and answers `Pending` to the first attempt of every
    /// other one, as a socket with a full send buffer does.
    #[derive(Clone, Default)]
    struct Recorder {
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
        stalls: bool,
        /// Whether the last attempt was answered `Pending`.
        stalled: bool,
    }

    impl AsyncRead for Recorder {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            if self.stalls {
                self.stalled = !self.stalled;
                if self.stalled {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            }
            self.writes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn written(r: &Recorder) -> Vec<Vec<u8>> {
        r.writes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Writes what is queued, then flushes, as h2's connection task does each time it is
    /// polled (from the top: frames queued meanwhile are written before the flush goes on).
    /// Each poll first signals `polled`, as h2's connection hands a stream capacity to send.
    fn poll_conn(
        c: &mut Coalesced<Recorder>,
        queue: &Mutex<Vec<&'static [u8]>>,
        polled: &tokio::sync::watch::Sender<u32>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        polled.send_modify(|n| *n += 1);
        let frames: Vec<_> = queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for frame in frames {
            // Frames far below the capacity: the buffer takes them whole.
            let n = ready!(Pin::new(&mut *c).poll_write(cx, frame))?;
            assert_eq!(n, frame.len());
        }
        Pin::new(c).poll_flush(cx)
    }

    /// The frames of a call go out in one write: HEADERS, then DATA from a task that was
    /// ready when the connection flushed, then END_STREAM, which that task queues only after
    /// the connection was polled again (in h2 the end of a body waits for the capacity the
    /// connection assigns). With one turn the END_STREAM frame misses the write, as it did
    /// under load; with none, the DATA frame too.
    #[tokio::test(flavor = "current_thread")]
    async fn a_calls_frames_leave_in_one_write() {
        let rec = Recorder::default();
        let queue: Arc<Mutex<Vec<&'static [u8]>>> = Arc::new(Mutex::new(vec![b"HEADERS"]));
        // The connection's polls, counted; closed when the connection task ends.
        let (polled, mut polls) = tokio::sync::watch::channel(0u32);
        let push = |q: &Mutex<Vec<&'static [u8]>>, frame: &'static [u8]| {
            q.lock().unwrap_or_else(|p| p.into_inner()).push(frame);
        };
        let conn = tokio::spawn({
            let (rec, queue) = (rec.clone(), queue.clone());
            async move {
                let mut c = Coalesced::new(rec);
                std::future::poll_fn(|cx| poll_conn(&mut c, &queue, &polled, cx)).await?;
                // What came after the flush, written by a later poll.
                std::future::poll_fn(|cx| poll_conn(&mut c, &queue, &polled, cx)).await
            }
        });
        // Spawned after the connection task: it runs once the connection has flushed.
        let body = tokio::spawn({
            let queue = queue.clone();
            async move {
                polls.borrow_and_update();
                push(&queue, b"DATA");
                // The connection's next poll (or its end, when it did not wait for this).
                let _ = polls.changed().await;
                push(&queue, b"END");
            }
        });
        body.await.unwrap();
        conn.await.unwrap().unwrap();
        assert_eq!(written(&rec), vec![b"HEADERSDATAEND".to_vec()]);
    }

    /// Whatever the socket does, every byte arrives, in order, and a flush returns only once
    /// the bytes are written.
    #[tokio::test(flavor = "current_thread")]
    async fn every_byte_arrives_in_order_through_a_stalling_socket() {
        let rec = Recorder {
            stalls: true,
            ..Recorder::default()
        };
        let mut c = Coalesced::new(rec.clone());
        let mut sent = Vec::new();
        for i in 0..200u32 {
            // Some writes above the buffer's capacity, which go around it.
            let chunk = vec![(i % 251) as u8; if i % 50 == 0 { CAPACITY + 7 } else { 97 }];
            c.write_all(&chunk).await.unwrap();
            sent.extend_from_slice(&chunk);
            if i % 3 == 0 {
                c.flush().await.unwrap();
                assert_eq!(written(&rec).concat(), sent);
            }
        }
        c.shutdown().await.unwrap();
        assert_eq!(written(&rec).concat(), sent);
    }

    /// A flush with nothing buffered answers at once (no turn is spent).
    #[tokio::test(flavor = "current_thread")]
    async fn an_empty_flush_does_not_yield() {
        let mut c = Coalesced::new(Recorder::default());
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(
            Pin::new(&mut c).poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
    }
}
