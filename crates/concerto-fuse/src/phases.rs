//! I/O phases of unmodified programs, found in their request streams
//! (io-sets.txt's online detection, concerto-core's `PhaseDetector`) and
//! taken to the cluster's coordinator: the first read or write of a job
//! after a quiet spell begins a phase (and waits for the job's set's turn,
//! as `begin_phase` does for a program that says so itself); a quiet spell
//! longer than the detector's gap threshold ends it, and so does the job
//! closing the last file it had open through this mount, after the
//! detector's short close gap (so the next job's turn does not wait out the
//! gap threshold on idle devices: the close has flushed what the job wrote
//! behind, its data is at the servers). The coordinator then
//! measures the job's w_iter between the phase starts and places it with
//! SET-10, with no change to the program.
//!
//! Done here, in the mount, rather than on the data servers: the mount
//! sees a job's whole stream (every server's share of it, reads and
//! writes), in the order the program issued it, and can hold the job's
//! requests back until its turn; a data server sees only its stripe of the
//! stream, and would have to merge its view with the others' before it
//! could tell a phase from a gap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use concerto_client::{FsClient, IoPhase};
use concerto_core::job::{PhaseConfig, PhaseDetector};
use concerto_core::Time;

/// How often phases that went quiet are looked for.
const POLL: Duration = Duration::from_millis(100);

/// A job quiet this long is forgotten (its w_iter lives on at the coordinator).
const FORGET: Duration = Duration::from_secs(600);

/// Most jobs tracked at once; a job quiet the longest is dropped first
/// (its phase, if any, ended).
const MAX_JOBS: usize = 4096;

/// One job's stream.
struct Job {
    detector: PhaseDetector,
    /// The phase in progress: whether it is granted yet, and the grant.
    gate: Option<watch::Receiver<bool>>,
    phase: Arc<Mutex<Option<IoPhase>>>,
    last: Instant,
    /// The job's descriptors open through this mount.
    open_files: u32,
}

/// Every job's phases, as the mount sees them.
pub(crate) struct ImplicitPhases {
    jobs: Mutex<HashMap<u32, Job>>,
    epoch: Instant,
    cfg: PhaseConfig,
    runtime: tokio::runtime::Handle,
}

impl ImplicitPhases {
    /// Tracks phases with `cfg`, ending quiet ones from a task on `runtime`.
    pub(crate) fn start(cfg: PhaseConfig, runtime: tokio::runtime::Handle) -> Arc<ImplicitPhases> {
        let phases = Arc::new(ImplicitPhases {
            jobs: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            cfg,
            runtime: runtime.clone(),
        });
        let weak = Arc::downgrade(&phases);
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(POLL).await;
                match weak.upgrade() {
                    Some(p) => p.end_quiet(),
                    None => return,
                }
            }
        });
        phases
    }

    fn now(&self, at: Instant) -> Time {
        Time::from_nanos(at.saturating_duration_since(self.epoch).as_nanos() as u64)
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Job>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A read or write of `client`'s job is about to go: returns once the
    /// job's phase is granted (at once while it is; the first request of
    /// a phase waits for the coordinator).
    pub(crate) async fn enter(&self, client: &FsClient) {
        let gate = self.request(client);
        if let Some(mut gate) = gate {
            let _ = gate.wait_for(|granted| *granted).await;
        }
    }

    fn request(&self, client: &FsClient) -> Option<watch::Receiver<bool>> {
        let app = client.identity().app;
        let at = Instant::now();
        let t = self.now(at);
        let mut jobs = self.jobs();
        if !jobs.contains_key(&app) && jobs.len() >= MAX_JOBS {
            if let Some(quietest) = jobs.iter().min_by_key(|(_, j)| j.last).map(|(&a, _)| a) {
                if let Some(j) = jobs.remove(&quietest) {
                    self.end(&j);
                }
            }
        }
        let job = jobs.entry(app).or_insert_with(|| self.new_job(at));
        job.last = at;
        let was_in_phase = job.detector.in_phase();
        let ended = job.detector.request(t);
        if ended.is_some() {
            self.end(job);
        }
        if !was_in_phase || ended.is_some() {
            // A phase begins: ask for it, and let this job's requests
            // through once it is granted.
            let (tx, rx) = watch::channel(false);
            job.phase = Arc::new(Mutex::new(None));
            let (client, slot) = (client.clone(), job.phase.clone());
            job.gate = Some(rx);
            self.runtime.spawn(async move {
                let phase = client.begin_phase().await;
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(phase);
                let _ = tx.send(true);
            });
        }
        job.gate.clone()
    }

    fn new_job(&self, at: Instant) -> Job {
        Job {
            detector: PhaseDetector::new(self.cfg),
            gate: None,
            phase: Arc::new(Mutex::new(None)),
            last: at,
            open_files: 0,
        }
    }

    /// `app` opened (or created) a file through the mount.
    pub(crate) fn opened(&self, app: u32) {
        let at = Instant::now();
        let mut jobs = self.jobs();
        if jobs.len() < MAX_JOBS || jobs.contains_key(&app) {
            jobs.entry(app)
                .or_insert_with(|| self.new_job(at))
                .open_files += 1;
        }
    }

    /// `app` let go of a file it had open (its last close, after the
    /// flush): when it was the job's last, its phase ends after the close
    /// gap unless it reads or writes again first.
    pub(crate) fn closed(self: &Arc<Self>, app: u32) {
        let t = self.now(Instant::now());
        let ends_at = {
            let mut jobs = self.jobs();
            let Some(job) = jobs.get_mut(&app) else {
                return;
            };
            job.open_files = job.open_files.saturating_sub(1);
            if job.open_files > 0 {
                return;
            }
            job.detector.files_closed(t);
            job.detector.closed_phase_ends_at()
        };
        // Looked at again when the close gap is up, not at the next poll.
        if let Some(ends_at) = ends_at {
            let wait = Duration::from_nanos(ends_at.saturating_sub(t).as_nanos());
            let phases = Arc::downgrade(self);
            self.runtime.spawn(async move {
                tokio::time::sleep(wait).await;
                if let Some(p) = phases.upgrade() {
                    p.end_quiet();
                }
            });
        }
    }

    /// Ends the phase of `job` at the coordinator (once it was granted).
    fn end(&self, job: &Job) {
        let (gate, slot) = (job.gate.clone(), job.phase.clone());
        self.runtime.spawn(async move {
            if let Some(mut gate) = gate {
                let _ = gate.wait_for(|granted| *granted).await;
            }
            let phase = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(phase) = phase {
                phase.end().await;
            }
        });
    }

    /// Ends the phases of jobs quiet for longer than their gap threshold
    /// (or their close gap, once they closed their files), and forgets jobs
    /// quiet for [`FORGET`] with no file open.
    fn end_quiet(&self) {
        let at = Instant::now();
        let t = self.now(at);
        let mut jobs = self.jobs();
        for job in jobs.values_mut() {
            if job.detector.poll(t).is_some() {
                self.end(job);
                job.gate = None;
                job.phase = Arc::new(Mutex::new(None));
            }
        }
        jobs.retain(|_, j| {
            j.detector.in_phase() || j.open_files > 0 || at.duration_since(j.last) < FORGET
        });
    }
}
