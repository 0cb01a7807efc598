//! `concerto-server --config FILE`: one Concerto server (data, metadata or
//! both) as a plain process a service manager can supervise — no Python on
//! an I/O node. `--check` validates the file and exits without starting.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use concerto_proto::process::{until_stopped, write_ready_file};
use concerto_server::config::server_config_warned;
use concerto_server::server::{self, ServerConfig};

/// Run one Concerto server until SIGINT or SIGTERM.
#[derive(Parser)]
#[command(name = "concerto-server", version)]
struct Args {
    /// The server file (docs/deployment.md).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Validate the file, print what it describes, and exit.
    #[arg(long)]
    check: bool,
    /// Once listening, write the bound addresses here as JSON
    /// (`{"address": ..., "metrics": ...}`).
    #[arg(long, value_name = "FILE")]
    ready_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = match std::fs::read_to_string(&args.config)
        .map_err(|e| e.to_string())
        .and_then(|text| server_config_warned(&text))
    {
        Ok((cfg, warnings)) => {
            for w in warnings {
                eprintln!("concerto-server: warning: {}: {w}", args.config.display());
            }
            cfg
        }
        Err(e) => {
            eprintln!("concerto-server: {}: {e}", args.config.display());
            return ExitCode::from(2);
        }
    };
    eprintln!("concerto-server: {}", describe(&cfg));
    if args.check {
        return ExitCode::SUCCESS;
    }
    match run(cfg, args.ready_file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("concerto-server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One line: roles, address, data directory, policy and throttle.
fn describe(cfg: &ServerConfig) -> String {
    let roles: Vec<&str> = cfg.roles.iter().map(|r| r.name()).collect();
    let throttle = cfg.throttle.as_ref().map_or(String::new(), |t| {
        format!(", throttled to {}", t.describe())
    });
    format!(
        "{} on {}, data in {}, policy {}{throttle}",
        roles.join(", "),
        cfg.listen,
        cfg.data_dir.display(),
        cfg.policy.name()
    )
}

fn run(cfg: ServerConfig, ready_file: Option<PathBuf>) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let handle = server::start(cfg).await?;
        if let Some(path) = ready_file {
            let ready = serde_json::json!({
                "address": handle.addr.to_string(),
                "metrics": handle.metrics_addr.map(|a| a.to_string()),
            });
            write_ready_file(&path, &ready.to_string())?;
        }
        until_stopped(|| true).await?;
        handle.shutdown().await;
        Ok(())
    })
}
