//! Who a client is: the application and rank stamped on every request. The
//! one place where an identity is read from an environment — this process's
//! own, or (for the FUSE mount) a calling process's, as it was at exec.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use concerto_proto::auth::Credential;
use concerto_proto::cluster::ClusterFile;
use concerto_proto::Tags;

/// Variables naming the application, first found wins: Concerto's own,
/// then the batch system's or launcher's job id, so the ranks of one job
/// share an application as Lustre's `jobid_var` makes them — Slurm, PBS,
/// LSF, Flux, PMIx (the namespace every PMIx launcher gives a job: Open
/// MPI 4 and 5, PRRTE, Slurm with PMIx) and Open MPI's own job id. MPICH's
/// Hydra sets none; a job whose variables name none of these is known by
/// its session ([`session_app`]).
pub const APP_VARS: [&str; 8] = [
    "CONCERTO_APP_ID",
    "SLURM_JOB_ID",
    "PBS_JOBID",
    "LSB_JOBID",
    "FLUX_JOB_ID",
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "OMPI_MCA_orte_ess_jobid",
];
/// Variables naming the rank, first found wins: Concerto's own, then what
/// Slurm, PMIx, MPICH/Hydra (PMI) and Open MPI set for each process.
pub const RANK_VARS: [&str; 5] = [
    "CONCERTO_RANK",
    "SLURM_PROCID",
    "PMIX_RANK",
    "PMI_RANK",
    "OMPI_COMM_WORLD_RANK",
];

/// The application id a job id names: the number itself when it is one
/// below 2^31 (`SLURM_JOB_ID=12` is application 12, as a tenant key for
/// job 12 says), else a stable hash of the text with the top bit set
/// (`1234.pbs01`, `prterun-node-4242@1`), so a hashed id never collides
/// with a numbered job.
pub fn app_of_job(job: &str) -> u32 {
    use sha2::{Digest, Sha256};
    let job = job.trim();
    match job.parse::<u32>() {
        Ok(n) if n < HASHED_APPS => n,
        _ => {
            let d = Sha256::digest(job.as_bytes());
            HASHED_APPS | (u32::from_le_bytes([d[0], d[1], d[2], d[3]]) & (HASHED_APPS - 1))
        }
    }
}

/// The application of a process no job id names: its session (`getsid`),
/// which the processes one shell or one launcher started share. MPICH's
/// Hydra gives each rank a session of its own under one proxy per node, so
/// a process a PMI launcher started (`pmi_launched`: a rank, or a program
/// a rank ran) is known by the session of the launcher: its nearest
/// ancestor without `PMI_RANK`. The process id when neither can be read.
pub fn session_app(pid: u32, pmi_launched: bool) -> u32 {
    let of = if pmi_launched {
        launcher_of(pid).unwrap_or(pid)
    } else {
        pid
    };
    // SAFETY: getsid only reads the process table.
    app_of_session(unsafe { libc::getsid(of as libc::pid_t) }, pid)
}

/// The application `getsid` answered `session` for, about process `pid`.
/// A session led from outside this pid namespace reads as 0 — in a
/// container or a batch system's step every process's session may — and
/// every process that reads 0 here shares that one outer session, so it
/// is one application, named by the namespace (a hash, above the numbered
/// jobs). The process id when the process is gone (`-1`).
fn app_of_session(session: libc::pid_t, pid: u32) -> u32 {
    match session {
        s if s > 0 => s as u32,
        0 => {
            let ns = std::fs::read_link("/proc/self/ns/pid")
                .map_or_else(|_| "?".to_string(), |l| l.display().to_string());
            app_of_job(&format!("session outside pid namespace {ns}"))
        }
        _ => pid,
    }
}

/// The nearest ancestor of `pid` whose environment has no `PMI_RANK`.
fn launcher_of(pid: u32) -> Option<u32> {
    let mut at = pid;
    // A process tree is shallow; the bound only guards against a loop
    // while processes exit and their ids are reused.
    for _ in 0..64 {
        at = parent_of(at)?;
        let environ = std::fs::read(format!("/proc/{at}/environ")).ok()?;
        if !environ
            .split(|&b| b == 0)
            .any(|kv| kv.starts_with(b"PMI_RANK="))
        {
            return Some(at);
        }
    }
    None
}

/// A process's parent, from `/proc/PID/stat` (`pid (comm) state ppid ...`;
/// the command name may hold spaces and parentheses, so it is skipped up to
/// the last `)`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Application ids from here up are hashes of job ids that are not numbers.
pub const HASHED_APPS: u32 = 1 << 31;

/// Who this client is, stamped on every request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Identity {
    pub app: u32,
    pub rank: u32,
    pub weight: Option<f64>,
}

impl Identity {
    /// Application `app`, rank `rank`, the servers' default weight.
    pub fn new(app: u32, rank: u32) -> Identity {
        Identity {
            app,
            rank,
            weight: None,
        }
    }

