//! The requests a connection sends, one typed method each: data, metadata,
//! the server's control and its statistics.

use std::time::Duration;

use bytes::Bytes;

use concerto_core::Extent;

use super::{Changes, ClientError, Object, PhaseAnswer, ServerConnection, Space};
use crate::auth::Principal;
use crate::stats::{Arrival, ServerStats};
use crate::{Member, Message, MetaReply, MetaRequest, Role, Tags, MAX_PHASE_WAIT_MS};

impl ServerConnection {
    /// Writes `data` over the object's `extents` (ascending; lengths summing to `data.len()`).
    pub async fn write(
        &self,
        tags: Tags,
        object: impl Into<Object>,
        extents: Vec<Extent>,
        data: Bytes,
    ) -> Result<(), ClientError> {
        let Object { id: object, cap } = object.into();
        match self
            .call(Message::Write {
                tags,
                object,
                cap,
                extents,
                data,
            })
            .await?
        {
            Message::Done => Ok(()),
            _ => self.unexpected(),
        }
    }

    /// Reads the object's `extents`, concatenated; short where the object ends.
    pub async fn read(
        &self,
        tags: Tags,
        object: impl Into<Object>,
        extents: Vec<Extent>,
    ) -> Result<Bytes, ClientError> {
        let Object { id: object, cap } = object.into();
        match self
            .call(Message::Read {
                tags,
                object,
                cap,
                extents,
            })
            .await?
        {
            Message::Data { data } => Ok(data),
            _ => self.unexpected(),
        }
    }

    pub async fn fsync(&self, tags: Tags, object: impl Into<Object>) -> Result<(), ClientError> {
        let Object { id: object, cap } = object.into();
        self.expect_done(Message::Fsync { tags, object, cap }).await
    }

    /// The object's length and modification time.
    pub async fn object_size(
        &self,
        tags: Tags,
        object: impl Into<Object>,
    ) -> Result<(u64, u64), ClientError> {
        let Object { id: object, cap } = object.into();
        match self.call(Message::ObjectSize { tags, object, cap }).await? {
            Message::Size { size, mtime_ns } => Ok((size, mtime_ns)),
            _ => self.unexpected(),
        }
    }

    pub async fn truncate(
        &self,
        tags: Tags,
        object: impl Into<Object>,
        size: u64,
    ) -> Result<(), ClientError> {
        let Object { id: object, cap } = object.into();
        self.expect_done(Message::Truncate {
            tags,
            object,
            cap,
            size,
        })
        .await
    }

    pub async fn meta(&self, tags: Tags, op: MetaRequest) -> Result<MetaReply, ClientError> {
        self.meta_counted(tags, op, None)
            .await
            .map(|(reply, _)| reply)
    }

    /// A metadata request's answer with the service's change counts: how
    /// many changes it made, and how many are durable. `user`: whom it
    /// is done as, when a node key's mount acts for one of its users.
    pub async fn meta_counted(
        &self,
        tags: Tags,
        op: MetaRequest,
        user: Option<Principal>,
    ) -> Result<(MetaReply, Changes), ClientError> {
        match self.call(Message::Meta { tags, op, user }).await? {
            Message::MetaReply {
                reply,
                changes,
                durable,
            } => Ok((
                reply,
                Changes {
                    made: changes,
                    durable,
                },
            )),
            _ => self.unexpected(),
        }
    }

    /// The server's current policy and roles.
    pub async fn ping(&self) -> Result<(String, Vec<Role>), ClientError> {
        match self.call(Message::Ping).await? {
            Message::Pong { policy, roles } => Ok((policy, roles)),
            _ => self.unexpected(),
        }
    }

    /// Switches the server's policy live (TOML, e.g. `kind = "sfq-d-plus"`);
    /// returns how many requests the previous policy still held, to finish.
    pub async fn set_policy(&self, policy: &str) -> Result<u64, ClientError> {
        match self
            .call(Message::SetPolicy {
                policy: policy.to_string(),
            })
            .await?
        {
            Message::Switched { retiring } => Ok(retiring),
            _ => self.unexpected(),
        }
    }

    /// Checks the QoS rules (TOML) on this server and, when `apply`, puts
    /// them in force.
    pub async fn set_rules(&self, rules: &str, apply: bool) -> Result<(), ClientError> {
        self.expect_done(Message::SetRules {
            rules: rules.to_string(),
            apply,
        })
        .await
    }

    /// The QoS rules in force, as TOML.
    pub async fn rules(&self) -> Result<String, ClientError> {
        match self.call(Message::GetRules).await? {
            Message::RulesReply { rules } => Ok(rules),
            _ => self.unexpected(),
        }
    }

    /// Asks the coordinator to begin an I/O phase (or renews the turn
    /// asked for), waiting there up to `wait` for the grant.
    pub async fn begin_phase(
        &self,
        tags: Tags,
        wait: Duration,
    ) -> Result<PhaseAnswer, ClientError> {
        let wait_ms = wait.as_millis().min(u128::from(MAX_PHASE_WAIT_MS)) as u32;
        match self.call(Message::BeginPhase { tags, wait_ms }).await? {
            Message::Granted { priority, lease_ms } => Ok(PhaseAnswer::Granted {
                priority,
                lease: Duration::from_millis(lease_ms),
            }),
            Message::Queued {
                set,
                ahead,
                lease_ms,
            } => Ok(PhaseAnswer::Queued {
                set,
                ahead,
                lease: Duration::from_millis(lease_ms),
            }),
            _ => self.unexpected(),
        }
    }

    /// Replaces the coordinator's set rule (TOML), live.
    pub async fn set_sets(&self, sets: &str) -> Result<(), ClientError> {
        self.expect_done(Message::SetSets {
            sets: sets.to_string(),
        })
        .await
    }

    /// Tells the coordinator the I/O phase ended.
    pub async fn end_phase(&self, tags: Tags) -> Result<(), ClientError> {
        self.expect_done(Message::EndPhase { tags }).await
    }

    /// Tells a server every server of its cluster (ids, addresses, roles).
    pub async fn set_cluster(&self, servers: Vec<Member>) -> Result<(), ClientError> {
        self.expect_done(Message::SetCluster { servers }).await
    }

    /// Removes objects of files that are gone (the metadata service's removal).
    pub async fn remove_objects(&self, tags: Tags, objects: Vec<u64>) -> Result<(), ClientError> {
        self.expect_done(Message::RemoveObjects { tags, objects })
            .await
    }

    /// The space of the file system the server keeps its objects on.
    pub async fn space(&self) -> Result<Space, ClientError> {
        match self.call(Message::Space).await? {
            Message::SpaceReply {
                total,
                free,
                available,
                disk,
            } => Ok(Space {
                total,
                free,
                available,
                disk,
            }),
            _ => self.unexpected(),
        }
    }

    /// The server's arrival log after request `after` (see [`Arrival`]).
    pub async fn arrivals(&self, after: u64) -> Result<Vec<Arrival>, ClientError> {
        match self.call(Message::Arrivals { after }).await? {
            Message::ArrivalLog { arrivals } => Ok(arrivals),
            _ => self.unexpected(),
        }
    }

    pub async fn stats(&self) -> Result<ServerStats, ClientError> {
        match self.call(Message::Stats).await? {
            Message::StatsReply(stats) => Ok(*stats),
            _ => self.unexpected(),
        }
    }

    async fn expect_done(&self, message: Message) -> Result<(), ClientError> {
        match self.call(message).await? {
            Message::Done => Ok(()),
            _ => self.unexpected(),
        }
    }
}
