//! The capabilities an open file's data requests carry
//! ([`concerto_proto::capability`]): kept with the handle (shared by its
//! clones), and renewed from the metadata service by inode when a third of
//! their life is left, so a file held open for hours keeps working while
//! a chmod that removes the right, or an unlink, ends it within the
//! capability's lifetime.

use std::sync::{Arc, Mutex};

use concerto_proto::capability::{now_s, Capability, LIFETIME};
use concerto_proto::connection::{ClientError, Object};
use concerto_proto::MetaRequest;

use crate::FsClient;

/// A handle's capability: none for an admin key's opens on a cluster
/// whose ring has no peer key (then nothing asks for one).
#[derive(Clone, Debug, Default)]
pub(crate) struct Held(Arc<Mutex<Option<Capability>>>);

impl Held {
    pub fn new(cap: Option<Capability>) -> Held {
        Held(Arc::new(Mutex::new(cap)))
    }

    fn get(&self) -> Option<Capability> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, cap: Option<Capability>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = cap;
    }
}

/// Whether a capability expiring at `expires_s` is renewed at `now`.
fn due(expires_s: u64, now: u64) -> bool {
    expires_s <= now + LIFETIME.as_secs() / 3
}

impl FsClient {
    /// The object `inode` as a data request names it, with the handle's
    /// capability, renewed first when it is due (`write`: the handle was
    /// opened for writing).
    pub(crate) async fn object(
        &self,
        inode: u64,
        held: &Held,
        write: bool,
    ) -> Result<Object, ClientError> {
        let cap = match held.get() {
            Some(c) if due(c.expires_s, now_s()) => {
                let attr = self.meta_attr(MetaRequest::Renew { inode, write }).await?;
                held.set(attr.capability);
                attr.capability
            }
            other => other,
        };
        Ok(Object { id: inode, cap })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_is_renewed_once_a_third_of_its_life_is_left() {
        let life = LIFETIME.as_secs();
        assert!(!due(1000 + life, 1000));
        assert!(!due(1000 + life, 1000 + life / 2));
        assert!(due(1000 + life, 1000 + life * 2 / 3));
        assert!(due(1000, 2000));
    }
}