    /// The identity an environment names (see [`APP_VARS`] and
    /// [`RANK_VARS`]); `fallback_app` when it names no application, rank 0
    /// when it names no rank. Empty values are skipped, and so are ranks
    /// that are not numbers.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, fallback_app: u32) -> Identity {
        let set = |k: &&str| var(k).filter(|v| !v.trim().is_empty());
        let app = APP_VARS.iter().find_map(set).map(|job| app_of_job(&job));
        let rank = RANK_VARS
            .iter()
            .find_map(|k| set(k).and_then(|v| v.trim().parse::<u32>().ok()));
        Identity::new(app.unwrap_or(fallback_app), rank.unwrap_or(0))
    }

    /// This process's identity: from its environment, else its session as
    /// the application ([`session_app`]), never its own process id, so the
    /// ranks of a plain `mpirun` are one application, not one each.
    pub fn from_env() -> Identity {
        let var = |k: &str| std::env::var(k).ok();
        let pmi = var("PMI_RANK").is_some();
        Identity::from_vars(var, session_app(std::process::id(), pmi))
    }

    /// The identity of process `pid` (the FUSE mount's caller): what its
    /// environment at exec names (`/proc/PID/environ`), else its session.
    pub fn of_process(pid: u32) -> Identity {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let pmi = environ
            .split(|&b| b == 0)
            .any(|kv| kv.starts_with(b"PMI_RANK="));
        Identity::from_environ(&environ, session_app(pid, pmi))
    }

    /// The supplementary groups of process `pid` (the FUSE mount's caller),
    /// from `/proc/PID/status`; none if it is gone. At most
    /// [`concerto_proto::auth::MAX_GROUPS`] (what the servers take).
    pub fn groups_of_process(pid: u32) -> Vec<u32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        groups_in_status(&status)
    }

    /// The identity named by a process's environment block as
    /// `/proc/PID/environ` holds it (`KEY=VALUE`, NUL-separated).
    pub fn from_environ(environ: &[u8], fallback_app: u32) -> Identity {
        Identity::from_vars(
            |key| {
                environ.split(|&b| b == 0).find_map(|kv| {
                    let value = kv.strip_prefix(key.as_bytes())?.strip_prefix(b"=")?;
                    std::str::from_utf8(value).ok().map(str::to_string)
                })
            },
            fallback_app,
        )
    }

    /// The tags of a request issued now.
    pub fn tags(&self) -> Tags {
        let issue_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Tags {
            app: self.app,
            rank: self.rank,
            issue_ns,
            weight: self.weight,
        }
    }
}

/// A cluster file read from `path`, with the credential a client finds for
/// it ([`credential_for`], through this process's environment): what a
/// program given a cluster file's path needs to connect. The error names
/// the file.
pub fn load_cluster(path: &Path) -> Result<(ClusterFile, Credential), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let cluster = ClusterFile::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let credential = credential_for(path, &cluster, |k| std::env::var(k).ok())?;
    Ok((cluster, credential))
}

/// The variable naming a credential file; it wins over the cluster file's.
pub const CREDENTIAL_VAR: &str = "CONCERTO_CREDENTIAL";

