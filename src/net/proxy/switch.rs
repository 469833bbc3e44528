//! The fault's switch: off or on, turned by SIGUSR1 and SIGUSR2, the live
//! view's key or the control endpoint, idempotently. Turning it does to
//! the connections what the fault asks for when it is given to every
//! request: `stall` and `blackhole` close the gate (nothing accepted,
//! read or written), `blackhole` shrinks the listen queue to one
//! connection as well, and `reset` resets every open connection (the
//! accept loop resets the new ones).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Notify, watch};

use super::gate::Gate;
use crate::model::fault::Fault;
use crate::net::backlog::AcceptQueue;
use crate::report::proxy::ProxyRecorder;

/// The fault, whether it is on, and what it acts on.
pub struct Switch {
    fault: Fault,
    on: watch::Sender<bool>,
    gate: Gate,
    queue: Arc<AcceptQueue>,
    backlog: u32,
    /// What resets each open client connection.
    open: Mutex<HashMap<u64, Weak<Notify>>>,
    next: AtomicU64,
    recorder: Arc<ProxyRecorder>,
}

/// A connection known to the switch until this is dropped.
pub(super) struct Registered {
    switch: Arc<Switch>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.switch.connections().remove(&self.id);
    }
}

impl Switch {
    /// The switch of `fault`, off, acting on the listening socket of
    /// `queue`, whose listen backlog is `backlog`.
    pub(super) fn new(
        fault: Fault,
        queue: Arc<AcceptQueue>,
        backlog: u32,
        recorder: Arc<ProxyRecorder>,
    ) -> Arc<Switch> {
        recorder.set_faulted(false);
        Arc::new(Switch {
            fault,
            on: watch::Sender::new(false),
            gate: Gate::new(),
            queue,
            backlog,
            open: Mutex::default(),
            next: AtomicU64::new(0),
            recorder,
        })
    }

    /// The fault.
    pub fn fault(&self) -> Fault {
        self.fault
    }

    /// Whether the fault is on.
    pub fn is_on(&self) -> bool {
        *self.on.borrow()
    }

    /// Turns the fault on or off; nothing happens if it is so already.
    /// Says whether it changed.
    pub fn turn(&self, on: bool) -> bool {
        let changed = self.on.send_if_modified(|now| {
            let changed = *now != on;
            *now = on;
            changed
        });
        if !changed {
            return false;
        }
        self.recorder.set_faulted(on);
        let f = self.fault;
        // On: first nothing accepted, then the queue shrunk; off: the
        // queue first, then accepting again.
        if on {
            if f.stops_connections() {
                self.gate.close();
            }
            if f.shuts_listen_queue() {
                self.resize_queue(0);
            }
            if f.resets_connections() {
                for reset in self.connections().values().filter_map(Weak::upgrade) {
                    reset.notify_one();
                }
            }
        } else {
            if f.shuts_listen_queue() {
                self.resize_queue(self.backlog);
            }
            if f.stops_connections() {
                self.gate.open();
            }
        }
        true
    }

    /// Turns the fault off if it is on, on if it is off.
    pub fn toggle(&self) {
        self.turn(!self.is_on());
    }

    fn resize_queue(&self, backlog: u32) {
        if let Err(e) = self.queue.resize(backlog) {
            eprintln!("warning: cannot set the listen backlog to {backlog}: {e}");
        }
    }

    /// The gate of every client connection.
    pub(super) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Watches the switch: the value is whether the fault is on.
    pub(super) fn watch(&self) -> watch::Receiver<bool> {
        self.on.subscribe()
    }

    /// Waits until the fault is off.
    pub(super) async fn off(&self) {
        let mut on = self.watch();
        // The sender lives as long as the switch.
        let _ = on.wait_for(|on| !*on).await;
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<Notify>>> {
        self.open.lock().expect("switch lock poisoned")
    }

    /// Knows a connection from now on, until the returned guard is
    /// dropped: `reset` is notified to reset it.
    pub(super) fn register(self: &Arc<Self>, reset: &Arc<Notify>) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.connections().insert(id, Arc::downgrade(reset));
        Registered {
            switch: self.clone(),
            id,
        }
    }
}
