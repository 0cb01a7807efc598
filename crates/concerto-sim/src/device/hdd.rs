//! A single-actuator disk: seek time growing with the square root of the
//! distance, a random rotational delay, a transfer rate, read-ahead, a read
//! cache, where each file's object sits, and the elevator that may order
//! what the server dispatched to it.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use concerto_core::server::DeviceClass;
use concerto_core::units::{Bandwidth, Bytes};
use concerto_core::{Request, Time};

use super::{DeviceKind, StorageModel};
use crate::config_error::{positive, positive_f, ConfigError};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HddConfig {
    pub rpm: f64,
    pub track_to_track: Time,
    pub full_stroke: Time,
    pub transfer_rate: Bandwidth,
    pub capacity: Bytes,
    /// An access starting less than this far past the previous one's end
    /// streams on without a seek (read-ahead / sequential detection).
    pub read_ahead: Bytes,
    /// Distance on disk between consecutive objects.
    pub object_spacing: Bytes,
    /// Where a file's object sits on each server's disk.
    #[serde(skip_serializing_if = "ObjectPlacement::is_spaced")]
    pub object_placement: ObjectPlacement,
    /// With random placement: objects sit in the first this many bytes of
    /// the disk (a young file system allocates near its start); default:
    /// the whole disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_span: Option<Bytes>,
    /// How the disk orders what the server has dispatched to it.
    #[serde(skip_serializing_if = "DiskScheduler::is_none")]
    pub scheduler: DiskScheduler,
    /// With the elevator: a request that has waited this long on the disk
    /// is served next, wherever it is.
    #[serde(skip_serializing_if = "is_default_deadline")]
    pub deadline: Time,
    /// The server's processing of each request before the disk moves
    /// (decoding a list-I/O request, mapping it to blocks).
    #[serde(skip_serializing_if = "is_zero_time")]
    pub request_overhead: Time,
    /// The server's page cache for reads: this many bytes of what the disk
    /// read last stay in memory, and a read of data all in it does not
    /// touch the disk (it waits only for the read that brings the data in).
    /// 0: no cache.
    #[serde(skip_serializing_if = "is_zero_bytes")]
    pub cache: Bytes,
    /// The operating system's read-ahead: a plain read that misses the
    /// cache makes the disk read at least this many bytes from its start,
    /// and the cache keeps them, so the next reads of a sequential stream
    /// are served from memory even when other streams' reads come between.
    /// 0: the disk reads what was asked. Needs a `cache` at least this big.
    #[serde(skip_serializing_if = "is_zero_bytes")]
    pub prefetch: Bytes,
}

pub(crate) fn is_zero_time(t: &Time) -> bool {
    t.is_zero()
}

pub(crate) fn is_zero_bytes(b: &Bytes) -> bool {
    b.0 == 0
}

pub(crate) fn is_default_deadline(t: &Time) -> bool {
    *t == HddConfig::default().deadline
}

/// Where each file's object sits on a server's disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectPlacement {
    /// File i's object at i × object_spacing, the same on every server.
    #[default]
    Spaced,
    /// Each object at its own position on each server (a multiple of
    /// object_spacing, drawn from the run's seed, the file and the
    /// server), so the servers' disks are independent.
    Random,
}

impl ObjectPlacement {
    fn is_spaced(&self) -> bool {
        *self == ObjectPlacement::Spaced
    }
}

/// The block layer below the server's queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiskScheduler {
    /// The disk serves requests in the order the server dispatched them.
    #[default]
    None,
    /// Of the requests dispatched and waiting, the disk serves next the one
    /// at the lowest address at or past its head, wrapping to the lowest
    /// (C-LOOK), unless one has waited `deadline`: then the oldest.
    Elevator,
}

impl DiskScheduler {
    fn is_none(&self) -> bool {
        *self == DiskScheduler::None
    }
}

impl Default for HddConfig {
    fn default() -> HddConfig {
        // A 7200 rpm SATA disk of the coordination paper's era.
        HddConfig {
            rpm: 7200.0,
            track_to_track: Time::from_micros(1000),
            full_stroke: Time::from_millis(15),
            transfer_rate: Bandwidth(100e6),
            capacity: Bytes(250_000_000_000),
            read_ahead: Bytes(512 * 1024),
            object_spacing: Bytes(1 << 30),
            object_placement: ObjectPlacement::Spaced,
            placement_span: None,
            scheduler: DiskScheduler::None,
            deadline: Time::from_millis(500),
            request_overhead: Time::ZERO,
            cache: Bytes(0),
            prefetch: Bytes(0),
        }
    }
}

impl DeviceKind for HddConfig {
    fn class(&self) -> DeviceClass {
        DeviceClass::Rotational
    }

    fn nominal_bandwidth(&self) -> Option<Bandwidth> {
        Some(self.transfer_rate)
    }

