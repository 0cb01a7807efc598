//! Schedules one random transfer instance with one schedule and prints its
//! size, Δ, the schedule's length and the time it took: what
//! docs/performance.md times the 10-million-transfer instance with (and
//! measures memory around, with `/usr/bin/time -v`), where a criterion
//! benchmark of the slower heuristics would take hours.
//!
//! `cargo run --release -p concerto-bench --example transfer_schedule --
//! CLIENTS SERVERS DENSITY MAX SCHEDULE`, SCHEDULE one of `optimal`, `fcfs`,
//! `hdf`, `hcdf`, `uar`, `m-passes` (3 passes) or `none` (only build the
//! instance).

use std::process::ExitCode;
use std::time::Instant;

use concerto_core::client::transfers::{optimal, random_counts, schedule, Heuristic, Transfers};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || {
        eprintln!("usage: transfer_schedule CLIENTS SERVERS DENSITY MAX SCHEDULE");
        ExitCode::from(2)
    };
    let [clients, servers, density, max, which] = args.as_slice() else {
        return usage();
    };
    let (Ok(clients), Ok(servers), Ok(density), Ok(max)) = (
        clients.parse::<u32>(),
        servers.parse::<u32>(),
        density.parse::<f64>(),
        max.parse::<u64>(),
    ) else {
        return usage();
    };
    let heuristic = match which.as_str() {
        "optimal" | "none" => None,
        "fcfs" => Some(Heuristic::Fcfs),
        "hdf" => Some(Heuristic::Hdf),
        "hcdf" => Some(Heuristic::Hcdf),
        "uar" => Some(Heuristic::Uar),
        "m-passes" => Some(Heuristic::MPasses { passes: 3 }),
        _ => return usage(),
    };
    let rows = random_counts(clients, servers, density, max, 1);
    let t = match Transfers::from_counts(&rows) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("transfer_schedule: {e}");
            return ExitCode::from(2);
        }
    };
    drop(rows);
    println!(
        "{clients} x {servers}, density {density}, 1 to {max} per pair: {} transfers, delta {}",
        t.edges().len(),
        t.max_degree()
    );
    if which == "none" {
        return ExitCode::SUCCESS;
    }
    let start = Instant::now();
    let s = match heuristic {
        None => optimal(&t),
        Some(h) => schedule(&t, h, 1),
    };
    let took = start.elapsed();
    let valid = s.check(&t);
    println!(
        "{which}: {} steps ({:.4} of delta) in {took:.2?}; {}",
        s.len(),
        s.len() as f64 / f64::from(t.max_degree().max(1)),
        if valid.is_ok() { "valid" } else { "INVALID" }
    );
    match valid {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("transfer_schedule: {e}");
            ExitCode::FAILURE
        }
    }
}
