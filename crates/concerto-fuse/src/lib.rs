//! A FUSE mount of a cluster, for unmodified POSIX programs (`cp`, `fio`,
//! an application's own `write(2)` calls).
//!
//! The layer is thin ([`filesystem`]): every operation is one call of the
//! client library, so data is striped, tagged and scheduled exactly as
//! through `concerto.fs`. FUSE speaks in inode numbers and the metadata
//! service in paths, so the mount keeps the path of every inode the kernel
//! holds (counted lookups, dropped on `forget`). Operations run as tasks
//! on a tokio runtime and reply when done, so several callers' I/O is in
//! flight at once rather than queued behind one FUSE thread.
//!
//! Each request is tagged with its caller's identity, read from the calling
//! process's environment as it was at exec (`/proc/PID/environ`) by the
//! client library's one reader of identities
//! ([`concerto_client::identity`]): the application from
//! `CONCERTO_APP_ID`, else the batch system's or launcher's job id, else
//! the caller's session, so the ranks of one job share an id without any
//! change to the program; the rank from what the launcher sets. The
//! identity is resolved once per open file
//! (reads, writes and closes of that file use it), and for other operations
//! once per process per second ([`CALLER_TTL`]). One client, with one set
//! of connections, serves every caller. A write through copies its bytes
//! once, from the kernel's buffer straight into the per-server requests; a
//! write behind is copied into its handle's held run, and from there into
//! the requests when the run is sent.
//!
//! Files are opened in the kernel's cached mode, with close-to-open
//! consistency ([`cache`]): the kernel reads ahead and keeps what it read
//! while the file does not change; writes reach the mount as they are
//! made and are held and coalesced by the client library's write-behind
//! (or written through: `O_DIRECT`, `O_SYNC`, `--write-behind 0`); files
//! opened with `O_DIRECT` bypass the cache. Closing a file (`flush`) makes
//! what it wrote durable on the servers it wrote to; names and attributes
//! are cached by the kernel for [`MountOptions::attr_ttl`].
//!
//! The mount point ([`mountpoint`]): a path that is a mount point already
//! is refused, so a mount never hides another; a mount detaches only the
//! mount it made (known by its mount id) and tells when someone else
//! unmounted it.

mod cache;
mod filesystem;
mod inodes;
mod listing;
mod mountpoint;
mod phases;
mod replies;

pub use filesystem::CALLER_TTL;

use std::io;
use std::path::Path;
use std::time::Duration;

use fuser::MountOption;
use tokio::runtime::Handle;

use concerto_client::FsClient;
use concerto_proto::Role;

/// How a mount behaves.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// How long the kernel may cache names and attributes before asking again.
    pub attr_ttl: Duration,
    /// Bytes of writes that may be on their way to the servers after
    /// `write(2)` returned (write-behind; 0 writes every write through).
    /// The client's bound: pass the same to `FsClient::with_write_behind`.
    pub write_behind: u64,
    /// Find callers' I/O phases in their streams and take them to the
    /// cluster's coordinator ([`phases`]): what `concerto mount` does when
    /// the cluster has one.
    pub detect_phases: bool,
}

impl Default for MountOptions {
    fn default() -> MountOptions {
        MountOptions {
            attr_ttl: Duration::from_secs(1),
            write_behind: concerto_client::DEFAULT_WRITE_BEHIND,
            detect_phases: false,
        }
    }
}

/// A mounted cluster; dropping it unmounts, lazily if files on it are
/// still open (a plain unmount then fails with EBUSY and would leave a
/// dead mount behind).
pub struct Mount {
    session: Option<fuser::BackgroundSession>,
    mountpoint: std::path::PathBuf,
    /// The kernel's id of this mount, so that only it is ever detached.
    id: Option<u64>,
}

