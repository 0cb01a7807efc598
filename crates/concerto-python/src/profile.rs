//! Profiling devices: a modelled one, the storage under a directory, and a
//! running data server through its own request path.

use pyo3::exceptions::{PyOSError, PyPermissionError, PyValueError};
use pyo3::prelude::*;
use serde::Serialize;

use concerto_client::probe::{DirectoryProbe, ServerProbe};
use concerto_client::{credential_for, ClientError, ClusterFile, Identity};
use concerto_core::profile::{self, Profile, ProfileSpec};
use concerto_sim::profile::DeviceProbe;

use crate::fs::py_err;
use crate::objects::{from_py, to_py};
use crate::{config_err, ConcertoConfigError};

/// What was profiled, beside a profile of real storage.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum ProbeInfo {
    Directory { path: String, direct: bool },
    Server { address: String, id: u32 },
}

/// A profile of real storage with what was profiled (`Profile` with
/// `probe` in the stub).
#[derive(Serialize)]
struct ProbedProfile {
    #[serde(flatten)]
    profile: Profile,
    probe: ProbeInfo,
}

/// A profiling sweep (`ProfileSpec` fields; defaults for the rest),
/// validated; errors name the field (`profile.count: ...`).
fn profile_spec(spec: Option<&Bound<'_, PyAny>>) -> PyResult<ProfileSpec> {
    let spec: ProfileSpec = match spec {
        Some(obj) => from_py(obj, "profile")?,
        None => ProfileSpec::default(),
    };
    spec.validate()
        .map_err(|e| ConcertoConfigError::new_err(e.within("profile")))?;
    Ok(spec)
}

/// Profiles a modelled device (`device`: the TOML keys of a
/// `[cluster.device]` table) with the sweep in `spec`.
#[pyfunction]
#[pyo3(signature = (device, spec=None, seed=1))]
pub fn profile_device(
    py: Python<'_>,
    device: &str,
    spec: Option<&Bound<'_, PyAny>>,
    seed: u64,
) -> PyResult<PyObject> {
    let mut probe = DeviceProbe::from_toml(device, seed).map_err(config_err)?;
    let spec = profile_spec(spec)?;
    let profile = py.allow_threads(|| profile::run(&mut probe, &spec));
    to_py(py, &profile)
}

/// Profiles the storage under directory `dir` (positioned reads, O_DIRECT
/// where the file system allows) over a working set of `working_set`
/// bytes, with the sweep in `spec`; the profile names the directory and
/// whether reads bypassed the page cache.
#[pyfunction]
#[pyo3(signature = (dir, working_set, spec=None, seed=1))]
pub fn profile_directory(
    py: Python<'_>,
    dir: std::path::PathBuf,
    working_set: u64,
    spec: Option<&Bound<'_, PyAny>>,
    seed: u64,
) -> PyResult<PyObject> {
    let spec = profile_spec(spec)?;
    let (profile, direct) = py
        .allow_threads(|| {
            let mut probe = DirectoryProbe::create(&dir, working_set, seed)?;
            let profile = profile::run(&mut probe, &spec);
            match probe.error() {
                Some(e) => Err(std::io::Error::other(e.to_string())),
                None => Ok((profile, probe.direct())),
            }
        })
        .map_err(|e| PyOSError::new_err(format!("profiling {}: {e}", dir.display())))?;
    let probe = ProbeInfo::Directory {
        path: dir.display().to_string(),
        direct,
    };
    to_py(py, &ProbedProfile { profile, probe })
}

/// Profiles data server `server` (its id in the cluster file, or its
/// address) through its own request path, with the cluster file's
/// credential, over a working set of `working_set` bytes; the profile
/// names the server.
#[pyfunction]
#[pyo3(signature = (cluster, path, server, working_set, spec=None, seed=1))]
pub fn profile_server(
    py: Python<'_>,
    cluster: &str,
    path: std::path::PathBuf,
    server: &str,
    working_set: u64,
    spec: Option<&Bound<'_, PyAny>>,
    seed: u64,
) -> PyResult<PyObject> {
    let spec = profile_spec(spec)?;
    let cluster = ClusterFile::parse(cluster)
        .map_err(|e| PyValueError::new_err(format!("cluster file: {e}")))?;
    let credential = credential_for(&path, &cluster, |k| std::env::var(k).ok())
        .map_err(PyPermissionError::new_err)?;
    let entry = cluster
        .servers
        .iter()
        .find(|s| s.id.to_string() == server || s.address.to_string() == server)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "--server {server}: no server with that id or address in {} (ids: {})",
                path.display(),
                cluster
                    .servers
                    .iter()
                    .map(|s| s.id.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
    let address = entry.address;
    let identity = Identity::from_env();
    let timeout = cluster.timeout().max(std::time::Duration::from_secs(30));
    let profile = py
        .allow_threads(|| {
            let mut probe =
                ServerProbe::connect(address, &credential, identity, timeout, working_set, seed)?;
            let profile = profile::run(&mut probe, &spec);
            match probe.error() {
                Some(e) => Err(ClientError::Invalid(e.to_string())),
                None => Ok(profile),
            }
        })
        .map_err(py_err)?;
    let probe = ProbeInfo::Server {
        address: address.to_string(),
        id: entry.id,
    };
    to_py(py, &ProbedProfile { profile, probe })
}
