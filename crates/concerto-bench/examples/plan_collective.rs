//! Plans one collective call of the planning benchmark's pattern
//! (noncontig, 1,024 processes, 64 servers, 64 KiB stripes, 64-byte
//! pieces) `REPEAT` times, for timing whole runs side by side with
//! `farm-bench` (criterion's figures vary too much between invocations on
//! a shared machine to compare two builds):
//!
//!     cargo run --release -p concerto-bench --example plan_collective -- \
//!         two-phase write 64 20
//!
//! Arguments: strategy (independent, two-phase, resonant), read or write,
//! MiB per call (64 = 1,048,576 segments), repetitions.

use concerto_core::client::collective::patterns::Pattern;
use concerto_core::client::collective::{Direction, PlannerChoice, Strategy};
use concerto_core::StripeLayout;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: plan_collective STRATEGY read|write MIB REPEAT";
    let [strategy, direction, mib, repeat] = &args[..] else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let strategy = Strategy::parse(strategy).unwrap_or_else(|e| {
        eprintln!("{e}\n{usage}");
        std::process::exit(2)
    });
    let direction = match direction.as_str() {
        "read" => Direction::Read,
        "write" => Direction::Write,
        other => {
            eprintln!("direction {other:?}: read or write\n{usage}");
            std::process::exit(2)
        }
    };
    let (Ok(mib), Ok(repeat)) = (mib.parse::<u64>(), repeat.parse::<u32>()) else {
        eprintln!("{usage}");
        std::process::exit(2)
    };
    let layout = StripeLayout::round_robin(65536, 64, 0, 64).expect("a valid layout");
    let pattern = Pattern::Noncontig {
        elmtcount: 16,
        call_bytes: mib << 20,
    };
    let accesses = pattern.accesses(1024, 0);
    let planner = PlannerChoice {
        strategy,
        ..PlannerChoice::default()
    }
    .planner()
    .expect("default options are valid");
    let mut exchanged = 0;
    for _ in 0..repeat {
        let plan = planner
            .plan(direction, &accesses, &layout)
            .expect("the pattern plans");
        exchanged += plan.exchanged_bytes();
    }
    println!("{repeat} plans, {exchanged} bytes exchanged in all");
}
