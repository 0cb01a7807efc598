//! What the kernel is answered besides an operation's value: a client
//! error as the errno a POSIX program expects, and what statfs says.

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
            Some(ErrorKind::NotPermitted) => libc::EPERM,
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
