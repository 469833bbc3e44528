//! A pool whose requests wait in the listen backlog, on the real network:
//! a worker is taken before a connection is accepted and given back when
//! its request leaves the model, so that the connections beyond the free
//! workers wait in the kernel's accept queue (and beyond it, their SYNs are
//! dropped), as they do in front of gunicorn's sync workers. The accept
//! queue's length is read back from the kernel for the report.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use nix::libc;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A free worker, taken before its connection is accepted. Dropped (given
/// back) when the request it serves leaves the model, or with its
/// connection if no request of it reached the model.
pub type Worker = OwnedSemaphorePermit;

/// The pool's workers, as the accept loop waits for them.
#[derive(Debug, Clone)]
pub struct Workers(Arc<Semaphore>);

impl Workers {
    /// `count` workers, all free.
    pub fn new(count: u32) -> Workers {
        Workers(Arc::new(Semaphore::new(count as usize)))
    }

    /// Waits for a free worker.
    pub async fn free(&self) -> Worker {
        self.0
            .clone()
            .acquire_owned()
            .await
            .expect("the workers' semaphore is never closed")
    }
}

/// The listening socket's accept queue, read from the kernel
/// (`TCP_INFO`: for a listener, `tcpi_unacked` is the connections waiting
/// to be accepted). It holds its own descriptor of the socket, so it can
/// be read until the model's last report.
#[derive(Debug)]
pub struct AcceptQueue {
    fd: OwnedFd,
}

impl AcceptQueue {
    /// The accept queue of `listener`.
    pub fn of(listener: &TcpListener) -> io::Result<AcceptQueue> {
        Ok(AcceptQueue {
            fd: listener.as_fd().try_clone_to_owned()?,
        })
    }

    /// Connections waiting to be accepted now, if the kernel says.
    pub fn waiting(&self) -> Option<u64> {
        tcp_info(&self.fd).map(|info| u64::from(info.tcpi_unacked))
    }

    /// Calls listen(2) on the socket again, with `backlog`: Linux then
    /// queues at most `backlog` connections (one with 0) and drops the
    /// SYNs of any more; those queued already stay.
    pub fn resize(&self, backlog: u32) -> io::Result<()> {
        let backlog = libc::c_int::try_from(backlog).unwrap_or(libc::c_int::MAX);
        // SAFETY: the descriptor is ours and open; listen only reads it.
        let status = unsafe { libc::listen(self.fd.as_raw_fd(), backlog) };
        if status == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// The kernel's `TCP_INFO` of a TCP socket, if it gives it.
pub fn tcp_info(socket: &impl AsRawFd) -> Option<libc::tcp_info> {
    // SAFETY: `tcp_info` is plain data, written by the kernel up to `len`
    // bytes, and the descriptor is open for the borrow's length.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let status = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (status == 0).then_some(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::accept::listen;

    /// Connections nobody accepts wait in the queue the kernel reports;
    /// accepting one takes it out.
    #[tokio::test(flavor = "current_thread")]
    async fn the_kernel_reports_the_connections_waiting_to_be_accepted() {
        let listener = listen("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        let queue = AcceptQueue::of(&listener).unwrap();
        assert_eq!(queue.waiting(), Some(0));
        let addr = listener.local_addr().unwrap();
        let clients: Vec<_> = (0..3)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        assert_eq!(queue.waiting(), Some(3));
        let (accepted, _) = listener.accept().await.unwrap();
        assert_eq!(queue.waiting(), Some(2));
        drop((accepted, clients));
    }

    /// A queue of none holds one connection; the next is not completed.
    #[tokio::test(flavor = "current_thread")]
    async fn a_queue_resized_to_none_holds_one_connection() {
        let listener = listen("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        let queue = AcceptQueue::of(&listener).unwrap();
        queue.resize(0).unwrap();
        let addr = listener.local_addr().unwrap();
        let first = tokio::net::TcpStream::connect(addr).await.unwrap();
        assert_eq!(queue.waiting(), Some(1));
        let second = tokio::net::TcpStream::connect(addr);
        let bound = std::time::Duration::from_millis(300);
        assert!(
            tokio::time::timeout(bound, second).await.is_err(),
            "its SYN is dropped"
        );
        queue.resize(16).unwrap();
        let third = tokio::net::TcpStream::connect(addr).await.unwrap();
        assert_eq!(queue.waiting(), Some(2));
        drop((first, third));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_worker_given_back_frees_the_next() {
        let workers = Workers::new(1);
        let first = workers.free().await;
        let mut next = std::pin::pin!(workers.free());
        assert!(futures_poll(&mut next).is_none(), "none free");
        drop(first);
        assert!(futures_poll(&mut next).is_some(), "given back");
    }

    /// Polls a future once.
    fn futures_poll<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match std::pin::Pin::new(f).poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }
}
