//! What the kernel is answered besides an operation's value: a client
//! error as the errno a POSIX program expects, what statfs says, and the
//! flags every file is opened with.

use fuser::consts::FOPEN_DIRECT_IO;
use libc::c_int;

use concerto_client::ClientError;
use concerto_proto::ErrorKind;

/// An errno for the kernel; a client error converts to the one a POSIX
/// program expects, so operations use `?` on client calls.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Errno(pub(crate) c_int);

impl From<ClientError> for Errno {
    fn from(e: ClientError) -> Errno {
        Errno(match e.kind() {
            Some(ErrorKind::NotFound) => libc::ENOENT,
            Some(ErrorKind::Exists) => libc::EEXIST,
            Some(ErrorKind::NotEmpty) => libc::ENOTEMPTY,
            Some(ErrorKind::NotADirectory) => libc::ENOTDIR,
            Some(ErrorKind::IsADirectory) => libc::EISDIR,
            Some(ErrorKind::Invalid) => libc::EINVAL,
            Some(ErrorKind::Denied) => libc::EACCES,
            Some(ErrorKind::NoSpace) => libc::ENOSPC,
            Some(ErrorKind::Stale) => libc::ESTALE,
            Some(ErrorKind::Busy) => libc::EAGAIN,
            _ if matches!(e, ClientError::Auth { .. }) => libc::EACCES,
            _ if matches!(e, ClientError::Invalid(_)) => libc::EINVAL,
            _ => libc::EIO,
        })
    }
}

/// What statfs answers.
pub(crate) struct Statfs {
    pub(crate) blocks: u64,
    pub(crate) free: u64,
    pub(crate) available: u64,
    pub(crate) files: u64,
    pub(crate) ffree: u64,
    pub(crate) bsize: u32,
    pub(crate) namelen: u32,
    pub(crate) frsize: u32,
}

/// How every file is opened: direct I/O (no page cache: every read(2) and
/// write(2) reaches the servers), and writes to one file from several
/// processes in parallel rather than one at a time (`FOPEN_PARALLEL_DIRECT_WRITES`,
/// Linux 6.2; older kernels ignore it).
pub(crate) fn open_flags() -> u32 {
    /// Not in fuser's ABI 7.28 constants; its value in the kernel's fuse.h.
    const FOPEN_PARALLEL_DIRECT_WRITES: u32 = 1 << 6;
    FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES
}
