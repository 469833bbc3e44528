//! The gate that stops a proxy as SIGSTOP stops a process, as its clients
//! see it: while it is closed, nothing is read from or written to any
//! client connection ([`Gated`]), so that requests stay unread in the
//! kernel's buffers and answers wait unwritten, and no timer of the
//! proxy's runs out on a connection meanwhile. Opening it wakes every
//! connection that waited at it.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A gate shared by every client connection: open, or closed. Cheap to
/// clone: clones are the same gate.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    closed: AtomicBool,
    /// Who waits at the gate, by the key of their side of a connection.
    waiting: Mutex<HashMap<u64, Waker>>,
    /// The next connection's keys: two each, one a side.
    next: AtomicU64,
}

impl Gate {
    /// An open gate.
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Closes the gate: every read and write through it waits from now
    /// on.
    pub fn close(&self) {
        self.0.closed.store(true, Ordering::SeqCst);
    }

    /// Opens the gate and wakes everyone who waited at it.
    pub fn open(&self) {
        self.0.closed.store(false, Ordering::SeqCst);
        let waiting = std::mem::take(&mut *self.waiting());
        for waker in waiting.into_values() {
            waker.wake();
        }
    }

    /// Whether the gate is open now.
    pub fn is_open(&self) -> bool {
        !self.0.closed.load(Ordering::SeqCst)
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waker>> {
        self.0.waiting.lock().expect("gate lock poisoned")
    }

    /// Ready once the gate is open; until then the task of `cx` waits,
    /// registered under `key`. It registers first and looks at the gate
    /// after, so that an opening between the two is never missed.
    fn poll_open(&self, key: u64, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_open() {
            return Poll::Ready(());
        }
        {
            let mut waiting = self.waiting();
            match waiting.get_mut(&key) {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                Some(waker) => waker.clone_from(cx.waker()),
                None => {
                    waiting.insert(key, cx.waker().clone());
                }
            }
        }
        if self.is_open() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Forgets whoever waits under `key`.
    fn forget(&self, key: u64) {
        self.waiting().remove(&key);
    }
}

/// An I/O object whose every read, write, flush and shutdown waits while
/// its gate is closed.
#[derive(Debug)]
pub struct Gated<T> {
    inner: T,
    gate: Gate,
    /// The key of its reads; its writes' is the next.
    key: u64,
}

impl<T> Gated<T> {
    /// `inner` behind `gate`.
    pub fn new(inner: T, gate: Gate) -> Gated<T> {
        let key = gate.0.next.fetch_add(2, Ordering::Relaxed);
        Gated { inner, gate, key }
    }

    /// What is behind the gate.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T> Drop for Gated<T> {
    fn drop(&mut self) {
        self.gate.forget(self.key);
        self.gate.forget(self.key + 1);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Gated<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        ready!(self.gate.poll_open(self.key, cx));
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Gated<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.gate.poll_open(self.key + 1, cx));
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.gate.poll_open(self.key + 1, cx));
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.gate.poll_open(self.key + 1, cx));
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.gate.poll_open(self.key + 1, cx));
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn woken(count: &Arc<Count>) -> usize {
        count.0.load(Ordering::SeqCst)
    }

    fn read_once<T: AsyncRead + Unpin>(io: &mut T, cx: &mut Context<'_>) -> Poll<Vec<u8>> {
        let mut bytes = [0u8; 16];
        let mut buf = ReadBuf::new(&mut bytes);
        match Pin::new(io).poll_read(cx, &mut buf) {
            Poll::Ready(r) => {
                r.unwrap();
                Poll::Ready(buf.filled().to_vec())
            }
            Poll::Pending => Poll::Pending,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_closed_gate_holds_reads_and_writes_and_opening_it_wakes_them() {
        let gate = Gate::new();
        let (near, mut far) = duplex(64);
        let mut gated = Gated::new(near, gate.clone());
        // Bytes wait to be read, and room waits to be written to.
        far.write_all(b"request").await.unwrap();
        gate.close();
        let (reader, writer) = (Arc::new(Count::default()), Arc::new(Count::default()));
        let read_waker = Waker::from(reader.clone());
        let write_waker = Waker::from(writer.clone());
        assert!(read_once(&mut gated, &mut Context::from_waker(&read_waker)).is_pending());
        let mut cx = Context::from_waker(&write_waker);
        assert!(
            Pin::new(&mut gated)
                .poll_write(&mut cx, b"answer")
                .is_pending()
        );
        assert!(Pin::new(&mut gated).poll_flush(&mut cx).is_pending());
        assert!(Pin::new(&mut gated).poll_shutdown(&mut cx).is_pending());
        // Polled again while closed: still held, nothing woken, and the
        // far end has received nothing.
        assert!(read_once(&mut gated, &mut Context::from_waker(&read_waker)).is_pending());
        assert_eq!((woken(&reader), woken(&writer)), (0, 0));
        let mut nothing = [0u8; 8];
        let mut far_cx = Context::from_waker(Waker::noop());
        let mut far_buf = ReadBuf::new(&mut nothing);
        assert!(
            Pin::new(&mut far)
                .poll_read(&mut far_cx, &mut far_buf)
                .is_pending()
        );
        // Opening wakes both sides once, and they go through.
        gate.open();
        assert_eq!((woken(&reader), woken(&writer)), (1, 1));
        let read = read_once(&mut gated, &mut Context::from_waker(&read_waker));
        assert_eq!(read, Poll::Ready(b"request".to_vec()));
        gated.write_all(b"answer").await.unwrap();
        let mut answer = [0u8; 6];
        far.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"answer");
        // Opened again, nobody waits: no stale wake-up.
        gate.open();
        assert_eq!((woken(&reader), woken(&writer)), (1, 1));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn one_gate_holds_every_connection_and_a_dropped_one_is_forgotten() {
        let gate = Gate::new();
        gate.close();
        let counts: Vec<Arc<Count>> = (0..3).map(|_| Arc::new(Count::default())).collect();
        let mut ends = Vec::new();
        for count in &counts {
            let (near, far) = duplex(8);
            let mut gated = Gated::new(near, gate.clone());
            let waker = Waker::from(count.clone());
            assert!(read_once(&mut gated, &mut Context::from_waker(&waker)).is_pending());
            ends.push((gated, far));
        }
        // Polled again by the same task: one registration, not two.
        let waker = Waker::from(counts[0].clone());
        assert!(read_once(&mut ends[0].0, &mut Context::from_waker(&waker)).is_pending());
        assert_eq!(gate.waiting().len(), 3);
        drop(ends.pop());
        assert_eq!(gate.waiting().len(), 2, "a dropped connection is forgotten");
        gate.open();
        let woken: Vec<usize> = counts.iter().map(woken).collect();
        assert_eq!(woken, [1, 1, 0]);
        assert!(gate.waiting().is_empty());
    }

    #[test]
    fn an_open_gate_lets_everything_through_at_once() {
        let gate = Gate::new();
        assert!(gate.is_open());
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(gate.poll_open(0, &mut cx), Poll::Ready(()));
        assert!(gate.waiting().is_empty());
        gate.close();
        assert!(!gate.is_open());
    }
}
