//! Runs one scenario file in the simulator and prints the run's events and
//! the time `simulate` took, without Python or result files: what
//! docs/performance.md times against SimGrid and measures memory with.
//!
//! `cargo run --release -p concerto-bench --example simulate -- FILE [KEY.PATH=VALUE ...]`

use std::process::ExitCode;
use std::time::Instant;

use concerto_sim::{simulate, Scenario};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: simulate FILE [KEY.PATH=VALUE ...]");
        return ExitCode::from(2);
    };
    let overrides: Vec<String> = args.collect();
    let scenario = match std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| Scenario::from_toml(&text, &overrides).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("simulate: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let start = Instant::now();
    let run = simulate(&scenario, 1, None);
    let seconds = start.elapsed().as_secs_f64();
    let s = &run.summary;
    println!(
        "{}: {} events, {} request completions in {seconds:.4} s: {:.2} M events/s, {:.0} ns per completion",
        scenario.name,
        s.events,
        s.requests,
        s.events as f64 / seconds / 1e6,
        seconds * 1e9 / s.requests.max(1) as f64
    );
    ExitCode::SUCCESS
}
