//! `shared` mode's NICs: a NIC sends its messages side by side, each at an
//! equal share of its bandwidth ([`Flows`]), so a message's end is an event
//! that later sends move. Once sent, a message takes the network's latency
//! and jitter to its receiver, which takes it in as in `queued` mode.

use super::*;
use crate::network::Flows;
use concerto_core::units::Bandwidth;

/// What a message in a shared NIC is for: what happens once it is sent.
#[derive(Clone, Copy, Debug)]
pub(super) enum Message {
    /// A piece's request (with its data, for a write), to its server.
    Request { piece: u32 },
    /// A piece's reply (with its data, for a read), to its client.
    Reply { piece: u32 },
    /// A collective call's data exchanged between two nodes.
    Exchange { app: u32, exchange: u32 },
}

/// The shared NICs of the clients' nodes and of the servers (empty in the
/// other modes).
#[derive(Default)]
pub(super) struct SharedNics {
    clients: Vec<Flows<Message>>,
    servers: Vec<Flows<Message>>,
    /// The messages an end event found sent (kept to reuse its memory).
    sent: Vec<Message>,
}

impl SharedNics {
    pub(super) fn new(net: &Network, clients: usize, servers: usize) -> SharedNics {
        if !net.is_shared() {
            return SharedNics::default();
        }
        SharedNics {
            clients: (0..clients).map(|_| Flows::default()).collect(),
            servers: (0..servers).map(|_| Flows::default()).collect(),
            sent: Vec::new(),
        }
    }
}

impl<'a> Simulation<'a> {
    /// Starts sending `bytes` for `message` from a client node's NIC
    /// (`server` false) or a server's.
    pub(super) fn share_send(
        &mut self,
        server: bool,
        nic: u32,
        bytes: u64,
        message: Message,
        now: Time,
    ) {
        let (flows, bw) = self.shared_nic(server, nic);
        let (end, generation) = flows.send(now, bytes, bw, message);
        self.events.schedule(
            end,
            Class::Normal,
            0,
            Event::NicEnd {
                server,
                nic,
                generation,
            },
        );
    }

    /// A shared NIC's message may have ended: what was sent goes on its way.
    pub(super) fn nic_end(&mut self, server: bool, nic: u32, generation: u32, now: Time) {
        let mut sent = std::mem::take(&mut self.shared.sent);
        let (flows, bw) = self.shared_nic(server, nic);
        if let Some((end, generation)) = flows.ended(now, generation, bw, &mut sent) {
            self.events.schedule(
                end,
                Class::Normal,
                0,
                Event::NicEnd {
                    server,
                    nic,
                    generation,
                },
            );
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

    fn shared_nic(&mut self, server: bool, nic: u32) -> (&mut Flows<Message>, Bandwidth) {
        if server {
            (
                &mut self.shared.servers[nic as usize],
                self.net.server_bandwidth(),
            )
        } else {
            (
                &mut self.shared.clients[nic as usize],
                self.net.client_bandwidth(),
            )
        }
    }
}
