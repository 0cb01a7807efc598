//! The wire protocol between clients and servers.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes (tokio-util's
//! `LengthDelimitedCodec`, which refuses frames over [`MAX_FRAME`] before
//! reading them). The bytes are a bincode-encoded [`Envelope`]: protocol
//! version, a request id the reply echoes, and the message. Decoding is
//! bounded (bincode's size limit, no trailing bytes) and every field is
//! checked by [`Envelope::validate`] before a server acts on it, so a
//! malformed frame becomes a [`ProtocolError`], never a panic or an
//! unbounded allocation.
//!
//! Every data request carries Concerto's tags ([`Tags`]): the application,
//! the rank, and the client's issue time, which is what lets a server's
//! policy order its queue without talking to the other servers.

use bincode::Options;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Bumped on any incompatible change; a server answers other versions with an error.
pub const VERSION: u16 = 1;
/// Largest data payload of one request or reply.
pub const MAX_IO: u64 = 16 << 20;
/// Largest frame: the payload plus headroom for the envelope.
pub const MAX_FRAME: usize = MAX_IO as usize + 64 * 1024;
/// Most extents one list-I/O request may carry.
pub const MAX_SEGMENTS: usize = 4096;
/// Longest string field (policy text, error messages).
pub const MAX_TEXT: usize = 64 * 1024;

/// Who sent a request and when: PVFS2's hints made first-class.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tags {
    pub app: u32,
    pub rank: u32,
    /// The client's issue time of the operation, nanoseconds since the Unix epoch.
    pub issue_ns: u64,
    /// Proportional-share weight; `None` is the server's default.
    pub weight: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Message {
    /// Write `data` at `offset` of `object`.
    Write { tags: Tags, object: u64, offset: u64, data: Vec<u8> },
    /// Read `len` bytes at `offset` of `object`; a short reply means end of object.
    Read { tags: Tags, object: u64, offset: u64, len: u64 },
    /// Make everything written to `object` durable.
    Fsync { tags: Tags, object: u64 },
    /// Liveness check; the reply names the server's policy.
    Ping,
    /// Replace the scheduling policy, given as TOML (`kind = "sfq-d-plus"` ...), without a restart.
    SetPolicy { policy: String },
    /// Replies.
    Done,
    Data { data: Vec<u8> },
    Pong { policy: String },
    Error { kind: ErrorKind, message: String },
}

