//! The device models.

use super::hdd::Hdd;
use super::ssd::Ssd;
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
    let mut d = Device::new(&DeviceConfig::Hdd(cfg));
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
        let mut d = Device::new(&DeviceConfig::Hdd(cfg));
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
    let mut d = Device::new(&DeviceConfig::Hdd(cfg));
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
            .map(|_| d.serve(Time::ZERO, 1_000_000))
            .collect::<Vec<Time>>()
    };
    let plain = ends(None);
    assert_eq!(plain[3], Time::from_micros(4100));
    // After 2 in the device, each more adds 10% to a transfer: the
    // first two run at full rate, the third at 1.1x, the fourth 1.2x.
    let slowed = ends(Some(Overload {
        after: 2,
        loss: 0.1,
    }));
    assert_eq!(&slowed[..2], &plain[..2]);
    assert_eq!(slowed[2], Time::from_micros(3200));
    assert_eq!(slowed[3], Time::from_micros(4400));
    // One request at a time never counts as overload.
    let mut d = Ssd::new(cfg(Some(Overload {
        after: 1,
        loss: 0.5,
    })));
    let first = d.serve(Time::ZERO, 1_000_000);
    assert_eq!(d.serve(first, 1_000_000), first + Time::from_micros(1100));
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
    let done: Vec<Time> = (0..4).map(|_| d.serve(Time::ZERO, 1000)).collect();
    assert_eq!(done[0], Time::from_micros(101));
    assert_eq!(done[3], Time::from_micros(104));
    // A large request is bandwidth-bound: 1 MB at 1 GB/s is 1 ms.
    let big = d.serve(Time::from_millis(1), 1_000_000);
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
