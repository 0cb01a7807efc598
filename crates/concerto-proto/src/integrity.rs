//! Integrity on the wire: after the handshake, every frame may carry a MAC
//! under a session key, as Lustre's SSK does in its integrity mode.
//!
//! Both ends derive two session keys from the key's secret and the
//! handshake's nonces, one per direction (so a frame can never be
//! reflected back to its sender):
//!
//! `K(c→s) = HMAC(secret, "concerto session c2s" | key_id | Nc | Ns)`, and
//! `"s2c"` for the other way.
//!
//! The n-th frame a side sends (counting from 0 after the handshake)
//! carries, after its payload, `BLAKE3-keyed(K, n | frame)` over the
//! frame's bytes after the length prefix (32 bytes, inside the length). The number is
//! not sent: each end counts, so a replayed, reordered, dropped or
//! altered frame fails its check, and the connection is closed with a
//! protocol error. Frames are not encrypted.
//!
//! Whether a connection carries MACs is settled in the handshake and bound
//! by its proofs: the client's hello asks (a client asks when the server
//! is not on its own host), the server turns it on when asked or when its
//! `integrity` setting says so, the client's proof covers what it asked
//! and the server's what it decided, so a man in the middle can turn it
//! neither off nor on.
//!
//! Written here rather than taken from a TLS library: the keys and proofs
//! are the handshake's own (pre-shared secrets, no certificates), and what
//! is needed is one keyed hash per frame. The session keys come from
//! HMAC-SHA256 like the handshake's proofs; the frame MAC is BLAKE3's keyed
//! mode (the `blake3` crate): HMAC-SHA256, even with the CPU's SHA
//! extensions, ran at 1.6 GB/s here and cost a loopback client 58% of its
//! 1 MiB write rate, where BLAKE3 uses the vector units (docs/security.md
//! gives both measurements).

use bytes::Bytes;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::auth::{Nonce, Secret};
use crate::ProtocolError;

/// When a client asks for MACs on its connections' frames (a cluster
/// file's `integrity`). The server may turn them on unasked (its own
/// `integrity` setting); it never turns them off when asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ask {
    /// When the server is not on the client's own host (not loopback).
    #[default]
    BetweenHosts,
    /// Always, the client's own host included.
    Always,
    /// Never (the server still may).
    Never,
}

impl Ask {
    /// Whether a connection to `server` asks.
    pub fn asks(self, server: std::net::IpAddr) -> bool {
        match self {
            Ask::BetweenHosts => !server.is_loopback(),
            Ask::Always => true,
            Ask::Never => false,
        }
    }

    pub fn is_default(&self) -> bool {
        *self == Ask::default()
    }
}

/// Bytes of MAC at the end of a frame that carries one.
pub const TAG_LEN: usize = 32;

/// Which way a frame travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    ToServer,
    ToClient,
}

fn session_key(
    direction: Direction,
    secret: &Secret,
    key_id: &str,
    client: &Nonce,
    server: &Nonce,
) -> blake3::Hasher {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret.bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    m.update(match direction {
        Direction::ToServer => b"concerto session c2s",
        Direction::ToClient => b"concerto session s2c",
    });
    m.update(&(key_id.len() as u32).to_be_bytes());
    m.update(key_id.as_bytes());
    m.update(client);
    m.update(server);
    let key: [u8; 32] = m.finalize().into_bytes().into();
    blake3::Hasher::new_keyed(&key)
}

/// One end's keys for a connection with integrity on: what it sends is
/// sealed, what it receives is opened.
pub struct Session {
    pub seal: Sealer,
    pub open: Opener,
}

impl Session {
    /// The client's end, after a handshake with these nonces.
    pub fn client(secret: &Secret, key_id: &str, client: &Nonce, server: &Nonce) -> Session {
        let to_server = session_key(Direction::ToServer, secret, key_id, client, server);
        let to_client = session_key(Direction::ToClient, secret, key_id, client, server);
        Session {
            seal: Sealer::new(to_server),
            open: Opener::new(to_client),
        }
    }

    /// The server's end.
    pub fn server(secret: &Secret, key_id: &str, client: &Nonce, server: &Nonce) -> Session {
        let Session { seal, open } = Session::client(secret, key_id, client, server);
        Session {
            seal: Sealer {
                keyed: open.keyed,
                next: 0,
            },
            open: Opener {
                keyed: seal.keyed,
                next: 0,
            },
        }
    }
}

