//! How well profiling recovers a known device (`make bench` runs it): a
//! data server throttled as flash or as an HDD is profiled through its own
//! request path (`ServerProbe`), and the profile's device time and
//! parallelism are compared with the emulated device's. A measurement of
//! time, so a benchmark and not a test (the tests check that profiling
//! through a server works, tests/integration/profile.rs); exits 1 when a figure is
//! outside its tolerance.
//!
//!     cargo run --release -p concerto-server --example profile_accuracy

use std::time::Duration;

use concerto_client::probe::ServerProbe;
use concerto_client::Identity;
use concerto_core::emulation::EmulationConfig;
use concerto_core::profile::{run, Profile, ProfileSpec};
use concerto_core::units::Bytes;
use concerto_core::PolicyConfig;
use concerto_server::server::{self, ServerConfig};

/// Profiles a data server throttled as `device`, with the server's queue
/// deep enough not to be what limits it.
fn profile_server(device: EmulationConfig, spec: &ProfileSpec) -> Profile {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = ServerConfig {
        depth: 64,
        throttle: Some(device),
        ..ServerConfig::data(
            dir.path().to_path_buf(),
            PolicyConfig::Fifo(Default::default()),
        )
    };
    let admin = cfg.admin_credential().unwrap();
    let s = rt.block_on(server::start(cfg)).unwrap();
    let mut probe = ServerProbe::connect(
        s.addr,
        &admin,
        Identity::new(1, 0),
        Duration::from_secs(30),
        16 << 20,
        7,
    )
    .unwrap();
    let p = run(&mut probe, spec);
    assert_eq!(probe.error(), None);
    drop(probe);
    rt.block_on(s.shutdown());
    p
}

/// Flash: 8 channels, each I/O a fixed time plus its transfer at 500 MB/s.
/// The `ssd` preset's 80 us per I/O over 8 channels asks for about 90,000
/// 4 KiB reads a second, more than this 2-core machine's loopback stack
/// carries (26,000 measured, client and server sharing the cores), so
/// the CPU, not the device, would set the profile. The same device with
/// 4 ms per I/O stays well within what the machine carries, and the profile
/// must recover it, with the round trip to the server taken off: the
/// parallelism (8) within 20%, and the device time of a 4 KiB read no
/// less than the emulated one and at most 15% more. What the server itself
/// spends on a request beyond a ping (its scheduling and storage threads
/// waking up) is part of what the profile sees: 60 to 140 us on a quiet
/// day here, 150 to 350 us on a busy one. At 2 ms per I/O that took the
/// device time to 16% over in one run of thirteen; at 4 ms, to 9% at most
/// in twelve runs.
fn flash() -> Vec<String> {
    let spec = ProfileSpec {
        sizes: vec![Bytes(4096), Bytes(65536)],
        depths: vec![1, 2, 4, 6, 8, 12, 16],
        count: 300,
        large_size: Bytes(65536),
        ..ProfileSpec::default()
    };
    let flash = EmulationConfig {
        latency: concerto_core::Time::from_millis(4),
        ..EmulationConfig::ssd()
    };
    let p = profile_server(flash, &spec);
    let small = &p.sizes[0];
    let service = 4e-3 + 4096.0 / 500e6;
    eprintln!(
        "flash: rtt {:.1} us, 4 KiB: latency {:.1} us, device {:.1} us, parallelism {:.2}, peak {:.1} MB/s, saturates at {}",
        p.overhead_s * 1e6,
        small.latency_s * 1e6,
        small.device_latency_s * 1e6,
        small.parallelism,
        small.peak_throughput_bps / 1e6,
        small.saturation_depth
    );
    let ratio = small.device_latency_s / service;
    let mut outside = Vec::new();
    if !(0.95..1.15).contains(&ratio) {
        outside.push(format!(
            "flash: device time {} s against {service} s",
            small.device_latency_s
        ));
    }
    if (small.parallelism / 8.0 - 1.0).abs() >= 0.2 {
        outside.push(format!("flash: parallelism {}", small.parallelism));
    }
    outside
}

/// The emulated HDD: one I/O at a time, each 8 ms of seek plus 100 us plus
/// its transfer at 100 MB/s. Random 4 KiB reads: the device time within
/// 10%, the parallelism 1 within 20%, and more outstanding reads add
/// little throughput: at most 10% at depth 4 (what a second read waiting
/// in the server hides of the first one's round trip).
fn hdd() -> Vec<String> {
    let spec = ProfileSpec {
        sizes: vec![Bytes(4096), Bytes(1 << 20)],
        depths: vec![1, 2, 4],
        count: 60,
        large_size: Bytes(1 << 20),
        ..ProfileSpec::default()
    };
    let p = profile_server(EmulationConfig::hdd(), &spec);
    let small = &p.sizes[0];
    let service = 8e-3 + 100e-6 + 4096.0 / 100e6;
    eprintln!(
        "hdd: rtt {:.1} us, 4 KiB: latency {:.3} ms, device {:.3} ms, parallelism {:.2}, saturates at {}",
        p.overhead_s * 1e6,
        small.latency_s * 1e3,
        small.device_latency_s * 1e3,
        small.parallelism,
        small.saturation_depth
    );
    let mut outside = Vec::new();
    if (small.device_latency_s / service - 1.0).abs() >= 0.1 {
        outside.push(format!(
            "hdd: device time {} s against {service} s",
            small.device_latency_s
        ));
    }
    if (small.parallelism - 1.0).abs() >= 0.2 {
        outside.push(format!("hdd: parallelism {}", small.parallelism));
    }
    let gain = small.samples[2].throughput_bps / small.samples[0].throughput_bps;
    if gain >= 1.1 {
        outside.push(format!(
            "hdd: depth 4 gives {gain} times depth 1's throughput"
        ));
    }
    outside
}

fn main() {
    let outside: Vec<String> = flash().into_iter().chain(hdd()).collect();
    if outside.is_empty() {
        println!("profile accuracy: every figure within its tolerance");
    } else {
        for o in &outside {
            eprintln!("outside its tolerance: {o}");
        }
        std::process::exit(1);
    }
}
