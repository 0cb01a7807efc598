//! `concerto-fuse --cluster FILE MOUNTPOINT`: mounts a Concerto cluster with
//! FUSE and serves it until SIGINT or SIGTERM (then unmounts), or until
//! someone else unmounts it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use concerto_client::{load_cluster, ClusterFile, FsClient, Identity, TransferOrder};
use concerto_fuse::MountOptions;
use concerto_proto::auth::Credential;
use concerto_proto::process::{until_stopped, write_ready_file};

/// Mount a Concerto cluster at MOUNTPOINT.
#[derive(Parser)]
#[command(name = "concerto-fuse", version)]
struct Args {
    /// The cluster file (what `concerto cluster up` writes).
    #[arg(long, value_name = "FILE")]
    cluster: PathBuf,
    /// An existing directory to mount on.
    mountpoint: PathBuf,
    /// Seconds the kernel may cache names and attributes (0 to 3600).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = attr_ttl)]
    attr_ttl: f64,
    /// Once mounted, write `{"mountpoint": ...}` here as JSON.
    #[arg(long, value_name = "FILE")]
    ready_file: Option<PathBuf>,
    /// Writes that may be on their way to the servers after write(2)
    /// returned (e.g. 16MiB; 0 writes every write through). O_DIRECT and
    /// O_SYNC writes are always written through.
    #[arg(long, value_name = "SIZE", default_value = "16MiB", value_parser = write_behind)]
    write_behind: u64,
    /// Do not find callers' I/O phases for the cluster's coordinator
    /// (found by default when the cluster has one).
    #[arg(long)]
    no_phases: bool,
    /// Send each read or write in blocks in one of Clusterfile's orders,
    /// each caller as its rank: ORDERING[,block=SIZE][,in-flight=N][,seed=N]
    /// with ORDERING first-ios, random-ios or hash-ios (default: every
    /// server's part at once).
    #[arg(long, value_name = "ORDER", value_parser = TransferOrder::parse)]
    transfers: Option<TransferOrder>,
}

fn write_behind(text: &str) -> Result<u64, String> {
    let bytes = concerto_core::units::parse_size(text)?;
    if bytes > 1 << 30 {
        return Err(format!("{text}: at most 1GiB"));
    }
    Ok(bytes)
}

fn attr_ttl(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=3600.0).contains(&s) => Ok(s),
        _ => Err(format!(
            "{text:?} is not a number of seconds between 0 and 3600"
        )),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cluster = match load_cluster(&args.cluster) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("concerto-fuse: {e}");
            return ExitCode::from(2);
        }
    };
    match run(cluster, &args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("concerto-fuse: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run((cluster, credential): (ClusterFile, Credential), args: &Args) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let options = MountOptions {
        attr_ttl: Duration::from_secs_f64(args.attr_ttl),
        write_behind: args.write_behind,
        detect_phases: cluster.coordinator().is_some() && !args.no_phases,
    };
    let client = FsClient::new(cluster, Identity::from_env(), credential)
        .with_write_behind(args.write_behind)
        .with_transfer_order(args.transfers);
    let mounted =
        concerto_fuse::mount(client, &args.mountpoint, runtime.handle().clone(), options)?;
    eprintln!(
        "concerto-fuse: {} mounted on {}; stop with Ctrl-C",
        args.cluster.display(),
        mounted.mountpoint().display()
    );
    if let Some(path) = &args.ready_file {
        let ready = serde_json::json!({"mountpoint": mounted.mountpoint().display().to_string()});
        write_ready_file(path, &ready.to_string())?;
    }
    runtime.block_on(until_stopped(|| mounted.is_mounted()))?;
    if !mounted.is_mounted() {
        eprintln!(
            "concerto-fuse: {} was unmounted by someone else; stopping",
            mounted.mountpoint().display()
        );
    }
    drop(mounted);
    Ok(())
}
