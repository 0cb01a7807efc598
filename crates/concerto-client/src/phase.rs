//! I/O phases at the cluster's coordinator (IO-SETS): a client asks to
//! begin one, waits until its set's turn comes, does its I/O while a
//! background task renews the grant's lease, and ends it. The servers
//! weigh the application's requests by its set's priority meanwhile.
//!
//! Never a reason to stop: a cluster without a coordinator runs every
//! phase ungated, and so does a client whose coordinator does not answer
//! (with one warning per process), so an application never hangs on the
//! coordinator. Once an answer told the lease, a queued client waits at
//! most half a lease per ask, and a coordinator that has not answered
//! half a lease after that (stopped, not gone: its connection stays up)
//! is taken as silent: within one lease rather than the client's
//! timeout. Phases begun in the next lease run ungated at once, and the
//! one after asks again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use concerto_proto::connection::{ClientError, PhaseAnswer, ServerConnection};
use concerto_proto::Tags;

use crate::FsClient;

/// An I/O phase this client holds (or runs ungated). Ending it
/// ([`IoPhase::end`]) lets the next of its set go; dropping it without
/// ending stops the renewals, and the coordinator gives the turn away
/// when the lease runs out.
pub struct IoPhase {
    client: FsClient,
    /// The coordinator's grant: the priority and the renewing task.
    grant: Option<(f64, tokio::task::JoinHandle<()>)>,
}

impl IoPhase {
    /// The set's priority the coordinator granted; `None` when the phase
    /// runs ungated (no coordinator, or none that answered).
    pub fn priority(&self) -> Option<f64> {
        self.grant.as_ref().map(|(p, _)| *p)
    }

    /// Ends the phase: the coordinator may grant the next of the set.
    pub async fn end(mut self) {
        if let Some((_, renewing)) = self.grant.take() {
            renewing.abort();
            if let Err(e) = self
                .client
                .coordinator_call(|c, tags| async move { c.end_phase(tags).await })
                .await
            {
                warn_once(&format!(
                    "cannot end the I/O phase at the coordinator ({e}); its lease will"
                ));
            }
        }
    }
}

impl Drop for IoPhase {
    fn drop(&mut self) {
        if let Some((_, renewing)) = self.grant.take() {
            renewing.abort();
            // Ended for the caller who forgot, if a runtime is there to
            // do it; the lease covers the rest.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let client = self.client.clone();
                rt.spawn(async move {
                    let _ = client
                        .coordinator_call(|c, tags| async move { c.end_phase(tags).await })
                        .await;
                });
            }
        }
    }
}

/// Said once per process: that phases run ungated, and why.
fn warn_once(why: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!("concerto: {why}; I/O phases run ungated while it does not answer");
    }
}

/// What a client knows of its coordinator: the lease its last answer
/// gave (none before the first), and until when it counts as silent.
#[derive(Default)]
pub(crate) struct CoordinatorWatch {
    lease_ms: AtomicU64,
    silent_until: Mutex<Option<Instant>>,
}

impl CoordinatorWatch {
    fn lease(&self) -> Option<Duration> {
        match self.lease_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    fn heard(&self, lease: Duration) {
        self.lease_ms
            .store(lease.as_millis().max(1) as u64, Ordering::Relaxed);
        *self.silent_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// It failed to answer: silent for a lease (or `otherwise`, before any
    /// answer gave one).
    fn failed(&self, otherwise: Duration) {
        let until = Instant::now() + self.lease().unwrap_or(otherwise);
        *self.silent_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(until);
    }

    fn silent(&self) -> bool {
        let until = *self.silent_until.lock().unwrap_or_else(|p| p.into_inner());
        until.is_some_and(|u| Instant::now() < u)
    }
}

impl FsClient {
    /// Begins an I/O phase at the coordinator: returns once this client's
    /// application is granted (at its set's priority), or at once, ungated,
    /// when the cluster has no coordinator or it does not answer.
    pub async fn begin_phase(&self) -> IoPhase {
        let ungated = IoPhase {
            client: self.clone(),
            grant: None,
        };
        if self.cluster().coordinator().is_none() || self.shared.coordinator.silent() {
            return ungated;
        }
        loop {
            // Each ask waits at the coordinator for at most half the
            // client's timeout, and half a lease once one is known, and
            // renews the place in the queue.
            let half_lease = self.shared.coordinator.lease().map(|l| l / 2);
            let wait = (self.cluster().timeout() / 2).min(half_lease.unwrap_or(Duration::MAX));
            match self.ask_coordinator(wait).await {
                Ok(PhaseAnswer::Granted { priority, lease }) => {
                    return IoPhase {
                        client: self.clone(),
                        grant: Some((priority, self.renew(lease))),
                    };
                }
                Ok(PhaseAnswer::Queued { .. }) => continue,
                Err(e) => {
                    warn_once(&format!("the coordinator did not grant an I/O phase ({e})"));
                    return ungated;
                }
            }
        }
    }

    /// Replaces the coordinator's set rule, live (TOML: `kind = "set10"`
    /// ...; an admin key). An error when the cluster has no coordinator.
    pub async fn set_sets(&self, sets: &str) -> Result<(), ClientError> {
        self.coordinator_call(|c, _| async move { c.set_sets(sets).await })
            .await
    }

    /// A task that renews the grant every third of its lease.
    fn renew(&self, lease: Duration) -> tokio::task::JoinHandle<()> {
        let client = self.clone();
        let every = (lease / 3).max(Duration::from_millis(50));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = client.ask_coordinator(Duration::ZERO).await {
                    warn_once(&format!("cannot renew the I/O phase's lease ({e})"));
                    return;
                }
            }
        })
    }

    /// Asks to begin (or renew) a phase, waiting at most `wait` at the
    /// coordinator; an answer not there half a lease after that (once a
    /// lease is known) is a timeout, and any failure makes the
    /// coordinator silent for a lease.
    async fn ask_coordinator(&self, wait: Duration) -> Result<PhaseAnswer, ClientError> {
        let watch = &self.shared.coordinator;
        let call = self.coordinator_call(|c, tags| async move { c.begin_phase(tags, wait).await });
        let answer = match (watch.lease(), self.cluster().coordinator()) {
            (Some(lease), Some(at)) => tokio::time::timeout(wait + lease / 2, call)
                .await
                .unwrap_or(Err(ClientError::Timeout {
                    server: at.address,
                    timeout: wait + lease / 2,
                })),
            _ => call.await,
        };
        match &answer {
            Ok(PhaseAnswer::Granted { lease, .. }) | Ok(PhaseAnswer::Queued { lease, .. }) => {
                watch.heard(*lease)
            }
            Err(_) => watch.failed(self.cluster().timeout()),
        }
        answer
    }

    /// One request to the coordinator, with this client's tags.
    async fn coordinator_call<T, F, Fut>(&self, f: F) -> Result<T, ClientError>
    where
        F: FnOnce(Arc<ServerConnection>, Tags) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        let id = match self.cluster().coordinator() {
            Some(s) => s.id,
            None => {
                return Err(ClientError::Invalid(
                    "the cluster has no coordinator".into(),
                ))
            }
        };
        let c = self.connection(id).await?;
        f(c, self.identity().tags()).await
    }
}
