//! The data role: what a request does to an object on this server, and how
//! it runs on the object store at the throttle's pace.

use std::io;

use bytes::Bytes;

use concerto_core::Extent;
use concerto_proto::Message;

use crate::storage::{error_kind, ObjectStore};
use crate::throttle::Throttle;

/// What a data request does to an object file.
pub(crate) enum ObjectOp {
    Write {
        extents: Vec<Extent>,
        data: Bytes,
    },
    Read {
        extents: Vec<Extent>,
    },
    Fsync,
    Size,
    Truncate(u64),
    /// The metadata service's removal of the objects of files that are gone.
    Remove(Vec<u64>),
}

/// Where a dispatched request sits on its object, for the throttle.
#[derive(Clone, Copy)]
pub(crate) struct Placement {
    pub object: u64,
    pub offset: u64,
    pub len: u64,
    pub segments: usize,
}

/// The largest read the scheduling loop serves itself from the page cache.
const INLINE_READ: u64 = 64 << 10;

/// A storage operation's answer: its message, or its error as the wire says it.
fn reply(done: io::Result<Message>) -> Message {
    done.unwrap_or_else(|e| Message::Error {
        kind: error_kind(&e),
        message: e.to_string(),
    })
}

impl ObjectOp {
    fn run(&self, objects: &ObjectStore, object: u64) -> io::Result<Message> {
        Ok(match self {
            ObjectOp::Write { extents, data } => objects
                .write(object, extents, data)
                .map(|_| Message::Done)?,
            ObjectOp::Read { extents } => Message::Data {
                data: objects.read(object, extents)?.into(),
            },
            ObjectOp::Fsync => objects.fsync(object).map(|_| Message::Done)?,
            ObjectOp::Size => {
                let (size, mtime_ns) = objects.size(object)?;
                Message::Size { size, mtime_ns }
            }
            ObjectOp::Truncate(size) => objects.truncate(object, *size).map(|_| Message::Done)?,
            ObjectOp::Remove(gone) => objects.remove(gone).map(|_| Message::Done)?,
        })
    }

    /// A small read whose bytes are all in memory, answered without waiting
    /// (what the scheduling loop serves itself); `None` for anything else,
    /// which goes to the storage executor.
    pub(crate) fn execute_if_cached(
        &self,
        objects: &ObjectStore,
        at: Placement,
    ) -> Option<Message> {
        let ObjectOp::Read { extents } = self else {
            return None;
        };
        if extents.iter().map(|e| e.len).sum::<u64>() > INLINE_READ {
            return None;
        }
        let read = objects.read_if_cached(at.object, extents)?;
        Some(reply(read.map(|data| Message::Data { data: data.into() })))
    }

    /// Runs on the storage executor, at the throttle's pace when there is one.
    pub(crate) fn execute(
        &self,
        objects: &ObjectStore,
        throttle: Option<&Throttle>,
        at: Placement,
    ) -> Message {
        let run = || reply(self.run(objects, at.object));
        match (throttle, self) {
            // A read costs the device what it found: the bytes past an
            // object's end are on no disk (a read-ahead fetch past a
            // file's end, which its client cannot tell beforehand, costs
            // a round trip and no device time, as the simulator's does).
            (Some(t), ObjectOp::Read { .. }) => t.read(at.object, at.offset, at.segments, || {
                let message = run();
                let found = match &message {
                    Message::Data { data } => data.len() as u64,
                    _ => 0,
                };
                (message, found)
            }),
            (Some(t), ObjectOp::Write { .. }) => {
                t.data(at.object, at.offset, at.len, at.segments, run)
            }
            (Some(t), _) => t.metadata(run),
            (None, _) => run(),
        }
    }
}