    fn check(&self, at: &str) -> Result<(), ConfigError> {
        let key = |k: &str| format!("{at}.{k}");
        positive_f(&key("rpm"), self.rpm)?;
        positive_f(&key("transfer_rate"), self.transfer_rate.0)?;
        positive(&key("capacity"), self.capacity.0)?;
        if self.full_stroke < self.track_to_track {
            return Err(ConfigError::at(
                key("full_stroke"),
                "must be >= track_to_track",
            ));
        }
        if let Some(span) = self.placement_span {
            if self.object_placement != ObjectPlacement::Random {
                return Err(ConfigError::at(
                    key("placement_span"),
                    "only for object_placement = \"random\"",
                ));
            }
            positive(&key("placement_span"), span.0)?;
        }
        if self.prefetch.0 > self.cache.0 {
            return Err(ConfigError::at(
                key("prefetch"),
                format!(
                    "{} bytes of read-ahead do not fit in a cache of {} bytes (set cache >= prefetch)",
                    self.prefetch.0, self.cache.0
                ),
            ));
        }
        Ok(())
    }

    fn model(&self) -> Box<dyn StorageModel> {
        Box::new(Hdd::new(self.clone()))
    }

    fn object_base(&self, seed: u64, file: u32, server: u32) -> u64 {
        object_position(self, seed, file, server)
    }

    fn elevator_deadline(&self) -> Option<Time> {
        (self.scheduler == DiskScheduler::Elevator).then_some(self.deadline)
    }
}

/// A single-actuator disk: seek time growing with the square root of the
/// distance, a random rotational delay, a transfer rate, and read-ahead so
/// that an access continuing just past the previous one streams on without
/// repositioning.
pub struct Hdd {
    cfg: HddConfig,
    revolution: Time,
    busy_until: Time,
    head: u64,
    cache: ReadCache,
}

/// The disk ranges read last, each with when its data is in memory; at
/// most `capacity` bytes, the oldest leaving first. Looked up by start
/// address (a lookup per read dispatched; a scan would cost the simulator
/// its event rate).
#[derive(Default)]
struct ReadCache {
    capacity: u64,
    held: u64,
    /// Insertion order: (start, end, sequence number), oldest first.
    order: std::collections::VecDeque<(u64, u64, u64)>,
    /// By start: (end, ready, sequence number) of the newest range there.
    by_start: std::collections::BTreeMap<u64, (u64, Time, u64)>,
    next: u64,
}

impl ReadCache {
    /// How many ranges starting at or below a segment's start a lookup
    /// tries (ranges read again in other pieces may overlap).
    const PROBES: usize = 4;

    fn insert(&mut self, start: u64, end: u64, ready: Time) {
        if self.capacity == 0 || end <= start {
            return;
        }
        let seq = self.next;
        self.next += 1;
        self.order.push_back((start, end, seq));
        self.by_start.insert(start, (end, ready, seq));
        self.held += end - start;
        while self.held > self.capacity {
            let Some((s, e, q)) = self.order.pop_front() else {
                break;
            };
            self.held -= e - s;
            // A newer range at the same start stays.
            if self
                .by_start
                .get(&s)
                .is_some_and(|&(_, _, newest)| newest == q)
            {
                self.by_start.remove(&s);
            }
        }
    }

    /// If every range `req` reads lies in one cached range: when the last
    /// of them is in memory (no earlier than `now`).
    fn covers(&self, now: Time, base: u64, req: &Request) -> Option<Time> {
        if self.capacity == 0 {
            return None;
        }
        let single = [concerto_core::Extent::new(req.offset, req.len)];
        let segments = if req.segments.is_empty() {
            &single[..]
        } else {
            &req.segments[..]
        };
        let mut ready = now;
        for s in segments {
            let (start, end) = (base + s.offset, base + s.end());
            let (_, &(_, at, _)) = self
                .by_start
                .range(..=start)
                .rev()
                .take(Self::PROBES)
                .find(|(_, &(e, _, _))| end <= e)?;
            ready = ready.max(at);
        }
        Some(ready)
    }
}

impl Hdd {
    pub(super) fn new(cfg: HddConfig) -> Hdd {
        let revolution = Time::from_secs_f64(60.0 / cfg.rpm);
        Hdd {
            cache: ReadCache {
                capacity: cfg.cache.0,
                ..ReadCache::default()
            },
            cfg,
            revolution,
            busy_until: Time::ZERO,
            head: 0,
        }
    }

    fn seek(&self, distance: u64) -> Time {
        if distance == 0 {
            return Time::ZERO;
        }
        let frac = (distance as f64 / self.cfg.capacity.0 as f64)
            .min(1.0)
            .sqrt();
        let t2t = self.cfg.track_to_track.as_nanos() as f64;
        let full = self.cfg.full_stroke.as_nanos() as f64;
        Time::from_nanos((t2t + (full - t2t) * frac) as u64)
    }

    fn position(&self, addr: u64, rng: &mut ChaCha8Rng) -> Time {
        let gap = addr.wrapping_sub(self.head);
        if addr >= self.head && gap < self.cfg.read_ahead.0 {
            // Sequential or a short skip forward: the data streams past the head.
            return self.cfg.transfer_rate.transfer_time(gap);
        }
        let rotation = Time::from_nanos(rng.gen_range(0..self.revolution.as_nanos().max(1)));
        self.seek(addr.abs_diff(self.head)) + rotation
    }

