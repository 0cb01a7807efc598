//! Service reports between data servers (total-service sharing, `service-sync`;
//! dmClock's distributed tags, `dmclock` with `distributed = true`).
//!
//! Peer to peer, as in the simulator: a server whose policy reports sends
//! each report straight to every other data server, which charges it to
//! its own queue. There is no hub to run, place or fail over, and a
//! report takes one network hop; a cluster of n servers exchanges n - 1
//! messages per report, which the policy's threshold keeps rare (one per
//! `threshold` bytes served, 4 MiB by default).
//!
//! Sending never holds up the scheduling loop: reports go to a task that
//! talks to the peers. When a peer is slow or down, the reports waiting for
//! it are merged into one (service adds up), so what is held stays bounded
//! and no service is lost; the peer gets the sum once it answers again.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::mpsc;

use concerto_core::server::ServiceReport;

use std::sync::Arc;

use concerto_proto::auth::{Credential, Grant};
use concerto_proto::connection::ServerConnection;

use crate::keys::Keys;
use concerto_proto::Message;

/// How long a peer may take to accept a connection or a report.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);

enum PeerCommand {
    Report(ServiceReport),
    Set(Vec<SocketAddr>),
}

/// The scheduling loop's handle on the task that talks to the peers.
pub(crate) struct PeerLink {
    tx: mpsc::UnboundedSender<PeerCommand>,
}

impl PeerLink {
    /// Starts the task; `own` is left out of any peer list it is given.
    /// Peers are reached with the ring's peer key.
    pub(crate) fn start(own: SocketAddr, peers: Vec<SocketAddr>, keys: Arc<Keys>) -> PeerLink {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(own, peers, keys, rx));
        PeerLink { tx }
    }

    /// Sends `report` to every peer (eventually, merged with later ones if a peer lags).
    pub(crate) fn send(&self, report: ServiceReport) {
        let _ = self.tx.send(PeerCommand::Report(report));
    }

    /// Replaces the peers.
    pub(crate) fn set(&self, peers: Vec<SocketAddr>) {
        let _ = self.tx.send(PeerCommand::Set(peers));
    }
}

struct Peer {
    addr: SocketAddr,
    connection: Option<ServerConnection>,
    /// Service not yet delivered to this peer.
    unsent: Option<ServiceReport>,
}

impl Peer {
    async fn deliver(&mut self, key: Option<&Credential>) {
        let Some(report) = self.unsent.take() else {
            return;
        };
        if self.connection.as_ref().is_none_or(|c| c.is_closed()) {
            self.connection = match key {
                Some(key) => ServerConnection::connect(self.addr, PEER_TIMEOUT, key)
                    .await
                    .ok(),
                None => None,
            };
        }
        let sent = match &self.connection {
            Some(c) => matches!(
                c.call(Message::ServiceReport(report.clone())).await,
                Ok(Message::Done)
            ),
            None => false,
        };
        if !sent {
            // Keep it for the next attempt (merged with whatever comes meanwhile).
            self.connection = None;
            self.unsent = Some(report);
        }
    }
}

fn peers_of(own: SocketAddr, list: Vec<SocketAddr>) -> Vec<Peer> {
    let mut list: Vec<SocketAddr> = list.into_iter().filter(|a| *a != own).collect();
    list.sort();
    list.dedup();
    list.into_iter()
        .map(|addr| Peer {
            addr,
            connection: None,
            unsent: None,
        })
        .collect()
}

async fn run(
    own: SocketAddr,
    list: Vec<SocketAddr>,
    keys: Arc<Keys>,
    mut rx: mpsc::UnboundedReceiver<PeerCommand>,
) {
    let mut peers = peers_of(own, list);
    while let Some(first) = rx.recv().await {
        // Take everything that is waiting, then deliver once.
        let mut next = Some(first);
        while let Some(cmd) = next.take().or_else(|| rx.try_recv().ok()) {
            match cmd {
                PeerCommand::Set(list) => peers = peers_of(own, list),
                PeerCommand::Report(report) => {
                    for p in &mut peers {
                        match &mut p.unsent {
                            Some(waiting) => waiting.merge(&report),
                            None => p.unsent = Some(report.clone()),
                        }
                    }
                }
            }
        }
        // Without a peer key in the ring, reports wait (merged) until one is added.
        let key = keys.ring().with_grant(Grant::Peer).map(|k| k.credential());
        futures::future::join_all(peers.iter_mut().map(|p| p.deliver(key.as_ref()))).await;
    }
}
