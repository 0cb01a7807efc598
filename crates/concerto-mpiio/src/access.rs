//! One data access (a read or write call): its bytes in memory and in the
//! file, and how an independent call (or a rank's own I/O) moves them.

use std::sync::{Arc, Mutex};

use concerto_client::FileHandle;
use concerto_core::client::collective::Direction;
use concerto_core::Extent;

use crate::collective::Execution;
use crate::datatype::Typemap;
use crate::hints::Hints;
use crate::session::{OpenFile, Session};
use crate::view::{Memory, Positions};

/// Bytes one client call moves at most (a larger access is cut).
const CHUNK: u64 = 64 << 20;
/// File extents one client call names at most.
const CHUNK_EXTENTS: usize = concerto_core::client::collective::INDEPENDENT_CALL_EXTENTS;

/// A read or write of one call on one rank.
pub struct Access {
    pub handle: FileHandle,
    pub hints: Hints,
    pub direction: Direction,
    /// The file extents of the access, ascending (the view's order).
    pub own: Vec<Extent>,
    /// Where each byte of `own` is in the access's stream.
    stream: Positions,
    pub memory: Memory,
    /// The caller's buffer.
    pub buf: *mut u8,
    /// Bytes the call moved (a read stops at the end of the file).
    pub bytes: u64,
    /// Some part read was a hole or past the end of the file.
    pub incomplete: bool,
    pub execution: Option<Execution>,
    /// `own` as (offset, length) pairs, for the MPI side to gather.
    flat: Vec<u64>,
}

impl Access {
    /// An access of `count` elements of `memtype` at `buf`, at `offset`
    /// elementary types into the view, or at the individual file pointer
    /// (which it moves past the access) when `offset` is `None`.
    pub fn new(
        file: &Arc<Mutex<OpenFile>>,
        offset: Option<u64>,
        buf: *mut u8,
        count: u64,
        memtype: &Typemap,
        direction: Direction,
    ) -> Result<Access, String> {
        let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
        match direction {
            Direction::Read if !f.amode.read => {
                return Err(format!("{}: opened write-only (MPI_MODE_WRONLY)", f.path))
            }
            Direction::Write if !f.amode.write => {
                return Err(format!("{}: opened read-only (MPI_MODE_RDONLY)", f.path))
            }
            _ => {}
        }
        let memory = Memory::new(memtype, count);
        let etype = f.view.etype_size;
        if memory.size % etype != 0 {
            return Err(format!(
                "{} bytes of data is not a whole number of the view's {etype}-byte elementary types",
                memory.size
            ));
        }
        let at = match offset {
            Some(o) => o,
            None => {
                let at = f.pointer;
                f.pointer += memory.size / etype;
                at
            }
        };
        let own = f.extents(at, memory.size);
        Ok(Access {
            handle: f.handle.clone(),
            hints: f.hints.clone(),
            direction,
            stream: Positions::of(&own),
            own,
            bytes: memory.size,
            memory,
            buf,
            incomplete: false,
            execution: None,
            flat: Vec::new(),
        })
    }

    /// `own` as (offset, length) pairs.
    pub fn flat_extents(&mut self) -> &[u64] {
        if self.flat.len() != 2 * self.own.len() {
            self.flat = self.own.iter().flat_map(|e| [e.offset, e.len]).collect();
        }
        &self.flat
    }

    /// Copies this rank's own data for file `extents` (within `own`) out
    /// of the caller's buffer.
    pub fn gather(&self, extents: &[Extent], out: &mut Vec<u8>) {
        for &e in extents {
            self.stream.each(e, |pos, n| {
                // SAFETY: the caller's buffer holds the access (MPI's contract).
                unsafe { self.memory.gather(self.buf, pos as u64, n as u64, out) };
            });
        }
    }

    /// Copies `data`, the bytes of file `extents` (within `own`), into the
    /// caller's buffer.
    pub fn scatter(&self, extents: &[Extent], data: &[u8]) {
        let mut at = 0usize;
        for &e in extents {
            self.stream.each(e, |pos, n| {
                // SAFETY: as in gather; a read's buffer is writable.
                unsafe { self.memory.scatter(self.buf, pos as u64, &data[at..at + n]) };
                at += n;
            });
        }
    }

    /// Runs the access as an independent call: this rank's own extents,
    /// in pieces of at most 64 MiB. A contiguous write is held behind
    /// (when the session writes behind): coalesced with the rank's next
    /// ones and sent as the client's write-behind says, at the latest by
    /// the file's next collective call, sync, size change or close, as MPI
    /// lets a write be in flight until then; an error it meets is the next
    /// such call's. A list write goes at once, after what the rank holds
    /// over its range (the program's order).
    pub fn run_independent(&mut self, session: &Session) -> Result<(), String> {
        for extents in pieces(&self.own) {
            match self.direction {
                Direction::Write => {
                    let mut data = Vec::new();
                    self.gather(&extents, &mut data);
                    let client = &session.client;
                    if let ([e], true) = (&extents[..], session.write_behind) {
                        session.run(client.write_behind(&self.handle, e.offset, data.into()))?;
                    } else {
                        let write = client
                            .prepare_write(&self.handle, &extents, &data)
                            .map_err(|e| e.to_string())?;
                        session.run(client.write_through(&self.handle, write))?;
                    }
                }
                Direction::Read => {
                    let (data, complete) =
                        session.run(session.client.read_list_complete(&self.handle, &extents))?;
                    self.scatter(&extents, &data);
                    self.incomplete |= !complete;
                }
            }
        }
        Ok(())
    }

    /// A read that met a hole or the end of the file counts only the
    /// bytes before the file's end (MPI's count of a short read).
    pub fn count_to_end(&mut self, session: &Session) -> Result<(), String> {
        if self.direction == Direction::Read && self.incomplete {
            let size = session.run(session.client.fstat(&self.handle))?.size;
            self.bytes = self
                .own
                .iter()
                .map(|e| size.saturating_sub(e.offset).min(e.len))
                .sum();
        }
        Ok(())
    }
}

/// Ascending extents cut into runs of at most [`CHUNK`] bytes and
/// [`CHUNK_EXTENTS`] extents.
pub fn pieces(extents: &[Extent]) -> Vec<Vec<Extent>> {
    let mut out: Vec<Vec<Extent>> = Vec::new();
    let mut current: Vec<Extent> = Vec::new();
    let mut bytes = 0u64;
    for e in extents {
        let (mut offset, mut left) = (e.offset, e.len);
        while left > 0 {
            if bytes == CHUNK || current.len() == CHUNK_EXTENTS {
                out.push(std::mem::take(&mut current));
                bytes = 0;
            }
            let take = left.min(CHUNK - bytes);
            current.push(Extent::new(offset, take));
            bytes += take;
            offset += take;
            left -= take;
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_accesses_are_cut_into_bounded_pieces_covering_every_byte() {
        let extents = vec![Extent::new(0, 100 << 20), Extent::new(200 << 20, 10)];
        let p = pieces(&extents);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0], vec![Extent::new(0, 64 << 20)]);
        assert_eq!(
            p[1],
            vec![Extent::new(64 << 20, 36 << 20), Extent::new(200 << 20, 10)]
        );
        let many: Vec<Extent> = (0..5000).map(|i| Extent::new(i * 10, 5)).collect();
        let p = pieces(&many);
        assert_eq!(p.iter().map(Vec::len).collect::<Vec<_>>(), vec![4096, 904]);
    }
}
