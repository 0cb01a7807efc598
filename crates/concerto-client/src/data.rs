//! The data path: a read or write is cut by the file's layout
//! (concerto-core's `StripeLayout::requests`, the striping arithmetic the
//! simulator uses) into one request per server — object extents ascending
//! and coalesced, list I/O when not contiguous on that server — sent to
//! every server at once with the same issue time; or into blocks sent in
//! a transfer order, a few at a time ([`crate::transfers`]).

use std::collections::BTreeSet;

use bytes::{Bytes, BytesMut};
use futures::future::try_join_all;

use concerto_core::Extent;
use concerto_proto::{ordered_total, Tags};

use crate::transfers::in_order;
use crate::{ClientError, FileHandle, FsClient};

/// Largest buffer one read call fills.
pub const MAX_READ: u64 = 1 << 30;

/// A caller's extents must be in order; a list read is also bounded, because
/// its buffer (zeros where nothing was written) is allocated whole.
fn check_extents(extents: &[Extent]) -> Result<u64, ClientError> {
    ordered_total(extents).map_err(|e| ClientError::Invalid(e.message))
}

/// `extents` (ascending) cut at file byte `end`.
fn within(extents: &[Extent], end: u64) -> Vec<Extent> {
    extents
        .iter()
        .filter(|e| e.offset < end)
        .map(|e| Extent::new(e.offset, e.len.min(end - e.offset)))
        .collect()
}

/// A write planned and copied into its per-server requests, ready to send:
/// what [`FsClient::prepare_write`] returns. The caller's bytes are copied
/// once, here, straight into the requests' payloads.
pub struct PreparedWrite {
    inode: u64,
    capability: crate::capabilities::Held,
    tags: Tags,
    /// Server, object extents and payload, in sending order.
    requests: Vec<(u32, Vec<Extent>, Bytes)>,
    /// Requests in flight at once.
    in_flight: usize,
    /// The first and the furthest byte of the file it writes.
    start: u64,
    end: u64,
}

