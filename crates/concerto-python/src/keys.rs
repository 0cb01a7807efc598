//! Key rings (the administrator's view: issue, revoke, list; never a
//! secret out) and the throttle's presets.

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use serde::Serialize;

use concerto_client::proto::auth::{Grant, Key, KeyRing, Secret};

use crate::objects::to_py;

/// A new key ring for a local cluster (an admin and a peer key) and the
/// admin key's credential, both as TOML.
#[pyfunction]
pub fn generate_keys() -> PyResult<(String, String)> {
    let ring = KeyRing::generate().map_err(PyOSError::new_err)?;
    let admin = ring
        .with_grant(Grant::Admin)
        .map(|k| k.credential().to_toml())
        .unwrap_or_default();
    Ok((ring.to_toml(), admin))
}

/// Adds a tenant key for `job` to the ring (TOML); returns the new ring
/// and the key's credential.
#[pyfunction]
#[pyo3(signature = (ring, id, job, weight=None, user=None, groups=Vec::new()))]
pub fn issue_key(
    ring: &str,
    id: &str,
    job: u32,
    weight: Option<f64>,
    user: Option<u32>,
    groups: Vec<u32>,
) -> PyResult<(String, String)> {
    let ring = KeyRing::parse(ring).map_err(PyValueError::new_err)?;
    if let Some(w) = weight.filter(|w| !(w.is_finite() && *w > 0.0)) {
        return Err(PyValueError::new_err(format!(
            "--weight: {w} is not a number > 0"
        )));
    }
    let key = Key {
        id: id.to_string(),
        grant: Grant::Tenant { job },
        weight,
        user,
        groups,
        secret: Secret::generate().map_err(PyOSError::new_err)?,
    };
    with_key(ring, key)
}

/// `ring` with `key` added, checked as the servers will read it (user 0,
/// groups without a user, root in a node's range: named as the option
/// that set it), and the key's credential.
fn with_key(mut ring: KeyRing, key: Key) -> PyResult<(String, String)> {
    let credential = key.credential().to_toml();
    ring.add(key).map_err(PyValueError::new_err)?;
    let ring = KeyRing::parse(&ring.to_toml()).map_err(|e| {
        PyValueError::new_err(e.replace(&format!("keys[{}].", ring.keys().len() - 1), "--"))
    })?;
    Ok((ring.to_toml(), credential))
}

/// Adds a node key to the ring (TOML), for a node's mount serving the
/// users `first_user..=last_user`; returns the new ring and the credential.
#[pyfunction]
pub fn issue_node_key(
    ring: &str,
    id: &str,
    first_user: u32,
    last_user: u32,
) -> PyResult<(String, String)> {
    let ring = KeyRing::parse(ring).map_err(PyValueError::new_err)?;
    let key = Key {
        id: id.to_string(),
        grant: Grant::Node {
            first_user,
            last_user,
        },
        weight: None,
        user: None,
        groups: Vec::new(),
        secret: Secret::generate().map_err(PyOSError::new_err)?,
    };
    with_key(ring, key)
}

/// The ring without key `id`.
#[pyfunction]
pub fn revoke_key(ring: &str, id: &str) -> PyResult<String> {
    let ring = KeyRing::parse(ring).map_err(PyValueError::new_err)?;
    let mut kept = KeyRing::default();
    let mut found = false;
    for k in ring.keys() {
        if k.id == id {
            found = true;
        } else {
            kept.add(k.clone()).map_err(PyValueError::new_err)?;
        }
    }
    if !found {
        return Err(PyValueError::new_err(format!("no key {id:?} in the ring")));
    }
    Ok(kept.to_toml())
}

/// The ring's keys: id, role ("admin", "peer", "tenant" with its job,
/// "node" with its users), weight, user and groups; never the secrets.
#[pyfunction]
pub fn list_keys(py: Python<'_>, ring: &str) -> PyResult<PyObject> {
    let ring = KeyRing::parse(ring).map_err(PyValueError::new_err)?;
    let keys: Vec<_> = ring
        .keys()
        .iter()
        .map(|k| {
            let (role, job, users) = match k.grant {
                Grant::Admin => ("admin", None, None),
                Grant::Peer => ("peer", None, None),
                Grant::Tenant { job } => ("tenant", Some(job), None),
                Grant::Node {
                    first_user,
                    last_user,
                } => ("node", None, Some([first_user, last_user])),
            };
            KeyInfo {
                id: &k.id,
                role,
                job,
                weight: k.weight,
                user: k.user,
                groups: &k.groups,
                users,
            }
        })
        .collect();
    to_py(py, &keys)
}

/// One key of a ring, without its secret (`KeyInfo` in the stub).
#[derive(Serialize)]
struct KeyInfo<'a> {
    id: &'a str,
    role: &'static str,
    job: Option<u32>,
    weight: Option<f64>,
    user: Option<u32>,
    groups: &'a [u32],
    users: Option<[u32; 2]>,
}
/// A throttle preset (`hdd`, `ssd`): bandwidth_Bps, latency_ns, seek_ns,
/// parallelism, and metadata_ns (what the throttle charges every metadata
/// operation).
#[pyfunction]
pub fn emulation_preset(py: Python<'_>, name: &str) -> PyResult<PyObject> {
    let p = concerto_core::emulation::EmulationConfig::preset(name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown preset {name:?} (hdd, ssd)")))?;
    let out = EmulationPreset {
        bandwidth_bps: p.bandwidth.0,
        latency_ns: p.latency.as_nanos(),
        seek_ns: p.seek.as_nanos(),
        parallelism: p.parallelism,
        metadata_ns: concerto_core::emulation::METADATA_SERVICE.as_nanos(),
    };
    to_py(py, &out)
}

/// A throttle preset's figures (`EmulationPreset` in the stub).
#[derive(Serialize)]
struct EmulationPreset {
    #[serde(rename = "bandwidth_Bps")]
    bandwidth_bps: f64,
    latency_ns: u64,
    seek_ns: u64,
    parallelism: u32,
    metadata_ns: u64,
}
