//! `shared` mode's network: every message is a flow on a [`Fabric`] of the
//! clients' nodes' and the servers' NICs, at its max-min fair share of the
//! sender's and the receiver's NIC, as TCP connections share links. A
//! flow's end is an event that later flows move. Once its last byte is
//! sent, a message takes the network's latency and jitter to arrive; its
//! receiver has already taken it in (its share was the receiver's too).

use super::*;
use crate::network::Fabric;

/// What a message on the fabric is for: what happens once it is sent.
#[derive(Clone, Copy, Debug)]
pub(super) enum Message {
    /// A piece's request (with its data, for a write), to its server.
    Request { piece: u32 },
    /// A piece's reply (with its data, for a read), to its client.
    Reply { piece: u32 },
    /// A collective call's data exchanged between two nodes.
    Exchange { app: u32, exchange: u32 },
}

/// A NIC of the fabric: a client node's or a server's.
#[derive(Clone, Copy, Debug)]
pub(super) enum Nic {
    Client(u32),
    Server(u32),
}

/// The fabric (empty in the other modes).
pub(super) struct SharedNetwork {
    fabric: Fabric<Message>,
    /// Client nodes: the servers' NICs are numbered after them.
    nodes: u32,
    /// The messages an end event found sent (kept to reuse its memory).
    sent: Vec<Message>,
}

impl SharedNetwork {
    pub(super) fn new(net: &Network, nodes: usize, servers: usize) -> SharedNetwork {
        let (nodes, servers) = if net.is_shared() {
            (nodes, servers)
        } else {
            (0, 0)
        };
        let nics = std::iter::repeat_n(net.client_bandwidth(), nodes)
            .chain(std::iter::repeat_n(net.server_bandwidth(), servers));
        SharedNetwork {
            fabric: Fabric::new(nics),
            nodes: nodes as u32,
            sent: Vec::new(),
        }
    }

    fn index(&self, nic: Nic) -> u32 {
        match nic {
            Nic::Client(node) => node,
            Nic::Server(server) => self.nodes + server,
        }
    }
}

impl<'a> Simulation<'a> {
    /// Starts sending `bytes` for `message` from NIC `src` to NIC `dst`.
    pub(super) fn share_send(
        &mut self,
        src: Nic,
        dst: Nic,
        bytes: u64,
        message: Message,
        now: Time,
    ) {
        let shared = &mut self.shared;
        let nics = [shared.index(src), shared.index(dst)];
        let (end, generation) = shared.fabric.send(now, bytes, nics, message);
        self.events
            .schedule(end, Class::Normal, 0, Event::FlowEnd { generation });
    }

    /// A flow may have ended: what was sent goes on its way.
    pub(super) fn flow_end(&mut self, generation: u32, now: Time) {
        let mut sent = std::mem::take(&mut self.shared.sent);
        if let Some((end, generation)) = self.shared.fabric.ended(now, generation, &mut sent) {
            self.events
                .schedule(end, Class::Normal, 0, Event::FlowEnd { generation });
        }
        for message in sent.drain(..) {
            let arrival = now + self.net.one_way(&mut self.rng_net);
            match message {
                Message::Request { piece } => {
                    // Simultaneous arrivals at a server are taken in random order.
                    let tie = self.rng_tie.gen::<u32>();
                    self.events
                        .schedule(arrival, Class::Normal, tie, Event::ReachServer { piece });
                    // A process that orders its blocks sends its next write
                    // block once this one has left (see `send_block`).
                    let p = &self.pieces[piece as usize];
                    if p.op == Op::Write && !self.ranks[p.rank as usize].blocks.is_empty() {
                        let rank = p.rank;
                        self.events
                            .schedule(now, Class::Normal, 0, Event::SendBlock { rank });
                    }
                }
                Message::Reply { piece } => {
                    self.events
                        .schedule(arrival, Class::Normal, 0, Event::ReachClient { piece })
                }
                Message::Exchange { app, exchange } => self.events.schedule(
                    arrival,
                    Class::Normal,
                    0,
                    Event::ExchangeReach { app, exchange },
                ),
            }
        }
        self.shared.sent = sent;
    }
}
