//! Probes for real storage, for concerto-core's profiling procedure
//! ([`concerto_core::profile`]): a directory on a local file system, and a
//! running data server (through its scheduler, storage executor and
//! throttle, as the file system's own requests go).
//!
//! Both keep `depth` random reads of `size` bytes outstanding over a
//! working set written first, and time each read from submission to
//! completion. The directory probe reads with O_DIRECT where the file
//! system supports it (else it drops the file's cached pages before each
//! point, and says so); the server probe measures what the server
//! delivers, its page cache included, and the round trip of a request that
//! does no I/O (a ping), which the profile takes off the latencies.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::join_all;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use concerto_core::profile::{Probe, Sample};
use concerto_core::Extent;
use concerto_proto::auth::{Credential, Grant};
use concerto_proto::connection::{ClientError, ServerConnection};

use crate::Identity;

/// O_DIRECT wants buffers, offsets and lengths aligned to the block size.
const ALIGN: usize = 4096;

/// How the working set is written: in pieces of this size.
const FILL: u64 = 1 << 20;

/// A buffer of `len` bytes starting on an [`ALIGN`] boundary.
struct Aligned {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let buf = vec![0u8; len + ALIGN];
        let start = buf.as_ptr().align_offset(ALIGN);
        Aligned { buf, start, len }
    }

    fn get(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// A file of the working set's size in a directory, read at random.
pub struct DirectoryProbe {
    path: PathBuf,
    file: File,
    working_set: u64,
    direct: bool,
    seed: u64,
    /// The first read that failed, if one did.
    error: Option<String>,
}

impl DirectoryProbe {
    /// Writes a working set of `working_set` bytes (a whole number of MiB)
    /// in a new file in `dir`; removed when the probe is dropped.
    pub fn create(dir: &Path, working_set: u64, seed: u64) -> io::Result<DirectoryProbe> {
        if working_set < FILL || working_set % FILL != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "working set {working_set} bytes: must be a whole number of MiB, at least 1"
                ),
            ));
        }
        if !dir.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "not a directory"));
        }
        let path = dir.join(format!(".concerto-profile-{}", std::process::id()));
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let open = |direct: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(true).create(true).truncate(true);
            if direct {
                o.custom_flags(libc::O_DIRECT);
            }
            o.open(&path)
        };
        // tmpfs and some others refuse O_DIRECT (EINVAL): read through the
        // page cache then, dropping the file's pages before each point.
        let (file, direct) = match open(true) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                (open(false).map_err(named)?, false)
            }
            Err(e) => return Err(named(e)),
        };
        let probe = DirectoryProbe {
            path: path.clone(),
            file,
            working_set,
            direct,
            seed,
            error: None,
        };
        let mut block = Aligned::new(FILL as usize);
        let mut fill = ChaCha8Rng::seed_from_u64(seed);
        for at in (0..working_set).step_by(FILL as usize) {
            fill.fill_bytes(block.get());
            probe.file.write_all_at(block.get(), at).map_err(named)?;
        }
        probe.file.sync_all().map_err(named)?;
        Ok(probe)
    }

    /// Whether reads bypass the page cache (O_DIRECT).
    pub fn direct(&self) -> bool {
        self.direct
    }

    /// The first read that failed: the profile is then not to be trusted.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Drops the file's pages from the cache (what O_DIRECT makes unneeded).
    fn drop_cache(&self) {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid open descriptor; the call only advises the kernel.
        unsafe {
            libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
}

impl Drop for DirectoryProbe {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Probe for DirectoryProbe {
    fn measure(&mut self, size: u64, depth: u32, count: u32) -> Sample {
        if !self.direct {
            self.drop_cache();
        }
        // O_DIRECT needs whole blocks; a smaller size reads one block.
        let len = if self.direct {
            size.div_ceil(ALIGN as u64) * ALIGN as u64
        } else {
            size
        };
        let slots = (self.working_set / len).max(1);
        let claimed = AtomicU32::new(0);
        let start = Instant::now();
        let per_thread: Vec<Worker> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..depth)
                .map(|t| {
                    let claimed = &claimed;
                    let file = &self.file;
                    let seed = self.seed ^ size.rotate_left(17) ^ ((depth as u64) << 40) ^ t as u64;
                    s.spawn(move || {
                        let mut buf = Aligned::new(len as usize);
                        let mut offsets = ChaCha8Rng::seed_from_u64(seed);
                        let mut w = Worker::default();
                        while claimed.fetch_add(1, Ordering::Relaxed) < count {
                            let at = offsets.gen_range(0..slots) * len;
                            let issued = Instant::now();
                            if let Err(e) = file.read_exact_at(buf.get(), at) {
                                w.error = Some(format!("reading {len} bytes at {at}: {e}"));
                                break;
                            }
                            w.latency += issued.elapsed().as_secs_f64();
                            w.last = start.elapsed();
                            w.done += 1;
                        }
                        w
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| Worker {
                        error: Some("a probe thread panicked".into()),
                        ..Worker::default()
                    })
                })
                .collect()
        });
        sample(size, depth, &per_thread, &mut self.error)
    }
}