impl Drop for Mount {
    fn drop(&mut self) {
        drop(self.session.take());
        if !self.is_mounted() {
            return;
        }
        let shown = self.mountpoint.display();
        if mountpoint::top(&self.mountpoint).map(|m| m.id) == self.id {
            if !mountpoint::detach(&self.mountpoint) {
                eprintln!(
                    "concerto-fuse: could not unmount {shown}: run `fusermount3 -u {shown}` (or, as root, `umount -l {shown}`)"
                );
            }
        } else {
            eprintln!(
                "concerto-fuse: {shown} has another mount on top of this one; unmount that first, then `umount -l {shown}`"
            );
        }
    }
}

impl Mount {
    /// Where it is mounted (the canonical path).
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// False once this mount is gone (`umount` by someone else, or the
    /// kernel aborted it), whatever else is mounted at the path now.
    pub fn is_mounted(&self) -> bool {
        match mountpoint::mounts_at(&self.mountpoint) {
            Ok(mounts) => mounts.iter().any(|m| Some(m.id) == self.id),
            Err(_) => true,
        }
    }
}

/// The cluster must answer before it is mounted: the metadata server (or
/// nothing would work), and each data server that does not answer is named.
fn check_cluster(client: &FsClient, runtime: &Handle) -> io::Result<()> {
    let answers = runtime.block_on(client.ping_all());
    for (server, answer) in client.cluster().servers.iter().zip(answers) {
        let Err(e) = answer else {
            continue;
        };
        if server.roles.contains(&Role::Metadata) {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!(
                    "the cluster's metadata server (id {}, {}) does not answer ({e}): is the cluster running? (`concerto cluster status`)",
                    server.id, server.address
                ),
            ));
        }
        eprintln!(
            "concerto-fuse: warning: data server {} ({}) does not answer ({e}); files striped over it will give EIO until it does",
            server.id, server.address
        );
    }
    Ok(())
}

/// Mounts `client`'s cluster at `mountpoint` (an existing directory that
/// is not a mount point); the operations run on `runtime` (not called from
/// inside it). Needs `/dev/fuse` and the right to mount (root, or
/// `fusermount3` on the path).
pub fn mount(
    client: FsClient,
    mountpoint: &Path,
    runtime: Handle,
    options: MountOptions,
) -> io::Result<Mount> {
    mountpoint::prepare(mountpoint)?;
    if !mountpoint.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("mount point {} is not a directory", mountpoint.display()),
        ));
    }
    let mountpoint = mountpoint.canonicalize()?;
    check_cluster(&client, &runtime)?;
    // A node key's mount is the node's: it serves every user of the node
    // (`allow_other`), each request on files as its caller's uid, gid and
    // groups, which the metadata service checks. The kernel checks the
    // modes too (`default_permissions`): it caches names, and a path walk
    // through a cached directory never reaches the mount, so without it
    // one user could pass through a directory another user looked up.
    let serve_users = matches!(
        runtime.block_on(client.grant()),
        Ok(concerto_proto::auth::Grant::Node { .. })
    );
    let mut opts = vec![
        // The source names the cluster, so that the MPI-IO library serves
        // a path under this mount from this cluster only.
        MountOption::FSName(client.cluster().mount_source()),
        MountOption::Subtype("concerto".into()),
        MountOption::NoAtime,
    ];
    if serve_users {
        opts.extend([MountOption::AllowOther, MountOption::DefaultPermissions]);
    }
    let fs = filesystem::ConcertoFuse::new(client, runtime, options, serve_users);
    let notifier = fs.notifier_slot();
    let session = fuser::spawn_mount2(fs, &mountpoint, &opts).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot mount at {}: {e}", mountpoint.display()),
        )
    })?;
    let _ = notifier.set(session.notifier());
    // Right after mounting, the mount a lookup reaches is ours.
    let id = mountpoint::top(&mountpoint)
        .filter(|m| m.is_concerto())
        .map(|m| m.id);
    Ok(Mount {
        session: Some(session),
        mountpoint,
        id,
    })
}
