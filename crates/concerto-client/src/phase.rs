//! I/O phases at the cluster's coordinator (IO-SETS): a client asks to
//! begin one, waits until its set's turn comes, does its I/O while a
//! background task renews the grant's lease, and ends it. The servers
//! weigh the application's requests by its set's priority meanwhile.
//!
//! Never a reason to stop: a cluster without a coordinator runs every
//! phase ungated, and so does a client whose coordinator does not answer
//! (with one warning per process), so an application never hangs on the
//! coordinator.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
        eprintln!("concerto: {why}; I/O phases run ungated from here on");
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
        if self.cluster().coordinator().is_none() {
            return ungated;
        }
        // Each ask waits at the coordinator for at most half the client's
        // timeout, and renews the place in the queue.
        let wait = self.cluster().timeout() / 2;
        loop {
            let asked = self
                .coordinator_call(|c, tags| async move { c.begin_phase(tags, wait).await })
                .await;
            match asked {
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
                let renewed = client
                    .coordinator_call(
                        |c, tags| async move { c.begin_phase(tags, Duration::ZERO).await },
                    )
                    .await;
                if let Err(e) = renewed {
                    warn_once(&format!("cannot renew the I/O phase's lease ({e})"));
                    return;
                }
            }
        })
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