/// The key a client authenticates with: the file `CONCERTO_CREDENTIAL`
/// names (through `var`), else the cluster file's `credential`, relative
/// to the cluster file's directory. The error says where it looked.
pub fn credential_for(
    cluster_file: &Path,
    cluster: &ClusterFile,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Credential, String> {
    if let Some(path) = var(CREDENTIAL_VAR).filter(|p| !p.is_empty()) {
        return Credential::load(Path::new(&path)).map_err(|e| format!("{CREDENTIAL_VAR}: {e}"));
    }
    match &cluster.cluster.credential {
        Some(path) => {
            let dir = cluster_file.parent().unwrap_or(Path::new("."));
            Credential::load(&dir.join(path))
                .map_err(|e| format!("{}: cluster.credential: {e}", cluster_file.display()))
        }
        None => Err(format!(
            "no credential: set {CREDENTIAL_VAR} to the key file the administrator issued \
             (`concerto auth issue`), or give cluster.credential in {}",
            cluster_file.display()
        )),
    }
}

/// The `Groups:` line of a `/proc/PID/status` text, as numbers.
fn groups_in_status(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .take(concerto_proto::auth::MAX_GROUPS - 1)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_status_gives_its_supplementary_groups() {
        let status = "Name:\tbash\nUid:\t1001\t1001\t1001\t1001\nGroups:\t100 400 \nNSpid:\t7\n";
        assert_eq!(groups_in_status(status), vec![100, 400]);
        assert_eq!(groups_in_status("Groups:\n"), Vec::<u32>::new());
        assert_eq!(groups_in_status(""), Vec::<u32>::new());
    }

    #[test]
    fn a_cluster_file_that_cannot_be_loaded_is_named() {
        let dir = std::env::temp_dir().join(format!("concerto-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.toml");
        let e = load_cluster(&missing).unwrap_err();
        assert!(e.starts_with(&format!("{}: ", missing.display())), "{e}");
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "[cluster\n").unwrap();
        let e = load_cluster(&bad).unwrap_err();
        assert!(e.starts_with(&format!("{}: ", bad.display())), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn concerto_variables_win_over_the_batch_system() {
        let id = Identity::from_vars(
            env(&[
                ("SLURM_JOB_ID", "9"),
                ("CONCERTO_APP_ID", "7"),
                ("SLURM_PROCID", "3"),
                ("CONCERTO_RANK", "1"),
            ]),
            42,
        );
        assert_eq!((id.app, id.rank), (7, 1));
    }

    #[test]
    fn the_rank_comes_from_slurm_pmi_or_open_mpi() {
        for var in ["SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK"] {
            let id = Identity::from_vars(env(&[("SLURM_JOB_ID", "9"), (var, "5")]), 42);
            assert_eq!((id.app, id.rank), (9, 5), "{var}");
        }
    }

    #[test]
    fn without_variables_the_fallback_application_and_rank_zero() {
        let id = Identity::from_vars(env(&[("CONCERTO_APP_ID", " "), ("PMI_RANK", "x")]), 42);
        assert_eq!((id.app, id.rank), (42, 0));
    }

    /// Every launcher's job id names the application, so the ranks of one
    /// job share it; a job id that is not a number is hashed, the same in
    /// every rank, above the numbered jobs.
    #[test]
    fn each_launchers_job_id_names_the_application() {
        for var in &APP_VARS[1..] {
            let a = Identity::from_vars(env(&[(var, "4242.host"), ("PMIX_RANK", "0")]), 1);
            let b = Identity::from_vars(env(&[(var, "4242.host"), ("PMIX_RANK", "3")]), 2);
            assert_eq!((a.app, b.rank), (b.app, 3), "{var}");
            assert!(a.app >= HASHED_APPS, "{var}: {}", a.app);
            let numbered = Identity::from_vars(env(&[(var, "17")]), 1);
            assert_eq!(numbered.app, 17, "{var}");
        }
        assert_ne!(app_of_job("prterun-a-1@1"), app_of_job("prterun-a-2@1"));
        assert_eq!(app_of_job("3000000000"), app_of_job(" 3000000000 "));
        assert!(app_of_job("3000000000") >= HASHED_APPS);
    }

    /// Without a job id, a process is known by its session: two processes
    /// of one session (a plain launcher's ranks) are one application.
    #[test]
    fn without_a_job_id_a_process_is_its_session() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .env_remove("CONCERTO_APP_ID")
            .envs(APP_VARS.iter().map(|v| (*v, "")))
            .spawn()
            .unwrap();
        let theirs = Identity::of_process(child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        let ours = session_app(std::process::id(), false);
        assert_eq!(theirs.app, ours);
        assert_ne!(theirs.app, child.id());
    }

    /// A rank a PMI launcher started in a session of its own (as MPICH's
    /// Hydra does) is known by its launcher's session, which its sibling
    /// ranks share.
    #[test]
    fn a_pmi_rank_in_its_own_session_is_known_by_its_parents() {
        let mut rank = std::process::Command::new("setsid")
            .args(["sleep", "5"])
            .env("PMI_RANK", "1")
            .envs(APP_VARS.iter().map(|v| (*v, "")))
            .spawn()
            .unwrap();
        // setsid forks when it leads a process group; poll until `sleep`
        // runs in a session of its own with its environment in place (the
        // kernel names the new executable in /proc/PID/exe before it sets
        // up the environment: under load, reading between the two found
        // an empty environ).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let sleeper = loop {
            // SAFETY: getsid only reads the process table.
            let own = |pid: u32| unsafe { libc::getsid(pid as libc::pid_t) } == pid as i32;
            let exe = std::fs::read_link(format!("/proc/{}/exe", rank.id())).ok();
            let environ = std::fs::read(format!("/proc/{}/environ", rank.id())).unwrap_or_default();
            let has_rank = environ.split(|&b| b == 0).any(|kv| kv == b"PMI_RANK=1");
            if own(rank.id()) && exe.is_some_and(|e| e.ends_with("sleep")) && has_rank {
                break rank.id();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "setsid never ran sleep"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let id = Identity::of_process(sleeper);
        rank.kill().unwrap();
        rank.wait().unwrap();
        let ours = session_app(std::process::id(), false);
        assert_eq!((id.app, id.rank), (ours, 1));
    }

    /// A session led from outside this pid namespace reads as 0 to every
    /// process inside it; they share it, so they are one application — not
    /// one each, and not a numbered job's.
    #[test]
    fn a_session_led_from_outside_the_namespace_is_one_application() {
        let a = app_of_session(0, 100);
        assert_eq!(a, app_of_session(0, 200));
        assert!(a >= HASHED_APPS, "{a}");
        assert_eq!(app_of_session(4242, 100), 4242);
        assert_eq!(app_of_session(-1, 100), 100);
    }

    #[test]
    fn an_environ_block_is_read_like_an_environment() {
        let block = b"PATH=/bin\0SLURM_JOB_ID=12\0PMI_RANK=4\0SLURM_JOB_ID_X=99\0";
        let id = Identity::from_environ(block, 1);
        assert_eq!((id.app, id.rank), (12, 4));
    }
}