impl FsClient {
    /// Writes `data` at `offset`.
    pub async fn write(
        &self,
        file: &FileHandle,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ClientError> {
        self.write_list(file, &[Extent::new(offset, data.len() as u64)], data)
            .await
    }

    /// Writes `data` over the file `extents` (ascending, disjoint; list I/O).
    pub async fn write_list(
        &self,
        file: &FileHandle,
        extents: &[Extent],
        data: &[u8],
    ) -> Result<(), ClientError> {
        let prepared = self.prepare_write(file, extents, data)?;
        self.send_write(prepared).await
    }

    /// The first half of a write, done where the caller's bytes are still
    /// borrowed (a FUSE callback): plans the per-server requests and copies
    /// the bytes into their payloads, the one copy on the client. The tags
    /// (and so the issue time) are taken now, once for every server.
    pub fn prepare_write(
        &self,
        file: &FileHandle,
        extents: &[Extent],
        data: &[u8],
    ) -> Result<PreparedWrite, ClientError> {
        if !file.writable {
            return Err(ClientError::Invalid(format!(
                "{}: opened for reading only",
                file.path
            )));
        }
        let total = check_extents(extents)?;
        if total != data.len() as u64 {
            return Err(ClientError::Invalid(format!(
                "{} bytes of data for extents of {total} bytes",
                data.len()
            )));
        }
        let end = extents.last().map_or(0, |e| e.offset + e.len);
        let largest = file.layout.largest_file(concerto_proto::MAX_OBJECT_END);
        if end > largest {
            return Err(ClientError::Invalid(format!(
                "{}: a write reaching byte {end} is past the largest file of its layout ({largest} bytes: \
                 the servers' bound of {} bytes per object)",
                file.path,
                concerto_proto::MAX_OBJECT_END
            )));
        }
        let plan = self.plan(file, extents);
        let requests = plan
            .blocks
            .into_iter()
            .map(|r| {
                let mut bytes = BytesMut::with_capacity(r.bytes as usize);
                for p in &r.parts {
                    let at = p.buf_offset as usize;
                    bytes.extend_from_slice(&data[at..at + p.len as usize]);
                }
                (r.server, r.extents, bytes.freeze())
            })
            .collect();
        Ok(PreparedWrite {
            inode: file.inode,
            capability: file.capability.clone(),
            tags: self.identity.tags(),
            requests,
            in_flight: plan.in_flight,
            start: extents.first().map_or(0, |e| e.offset),
            end: extents.last().map_or(0, |e| e.offset + e.len),
        })
    }

    /// A prepared write sent after what this client holds or has in
    /// flight over its range (the program's order), waiting for the
    /// servers: `O_DIRECT` and `O_SYNC` writes on a mount.
    pub async fn write_through(
        &self,
        file: &FileHandle,
        write: PreparedWrite,
    ) -> Result<(), ClientError> {
        self.settle(file.inode, Some((write.start, write.end)))
            .await?;
        self.send_write(write).await
    }

    /// The second half of a write: sends the prepared requests in their
    /// order, as many at once as the plan lets (by default all), and waits
    /// for all of them.
    pub async fn send_write(&self, write: PreparedWrite) -> Result<(), ClientError> {
        let PreparedWrite {
            inode,
            capability,
            tags,
            requests,
            in_flight,
            end,
            ..
        } = write;
        let servers: Vec<u32> = requests.iter().map(|r| r.0).collect();
        let object = self.object(inode, &capability, true).await?;
        let sent = in_order(
            requests
                .into_iter()
                .map(|(server, extents, bytes)| async move {
                    self.connection(server)
                        .await?
                        .write(tags, object, extents, bytes)
                        .await
                }),
            in_flight,
        )
        .await;
        // Even a write that failed on some server may have landed on others.
        self.shared
            .files
            .wrote(inode, servers, if sent.is_ok() { end } else { 0 });
        sent.map(|_| ())
    }

    /// Reads up to `len` bytes at `offset`; shorter only at the end of the
    /// file. Sequential reads of a handle are read ahead (see the
    /// `readahead` module).
    pub async fn read(
        &self,
        file: &FileHandle,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ClientError> {
        // A large request is first cut to the file, so asking for "everything" costs no more than there is.
        let len = if len > concerto_proto::MAX_IO {
            len.min(self.fstat(file).await?.size.saturating_sub(offset))
        } else {
            len
        };
        let range = (offset, offset.saturating_add(len));
        self.settle(file.inode, Some(range)).await?;
        let ahead = self.read_ahead(file, offset, len).await?;
        let served = ahead.len() as u64;
        if served == len {
            return Ok(ahead);
        }
        let (at, rest) = (offset + served, len - served);
        // At or past where the data was seen to end: the size says whether
        // there is more, for one request instead of one per server.
        if self.end_seen(file).is_some_and(|end| at >= end) {
            if self.fstat(file).await?.size <= at {
                return Ok(ahead);
            }
            self.grew(file);
        }
        let (mut buf, complete) = self.read_extents(file, &[Extent::new(at, rest)]).await?;
        if !complete {
            // Some object ended early: a hole or the end of the file (or a
            // file removed meanwhile). Only the size can tell.
            let size = self.fstat(file).await?.size;
            buf.truncate(size.saturating_sub(at).min(rest) as usize);
        }
        if ahead.is_empty() {
            return Ok(buf);
        }
        let mut out = BytesMut::with_capacity(ahead.len() + buf.len());
        out.extend_from_slice(&ahead);
        out.extend_from_slice(&buf);
        Ok(out.freeze())
    }

    /// Reads the file `extents` (ascending, disjoint; list I/O), concatenated;
    /// bytes never written (holes, past the end) read as zeros.
    pub async fn read_list(
        &self,
        file: &FileHandle,
        extents: &[Extent],
    ) -> Result<Bytes, ClientError> {
        Ok(self.read_list_complete(file, extents).await?.0)
    }

    /// [`FsClient::read_list`], and whether every object had all of its
    /// part: when not, some bytes were a hole or past the end of the file,
    /// and only the file's size tells which (MPI-IO counts the bytes read
    /// up to the end of the file).
    pub async fn read_list_complete(
        &self,
        file: &FileHandle,
        extents: &[Extent],
    ) -> Result<(Bytes, bool), ClientError> {
        check_extents(extents)?;
        if let (Some(first), Some(last)) = (extents.first(), extents.last()) {
            let range = (first.offset, last.offset + last.len);
            self.settle(file.inode, Some(range)).await?;
        }
        self.read_extents(file, extents).await
    }

    /// The bytes of `extents`, zero where objects end early, and whether
    /// every object had all of its part. A read one server answers whole
    /// is that server's reply as it came (no copy); otherwise the pieces
    /// are put in file order with one copy each.
    pub(crate) async fn read_extents(
        &self,
        file: &FileHandle,
        extents: &[Extent],
    ) -> Result<(Bytes, bool), ClientError> {
        let total = check_extents(extents)?;
        if total > MAX_READ {
            return Err(ClientError::Invalid(format!("a read of {total} bytes is over the {MAX_READ}-byte limit of one call; read in pieces")));
        }
        // Nothing is past the largest file the servers' bound on an object
        // allows: that part reads as the end of the file, without asking.
        let largest = file.layout.largest_file(concerto_proto::MAX_OBJECT_END);
        let within = within(extents, largest);
        if within.len() < extents.len() || within.last() != extents.last() {
            let (mut buf, _) = if within.is_empty() {
                (Bytes::new(), false)
            } else {
                Box::pin(self.read_extents(file, &within)).await?
            };
            let mut out = BytesMut::from(&buf[..]);
            out.resize(total as usize, 0);
            buf = out.freeze();
            return Ok((buf, false));
        }
        let plan = self.plan(file, extents);
        let batches = plan.blocks;
        let tags = self.identity.tags();
        let object = self
            .object(file.inode, &file.capability, file.writable)
            .await?;
        let replies = in_order(
            batches.iter().map(|b| async move {
                self.connection(b.server)
                    .await?
                    .read(tags, object, b.extents.clone())
                    .await
            }),
            plan.in_flight,
        )
        .await?;
        if let ([batch], [reply]) = (batches.as_slice(), replies.as_slice()) {
            if batch.parts.len() == 1 && reply.len() as u64 == total {
                return Ok((reply.clone(), true));
            }
        }
        // Every part's place in the buffer and in its server's reply; the
        // parts tile the buffer, so in buffer order they fill it from the
        // start, and nothing is written twice (or zeroed first).
        let mut pieces: Vec<(u64, usize, usize, usize)> = Vec::new();
        for (i, b) in batches.iter().enumerate() {
            let mut at = 0usize;
            for p in &b.parts {
                pieces.push((p.buf_offset, i, at, p.len as usize));
                at += p.len as usize;
            }
        }
        pieces.sort_unstable_by_key(|p| p.0);
        let mut buf = BytesMut::with_capacity(total as usize);
        let mut complete = true;
        for (_, i, at, len) in pieces {
            // A reply shorter than its parts (the object ends early) gives
            // what it has; the rest of the part is zeros.
            let data = replies[i].get(at..).unwrap_or_default();
            let n = len.min(data.len());
            buf.extend_from_slice(&data[..n]);
            if n < len {
                buf.resize(buf.len() + (len - n), 0);
                complete = false;
            }
        }
        Ok((buf.freeze(), complete))
    }

    /// Makes the file durable: the data this client wrote to it, on the
    /// servers it wrote to, and the namespace changes this client saw
    /// (the file's creation among them), at once.
    pub async fn fsync(&self, file: &FileHandle) -> Result<(), ClientError> {
        self.settle(file.inode, None).await?;
        let dirty = self.shared.files.take_dirty(file.inode);
        self.sync_servers(file, dirty).await
    }

    /// What `close(2)` does: only when this client wrote to the file
    /// since its last fsync, that data (and the name that reaches it) is
    /// made durable; a file only read, or written and synced, costs
    /// nothing.
    pub async fn flush(&self, file: &FileHandle) -> Result<(), ClientError> {
        self.settle(file.inode, None).await?;
        let dirty = self.shared.files.take_dirty(file.inode);
        if dirty.is_empty() {
            return Ok(());
        }
        self.sync_servers(file, dirty).await
    }

    /// Whether [`FsClient::flush`] has anything to do: this client wrote
    /// to the file since its last fsync (or has writes of it in flight).
    pub fn has_unflushed_writes(&self, file: &FileHandle) -> bool {
        self.shared.files.is_dirty(file.inode)
            || self.shared.pending.holds(file.inode)
            || self.shared.held.holds(file.inode)
    }

    async fn sync_servers(
        &self,
        file: &FileHandle,
        dirty: BTreeSet<u32>,
    ) -> Result<(), ClientError> {
        let tags = self.identity.tags();
        let object = self
            .object(file.inode, &file.capability, file.writable)
            .await?;
        let data = try_join_all(
            dirty
                .iter()
                .map(|&s| async move { self.connection(s).await?.fsync(tags, object).await }),
        );
        let (data, names) = futures::future::join(data, self.sync_namespace()).await;
        if data.is_err() {
            self.shared.files.still_dirty(file.inode, dirty);
        }
        data.map(|_| ())?;
        names
    }

    /// Each object's length, in layout order: what each server holds of
    /// the file (`concerto fs layout`; one request per server).
    pub async fn object_sizes(&self, file: &FileHandle) -> Result<Vec<u64>, ClientError> {
        let tags = self.identity.tags();
        let object = self
            .object(file.inode, &file.capability, file.writable)
            .await?;
        try_join_all(file.layout.servers().iter().map(|&s| async move {
            self.connection(s)
                .await?
                .object_size(tags, object)
                .await
                .map(|(len, _)| len)
        }))
        .await
    }
}
