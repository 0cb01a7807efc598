//! Why a metadata operation failed: the errors a shell would show, and the
//! store's own failures (which of them need the store opened again).

use thiserror::Error;

use concerto_proto::ErrorKind;

#[derive(Debug, Error)]
pub enum MetaError {
    #[error("{0}: no such file or directory")]
    NotFound(String),
    #[error("{0}: already exists")]
    Exists(String),
    #[error("{0}: directory not empty")]
    NotEmpty(String),
    #[error("{0}: not a directory")]
    NotADirectory(String),
    #[error("{0}: is a directory")]
    IsADirectory(String),
    #[error("{0}")]
    Invalid(String),
    /// The key's user may not (the message names the operation, the file and why).
    #[error("{0}")]
    Denied(String),
    /// Only the owner or root may, whatever the modes say (EPERM; the
    /// message names the operation, the file and why).
    #[error("{0}")]
    NotPermitted(String),
    #[error("metadata store: {0}")]
    Store(String),
    /// The store's disk failed; the store is closed and opened again by
    /// the next operation.
    #[error("metadata store: {0}")]
    StoreIo(String),
    /// The store's disk is full.
    #[error("metadata store: {0}")]
    NoSpace(String),
    /// A data server did not answer (asked for a file's size).
    #[error("{0}")]
    Unavailable(String),
    /// The store is busy (committing) and the caller would not wait.
    #[error("metadata store: busy")]
    Busy,
}

impl MetaError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            MetaError::NotFound(_) => ErrorKind::NotFound,
            MetaError::Exists(_) => ErrorKind::Exists,
            MetaError::NotEmpty(_) => ErrorKind::NotEmpty,
            MetaError::NotADirectory(_) => ErrorKind::NotADirectory,
            MetaError::IsADirectory(_) => ErrorKind::IsADirectory,
            MetaError::Invalid(_) => ErrorKind::Invalid,
            MetaError::Denied(_) => ErrorKind::Denied,
            MetaError::NotPermitted(_) => ErrorKind::NotPermitted,
            MetaError::Store(_)
            | MetaError::StoreIo(_)
            | MetaError::Unavailable(_)
            | MetaError::Busy => ErrorKind::Io,
            MetaError::NoSpace(_) => ErrorKind::NoSpace,
        }
    }

    /// Whether the store must be closed and opened again: redb refuses
    /// every later transaction after an I/O error ("Previous I/O error
    /// occurred. Please close and re-open the database.").
    pub(super) fn needs_reopen(&self) -> bool {
        matches!(self, MetaError::StoreIo(_) | MetaError::NoSpace(_))
    }
}

/// Every redb error kind converts into `redb::Error`; all of them mean the
/// store failed, and an I/O error says whether the disk was full.
impl<E: Into<redb::Error>> From<E> for MetaError {
    fn from(e: E) -> MetaError {
        match e.into() {
            redb::Error::Io(io) => match io.raw_os_error() {
                Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
                    MetaError::NoSpace(format!("{io} (free space, then retry)"))
                }
                _ => MetaError::StoreIo(io.to_string()),
            },
            e @ redb::Error::PreviousIo => MetaError::StoreIo(e.to_string()),
            e => MetaError::Store(e.to_string()),
        }
    }
}
