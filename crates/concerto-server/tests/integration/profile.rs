//! Profiling real storage: a throttled data server is profiled through its
//! own request path (`ServerProbe`), and a local directory with O_DIRECT
//! where it can be. What is checked is that profiling works — every size
//! and depth sampled, the probe's requests served, nothing left behind —
//! not how close its figures come to the device: that is a measurement of
//! time, made by `make bench` (examples/profile_accuracy.rs).

use std::time::Duration;

use concerto_client::probe::{DirectoryProbe, ServerProbe};
use concerto_client::Identity;
use concerto_core::emulation::EmulationConfig;
use concerto_core::profile::{run, ProfileSpec};
use concerto_core::units::Bytes;
use concerto_core::PolicyConfig;
use concerto_server::server::{self, ServerConfig};

/// A data server throttled as an HDD, profiled through its request path:
/// no probe error, every (size, depth) sampled, each sample a positive
/// throughput and latency.
#[test]
fn a_throttled_server_is_profiled_through_its_own_request_path() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig {
        depth: 8,
        throttle: Some(EmulationConfig::hdd()),
        ..ServerConfig::data(
            dir.path().to_path_buf(),
            PolicyConfig::Fifo(Default::default()),
        )
    };
    let admin = cfg.admin_credential().unwrap();
    let s = rt.block_on(server::start(cfg)).unwrap();
    let spec = ProfileSpec {
        sizes: vec![Bytes(4096), Bytes(65536)],
        depths: vec![1, 2],
        count: 20,
        large_size: Bytes(65536),
        ..ProfileSpec::default()
    };
    let mut probe = ServerProbe::connect(
        s.addr,
        &admin,
        Identity::new(41, 0),
        Duration::from_secs(30),
        4 << 20,
        7,
    )
    .unwrap();
    let p = run(&mut probe, &spec);
    assert_eq!(probe.error(), None);
    drop(probe);
    assert_eq!(p.sizes.len(), 2);
    for size in &p.sizes {
        assert_eq!(size.samples.len(), spec.depths.len());
        assert!(size
            .samples
            .iter()
            .all(|x| x.throughput_bps > 0.0 && x.mean_latency_s > 0.0));
    }
    rt.block_on(s.shutdown());
}

/// A local directory: the probe writes its working set, reads it at
/// random (O_DIRECT where the file system allows), removes its file, and
/// says when it could not bypass the page cache.
#[test]
fn a_directory_is_profiled_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ProfileSpec {
        sizes: vec![Bytes(4096), Bytes(65536)],
        depths: vec![1, 4],
        count: 200,
        large_size: Bytes(65536),
        ..ProfileSpec::default()
    };
    let mut probe = DirectoryProbe::create(dir.path(), 8 << 20, 1).unwrap();
    let direct = probe.direct();
    let p = run(&mut probe, &spec);
    assert_eq!(probe.error(), None);
    drop(probe);
    eprintln!(
        "directory (direct: {direct}): 4 KiB at {:.1} us, {:.1} MB/s at depth 4",
        p.sizes[0].latency_s * 1e6,
        p.sizes[0].samples[1].throughput_bps / 1e6
    );
    assert!(p.sizes.iter().all(|s| s
        .samples
        .iter()
        .all(|x| x.throughput_bps > 0.0 && x.mean_latency_s > 0.0)));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "the probe's file is gone"
    );
    let e = DirectoryProbe::create(&dir.path().join("missing"), 8 << 20, 1)
        .err()
        .unwrap();
    assert_eq!(e.to_string(), "not a directory");
    let e = DirectoryProbe::create(dir.path(), 1000, 1).err().unwrap();
    assert!(e.to_string().contains("whole number of MiB"), "{e}");
}