    /// Reads or writes `req`, from `now` or when the disk is free.
    fn serve(&mut self, now: Time, base: u64, req: &Request, rng: &mut ChaCha8Rng) -> Time {
        let begin = now.max(self.busy_until);
        let rate: Bandwidth = self.cfg.transfer_rate;
        let mut t = self.cfg.request_overhead;
        // A plain read reads ahead, and the cache keeps what it read.
        let plain_read = req.op == concerto_core::Op::Read && req.segments.is_empty();
        let read_len = if plain_read {
            req.len.max(self.cfg.prefetch.0)
        } else {
            req.len
        };
        if req.segments.is_empty() {
            let addr = base + req.offset;
            t += self.position(addr, rng) + rate.transfer_time(read_len);
            self.head = addr + read_len;
        } else {
            // List I/O: position once, then each later segment costs the
            // cheaper of streaming over the gap and a track-to-track seek.
            // A read's segments enter the cache one by one, as the disk
            // reads them.
            let caching = req.op == concerto_core::Op::Read;
            let first = req.segments[0];
            t += self.position(base + first.offset, rng) + rate.transfer_time(first.len);
            if caching {
                self.cache
                    .insert(base + first.offset, base + first.end(), begin + t);
            }
            let mut end = first.end();
            for s in &req.segments[1..] {
                let gap = s.offset.saturating_sub(end);
                t += rate.transfer_time(gap).min(self.cfg.track_to_track)
                    + rate.transfer_time(s.len);
                end = s.end();
                if caching {
                    self.cache
                        .insert(base + s.offset, base + s.end(), begin + t);
                }
            }
            self.head = base + end;
        }
        let done = begin + t;
        self.busy_until = done;
        if plain_read {
            self.cache
                .insert(base + req.offset, base + req.offset + read_len, done);
        }
        done
    }
}

impl StorageModel for Hdd {
    fn start(&mut self, now: Time, base: u64, req: &Request, rng: &mut ChaCha8Rng) -> Time {
        self.serve(now, base, req, rng)
    }

    fn start_metadata(&mut self, now: Time, service: Time) -> Time {
        let done = now.max(self.busy_until) + service;
        self.busy_until = done;
        // The metadata database sits away from the data objects: the next
        // data access has to seek back.
        self.head = self.cfg.capacity.0 / 2;
        done
    }

    fn cached_until(&self, now: Time, base: u64, req: &Request) -> Option<Time> {
        if req.op != concerto_core::Op::Read {
            return None;
        }
        self.cache.covers(now, base, req)
    }

    /// Just past the last access.
    fn head(&self) -> u64 {
        self.head
    }
}

/// Where file `file`'s object starts on server `server`'s disk: with
/// `spaced` placement at `file × object_spacing` on every server; with
/// `random`, at a multiple of `object_spacing` drawn from the seed, the
/// file and the server (a hash, so it draws from no random stream and the
/// other draws of a run stay as they were).
fn object_position(cfg: &HddConfig, seed: u64, file: u32, server: u32) -> u64 {
    let capacity = cfg.capacity.0.max(1);
    let spacing = cfg.object_spacing.0;
    match cfg.object_placement {
        ObjectPlacement::Spaced => u64::from(file).wrapping_mul(spacing) % capacity,
        ObjectPlacement::Random => {
            let span = cfg.placement_span.map_or(capacity, |s| s.0.min(capacity));
            let slots = (span / spacing.max(1)).max(1);
            let mut x = seed ^ (u64::from(file) << 32) ^ u64::from(server) ^ 0x9e37_79b9_7f4a_7c15;
            // splitmix64's finalizer: every input bit moves every output bit.
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^= x >> 31;
            (x % slots) * spacing
        }
    }
}

/// A request waiting on the disk under the elevator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskWait {
    pub piece: u32,
    /// Its first byte's address on the disk.
    pub address: u64,
    pub arrived: Time,
}

/// The elevator's choice among `waiting` (not empty): the oldest if it has
/// waited `deadline`, else the lowest address at or past `head`, else the
/// lowest address (C-LOOK sweeps upward and jumps back). Ties go to the
/// earliest arrival.
pub fn elevator_pick(waiting: &[DiskWait], head: u64, now: Time, deadline: Time) -> usize {
    let oldest = (0..waiting.len())
        .min_by_key(|&i| (waiting[i].arrived, i))
        .unwrap_or(0);
    if now.saturating_sub(waiting[oldest].arrived) >= deadline {
        return oldest;
    }
    let ahead = (0..waiting.len())
        .filter(|&i| waiting[i].address >= head)
        .min_by_key(|&i| (waiting[i].address, waiting[i].arrived, i));
    ahead.unwrap_or_else(|| {
        (0..waiting.len())
            .min_by_key(|&i| (waiting[i].address, waiting[i].arrived, i))
            .unwrap_or(0)
    })
}