fn tag(keyed: &blake3::Hasher, number: u64, parts: &[&[u8]]) -> blake3::Hash {
    let mut m = keyed.clone();
    m.update(&number.to_be_bytes());
    for p in parts {
        m.update(p);
    }
    m.finalize()
}

/// MACs the frames one end sends, numbering them.
pub struct Sealer {
    keyed: blake3::Hasher,
    next: u64,
}

impl Sealer {
    fn new(keyed: blake3::Hasher) -> Sealer {
        Sealer { keyed, next: 0 }
    }

    /// The MAC of the next frame sent, whose bytes after the length prefix
    /// are `parts` in order. Frames must leave in the order they are sealed.
    pub fn seal(&mut self, parts: &[&[u8]]) -> [u8; TAG_LEN] {
        let number = self.next;
        self.next += 1;
        tag(&self.keyed, number, parts).into()
    }
}

/// Checks the frames one end receives, in order.
pub struct Opener {
    keyed: blake3::Hasher,
    next: u64,
}

impl Opener {
    fn new(keyed: blake3::Hasher) -> Opener {
        Opener { keyed, next: 0 }
    }

    /// The frame's bytes (after the length prefix) without their MAC, if
    /// the MAC is the one the next frame must carry; checked in constant
    /// time.
    pub fn open(&mut self, mut frame: Bytes) -> Result<Bytes, ProtocolError> {
        let number = self.next;
        if frame.len() < TAG_LEN {
            return Err(ProtocolError::Integrity(format!(
                "frame {number} of {} bytes failed its integrity check: too short to carry its MAC",
                frame.len()
            )));
        }
        let mac = frame.split_off(frame.len() - TAG_LEN);
        let mac: [u8; TAG_LEN] = mac[..].try_into().unwrap_or([0; TAG_LEN]);
        // blake3::Hash compares in constant time.
        if tag(&self.keyed, number, &[&frame]) != blake3::Hash::from(mac) {
            return Err(ProtocolError::Integrity(format!(
                "frame {number} failed its integrity check (altered, replayed, reordered or \
                 from another connection)"
            )));
        }
        self.next += 1;
        Ok(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Envelope, Message};

    fn pair() -> (Session, Session) {
        let secret = Secret::generate().unwrap();
        let (nc, ns) = ([1u8; 32], [2u8; 32]);
        (
            Session::client(&secret, "k", &nc, &ns),
            Session::server(&secret, "k", &nc, &ns),
        )
    }

    fn sealed(sealer: &mut Sealer, id: u64) -> Bytes {
        let mut frame = Envelope::new(id, Message::Ping).encode();
        let mac = sealer.seal(&[&frame]);
        frame.extend_from_slice(&mac);
        Bytes::from(frame)
    }

    #[test]
    fn frames_open_in_order_on_the_other_end_and_nowhere_else() {
        let (mut client, mut server) = pair();
        for id in 0..3 {
            let f = sealed(&mut client.seal, id);
            let open = server.open.open(f).unwrap();
            assert_eq!(Envelope::decode(open).unwrap().id, id);
            let back = sealed(&mut server.seal, id);
            assert_eq!(
                Envelope::decode(client.open.open(back).unwrap())
                    .unwrap()
                    .id,
                id
            );
        }
        // Reflected back to its sender, a frame fails.
        let (mut client, _) = pair();
        let f = sealed(&mut client.seal, 0);
        assert!(client.open.open(f).is_err());
    }

    #[test]
    fn an_altered_replayed_reordered_or_foreign_frame_fails_naming_its_number() {
        let (mut client, mut server) = pair();
        let first = sealed(&mut client.seal, 1);
        let second = sealed(&mut client.seal, 2);
        // Reordered: the second first.
        let e = server.open.open(second.clone()).unwrap_err().to_string();
        assert!(e.contains("frame 0 failed its integrity check"), "{e}");
        server.open.open(first.clone()).unwrap();
        // Replayed.
        assert!(server.open.open(first).is_err());
        // Altered, byte by byte.
        for at in 0..second.len() {
            let mut bad = second.to_vec();
            bad[at] ^= 0x20;
            assert!(server.open.open(Bytes::from(bad)).is_err(), "byte {at}");
        }
        server.open.open(second).unwrap();
        // Another connection's (other nonces) or a cut one.
        let (mut other, _) = pair();
        assert!(server.open.open(sealed(&mut other.seal, 3)).is_err());
        let e = server.open.open(Bytes::from_static(b"short")).unwrap_err();
        assert!(e.to_string().contains("too short"), "{e}");
    }
}
