//! Who is at the other end of a connection.
//!
//! The administrator issues keys: a secret shared between the servers (the
//! key ring, `keys.toml`) and one holder (a credential file). A key grants
//! one role: `admin` (everything, any application id), `peer` (a server
//! sending its service reports to the others) or `tenant` (one job: data
//! and namespace requests as that job's application id only, at the weight
//! the administrator set for it).
//!
//! A connection proves its key before anything else is served, by a
//! challenge-response with HMAC-SHA256 (RustCrypto's `hmac`, whose
//! comparison takes constant time):
//!
//! 1. client → `Hello { key_id, nonce: Nc, integrity: I }`
//! 2. server → `Challenge { nonce: Ns }` (fresh from the OS for every connection)
//! 3. client → `Proof { mac: HMAC(secret, "concerto client" | key_id | Nc | Ns | I) }`
//! 4. server → `Welcome { grant, integrity: J, mac: HMAC(secret, "concerto server" | key_id | Nc | Ns | J) }`
//!
//! The secret never travels. A recorded proof is worth nothing on another
//! connection, whose server nonce differs; the server's own proof tells
//! the client that it, too, holds the key. When `J` is set, every frame
//! after the handshake carries a MAC under a session key derived from
//! these nonces ([`crate::integrity`]), as in Lustre's SSK integrity mode;
//! frames are never encrypted, so a cluster's network between hosts should
//! still be private (docs/deployment.md).

use concerto_core::FieldError;
use std::fmt;
use std::path::Path;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// Bytes in a secret and in a nonce.
pub const SECRET_LEN: usize = 32;
pub const NONCE_LEN: usize = 32;
/// Longest key id.
pub const MAX_KEY_ID: usize = 128;
/// The most groups a key may name (NFS's AUTH_SYS carries 16; Linux allows 65536).
pub const MAX_GROUPS: usize = 256;

/// A nonce or a MAC as it travels.
pub type Nonce = [u8; NONCE_LEN];
pub type Proof = [u8; 32];

/// A key's secret; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; SECRET_LEN]);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A new secret from the operating system's random source.
    pub fn generate() -> Result<Secret, String> {
        Ok(Secret(random()?))
    }

    /// The secret's bytes, to key a MAC with (never to print).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn from_hex(text: &str) -> Result<Secret, String> {
        let mut bytes = [0u8; SECRET_LEN];
        hex::decode_to_slice(text.trim(), &mut bytes)
            .map_err(|_| format!("must be {} hexadecimal digits", 2 * SECRET_LEN))?;
        Ok(Secret(bytes))
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// Fresh random bytes from the operating system (nonces, secrets).
pub fn random() -> Result<[u8; 32], String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| format!("no randomness from the system: {e}"))?;
    Ok(bytes)
}

/// What a key allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Grant {
    /// Every operation, as any application.
    Admin,
    /// A server's service reports to its peers.
    Peer,
    /// Data and namespace requests as application `job` only.
    Tenant { job: u32 },
    /// A node's mount serving every user of the node: data and namespace
    /// requests as any application, on files as the user each request
    /// names, if in `first_user..=last_user` (the node is trusted for
    /// the uid, as a Lustre or NFS client is; never root).
    Node { first_user: u32, last_user: u32 },
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Admin => f.write_str("admin"),
            Grant::Peer => f.write_str("peer"),
            Grant::Tenant { job } => write!(f, "tenant of job {job}"),
            Grant::Node {
                first_user,
                last_user,
            } => write!(f, "node key for users {first_user}-{last_user}"),
        }
    }
}

/// One key of the ring, as the servers know it.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    pub id: String,
    pub grant: Grant,
    /// A tenant's proportional-share weight, set by the administrator
    /// (requests' own weights are not taken from tenants).
    pub weight: Option<f64>,
    /// The user (numeric id) a tenant's job runs as, set by the
    /// administrator: QoS rules can match it (all of a user's jobs together).
    pub user: Option<u32>,
    /// The groups (numeric ids) a tenant's user is in, the first its
    /// primary group (files it creates get it); none: the user's own
    /// group, numbered as the user (a user-private group).
    pub groups: Vec<u32>,
    pub secret: Secret,
}

/// The user nothing is granted to: what a tenant key naming no user (and
/// a peer key) acts as on files, as NFS squashes root.
pub const NOBODY: u32 = 65534;

