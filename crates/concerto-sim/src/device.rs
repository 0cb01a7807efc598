//! Storage device models. Each serves requests in the order it receives them
//! (the server's queue decides that order) and says, at dispatch, when a
//! request will finish.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use concerto_core::emulation::EmulatedDevice;
use concerto_core::units::Bandwidth;
use concerto_core::{Request, Time};

use crate::scenario::{DeviceConfig, FixedConfig, HddConfig, ObjectPlacement, SsdConfig};

pub enum Device {
    Fixed(Fixed),
    Hdd(Hdd),
    Ssd(Ssd),
    Emulated(EmulatedDevice),
}

impl Device {
    pub fn new(cfg: &DeviceConfig) -> Device {
        match cfg {
            DeviceConfig::Fixed(c) => Device::Fixed(Fixed {
                cfg: c.clone(),
                busy_until: Time::ZERO,
            }),
            DeviceConfig::Hdd(c) => Device::Hdd(Hdd::new(c.clone())),
            DeviceConfig::Ssd(c) => Device::Ssd(Ssd::new(c.clone())),
            DeviceConfig::Emulated(c) => Device::Emulated(EmulatedDevice::new(c.clone())),
        }
    }

    /// Starts `req` at `now`; `base` is where its object begins on the
    /// device. Returns the completion time.
    pub fn start(&mut self, now: Time, base: u64, req: &Request, rng: &mut ChaCha8Rng) -> Time {
        match self {
            Device::Fixed(d) => d.start(now),
            Device::Hdd(d) => d.start(now, base, req, rng),
            Device::Ssd(d) => d.start(now, req.len),
            Device::Emulated(d) => d.start(
                now,
                req.object.0,
                req.offset,
                req.len,
                req.segments.len().max(1),
            ),
        }
    }

    /// When a read of data all in the server's cache (see
    /// [`HddConfig::cache`]) can be answered, if it is in the cache.
    pub fn cached_until(&self, now: Time, base: u64, req: &Request) -> Option<Time> {
        match self {
            Device::Hdd(d) if req.op == concerto_core::Op::Read => d.cache.covers(now, base, req),
            _ => None,
        }
    }

    /// Starts a metadata operation that keeps the storage busy for
    /// `service` (a small database transaction); returns its completion.
    pub fn start_metadata(&mut self, now: Time, service: Time) -> Time {
        match self {
            Device::Fixed(d) => {
                let done = now.max(d.busy_until) + service;
                d.busy_until = done;
                done
            }
            Device::Hdd(d) => {
                let done = now.max(d.busy_until) + service;
                d.busy_until = done;
                // The metadata database sits away from the data objects:
                // the next data access has to seek back.
                d.head = d.cfg.capacity.0 / 2;
                done
            }
            // Latency-bound: it takes an internal unit, not the data bus.
            Device::Ssd(d) => d.occupy_channel(now, service),
            Device::Emulated(d) => d.start_metadata(now, service),
        }
    }
}

/// Constant service time, one request at a time.
pub struct Fixed {
    cfg: FixedConfig,
    busy_until: Time,
}