/// What one worker (thread or task) did: reads completed, their summed
/// latency, when its last one completed, and the error that stopped it.
#[derive(Default)]
struct Worker {
    done: u32,
    latency: f64,
    last: Duration,
    error: Option<String>,
}

/// The sample the workers make together; the first error is kept in `error`.
fn sample(size: u64, depth: u32, workers: &[Worker], error: &mut Option<String>) -> Sample {
    if error.is_none() {
        *error = workers.iter().find_map(|w| w.error.clone());
    }
    let done: u32 = workers.iter().map(|w| w.done).sum();
    let latency: f64 = workers.iter().map(|w| w.latency).sum();
    let elapsed = workers.iter().map(|w| w.last).max().unwrap_or_default();
    Sample::from_totals(size, depth, done, latency, elapsed.as_secs_f64())
}

/// The object a server probe reads and writes: a scratch object no file
/// can have (at or above [`concerto_proto::SCRATCH_OBJECTS`]). It is cut
/// to nothing when the probe is dropped.
pub const PROBE_OBJECT: u64 = u64::MAX - 1;

/// A running data server, read through its own request path.
pub struct ServerProbe {
    runtime: tokio::runtime::Runtime,
    connection: Arc<ServerConnection>,
    identity: Identity,
    working_set: u64,
    seed: u64,
    /// Median round trip of a request that does no I/O.
    rtt: Duration,
    /// The first read that failed, if one did.
    error: Option<String>,
}

impl ServerProbe {
    /// Connects to the server at `addr` with `credential`, acting as
    /// `identity` (a tenant key's job, for a tenant key), and writes a
    /// working set of `working_set` bytes (a whole number of MiB) to
    /// [`PROBE_OBJECT`].
    pub fn connect(
        addr: std::net::SocketAddr,
        credential: &Credential,
        mut identity: Identity,
        timeout: Duration,
        working_set: u64,
        seed: u64,
    ) -> Result<ServerProbe, ClientError> {
        if working_set < FILL || working_set % FILL != 0 {
            return Err(ClientError::Invalid(format!(
                "working set {working_set} bytes: must be a whole number of MiB, at least 1"
            )));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| ClientError::Invalid(format!("cannot start a runtime: {e}")))?;
        let (connection, rtt) = runtime.block_on(async {
            let c = ServerConnection::connect(addr, timeout, credential).await?;
            if let Grant::Tenant { job } = c.grant() {
                identity.app = job;
            }
            let mut fill = ChaCha8Rng::seed_from_u64(seed);
            for at in (0..working_set).step_by(FILL as usize) {
                let mut data = vec![0u8; FILL as usize];
                fill.fill_bytes(&mut data);
                c.write(
                    identity.tags(),
                    PROBE_OBJECT,
                    vec![Extent::new(at, FILL)],
                    Bytes::from(data),
                )
                .await?;
            }
            c.fsync(identity.tags(), PROBE_OBJECT).await?;
            let mut rtts = Vec::with_capacity(101);
            for _ in 0..101 {
                let t = Instant::now();
                c.ping().await?;
                rtts.push(t.elapsed());
            }
            rtts.sort_unstable();
            Ok::<_, ClientError>((c, rtts[rtts.len() / 2]))
        })?;
        Ok(ServerProbe {
            runtime,
            connection: Arc::new(connection),
            identity,
            working_set,
            seed,
            rtt,
            error: None,
        })
    }

    /// The median round trip of a request that does no I/O.
    pub fn round_trip(&self) -> Duration {
        self.rtt
    }

    /// The first read that failed: the profile is then not to be trusted.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

impl Drop for ServerProbe {
    fn drop(&mut self) {
        let (c, tags) = (self.connection.clone(), self.identity.tags());
        let _ = self
            .runtime
            .block_on(async move { c.truncate(tags, PROBE_OBJECT, 0).await });
    }
}

impl Probe for ServerProbe {
    fn measure(&mut self, size: u64, depth: u32, count: u32) -> Sample {
        let slots = (self.working_set / size).max(1);
        let claimed = Arc::new(AtomicU32::new(0));
        let start = Instant::now();
        let workers = (0..depth).map(|t| {
            let (c, claimed, identity) = (self.connection.clone(), claimed.clone(), self.identity);
            let seed = self.seed ^ size.rotate_left(17) ^ ((depth as u64) << 40) ^ t as u64;
            async move {
                let mut offsets = ChaCha8Rng::seed_from_u64(seed);
                let mut w = Worker::default();
                while claimed.fetch_add(1, Ordering::Relaxed) < count {
                    let at = offsets.gen_range(0..slots) * size;
                    let issued = Instant::now();
                    let read = c.read(identity.tags(), PROBE_OBJECT, vec![Extent::new(at, size)]);
                    if let Err(e) = read.await {
                        w.error = Some(format!("reading {size} bytes at {at}: {e}"));
                        break;
                    }
                    w.latency += issued.elapsed().as_secs_f64();
                    w.last = start.elapsed();
                    w.done += 1;
                }
                w
            }
        });
        let per_task = self.runtime.block_on(join_all(workers));
        sample(size, depth, &per_task, &mut self.error)
    }

    fn overhead_s(&self) -> f64 {
        self.rtt.as_secs_f64()
    }
}