/// Who a key's requests are on files: the user and groups POSIX
/// permissions are checked against. Only the administrator's key is root
/// (uid 0); a tenant is its key's user, never what a request claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub uid: u32,
    /// The primary group: new files get it.
    pub gid: u32,
    /// Every group the user is in, the primary one included.
    pub groups: Vec<u32>,
}

impl Principal {
    pub fn root() -> Principal {
        Principal {
            uid: 0,
            gid: 0,
            groups: vec![0],
        }
    }

    pub fn nobody() -> Principal {
        Principal {
            uid: NOBODY,
            gid: NOBODY,
            groups: vec![NOBODY],
        }
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    pub fn in_group(&self, gid: u32) -> bool {
        self.groups.contains(&gid)
    }

    /// A user as a node's mount names it (the kernel's uid and gid of the
    /// calling process, and its groups).
    pub fn user(uid: u32, gid: u32, supplementary: &[u32]) -> Principal {
        let mut groups = vec![gid];
        groups.extend(supplementary.iter().copied().filter(|&g| g != gid));
        Principal { uid, gid, groups }
    }
}

impl Key {
    /// The principal its requests act as on files.
    pub fn principal(&self) -> Principal {
        match (self.grant, self.user) {
            (Grant::Admin, _) => Principal::root(),
            (Grant::Tenant { .. }, Some(uid)) if uid != 0 => {
                let gid = self.groups.first().copied().unwrap_or(uid);
                let mut groups = vec![gid];
                groups.extend(self.groups.iter().copied().filter(|&g| g != gid));
                Principal { uid, gid, groups }
            }
            _ => Principal::nobody(),
        }
    }

    /// Who a request is on files when it names `user`: a node key acts
    /// for the user it names if the key's range holds it, with the groups
    /// it names; root, and root's group, are squashed to nobody (the admin
    /// key is the only root); naming no user, it acts as nobody. Every
    /// other key acts as its own principal and may name no user. The
    /// error says why, naming the key.
    pub fn acting_for(&self, user: Option<&Principal>) -> Result<Principal, String> {
        match (self.grant, user) {
            (
                Grant::Node {
                    first_user,
                    last_user,
                },
                Some(p),
            ) => {
                if p.uid == 0 {
                    return Ok(Principal::nobody());
                }
                if !(first_user..=last_user).contains(&p.uid) {
                    return Err(format!(
                        "key {:?} acts for users {first_user}-{last_user}, not {}",
                        self.id, p.uid
                    ));
                }
                let squash = |g: u32| if g == 0 { NOBODY } else { g };
                let supplementary: Vec<u32> = p.groups.iter().map(|&g| squash(g)).collect();
                Ok(Principal::user(p.uid, squash(p.gid), &supplementary))
            }
            (Grant::Node { .. }, None) => Ok(Principal::nobody()),
            (_, Some(p)) => Err(format!(
                "key {:?} is not a node key: it acts as its own user, not as user {}",
                self.id, p.uid
            )),
            (_, None) => Ok(self.principal()),
        }
    }

    /// What its holder keeps: the id and the secret (and the job it acts as).
    pub fn credential(&self) -> Credential {
        Credential {
            id: self.id.clone(),
            secret: self.secret.clone(),
            job: match self.grant {
                Grant::Tenant { job } => Some(job),
                _ => None,
            },
        }
    }
}

/// A key as the key ring's TOML spells it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    id: String,
    role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    job: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    weight: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    groups: Vec<u32>,
    /// A node key's users: `[first, last]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    users: Option<[u32; 2]>,
    secret: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Role {
    Admin,
    Peer,
    Tenant,
    Node,
}

impl KeyEntry {
    /// What its role grants, with the job or users the role needs.
    fn grant(&self) -> Result<Grant, FieldError> {
        let grant = match (self.role, self.job) {
            (Role::Tenant, Some(job)) => Grant::Tenant { job },
            (Role::Tenant, None) => {
                return Err(FieldError::new("job", "a tenant key needs one".into()))
            }
            (_, Some(_)) => {
                return Err(FieldError::new(
                    "job",
                    "only a tenant key names a job".into(),
                ))
            }
            (Role::Admin, None) => Grant::Admin,
            (Role::Peer, None) => Grant::Peer,
            (Role::Node, None) => node_users(self.users)?,
        };
        if self.users.is_some() && self.role != Role::Node {
            return Err(FieldError::new(
                "users",
                "only a node key names a range of users".into(),
            ));
        }
        Ok(grant)
    }

