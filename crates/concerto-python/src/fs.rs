//! The real file system from Python: a blocking client over concerto-fs's
//! async one (each call releases the GIL and runs on the client's own tokio
//! runtime), and the server entry point behind `concerto server`.
//!
//! Errors become the Python exceptions a file system user expects:
//! `FileNotFoundError`, `FileExistsError`, `NotADirectoryError`,
//! `IsADirectoryError`, `OSError(ENOTEMPTY)`, `OSError(ENOSPC)`,
//! `OSError(ESTALE)`, `TimeoutError` and
//! `ConnectionError` (naming the server), `ValueError` for bad arguments.

use std::future::Future;
use std::sync::Arc;

use pyo3::exceptions::{
    PyConnectionError, PyFileExistsError, PyFileNotFoundError, PyIsADirectoryError,
    PyNotADirectoryError, PyOSError, PyPermissionError, PyTimeoutError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_json::json;

use concerto_client::probe::{DirectoryProbe, ServerProbe};
use concerto_client::proto::auth::{Grant, Key, KeyRing, Secret};
use concerto_client::proto::stats::ServerStats;
use concerto_client::proto::{ErrorKind, LayoutRequest};
use concerto_client::transfers::{TransferOrder, TRANSFERS_VAR};
use concerto_client::{
    credential_for, ClientError, ClusterFile, FileHandle, FsClient, Identity, IoPhase,
};
use concerto_core::Extent;

fn py_err(e: ClientError) -> PyErr {
    let msg = e.to_string();
    match &e {
        ClientError::Timeout { .. } => PyTimeoutError::new_err(msg),
        ClientError::Connect { .. } | ClientError::Closed { .. } => PyConnectionError::new_err(msg),
        ClientError::Invalid(_) => PyValueError::new_err(msg),
        ClientError::Unexpected { .. } => PyOSError::new_err(msg),
        ClientError::Auth { .. } => PyPermissionError::new_err(msg),
        ClientError::Deferred { kind: None, .. } => PyOSError::new_err((libc::EIO, msg)),
        ClientError::Server { kind, .. }
        | ClientError::Deferred {
            kind: Some(kind), ..
        } => match kind {
            ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
            ErrorKind::Exists => PyFileExistsError::new_err(msg),
            ErrorKind::NotADirectory => PyNotADirectoryError::new_err(msg),
            ErrorKind::IsADirectory => PyIsADirectoryError::new_err(msg),
            ErrorKind::NotEmpty => PyOSError::new_err((libc::ENOTEMPTY, msg)),
            ErrorKind::NoSpace => PyOSError::new_err((libc::ENOSPC, msg)),
            ErrorKind::Stale => PyOSError::new_err((libc::ESTALE, msg)),
            ErrorKind::Busy => PyOSError::new_err((libc::EAGAIN, msg)),
            ErrorKind::Invalid => PyValueError::new_err(msg),
            ErrorKind::Denied => PyPermissionError::new_err(msg),
            ErrorKind::Io | ErrorKind::Protocol => PyOSError::new_err(msg),
        },
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// An open file: path, inode and layout (stripe unit and server ids).
#[pyclass(frozen, module = "concerto._native")]
pub struct FsFile {
    handle: FileHandle,
}

#[pymethods]
impl FsFile {
    #[getter]
    fn path(&self) -> &str {
        &self.handle.path
    }
    #[getter]
    fn inode(&self) -> u64 {
        self.handle.inode
    }
    #[getter]
    fn stripe_unit(&self) -> u64 {
        self.handle.layout.unit()
    }
    #[getter]
    fn servers(&self) -> Vec<u32> {
        self.handle.layout.servers().to_vec()
    }
    fn __repr__(&self) -> String {
        format!(
            "FsFile({:?}, inode={}, unit={}, servers={:?})",
            self.handle.path,
            self.handle.inode,
            self.handle.layout.unit(),
            self.handle.layout.servers()
        )
    }
}

#[pyclass(frozen, module = "concerto._native")]
pub struct FsClientHandle {
    runtime: tokio::runtime::Runtime,
    inner: Arc<FsClient>,
    /// The I/O phase this client holds at the coordinator, if any.
    phase: std::sync::Mutex<Option<IoPhase>>,
}

fn extents(list: Vec<(u64, u64)>) -> Vec<Extent> {
    list.into_iter().map(|(o, l)| Extent::new(o, l)).collect()
}

impl FsClientHandle {
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl Future<Output = Result<T, ClientError>> + Send,
    ) -> PyResult<T> {
        py.allow_threads(|| self.runtime.block_on(f))
            .map_err(py_err)
    }
}

#[pymethods]
impl FsClientHandle {
    /// `cluster`: the cluster file's text; `path`: where it is (a relative
    /// `credential` is found from there). Identity from the arguments, else
    /// the job and rank the environment names (`concerto_client::identity`);
    /// a tenant credential fixes the application to its job.
    #[new]
    #[pyo3(signature = (cluster, path, app=None, rank=None, weight=None, transfers=None))]
    fn new(
        cluster: &str,
        path: std::path::PathBuf,
        app: Option<u32>,
        rank: Option<u32>,
        weight: Option<f64>,
        transfers: Option<&str>,
    ) -> PyResult<FsClientHandle> {
        // The argument, else the environment's (named in the error).
        let from_env = std::env::var(TRANSFERS_VAR)
            .ok()
            .filter(|t| !t.trim().is_empty());
        let (transfers, source) = match (transfers, &from_env) {
            (Some(t), _) => (Some(t), "transfers"),
            (None, Some(t)) => (Some(t.as_str()), TRANSFERS_VAR),
            (None, None) => (None, ""),
        };
        let transfers = transfers
            .map(TransferOrder::parse)
            .transpose()
            .map_err(|e| PyValueError::new_err(format!("{source}: {e}")))?;
        let cluster = ClusterFile::parse(cluster)
            .map_err(|e| PyValueError::new_err(format!("cluster file: {e}")))?;
        let credential = credential_for(&path, &cluster, |k| std::env::var(k).ok())
            .map_err(PyPermissionError::new_err)?;
        if let Some(w) = weight.filter(|w| !(w.is_finite() && *w > 0.0)) {
            return Err(PyValueError::new_err(format!(
                "weight: {w} is not a number > 0"
            )));
        }
        let env = Identity::from_env();
        let identity = Identity {
            app: app.unwrap_or(env.app),
            rank: rank.unwrap_or(env.rank),
            weight: weight.or(env.weight),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| PyOSError::new_err(format!("cannot start the client runtime: {e}")))?;
        Ok(FsClientHandle {
            runtime,
            inner: Arc::new(
                FsClient::new(cluster, identity, credential).with_transfer_order(transfers),
            ),
            phase: std::sync::Mutex::new(None),
        })
    }

    #[getter]
    fn app(&self) -> u32 {
        self.inner.identity().app
    }
    #[getter]
    fn rank(&self) -> u32 {
        self.inner.identity().rank
    }

    #[pyo3(signature = (path, mode=concerto_client::DEFAULT_DIR_MODE))]
    fn mkdir(&self, py: Python<'_>, path: &str, mode: u32) -> PyResult<()> {
        self.run(py, self.inner.mkdir_mode(path, mode)).map(|_| ())
    }
    /// chmod, chown and chgrp in one request; the new attributes as JSON.
    #[pyo3(signature = (path, mode=None, uid=None, gid=None))]
    fn set_attr(
        &self,
        py: Python<'_>,
        path: &str,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> PyResult<String> {
        Ok(stat_json(
            &self.run(py, self.inner.set_attr(path, mode, uid, gid))?,
        ))
    }
    fn access(&self, py: Python<'_>, path: &str, mask: u32) -> PyResult<()> {
        self.run(py, self.inner.access(path, mask))
    }
    fn rmdir(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        self.run(py, self.inner.rmdir(path))
    }
    fn unlink(&self, py: Python<'_>, path: &str) -> PyResult<()> {
        self.run(py, self.inner.unlink(path))
    }
    fn rename(&self, py: Python<'_>, src: &str, dst: &str) -> PyResult<()> {
        self.run(py, self.inner.rename(src, dst))
    }
    fn truncate(&self, py: Python<'_>, path: &str, size: u64) -> PyResult<()> {
        self.run(py, self.inner.truncate(path, size))
    }
    #[pyo3(signature = (path, unit=None, count=None))]
    fn setstripe(
        &self,
        py: Python<'_>,
        path: &str,
        unit: Option<u64>,
        count: Option<u32>,
    ) -> PyResult<()> {
        self.run(py, self.inner.setstripe(path, unit, count))
    }

    #[pyo3(signature = (path, unit=None, count=None, exclusive=true))]
    fn create(
        &self,
        py: Python<'_>,
        path: &str,
        unit: Option<u64>,
        count: Option<u32>,
        exclusive: bool,
    ) -> PyResult<FsFile> {
        if unit == Some(0) || count == Some(0) {
            return Err(PyValueError::new_err("stripe unit and count must be > 0"));
        }
        let handle = self.run(
            py,
            self.inner
                .create(path, LayoutRequest { unit, count }, exclusive),
        )?;
        Ok(FsFile { handle })
    }

    #[pyo3(signature = (path, write=false))]
    fn open(&self, py: Python<'_>, path: &str, write: bool) -> PyResult<FsFile> {
        Ok(FsFile {
            handle: self.run(py, self.inner.open(path, write))?,
        })
    }

    /// Makes what the handle wrote durable and lets it go.
    fn close(&self, py: Python<'_>, file: &FsFile) -> PyResult<()> {
        self.run(py, self.inner.close(&file.handle))
    }

    /// Each object's length, in layout order (one request per server).
    fn object_sizes(&self, py: Python<'_>, file: &FsFile) -> PyResult<Vec<u64>> {
        self.run(py, self.inner.object_sizes(&file.handle))
    }

    fn write(&self, py: Python<'_>, file: &FsFile, offset: u64, data: &[u8]) -> PyResult<()> {
        let data = data.to_vec();
        self.run(py, self.inner.write(&file.handle, offset, &data))
    }

    fn read<'py>(
        &self,
        py: Python<'py>,
        file: &FsFile,
        offset: u64,
        len: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.run(py, self.inner.read(&file.handle, offset, len))?;
        Ok(PyBytes::new(py, &data))
    }

    /// List I/O: `extents` is a list of (offset, length), ascending and disjoint.
    fn write_list(
        &self,
        py: Python<'_>,
        file: &FsFile,
        extents_: Vec<(u64, u64)>,
        data: &[u8],
    ) -> PyResult<()> {
        let (ext, data) = (extents(extents_), data.to_vec());
        self.run(py, self.inner.write_list(&file.handle, &ext, &data))
    }

    fn read_list<'py>(
        &self,
        py: Python<'py>,
        file: &FsFile,
        extents_: Vec<(u64, u64)>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let ext = extents(extents_);
        let data = self.run(py, self.inner.read_list(&file.handle, &ext))?;
        Ok(PyBytes::new(py, &data))
    }

    fn fsync(&self, py: Python<'_>, file: &FsFile) -> PyResult<()> {
        self.run(py, self.inner.fsync(&file.handle))
    }

    /// Copies the local file at `path` into `file` from offset 0, `chunk`
    /// bytes at a time, the bytes never passing through Python;
    /// `on_progress(bytes so far)` after each chunk. Returns the bytes copied.
    #[pyo3(signature = (file, path, chunk, on_progress=None))]
    fn copy_in(
        &self,
        py: Python<'_>,
        file: &FsFile,
        path: std::path::PathBuf,
        chunk: usize,
        on_progress: Option<PyObject>,
    ) -> PyResult<u64> {
        use std::io::Read;
        let local_err = |e: std::io::Error| PyOSError::new_err(format!("{}: {e}", path.display()));
        let mut src = std::fs::File::open(&path).map_err(local_err)?;
        let mut buf = vec![0u8; chunk.max(1)];
        let mut offset = 0u64;
        loop {
            let n = py.allow_threads(|| {
                // Fill the chunk (a read may return less than asked).
                let mut filled = 0;
                while filled < buf.len() {
                    match src.read(&mut buf[filled..])? {
                        0 => break,
                        n => filled += n,
                    }
                }
                Ok::<usize, std::io::Error>(filled)
            });
            let n = n.map_err(local_err)?;
            if n == 0 {
                break;
            }
            self.run(py, self.inner.write(&file.handle, offset, &buf[..n]))?;
            offset += n as u64;
            if let Some(progress) = &on_progress {
                progress.call1(py, (offset,))?;
            }
        }
        Ok(offset)
    }

    /// Copies `size` bytes of `file` from offset 0 into a new local file at
    /// `path`, `chunk` bytes at a time, the bytes never passing through
    /// Python; stops early at the end of the file. `on_progress(bytes so
    /// far)` after each chunk. Returns the bytes copied.
    #[pyo3(signature = (file, path, size, chunk, on_progress=None))]
    fn copy_out(
        &self,
        py: Python<'_>,
        file: &FsFile,
        path: std::path::PathBuf,
        size: u64,
        chunk: u64,
        on_progress: Option<PyObject>,
    ) -> PyResult<u64> {
        use std::io::Write;
        let local_err = |e: std::io::Error| PyOSError::new_err(format!("{}: {e}", path.display()));
        let mut dst = std::fs::File::create(&path).map_err(local_err)?;
        let mut offset = 0u64;
        while offset < size {
            let data = self.run(
                py,
                self.inner
                    .read(&file.handle, offset, chunk.max(1).min(size - offset)),
            )?;
            if data.is_empty() {
                break;
            }
            py.allow_threads(|| dst.write_all(&data))
                .map_err(local_err)?;
            offset += data.len() as u64;
            if let Some(progress) = &on_progress {
                progress.call1(py, (offset,))?;
            }
        }
        py.allow_threads(|| dst.flush()).map_err(local_err)?;
        Ok(offset)
    }

    /// JSON: inode, kind, size, times, layout (unit, servers), default layout, entries.
    fn stat(&self, py: Python<'_>, path: &str) -> PyResult<String> {
        Ok(stat_json(&self.run(py, self.inner.stat(path))?))
    }

    /// `stat` of an open file, by its inode (ESTALE once it was removed).
    fn fstat(&self, py: Python<'_>, file: &FsFile) -> PyResult<String> {
        Ok(stat_json(&self.run(py, self.inner.fstat(&file.handle))?))
    }

    /// JSON list of {name, inode, kind}.
    fn readdir(&self, py: Python<'_>, path: &str) -> PyResult<String> {
        Ok(to_json(&self.run(py, self.inner.readdir(path))?))
    }

    fn statfs(&self, py: Python<'_>) -> PyResult<String> {
        Ok(to_json(&self.run(py, self.inner.statfs())?))
    }

    /// JSON list, one per server in cluster-file order: its arrival log
    /// after request `after` (a list of arrivals), or {"error": message}.
    fn arrivals(&self, py: Python<'_>, after: u64) -> String {
        let all = py.allow_threads(|| self.runtime.block_on(self.inner.arrivals(after)));
        let out: Vec<serde_json::Value> = all
            .into_iter()
            .map(|r| match r {
                Ok(a) => json!(a),
                Err(e) => json!({"error": e.to_string()}),
            })
            .collect();
        serde_json::Value::Array(out).to_string()
    }

    /// JSON list, one per server in cluster-file order: the statistics, or {"error": message}.
    fn stats(&self, py: Python<'_>) -> String {
        let all = py.allow_threads(|| self.runtime.block_on(self.inner.stats()));
        let out: Vec<serde_json::Value> = all
            .into_iter()
            .map(|r| match r {
                Ok(s) => with_quantiles(&s),
                Err(e) => json!({"error": e.to_string()}),
            })
            .collect();
        serde_json::Value::Array(out).to_string()
    }

    /// Begins an I/O phase at the coordinator (returns once granted) and
    /// returns the set's priority; `None` when it runs ungated (no
    /// coordinator, or one that does not answer). A phase held already is
    /// kept.
    fn begin_phase(&self, py: Python<'_>) -> Option<f64> {
        let mut held = self.phase.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = held.as_ref() {
            return p.priority();
        }
        let phase = py.allow_threads(|| self.runtime.block_on(self.inner.begin_phase()));
        let priority = phase.priority();
        *held = Some(phase);
        priority
    }

    /// Replaces the coordinator's set rule (TOML text), live.
    fn set_sets(&self, py: Python<'_>, sets: &str) -> PyResult<()> {
        self.run(py, self.inner.set_sets(sets))
    }

    /// Ends the I/O phase this client holds, if any.
    fn end_phase(&self, py: Python<'_>) {
        let phase = self.phase.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(p) = phase {
            py.allow_threads(|| self.runtime.block_on(p.end()));
        }
    }

    /// JSON list, one per server: {"policy", "roles"} or {"error"}.
    fn ping(&self, py: Python<'_>) -> String {
        let all = py.allow_threads(|| self.runtime.block_on(self.inner.ping_all()));
        let out: Vec<serde_json::Value> = all
            .into_iter()
            .map(|r| match r {
                Ok((policy, roles)) => json!({"policy": policy, "roles": roles}),
                Err(e) => json!({"error": e.to_string()}),
            })
            .collect();
        serde_json::Value::Array(out).to_string()
    }

    /// Switches every server's policy live (TOML text of a `[policy]` table);
    /// returns per server the requests the previous policy still held.
    fn set_policy(&self, py: Python<'_>, policy: &str) -> PyResult<Vec<u64>> {
        self.run(py, self.inner.set_policy(policy))
    }

    /// Puts QoS rules (TOML) in force on every server, checked by all first.
    fn set_rules(&self, py: Python<'_>, rules: &str) -> PyResult<()> {
        self.run(py, self.inner.set_rules(rules))
    }

    /// Every server's QoS rules (TOML), as (server id, text) pairs.
    fn rules(&self, py: Python<'_>) -> PyResult<Vec<(u32, String)>> {
        self.run(py, self.inner.rules())
    }

    /// Tells every server the cluster map (ids, addresses, roles).
    fn introduce_cluster(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, self.inner.introduce_cluster())
    }
}

