//! Who a client is: the application and rank stamped on every request. The
//! one place where an identity is read from an environment — this process's
//! own, or (for the FUSE mount) a calling process's, as it was at exec.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use concerto_proto::auth::Credential;
use concerto_proto::cluster::ClusterFile;
use concerto_proto::Tags;

/// Variables naming the application, first found wins: Concerto's own, then
/// the batch system's job id, so the ranks of one job share an application.
pub const APP_VARS: [&str; 2] = ["CONCERTO_APP_ID", "SLURM_JOB_ID"];
/// Variables naming the rank, first found wins: Concerto's own, then what
/// Slurm, MPICH/Hydra (PMI) and Open MPI set for each process.
pub const RANK_VARS: [&str; 4] = [
    "CONCERTO_RANK",
    "SLURM_PROCID",
    "PMI_RANK",
    "OMPI_COMM_WORLD_RANK",
];

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
    /// when it names no rank. Values that are not numbers are skipped.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, fallback_app: u32) -> Identity {
        let first = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| var(k).and_then(|v| v.trim().parse::<u32>().ok()))
        };
        Identity::new(
            first(&APP_VARS).unwrap_or(fallback_app),
            first(&RANK_VARS).unwrap_or(0),
        )
    }

    /// This process's identity: from its environment, else its process id as
    /// the application.
    pub fn from_env() -> Identity {
        Identity::from_vars(|k| std::env::var(k).ok(), std::process::id())
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let id = Identity::from_vars(env(&[("CONCERTO_APP_ID", "not-a-number")]), 42);
        assert_eq!((id.app, id.rank), (42, 0));
    }

    #[test]
    fn an_environ_block_is_read_like_an_environment() {
        let block = b"PATH=/bin\0SLURM_JOB_ID=12\0PMI_RANK=4\0SLURM_JOB_ID_X=99\0";
        let id = Identity::from_environ(block, 1);
        assert_eq!((id.app, id.rank), (12, 4));
    }
}