    /// Its weight, user and groups: a tenant's only, never root's.
    fn check_identity(&self) -> Result<(), FieldError> {
        match self.weight {
            Some(w) if !(w.is_finite() && w > 0.0) => {
                return Err(FieldError::new(
                    "weight",
                    format!("{w} is not a number > 0"),
                ))
            }
            Some(_) if self.role != Role::Tenant => {
                return Err(FieldError::new(
                    "weight",
                    "only a tenant key has a weight".into(),
                ))
            }
            _ => {}
        }
        if self.user.is_some() && self.role != Role::Tenant {
            return Err(FieldError::new(
                "user",
                "only a tenant key names a user".into(),
            ));
        }
        if self.user == Some(0) {
            return Err(FieldError::new(
                "user",
                "0 is root: only the admin key acts as root (tenants are squashed)".into(),
            ));
        }
        if !self.groups.is_empty() && self.user.is_none() {
            return Err(FieldError::new(
                "groups",
                "groups need a user (a key without one acts as nobody)".into(),
            ));
        }
        if self.groups.len() > MAX_GROUPS {
            return Err(FieldError::new(
                "groups",
                format!(
                    "{} groups is over the limit of {MAX_GROUPS}",
                    self.groups.len()
                ),
            ));
        }
        Ok(())
    }
}

/// A node key's grant: the users it may act for, never root.
fn node_users(users: Option<[u32; 2]>) -> Result<Grant, FieldError> {
    match users {
        Some([first_user, last_user]) if first_user >= 1 && first_user <= last_user => {
            Ok(Grant::Node {
                first_user,
                last_user,
            })
        }
        Some([first, last]) if first == 0 => Err(FieldError::new(
            "users",
            format!("[{first}, {last}] holds 0, root: a node never acts as root (root squash)"),
        )),
        Some([first, last]) => Err(FieldError::new(
            "users",
            format!("[{first}, {last}]: the first is above the last"),
        )),
        None => Err(FieldError::new(
            "users",
            "a node key needs the users it may act for: users = [FIRST, LAST] (e.g. [1000, 59999])"
                .into(),
        )),
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RingFile {
    #[serde(default)]
    keys: Vec<KeyEntry>,
}

/// Every key the servers accept (`keys.toml`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyRing {
    keys: Vec<Key>,
}

/// A key id: what log lines and errors name, so plain characters only.
pub fn check_key_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_KEY_ID {
        return Err(format!("must be 1 to {MAX_KEY_ID} characters"));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!(
            "{id:?}: only letters, digits, '-', '_' and '.' are allowed"
        ));
    }
    Ok(())
}

impl KeyRing {
    /// Parses a key ring; an error names the key (`keys[2].job: ...`).
    pub fn parse(text: &str) -> Result<KeyRing, String> {
        let file: RingFile = concerto_toml::parse(text)?;
        let mut keys: Vec<Key> = Vec::with_capacity(file.keys.len());
        for (i, e) in file.keys.into_iter().enumerate() {
            let at = |e: FieldError| e.within(&format!("keys[{i}]"));
            check_key_id(&e.id).map_err(|m| at(FieldError::new("id", m)))?;
            if keys.iter().any(|k| k.id == e.id) {
                return Err(at(FieldError::new(
                    "id",
                    format!("{:?} appears twice", e.id),
                )));
            }
            let grant = e.grant().map_err(at)?;
            e.check_identity().map_err(at)?;
            let secret =
                Secret::from_hex(&e.secret).map_err(|m| at(FieldError::new("secret", m)))?;
            keys.push(Key {
                id: e.id,
                grant,
                weight: e.weight,
                user: e.user,
                groups: e.groups,
                secret,
            });
        }
        Ok(KeyRing { keys })
    }