fn stat_json(s: &concerto_client::Stat) -> String {
    json!({
        "inode": s.inode, "kind": s.kind, "size": s.size, "ctime_ns": s.ctime_ns, "mtime_ns": s.mtime_ns,
        "layout": s.layout.as_ref().map(|l| json!({"unit": l.unit(), "servers": l.servers()})),
        "default_layout": s.default_layout.map(|(unit, count)| json!({"unit": unit, "count": count})),
        "entries": s.entries, "uid": s.uid, "gid": s.gid, "mode": s.mode,
    })
    .to_string()
}

/// Checks a cluster file; returns it as JSON.
#[pyfunction]
pub fn check_cluster_file(text: &str) -> PyResult<String> {
    ClusterFile::parse(text)
        .map(|c| to_json(&c))
        .map_err(|e| PyValueError::new_err(format!("cluster file: {e}")))
}

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

/// The ring's keys as JSON: id, grant ("admin", "peer", or the tenant's
/// job) and weight; never the secrets.
#[pyfunction]
pub fn list_keys(ring: &str) -> PyResult<String> {
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
            json!({"id": k.id, "role": role, "job": job, "weight": k.weight, "user": k.user, "groups": k.groups,
                   "users": users})
        })
        .collect();
    Ok(to_json(&keys))
}