/// What went wrong, for the client to turn into the right exception.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The frame could not be decoded or a field is out of bounds; the connection is closed.
    Protocol,
    /// The request was well formed but is not acceptable (a bad policy, say).
    Invalid,
    /// The storage failed.
    Io,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub version: u16,
    /// Chosen by the client; the reply carries the same id.
    pub id: u64,
    pub message: Message,
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum ProtocolError {
    #[error("undecodable frame: {0}")]
    Decode(String),
    #[error("protocol version {got} is not supported (this server speaks {VERSION})")]
    Version { got: u16 },
    #[error("{field}: {message}")]
    Field { field: &'static str, message: String },
}

fn codec() -> impl Options {
    bincode::DefaultOptions::new().with_limit(MAX_FRAME as u64).with_fixint_encoding().reject_trailing_bytes()
}

impl Envelope {
    pub fn new(id: u64, message: Message) -> Envelope {
        Envelope { version: VERSION, id, message }
    }

    pub fn encode(&self) -> Vec<u8> {
        // Serializing these plain types into a Vec cannot fail; a size over
        // the limit is caught when the peer decodes it.
        codec().serialize(self).unwrap_or_default()
    }

    /// Decodes and validates one frame's bytes.
    pub fn decode(bytes: &[u8]) -> Result<Envelope, ProtocolError> {
        if bytes.len() > MAX_FRAME {
            return Err(ProtocolError::Decode(format!("frame of {} bytes is over the {MAX_FRAME}-byte limit", bytes.len())));
        }
        let env: Envelope = codec().deserialize(bytes).map_err(|e| ProtocolError::Decode(e.to_string()))?;
        env.validate()?;
        Ok(env)
    }

    /// Checks every field against its bounds.
    pub fn validate(&self) -> Result<(), ProtocolError> {
        if self.version != VERSION {
            return Err(ProtocolError::Version { got: self.version });
        }
        let field = |field: &'static str, message: String| Err(ProtocolError::Field { field, message });
        let check_tags = |t: &Tags| match t.weight {
            Some(w) if !(w.is_finite() && w > 0.0) => field("tags.weight", format!("{w} is not a number > 0")),
            _ => Ok(()),
        };
        let check_range = |offset: u64, len: u64| {
            if len > MAX_IO {
                return field("len", format!("{len} bytes is over the {MAX_IO}-byte limit per request"));
            }
            if offset.checked_add(len).is_none() {
                return field("offset", format!("{offset} + {len} overflows"));
            }
            Ok(())
        };
        match &self.message {
            Message::Write { tags, offset, data, .. } => {
                check_tags(tags)?;
                check_range(*offset, data.len() as u64)
            }
            Message::Read { tags, offset, len, .. } => {
                check_tags(tags)?;
                check_range(*offset, *len)
            }
            Message::Fsync { tags, .. } => check_tags(tags),
            Message::SetPolicy { policy } if policy.len() > MAX_TEXT => field("policy", "text is too long".into()),
            Message::Error { message, .. } if message.len() > MAX_TEXT => field("message", "text is too long".into()),
            Message::Data { data } if data.len() as u64 > MAX_IO => field("data", "over the size limit".into()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tags() -> impl Strategy<Value = Tags> {
        (any::<u32>(), any::<u32>(), any::<u64>(), proptest::option::of(0.01f64..100.0))
            .prop_map(|(app, rank, issue_ns, weight)| Tags { app, rank, issue_ns, weight })
    }

    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            (tags(), any::<u64>(), 0u64..1 << 40, proptest::collection::vec(any::<u8>(), 0..512))
                .prop_map(|(tags, object, offset, data)| Message::Write { tags, object, offset, data }),
            (tags(), any::<u64>(), 0u64..1 << 40, 0..MAX_IO)
                .prop_map(|(tags, object, offset, len)| Message::Read { tags, object, offset, len }),
            (tags(), any::<u64>()).prop_map(|(tags, object)| Message::Fsync { tags, object }),
            Just(Message::Ping),
            ".{0,40}".prop_map(|policy| Message::SetPolicy { policy }),
        ]
    }

    proptest! {
        #[test]
        fn valid_envelopes_round_trip(id in any::<u64>(), m in message()) {
            let env = Envelope::new(id, m);
            prop_assert_eq!(Envelope::decode(&env.encode()), Ok(env));
        }

        /// The decoder is the server's first line: arbitrary bytes give an
        /// error or a validated envelope, never a panic or a huge allocation.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(env) = Envelope::decode(&bytes) {
                prop_assert!(env.validate().is_ok());
            }
        }

        /// Flipping bytes of a valid frame is caught or still decodes to something valid.
        #[test]
        fn corrupted_frames_are_caught(m in message(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let mut bytes = Envelope::new(7, m).encode();
            let i = at.index(bytes.len());
            bytes[i] = byte;
            if let Ok(env) = Envelope::decode(&bytes) {
                prop_assert!(env.validate().is_ok());
            }
        }
    }

    #[test]
    fn out_of_bounds_fields_are_named() {
        let t = Tags { app: 1, rank: 0, issue_ns: 0, weight: None };
        let read = |offset, len| Envelope::new(1, Message::Read { tags: t, object: 0, offset, len });
        assert!(matches!(read(0, MAX_IO + 1).validate(), Err(ProtocolError::Field { field: "len", .. })));
        assert!(matches!(read(u64::MAX, 2).validate(), Err(ProtocolError::Field { field: "offset", .. })));
        let bad_weight = Envelope::new(1, Message::Fsync { tags: Tags { weight: Some(-1.0), ..t }, object: 0 });
        assert!(matches!(bad_weight.validate(), Err(ProtocolError::Field { field: "tags.weight", .. })));
        let mut old = Envelope::new(1, Message::Ping);
        old.version = 0;
        assert_eq!(Envelope::decode(&old.encode()), Err(ProtocolError::Version { got: 0 }));
        // A length field claiming more than the limit is refused before allocating.
        let mut huge = Envelope::new(1, Message::Data { data: vec![] }).encode();
        let n = huge.len();
        huge[n - 8..].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(Envelope::decode(&huge), Err(ProtocolError::Decode(_))));
    }
}