impl Fixed {
    fn start(&mut self, now: Time) -> Time {
        let done = now.max(self.busy_until) + self.cfg.service_time;
        self.busy_until = done;
        done
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
    fn new(cfg: HddConfig) -> Hdd {
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

    fn start(&mut self, now: Time, base: u64, req: &Request, rng: &mut ChaCha8Rng) -> Time {
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

impl Hdd {
    /// Where the head is: just past the last access.
    pub fn head(&self) -> u64 {
        self.head
    }
}

/// Where file `file`'s object starts on server `server`'s disk: with
/// `spaced` placement at `file × object_spacing` on every server; with
/// `random`, at a multiple of `object_spacing` drawn from the seed, the
/// file and the server (a hash, so it draws from no random stream and the
/// other draws of a run stay as they were).
pub fn object_base(device: &DeviceConfig, seed: u64, file: u32, server: u32) -> u64 {
    // Only the HDD model has positions.
    let DeviceConfig::Hdd(cfg) = device else {
        return 0;
    };
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

/// Flash: per-request latency overlapped across `parallelism` channels, data
/// moved over one shared internal bus at `bandwidth`. Small requests are
/// latency-bound and need depth; large ones are bandwidth-bound.
pub struct Ssd {
    cfg: SsdConfig,
    channels: Vec<Time>,
    bus_free: Time,
}

impl Ssd {
    fn new(cfg: SsdConfig) -> Ssd {
        let channels = vec![Time::ZERO; cfg.parallelism.max(1) as usize];
        Ssd {
            cfg,
            channels,
            bus_free: Time::ZERO,
        }
    }

    fn occupy_channel(&mut self, now: Time, service: Time) -> Time {
        let (i, free) = self.earliest_channel();
        let done = now.max(free) + service;
        if let Some(c) = self.channels.get_mut(i) {
            *c = done;
        }
        done
    }

    /// `transfer` as it takes with the requests in the device at `begin`
    /// (this one included), under the configured overload.
    fn overloaded(&self, begin: Time, transfer: Time) -> Time {
        let Some(o) = &self.cfg.overload else {
            return transfer;
        };
        let in_device = 1 + self.channels.iter().filter(|&&busy| busy > begin).count() as u32;
        let beyond = in_device.saturating_sub(o.after);
        if beyond == 0 {
            return transfer;
        }
        Time::from_secs_f64(transfer.as_secs_f64() * (1.0 + o.loss * beyond as f64))
    }

    fn earliest_channel(&self) -> (usize, Time) {
        self.channels
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, t)| t)
            .unwrap_or((0, Time::ZERO))
    }

    fn start(&mut self, now: Time, bytes: u64) -> Time {
        let (i, free) = self.earliest_channel();
        let begin = now.max(free);
        let data_start = (begin + self.cfg.latency).max(self.bus_free);
        let transfer = self.cfg.bandwidth.transfer_time(bytes);
        let done = data_start + self.overloaded(begin, transfer);
        self.bus_free = done;
        if let Some(c) = self.channels.get_mut(i) {
            *c = done;
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concerto_core::Op;
    use rand::SeedableRng;

    fn req(offset: u64, len: u64) -> Request {
        Request::data(0, 0, 0, Time::ZERO, Op::Read, 0, offset, len)
    }

    #[test]
    fn fixed_device_serves_one_at_a_time() {
        let mut d = Device::new(&DeviceConfig::Fixed(FixedConfig {
            service_time: Time::from_millis(2),
        }));
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(
            d.start(Time::ZERO, 0, &req(0, 1), &mut rng),
            Time::from_millis(2)
        );
        assert_eq!(
            d.start(Time::ZERO, 0, &req(0, 1), &mut rng),
            Time::from_millis(4)
        );
        assert_eq!(
            d.start(Time::from_millis(10), 0, &req(0, 1), &mut rng),
            Time::from_millis(12)
        );
    }

    #[test]
    fn hdd_sequential_access_is_cheaper_than_random() {
        let cfg = HddConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut seq = Hdd::new(cfg.clone());
        let mut t_seq = Time::ZERO;
        for i in 0..64 {
            t_seq = seq.start(Time::ZERO, 0, &req(i * 65536, 65536), &mut rng);
        }
        let mut rnd = Hdd::new(cfg.clone());
        let mut t_rnd = Time::ZERO;
        for i in 0..64u64 {
            let off = (i * 7919 % 64) * (1 << 30);
            t_rnd = rnd.start(Time::ZERO, 0, &req(off, 65536), &mut rng);
        }
        // 64 x 64 KiB at 100 MB/s is ~42 ms; random access adds a seek and rotation each.
        assert!(t_seq < Time::from_millis(50), "sequential took {t_seq}");
        assert!(
            t_rnd > t_seq + Time::from_millis(64 * 4),
            "random took {t_rnd}"
        );
    }

    #[test]
    fn the_read_cache_answers_what_the_disk_read_once_it_is_read_and_forgets_the_oldest() {
        let cfg = HddConfig {
            cache: concerto_core::units::Bytes(200_000),
            transfer_rate: Bandwidth(100e6),
            ..HddConfig::default()
        };
        let mut d = Device::Hdd(Hdd::new(cfg));
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        // A list read of two 50 KB segments: each is in memory when the disk has read it.
        let mut list = req(0, 100_000);
        list.segments = vec![
            concerto_core::Extent::new(0, 50_000),
            concerto_core::Extent::new(50_000, 50_000),
        ];
        let done = d.start(Time::ZERO, 1000, &list, &mut rng);
        let first = d
            .cached_until(Time::ZERO, 1000, &req(10_000, 20_000))
            .unwrap();
        assert!(first < done && first > Time::ZERO, "{first} against {done}");
        assert_eq!(
            d.cached_until(Time::ZERO, 1000, &req(60_000, 1000)),
            Some(done)
        );
        // A range the disk did not read, or read for another object, is not cached.
        assert_eq!(d.cached_until(Time::ZERO, 1000, &req(90_000, 20_000)), None);
        assert_eq!(d.cached_until(Time::ZERO, 10_000_000, &req(0, 1000)), None);
        // Later: answered at once. Writes never are.
        assert_eq!(
            d.cached_until(done + Time::from_millis(1), 1000, &req(0, 10)),
            Some(done + Time::from_millis(1))
        );
        let mut w = req(0, 10);
        w.op = Op::Write;
        assert_eq!(d.cached_until(done, 1000, &w), None);
        // 150 KB more pushes out the oldest segment.
        d.start(done, 1000, &req(1_000_000, 150_000), &mut rng);
        assert_eq!(d.cached_until(done, 1000, &req(0, 10)), None);
        assert!(d.cached_until(done, 1000, &req(60_000, 10)).is_some());
    }

    #[test]
    fn read_ahead_serves_interleaved_sequential_streams_from_memory() {
        // Two streams of 8 KiB reads, 1 GiB apart, taking turns. Without
        // read-ahead every read seeks; with 128 KiB of it one read in 16 does.
        let run = |prefetch: u64| {
            let cfg = HddConfig {
                cache: concerto_core::units::Bytes(1 << 20),
                prefetch: concerto_core::units::Bytes(prefetch),
                ..HddConfig::default()
            };
            let mut d = Device::Hdd(Hdd::new(cfg));
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let (mut now, mut disk_reads) = (Time::ZERO, 0);
            for i in 0..64u64 {
                for base in [0, 1 << 30] {
                    let r = req(i * 8192, 8192);
                    now = match d.cached_until(now, base, &r) {
                        Some(at) => at,
                        None => {
                            disk_reads += 1;
                            d.start(now, base, &r, &mut rng)
                        }
                    };
                }
            }
            (now, disk_reads)
        };
        let (plain, plain_reads) = run(0);
        let (ahead, ahead_reads) = run(128 * 1024);
        assert_eq!(plain_reads, 128);
        assert_eq!(ahead_reads, 8, "one disk read per 128 KiB of each stream");
        assert!(
            ahead.as_nanos() * 5 < plain.as_nanos(),
            "read-ahead {ahead} against {plain}"
        );
        // Writes never read ahead.
        let cfg = HddConfig {
            cache: concerto_core::units::Bytes(1 << 20),
            prefetch: concerto_core::units::Bytes(1 << 20),
            ..HddConfig::default()
        };
        let mut d = Device::Hdd(Hdd::new(cfg));
        let mut w = req(0, 8192);
        w.op = Op::Write;
        d.start(Time::ZERO, 0, &w, &mut ChaCha8Rng::seed_from_u64(1));
        assert_eq!(d.cached_until(Time::from_secs(1), 0, &req(8192, 10)), None);
    }

    fn wait(piece: u32, address: u64, arrived_ms: u64) -> DiskWait {
        DiskWait {
            piece,
            address,
            arrived: Time::from_millis(arrived_ms),
        }
    }

    #[test]
    fn the_elevator_sweeps_up_wraps_and_serves_the_overdue_first() {
        let w = [
            wait(0, 900, 0),
            wait(1, 100, 1),
            wait(2, 500, 2),
            wait(3, 500, 3),
        ];
        let deadline = Time::from_millis(100);
        let now = Time::from_millis(10);
        // From 400: the lowest address at or past the head, the earlier of a tie.
        assert_eq!(elevator_pick(&w, 400, now, deadline), 2);
        // Past every address: back to the lowest.
        assert_eq!(elevator_pick(&w, 950, now, deadline), 1);
        // Piece 0 has waited 100 ms: it goes first, wherever it is.
        assert_eq!(elevator_pick(&w, 400, Time::from_millis(100), deadline), 0);
    }

    #[test]
    fn objects_sit_apart_per_server_only_when_placed_at_random() {
        let mut cfg = HddConfig::default();
        let spaced = DeviceConfig::Hdd(cfg.clone());
        assert_eq!(object_base(&spaced, 7, 3, 0), 3 << 30);
        assert_eq!(object_base(&spaced, 7, 3, 1), 3 << 30);
        cfg.object_placement = ObjectPlacement::Random;
        let random = DeviceConfig::Hdd(cfg.clone());
        let bases: Vec<u64> = (0..8).map(|s| object_base(&random, 7, 3, s)).collect();
        assert!(bases
            .iter()
            .all(|b| b % (1 << 30) == 0 && *b < cfg.capacity.0));
        let mut distinct = bases.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 4, "{bases:?}");
        assert_eq!(object_base(&random, 7, 3, 5), bases[5], "seeded, not drawn");
        assert_ne!(object_base(&random, 8, 3, 5), bases[5]);
        let ssd = DeviceConfig::Ssd(SsdConfig::default());
        assert_eq!(object_base(&ssd, 7, 3, 5), 0);
    }

    proptest::proptest! {
        #[test]
        fn the_elevator_never_leaves_a_request_past_its_deadline_waiting(
            raw in proptest::collection::vec((0u64..1000, 0u64..50), 1..20),
            head in 0u64..1000,
            now in 0u64..100,
        ) {
            let w: Vec<DiskWait> = raw.iter().enumerate().map(|(i, &(a, t))| wait(i as u32, a, t)).collect();
            let deadline = Time::from_millis(60);
            let i = elevator_pick(&w, head, Time::from_millis(now), deadline);
            proptest::prop_assert!(i < w.len());
            let oldest = w.iter().map(|x| x.arrived).min().unwrap();
            if Time::from_millis(now).saturating_sub(oldest) >= deadline {
                proptest::prop_assert_eq!(w[i].arrived, oldest);
            } else if w.iter().any(|x| x.address >= head) {
                proptest::prop_assert!(w[i].address >= head);
                proptest::prop_assert!(w.iter().all(|x| x.address < head || x.address >= w[i].address));
            } else {
                proptest::prop_assert!(w.iter().all(|x| x.address >= w[i].address));
            }
        }
    }

    #[test]
    fn an_overloaded_ssd_moves_data_slower_only_beyond_its_threshold() {
        let cfg = |overload| SsdConfig {
            latency: Time::from_micros(100),
            bandwidth: Bandwidth(1e9),
            parallelism: 4,
            overload,
        };
        // 1 MB at 1 GB/s is 1 ms; four at once end at 4 ms without overload.
        let ends = |overload| {
            let mut d = Ssd::new(cfg(overload));
            (0..4)
                .map(|_| d.start(Time::ZERO, 1_000_000))
                .collect::<Vec<Time>>()
        };
        let plain = ends(None);
        assert_eq!(plain[3], Time::from_micros(4100));
        // After 2 in the device, each more adds 10% to a transfer: the
        // first two run at full rate, the third at 1.1x, the fourth 1.2x.
        let slowed = ends(Some(crate::scenario::Overload {
            after: 2,
            loss: 0.1,
        }));
        assert_eq!(&slowed[..2], &plain[..2]);
        assert_eq!(slowed[2], Time::from_micros(3200));
        assert_eq!(slowed[3], Time::from_micros(4400));
        // One request at a time never counts as overload.
        let mut d = Ssd::new(cfg(Some(crate::scenario::Overload {
            after: 1,
            loss: 0.5,
        })));
        let first = d.start(Time::ZERO, 1_000_000);
        assert_eq!(d.start(first, 1_000_000), first + Time::from_micros(1100));
    }

    #[test]
    fn ssd_overlaps_latency_but_not_bandwidth() {
        let cfg = SsdConfig {
            latency: Time::from_micros(100),
            bandwidth: Bandwidth(1e9),
            parallelism: 4,
            overload: None,
        };
        let mut d = Ssd::new(cfg);
        // Four small requests at once overlap their latency.
        let done: Vec<Time> = (0..4).map(|_| d.start(Time::ZERO, 1000)).collect();
        assert_eq!(done[0], Time::from_micros(101));
        assert_eq!(done[3], Time::from_micros(104));
        // A large request is bandwidth-bound: 1 MB at 1 GB/s is 1 ms.
        let big = d.start(Time::from_millis(1), 1_000_000);
        assert_eq!(
            big,
            Time::from_millis(1) + Time::from_micros(100) + Time::from_millis(1)
        );
    }

    #[test]
    fn the_emulated_device_reads_from_toml_and_seeks_between_streams() {
        let cfg: DeviceConfig = toml::from_str(
            "kind = \"emulated\"\nbandwidth = \"100MB/s\"\nlatency = \"100us\"\nseek = \"8ms\"",
        )
        .unwrap();
        let mut d = Device::new(&cfg);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut at = |object: u64, offset: u64| {
            let mut r = req(offset, 1_000_000);
            r.object = concerto_core::ObjectId(object);
            d.start(Time::ZERO, 0, &r, &mut rng)
        };
        let first = at(1, 0);
        assert_eq!(first, Time::from_micros(100 + 8000 + 10_000));
        assert_eq!(
            at(1, 1_000_000) - first,
            Time::from_micros(100 + 10_000),
            "a continuation does not seek"
        );
        let other = at(2, 0);
        assert_eq!(
            other - first,
            Time::from_micros(2 * 100 + 8000 + 2 * 10_000)
        );
    }
}