/// A throttle preset (`hdd`, `ssd`) as JSON: bandwidth_Bps, latency_ns,
/// seek_ns, parallelism, and metadata_ns (what the throttle charges every
/// metadata operation).
#[pyfunction]
pub fn emulation_preset(name: &str) -> PyResult<String> {
    let p = concerto_core::emulation::EmulationConfig::preset(name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown preset {name:?} (hdd, ssd)")))?;
    Ok(json!({
        "bandwidth_Bps": p.bandwidth.0, "latency_ns": p.latency.as_nanos(), "seek_ns": p.seek.as_nanos(), "parallelism": p.parallelism,
        "metadata_ns": concerto_core::emulation::METADATA_SERVICE.as_nanos(),
    })
    .to_string())
}

/// A server's statistics as JSON, each latency histogram with its p50 and
/// p99 bucket bounds (`LatencyHistogram::quantile`) added.
fn with_quantiles(stats: &ServerStats) -> serde_json::Value {
    let mut value = serde_json::to_value(stats).unwrap_or_default();
    if let Some(hists) = value.get_mut("latency").and_then(|v| v.as_array_mut()) {
        for (h, json) in stats.latency.iter().zip(hists) {
            json["p50_s"] = json!(h.quantile(0.5));
            json["p99_s"] = json!(h.quantile(0.99));
        }
    }
    value
}

/// One stripe unit of a file: (stripe, first byte, last byte, server id, object offset).
type StripeRow = (u64, u64, u64, u32, u64);

/// The first `stripes` stripe units of a file of `size` bytes with layout
/// (`unit`, `servers`), by core's layout.
#[pyfunction]
pub fn stripe_map(
    unit: u64,
    servers: Vec<u32>,
    size: u64,
    stripes: u64,
) -> PyResult<Vec<StripeRow>> {
    let layout = concerto_core::StripeLayout::new(unit, servers)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let shown = size.min(stripes.saturating_mul(unit));
    Ok(layout
        .chunks(0, shown)
        .map(|c| {
            (
                c.file_offset / unit,
                c.file_offset,
                c.file_offset + c.len - 1,
                c.server,
                c.object_offset,
            )
        })
        .collect())
}

/// Profiles the storage under directory `dir` (positioned reads, O_DIRECT
/// where the file system allows) over a working set of `working_set`
/// bytes, with the sweep in `spec` (JSON). Returns the profile as JSON,
/// with `"probe": {"kind": "directory", "path": ..., "direct": ...}`.
#[pyfunction]
#[pyo3(signature = (dir, working_set, spec="{}", seed=1))]
pub fn profile_directory(
    py: Python<'_>,
    dir: std::path::PathBuf,
    working_set: u64,
    spec: &str,
    seed: u64,
) -> PyResult<String> {
    let spec = crate::profile_spec(spec)?;
    let (profile, direct) = py
        .allow_threads(|| {
            let mut probe = DirectoryProbe::create(&dir, working_set, seed)?;
            let profile = concerto_core::profile::run(&mut probe, &spec);
            match probe.error() {
                Some(e) => Err(std::io::Error::other(e.to_string())),
                None => Ok((profile, probe.direct())),
            }
        })
        .map_err(|e| PyOSError::new_err(format!("profiling {}: {e}", dir.display())))?;
    let mut out =
        serde_json::to_value(&profile).map_err(|e| PyValueError::new_err(e.to_string()))?;
    out["probe"] =
        json!({"kind": "directory", "path": dir.display().to_string(), "direct": direct});
    Ok(out.to_string())
}

/// Profiles data server `server` (its id in the cluster file, or its
/// address) through its own request path, with the cluster file's
/// credential, over a working set of `working_set` bytes. Returns the
/// profile as JSON, with `"probe": {"kind": "server", "address": ...}`.
#[pyfunction]
#[pyo3(signature = (cluster, path, server, working_set, spec="{}", seed=1))]
pub fn profile_server(
    py: Python<'_>,
    cluster: &str,
    path: std::path::PathBuf,
    server: &str,
    working_set: u64,
    spec: &str,
    seed: u64,
) -> PyResult<String> {
    let spec = crate::profile_spec(spec)?;
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
            let profile = concerto_core::profile::run(&mut probe, &spec);
            match probe.error() {
                Some(e) => Err(ClientError::Invalid(e.to_string())),
                None => Ok(profile),
            }
        })
        .map_err(py_err)?;
    let mut out =
        serde_json::to_value(&profile).map_err(|e| PyValueError::new_err(e.to_string()))?;
    out["probe"] = json!({"kind": "server", "address": address.to_string(), "id": entry.id});
    Ok(out.to_string())
}