    /// The ring in `path`, which only its owner may read (see [`read_private`]).
    pub fn load(path: &Path) -> Result<KeyRing, String> {
        let text = read_private(path).map_err(|e| format!("{}: {e}", path.display()))?;
        KeyRing::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A ring with a fresh admin key (`admin`) and peer key (`peer`): what
    /// a local cluster starts with.
    pub fn generate() -> Result<KeyRing, String> {
        let key = |id: &str, grant| -> Result<Key, String> {
            Ok(Key {
                id: id.into(),
                grant,
                weight: None,
                user: None,
                groups: Vec::new(),
                secret: Secret::generate()?,
            })
        };
        Ok(KeyRing {
            keys: vec![key("admin", Grant::Admin)?, key("peer", Grant::Peer)?],
        })
    }

    pub fn get(&self, id: &str) -> Option<&Key> {
        self.keys.iter().find(|k| k.id == id)
    }

    /// The first key with this grant (a server's peer key, a test's admin key).
    pub fn with_grant(&self, grant: Grant) -> Option<&Key> {
        self.keys.iter().find(|k| k.grant == grant)
    }

    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// Adds a key (its id must be new).
    pub fn add(&mut self, key: Key) -> Result<(), String> {
        check_key_id(&key.id)?;
        if self.get(&key.id).is_some() {
            return Err(format!("a key {:?} exists already", key.id));
        }
        self.keys.push(key);
        Ok(())
    }

    pub fn to_toml(&self) -> String {
        let file = RingFile {
            keys: self
                .keys
                .iter()
                .map(|k| {
                    let (role, job, users) = match k.grant {
                        Grant::Admin => (Role::Admin, None, None),
                        Grant::Peer => (Role::Peer, None, None),
                        Grant::Tenant { job } => (Role::Tenant, Some(job), None),
                        Grant::Node {
                            first_user,
                            last_user,
                        } => (Role::Node, None, Some([first_user, last_user])),
                    };
                    KeyEntry {
                        id: k.id.clone(),
                        role,
                        job,
                        weight: k.weight,
                        user: k.user,
                        groups: k.groups.clone(),
                        users,
                        secret: k.secret.to_hex(),
                    }
                })
                .collect(),
        };
        toml::to_string(&file).unwrap_or_default()
    }
}

/// What a client holds: one key's id and secret (a credential file).
#[derive(Clone, Debug, PartialEq)]
pub struct Credential {
    pub id: String,
    pub secret: Secret,
    /// The job a tenant key acts as: its requests carry this application id.
    pub job: Option<u32>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialFile {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    job: Option<u32>,
    secret: String,
}

impl Credential {
    pub fn parse(text: &str) -> Result<Credential, String> {
        let f: CredentialFile = concerto_toml::parse(text)?;
        check_key_id(&f.id).map_err(|m| format!("id: {m}"))?;
        Ok(Credential {
            id: f.id,
            secret: Secret::from_hex(&f.secret).map_err(|m| format!("secret: {m}"))?,
            job: f.job,
        })
    }

    /// The credential in `path`, which only its owner may read (see [`read_private`]).
    pub fn load(path: &Path) -> Result<Credential, String> {
        let text = read_private(path).map_err(|e| format!("credential {}: {e}", path.display()))?;
        Credential::parse(&text).map_err(|e| format!("credential {}: {e}", path.display()))
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(&CredentialFile {
            id: self.id.clone(),
            job: self.job,
            secret: self.secret.to_hex(),
        })
        .unwrap_or_default()
    }
}

/// A file of secrets (a key ring, a credential): refused when its group or
/// others may read or write it, as ssh refuses an unprotected private key —
/// a secret others could read is no longer the owner's, and a server
/// that ran with it would let them in as the keys it holds.
pub fn read_private(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "mode {mode:04o} lets others than its owner read or change the secrets it holds; \
             `chmod 600 {}` (concerto auth writes its files so)",
            path.display()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))
}

/// Which end of the handshake a proof is from: each end's proof is made
/// with its own label, so a client's proof can never be reflected back as
/// the server's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// What one handshake's proofs cover: the key, both nonces, and whether
/// frames carry MACs afterwards (what the client asked, in its proof; what
/// the server decided, in its own).
#[derive(Clone, Copy, Debug)]
pub struct Exchange<'a> {
    pub key_id: &'a str,
    pub client: &'a Nonce,
    pub server: &'a Nonce,
    pub integrity: bool,
}

fn mac(side: Side, secret: &Secret, x: Exchange<'_>) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&secret.0)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    m.update(match side {
        Side::Client => b"concerto client",
        Side::Server => b"concerto server",
    });
    m.update(&(x.key_id.len() as u32).to_be_bytes());
    m.update(x.key_id.as_bytes());
    m.update(x.client);
    m.update(x.server);
    m.update(&[u8::from(x.integrity)]);
    m
}

/// `side`'s proof that it holds `secret`, for this exchange (steps 3 and 4).
pub fn proof(side: Side, secret: &Secret, exchange: Exchange<'_>) -> Proof {
    mac(side, secret, exchange).finalize().into_bytes().into()
}

/// Checks `side`'s proof, in constant time.
pub fn verify(side: Side, secret: &Secret, exchange: Exchange<'_>, proof: &Proof) -> bool {
    mac(side, secret, exchange).verify_slice(proof).is_ok()
}

#[cfg(test)]
mod tests;
