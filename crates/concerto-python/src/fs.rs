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
use serde::Serialize;
use serde_json::json;

use concerto_client::proto::stats::ServerStats;
use concerto_client::proto::{ErrorKind, FileKind, LayoutRequest, Role};
use concerto_client::transfers::{TransferOrder, TRANSFERS_VAR};
use concerto_client::{
    credential_for, ClientError, ClusterFile, FileHandle, FsClient, Identity, IoPhase,
};
use concerto_core::Extent;

use crate::objects::to_py;

pub fn py_err(e: ClientError) -> PyErr {
    let msg = e.to_string();
    match &e {
        ClientError::Timeout { .. } => PyTimeoutError::new_err(msg),
        ClientError::Connect { .. } | ClientError::Closed { .. } | ClientError::Ended { .. } => {
            PyConnectionError::new_err(msg)
        }
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
            ErrorKind::NotPermitted => PyPermissionError::new_err((libc::EPERM, msg)),
            ErrorKind::Io | ErrorKind::Protocol => PyOSError::new_err(msg),
        },
    }
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
    /// chmod, chown and chgrp in one request; the new attributes.
    #[pyo3(signature = (path, mode=None, uid=None, gid=None))]
    fn set_attr(
        &self,
        py: Python<'_>,
        path: &str,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> PyResult<PyObject> {
        let stat = self.run(py, self.inner.set_attr(path, mode, uid, gid))?;
        to_py(py, &StatOut::from(&stat))
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

    /// Inode, kind, size, times, owner and mode, layout (unit, servers),
    /// default layout, entries.
    fn stat(&self, py: Python<'_>, path: &str) -> PyResult<PyObject> {
        let stat = self.run(py, self.inner.stat(path))?;
        to_py(py, &StatOut::from(&stat))
    }

    /// `stat` of an open file, by its inode (ESTALE once it was removed).
    fn fstat(&self, py: Python<'_>, file: &FsFile) -> PyResult<PyObject> {
        let stat = self.run(py, self.inner.fstat(&file.handle))?;
        to_py(py, &StatOut::from(&stat))
    }

    /// The directory's entries: name, inode, kind.
    fn readdir(&self, py: Python<'_>, path: &str) -> PyResult<PyObject> {
        let entries = self.run(py, self.inner.readdir(path))?;
        to_py(py, &entries)
    }

    /// The file system's capacity and use, summed over the servers.
    fn statfs(&self, py: Python<'_>) -> PyResult<PyObject> {
        let statfs = self.run(py, self.inner.statfs())?;
        to_py(py, &statfs)
    }

    /// One entry per server in cluster-file order: its arrival log after
    /// request `after` (a list of arrivals), or `{"error": message}`.
    fn arrivals(&self, py: Python<'_>, after: u64) -> PyResult<PyObject> {
        let all = py.allow_threads(|| self.runtime.block_on(self.inner.arrivals(after)));
        let out: Vec<PerServer<_>> = all.into_iter().map(PerServer::from).collect();
        to_py(py, &out)
    }

    /// One entry per server in cluster-file order: its statistics (each
    /// latency histogram with its p50 and p99), or `{"error": message}`.
    fn stats(&self, py: Python<'_>) -> PyResult<PyObject> {
        let all = py.allow_threads(|| self.runtime.block_on(self.inner.stats()));
        let out: Vec<PerServer<_>> = all
            .into_iter()
            .map(|r| PerServer::from(r.map(|s| with_quantiles(&s))))
            .collect();
        to_py(py, &out)
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

    /// One entry per server: its policy and roles, or `{"error": message}`.
    fn ping(&self, py: Python<'_>) -> PyResult<PyObject> {
        let all = py.allow_threads(|| self.runtime.block_on(self.inner.ping_all()));
        let out: Vec<PerServer<_>> = all
            .into_iter()
            .map(|r| PerServer::from(r.map(|(policy, roles)| Ping { policy, roles })))
            .collect();
        to_py(py, &out)
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

/// A file's or directory's attributes (`Stat` in the stub).
#[derive(Serialize)]
struct StatOut<'a> {
    inode: u64,
    kind: &'a FileKind,
    size: u64,
    ctime_ns: u64,
    mtime_ns: u64,
    layout: Option<LayoutOut<'a>>,
    default_layout: Option<DefaultLayout>,
    entries: u64,
    uid: u32,
    gid: u32,
    mode: u32,
}

#[derive(Serialize)]
struct LayoutOut<'a> {
    unit: u64,
    servers: &'a [u32],
}

#[derive(Serialize)]
struct DefaultLayout {
    unit: u64,
    count: u32,
}

impl<'a> From<&'a concerto_client::Stat> for StatOut<'a> {
    fn from(s: &'a concerto_client::Stat) -> StatOut<'a> {
        StatOut {
            inode: s.inode,
            kind: &s.kind,
            size: s.size,
            ctime_ns: s.ctime_ns,
            mtime_ns: s.mtime_ns,
            layout: s.layout.as_ref().map(|l| LayoutOut {
                unit: l.unit(),
                servers: l.servers(),
            }),
            default_layout: s
                .default_layout
                .map(|(unit, count)| DefaultLayout { unit, count }),
            entries: s.entries,
            uid: s.uid,
            gid: s.gid,
            mode: s.mode,
        }
    }
}

/// A server's answer, or why there is none (`{"error": message}`).
#[derive(Serialize)]
#[serde(untagged)]
enum PerServer<T> {
    Answer(T),
    Error { error: String },
}

impl<T> From<Result<T, ClientError>> for PerServer<T> {
    fn from(r: Result<T, ClientError>) -> PerServer<T> {
        match r {
            Ok(answer) => PerServer::Answer(answer),
            Err(e) => PerServer::Error {
                error: e.to_string(),
            },
        }
    }
}

/// A server's policy and roles (`Ping` in the stub).
#[derive(Serialize)]
struct Ping {
    policy: String,
    roles: Vec<Role>,
}

/// Checks a cluster file; returns what it says, defaults filled in.
#[pyfunction]
pub fn check_cluster_file(py: Python<'_>, text: &str) -> PyResult<PyObject> {
    let cluster = ClusterFile::parse(text)
        .map_err(|e| PyValueError::new_err(format!("cluster file: {e}")))?;
    to_py(py, &cluster)
}

/// A server's statistics, each latency histogram with its p50 and p99
/// bucket bounds (`LatencyHistogram::quantile`) added.
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
