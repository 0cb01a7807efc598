//! Capabilities for objects: what makes an object id worth nothing alone.
//!
//! The metadata service, having checked a key's user against a file's
//! mode at open (or truncate), issues a capability: the file's inode, the
//! rights granted (read, write), an expiry, and an HMAC-SHA256 over them
//! and the key's id under a secret the metadata and data servers share
//! (derived from the ring's peer key, which every server holds). A data
//! server serves a tenant's request for an object only with a capability
//! for that object, the right it needs, not expired, and issued to the
//! key of the connection it came on — checked locally, without a round
//! trip to the metadata service, as Lustre's and Ceph's capabilities are.
//! Revocation is by expiry: a chmod that removes a right, or an unlink,
//! takes effect on other clients' open descriptors within
//! [`LIFETIME`]; clients renew before then ([`crate::MetaRequest::Renew`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::auth::{Grant, KeyRing};

pub const READ: u8 = 1;
pub const WRITE: u8 = 2;

/// How long a capability lasts.
pub const LIFETIME: Duration = Duration::from_secs(600);

/// A right to read and/or write one file's objects, bound to one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    pub inode: u64,
    pub rights: u8,
    /// The user it was issued to (whom the metadata service checked the
    /// mode for): a data server counts a node key's requests as this
    /// user's (QoS rules that name users), as it knows no other.
    pub uid: u32,
    /// Seconds since the Unix epoch, by the metadata server's clock.
    pub expires_s: u64,
    pub mac: [u8; 32],
}

/// The secret capabilities are made with: derived from the ring's peer
/// key (with its own label, so it is no key a handshake proves).
pub struct CapabilityKey([u8; 32]);

/// Now, in seconds since the Unix epoch.
pub fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl CapabilityKey {
    /// The ring's; `None` when it holds no peer key (then no tenant can
    /// be given objects: the servers say so).
    pub fn from_ring(ring: &KeyRing) -> Option<CapabilityKey> {
        let peer = ring.with_grant(Grant::Peer)?;
        let mut m = hmac(peer.secret.bytes());
        m.update(b"concerto object capabilities v1");
        Some(CapabilityKey(m.finalize().into_bytes().into()))
    }

    fn mac(&self, key_id: &str, cap: &Capability) -> Hmac<Sha256> {
        let mut m = hmac(&self.0);
        m.update(&(key_id.len() as u64).to_le_bytes());
        m.update(key_id.as_bytes());
        m.update(&cap.inode.to_le_bytes());
        m.update(&[cap.rights]);
        m.update(&cap.uid.to_le_bytes());
        m.update(&cap.expires_s.to_le_bytes());
        m
    }

    /// A capability for `key_id`, acting as user `uid`, to `rights` on
    /// `inode`, from `now_s` for [`LIFETIME`].
    pub fn issue(&self, key_id: &str, inode: u64, rights: u8, uid: u32, now_s: u64) -> Capability {
        let mut cap = Capability {
            inode,
            rights,
            uid,
            expires_s: now_s + LIFETIME.as_secs(),
            mac: [0; 32],
        };
        cap.mac = self.mac(key_id, &cap).finalize().into_bytes().into();
        cap
    }

    /// Why `cap` does not let `key_id` do `want` on `object` at `now_s`, or `None`.
    pub fn refusal(
        &self,
        cap: Option<&Capability>,
        key_id: &str,
        object: u64,
        want: u8,
        now_s: u64,
    ) -> Option<String> {
        let Some(cap) = cap else {
            return Some(format!(
                "object {object:#x}: no capability (open the file through the metadata service)"
            ));
        };
        if cap.inode != object {
            return Some(format!(
                "object {object:#x}: the capability is for object {:#x}",
                cap.inode
            ));
        }
        // The MAC first: an altered capability says nothing true.
        if self.mac(key_id, cap).verify_slice(&cap.mac).is_err() {
            return Some(format!(
                "object {object:#x}: the capability is forged, altered or issued to another key"
            ));
        }
        if cap.expires_s <= now_s {
            return Some(format!(
                "object {object:#x}: the capability expired {} s ago",
                now_s - cap.expires_s
            ));
        }
        if cap.rights & want != want {
            return Some(format!(
                "object {object:#x}: the capability grants {} where {} is needed",
                rights_name(cap.rights),
                rights_name(want)
            ));
        }
        None
    }
}

fn hmac(key: &[u8]) -> Hmac<Sha256> {
    <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"))
}

fn rights_name(rights: u8) -> &'static str {
    match rights & (READ | WRITE) {
        0 => "nothing",
        READ => "reading",
        WRITE => "writing",
        _ => "reading and writing",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_holds_for_its_key_object_rights_and_time_only() {
        let ring = KeyRing::generate().unwrap();
        let k = CapabilityKey::from_ring(&ring).unwrap();
        let cap = k.issue("job-7", 42, READ, 1001, 1000);
        assert_eq!(k.refusal(Some(&cap), "job-7", 42, READ, 1001), None);
        let why = |c: Option<&Capability>, key: &str, object: u64, want: u8, now: u64| {
            k.refusal(c, key, object, want, now).unwrap()
        };
        assert!(why(None, "job-7", 42, READ, 1001).contains("no capability"));
        assert!(why(Some(&cap), "job-8", 42, READ, 1001).contains("another key"));
        assert!(why(Some(&cap), "job-7", 43, READ, 1001).contains("is for object 0x2a"));
        assert!(why(Some(&cap), "job-7", 42, WRITE, 1001).contains("grants reading where writing"));
        let late = 1000 + LIFETIME.as_secs() + 5;
        assert!(why(Some(&cap), "job-7", 42, READ, late).contains("expired 5 s ago"));
        let mut raised = cap;
        raised.rights = READ | WRITE;
        assert!(why(Some(&raised), "job-7", 42, WRITE, 1001).contains("forged"));
        let mut longer = cap;
        longer.expires_s += 3600;
        assert!(why(Some(&longer), "job-7", 42, READ, 1001).contains("forged"));
        // The user it names is the one it was issued to.
        let mut another_user = cap;
        another_user.uid = 1002;
        assert!(why(Some(&another_user), "job-7", 42, READ, 1001).contains("forged"));
        // Another ring's servers (another peer secret) do not honour it.
        let other = CapabilityKey::from_ring(&KeyRing::generate().unwrap()).unwrap();
        assert!(other
            .refusal(Some(&cap), "job-7", 42, READ, 1001)
            .unwrap()
            .contains("forged"));
    }
}
