//! How an authenticated connection's requests come in and what they hold
//! of the server's memory. A frame is charged to the budgets — its
//! connection's, its address's, its key's and the server's — from the moment its
//! length prefix announces it, before its bytes are buffered, and the
//! charge travels with the request until its reply is written: a client
//! that begins large frames and stops holds no more than the budgets allow
//! (twenty half-sent 16 MiB frames held 300 MB for a minute when only
//! whole requests were counted).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{watch, Semaphore};

use concerto_core::Time;
use concerto_proto::integrity::{Opener, TAG_LEN};
use concerto_proto::{Envelope, Message, MAX_FRAME};

use crate::schedule::Held;

/// A byte budget in the semaphores' unit, KiB.
pub(crate) fn kib(bytes: u64) -> u32 {
    (bytes / 1024).clamp(1, Semaphore::MAX_PERMITS as u64) as u32
}

/// What a request holds of the budgets, in KiB, once it is decoded: its
/// frame, or the data its reply carries back if more, and a kibibyte for
/// the rest.
fn cost_kib(frame_len: usize, message: &Message) -> u32 {
    let reply: u64 = match message {
        Message::Read { extents, .. } => extents.iter().map(|e| e.len).sum(),
        _ => 0,
    };
    (reply.max(frame_len as u64).div_ceil(1024) + 1).min(u32::MAX as u64) as u32
}

/// One connection's budgets: its own, its address's, its key's (across
/// addresses) and the server's.
pub(crate) struct Budgets {
    semaphores: [Arc<Semaphore>; 4],
    /// The connection's own, KiB: no request is charged more (the others
    /// are at least as large).
    connection_kib: u32,
}

impl Budgets {
    pub fn new(connection_bytes: u64, [address, key, server]: [Arc<Semaphore>; 3]) -> Budgets {
        let connection_kib = kib(connection_bytes);
        Budgets {
            semaphores: [
                Arc::new(Semaphore::new(connection_kib as usize)),
                address,
                key,
                server,
            ],
            connection_kib,
        }
    }

    /// `cost` KiB of each budget, in one order (connection first), at most
    /// the connection's whole budget; waits while replies hold them.
    async fn hold(&self, cost: u32) -> Option<Held> {
        let cost = cost.min(self.connection_kib);
        let [connection, address, key, server] = &self.semaphores;
        Some([
            connection.clone().acquire_many_owned(cost).await.ok()?,
            address.clone().acquire_many_owned(cost).await.ok()?,
            key.clone().acquire_many_owned(cost).await.ok()?,
            server.clone().acquire_many_owned(cost).await.ok()?,
        ])
    }

    /// `held` grown to `cost` KiB of each budget.
    async fn top_up(&self, mut held: Held, cost: u32) -> Option<Held> {
        let have = held[0].num_permits() as u32;
        let cost = cost.min(self.connection_kib);
        if cost > have {
            let more = self.hold(cost - have).await?;
            for (h, m) in held.iter_mut().zip(more) {
                h.merge(m);
            }
        }
        Some(held)
    }
}

/// What [`next_request`] found. Its request is not boxed: one `Next` is
/// made per request and moved once, where a box would cost an allocation
/// per request for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Next {
    /// A request and what it holds of the budgets (all it will hold, its
    /// reply included).
    Request(Envelope, Held),
    /// The connection closed, or the server stops: nothing to answer.
    Closed,
    /// The frame cannot be read on: what to tell the client (a protocol
    /// error), and the connection closes.
    Broken(String),
    /// A frame failed its MAC check: told like [`Next::Broken`], and counted.
    Tampered(String),
    /// A frame was begun and not finished in time: the connection closes
    /// and is counted (not logged one by one: [`crate::refusals`]).
    Stalled(String),
}

/// The next request of an authenticated connection. Waiting for a frame
/// is not timed (an idle connection is kept); once its first byte is in,
/// the rest of its length must arrive within `frame_timeout`, and, once
/// the budgets let it in, its body within `frame_timeout` more.
pub(crate) async fn next_request<R: AsyncRead + Unpin>(
    reader: &mut R,
    opener: Option<&mut Opener>,
    budgets: &Budgets,
    frame_timeout: Time,
    stopped: &mut watch::Receiver<bool>,
    from: SocketAddr,
) -> Next {
    let window = Duration::from_nanos(frame_timeout.as_nanos().max(1));
    let mut prefix = [0u8; 4];
    let first = tokio::select! {
        r = reader.read(&mut prefix[..1]) => r,
        _ = stopped.changed() => return Next::Closed,
    };
    if !matches!(first, Ok(1)) {
        return Next::Closed;
    }
    let timed_out = |what: &str| {
        Next::Stalled(format!(
            "{from}: a frame was begun and not finished within {window:?} ({what})"
        ))
    };
    match tokio::time::timeout(window, reader.read_exact(&mut prefix[1..])).await {
        Err(_) => return timed_out("its length"),
        Ok(Err(_)) => return Next::Closed,
        Ok(Ok(_)) => {}
    }
    let len = u32::from_be_bytes(prefix) as usize;
    // A frame that carries a MAC may be longer by the MAC.
    let mac = if opener.is_some() { TAG_LEN } else { 0 };
    if len > MAX_FRAME + mac {
        return Next::Broken(format!(
            "frame of {len} bytes is over the {MAX_FRAME}-byte limit"
        ));
    }
    // The frame's bytes are charged before they are buffered.
    let held = tokio::select! {
        h = budgets.hold(kib(len as u64) + 1) => match h {
            Some(h) => h,
            None => return Next::Closed,
        },
        _ = stopped.changed() => return Next::Closed,
    };
    let mut body = BytesMut::with_capacity(len);
    let read = async {
        while body.len() < len {
            let want = len - body.len();
            if reader.read_buf(&mut (&mut body).limit(want)).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok::<_, io::Error>(())
    };
    match tokio::time::timeout(window, read).await {
        Err(_) => return timed_out("its body"),
        Ok(Err(_)) => return Next::Closed,
        Ok(Ok(())) => {}
    }
    // A frame whose MAC fails is not decoded: it may be anyone's.
    let body = body.freeze();
    let body = match opener {
        Some(o) => o.open(body),
        None => Ok(body),
    };
    let body = match body {
        Ok(body) => body,
        Err(e) => return Next::Tampered(e.to_string()),
    };
    let env = match Envelope::decode(body) {
        Ok(env) => env,
        Err(e) => return Next::Broken(e.to_string()),
    };
    // A read's reply may need more than its frame held.
    let cost = cost_kib(len, &env.message);
    let held = tokio::select! {
        h = budgets.top_up(held, cost) => h,
        _ = stopped.changed() => None,
    };
    match held {
        Some(held) => Next::Request(env, held),
        None => Next::Closed,
    }
}
