//! The servers' side: pieces received and queued, dispatched by the
//! server's policy into its device, and replied to when done.

use super::*;

impl<'a> Simulation<'a> {
    pub(super) fn reach_server(&mut self, piece: u32, now: Time) {
        let p = &mut self.pieces[piece as usize];
        let wire = self.net.header_bytes() + if p.op == Op::Write { p.bytes } else { 0 };
        let server = &mut self.servers[p.server as usize];
        let streamed = self.net.streamed(wire).filter(|_| p.op == Op::Write);
        let done = match streamed {
            // The server may start on a streamed write once its first
            // buffer is in; the disk cannot finish before its last is.
            Some(behind) => {
                let client = self.net.client_bandwidth().transfer_time(behind);
                let full = self.net.receive(
                    now + client,
                    wire,
                    &mut server.nic,
                    self.net.server_bandwidth(),
                );
                p.data_in = full;
                full.saturating_sub(self.net.server_bandwidth().transfer_time(behind))
                    .max(now)
            }
            None => self
                .net
                .receive(now, wire, &mut server.nic, self.net.server_bandwidth()),
        };
        if done == now {
            self.arrive(piece, now);
        } else {
            self.events
                .schedule(done, Class::Normal, 0, Event::Arrive { piece });
        }
    }

    pub(super) fn arrive(&mut self, piece: u32, now: Time) {
        let p = &mut self.pieces[piece as usize];
        p.arrive = now;
        let Some(mut req) = p.req.take() else { return };
        req.id = RequestId(piece as u64);
        let server = p.server;
        let s = &mut self.servers[server as usize];
        s.driver.enqueue(req, now);
        if let Some(t) = s.timeline.as_mut() {
            t[self.ranks[p.rank as usize].app as usize].enqueued(now);
        }
        let queued = s.driver.queued();
        s.max_queue = s.max_queue.max(queued);
        let poll = self.sc.cluster.poll_interval;
        if !poll.is_zero() && s.driver.in_flight() == 0 && queued == 1 && !s.kick_pending {
            // Idle: pick this request up with whatever else arrives within the poll interval.
            s.kick_pending = true;
            self.events
                .schedule(now + poll, Class::Late, 0, Event::Kick { server });
        } else if s.driver.dispatch_would_act() {
            self.kick(server);
        }
    }

    /// Asks the server to dispatch once everything at this instant has
    /// happened (after the event being handled: `flush_kicks`).
    pub(super) fn kick(&mut self, server: u32) {
        let s = &mut self.servers[server as usize];
        if !s.kick_pending {
            s.kick_pending = true;
            self.kicks.push(server);
        }
    }

    pub(super) fn dispatch(&mut self, server: u32, now: Time) {
        let s = &mut self.servers[server as usize];
        let elevator = s.elevator;
        s.kick_pending = false;
        if s.wakeup == Some(now) {
            s.wakeup = None;
        }
        self.dispatched.clear();
        s.driver.dispatch(now, &mut self.dispatched);
        for (req, ticket) in self.dispatched.drain(..) {
            let piece = req.id.0 as u32;
            let p = &mut self.pieces[piece as usize];
            if let Some(t) = s.timeline.as_mut() {
                t[self.ranks[p.rank as usize].app as usize].dispatched(now);
            }
            let base = object_base(&self.sc.cluster.device, self.seed, p.file, p.server);
            if let Some(at) = s.device.cached_until(now, base, &req) {
                // In the server's cache: no disk time.
                p.start = now;
                p.cached = true;
                p.req = Some(req);
                p.ticket = Some(ticket);
                self.events
                    .schedule(at, Class::Normal, 0, Event::DeviceDone { piece });
                continue;
            }
            // An fsync (a write of no bytes) costs its device what the
            // configuration says, as the throttle charges it.
            let fsync = req.op == Op::Write && req.len == 0;
            if elevator && req.op.is_data() && !fsync {
                // The disk takes it when the elevator picks it.
                let address = base.wrapping_add(req.offset);
                s.disk_waiting.push(DiskWait {
                    piece,
                    address,
                    arrived: now,
                });
                p.req = Some(req);
                p.ticket = Some(ticket);
                continue;
            }
            let done = match req.op {
                // A reaper's removal of n objects costs n removes.
                Op::Meta(op) => s.device.start_metadata(
                    now,
                    Time::from_nanos(
                        self.sc.cluster.metadata.costs.of(op).as_nanos()
                            * u64::from(p.objects.max(1)),
                    ),
                ),
                Op::Write if fsync => s
                    .device
                    .start_metadata(now, self.sc.cluster.metadata.costs.fsync),
                Op::Read | Op::Write => s
                    .device
                    .start(now, base, &req, &mut self.rng_dev)
                    .max(p.data_in),
            };
            s.busy += done - now.max(s.device_free);
            s.device_free = s.device_free.max(done);
            p.start = now;
            p.req = Some(req);
            p.ticket = Some(ticket);
            self.events
                .schedule(done, Class::Normal, 0, Event::DeviceDone { piece });
        }
        if let Some(at) = s.driver.next_wakeup(now) {
            // One pending wakeup suffices: when it fires the queue is asked again.
            if at > now && s.wakeup.is_none_or(|w| at < w) {
                s.wakeup = Some(at);
                self.events
                    .schedule(at, Class::Late, 0, Event::Kick { server });
            }
        }
        if elevator {
            self.start_disk(server, now);
        }
    }

    /// Under the elevator: if the disk is free, starts the request it picks.
    pub(super) fn start_disk(&mut self, server: u32, now: Time) {
        let Some(deadline) = self.sc.cluster.device.kind().elevator_deadline() else {
            return;
        };
        let s = &mut self.servers[server as usize];
        if s.disk_busy || s.disk_waiting.is_empty() {
            return;
        }
        let i = elevator_pick(&s.disk_waiting, s.device.head(), now, deadline);
        let DiskWait { piece, .. } = s.disk_waiting.remove(i);
        let p = &mut self.pieces[piece as usize];
        let Some(req) = p.req.as_ref() else { return };
        let base = object_base(&self.sc.cluster.device, self.seed, p.file, p.server);
        let done = s
            .device
            .start(now, base, req, &mut self.rng_dev)
            .max(p.data_in);
        s.busy += done - now.max(s.device_free);
        s.device_free = s.device_free.max(done);
        s.disk_busy = true;
        p.start = now;
        self.events
            .schedule(done, Class::Normal, 0, Event::DeviceDone { piece });
    }

    pub(super) fn device_done(&mut self, piece: u32, now: Time) {
        let p = &mut self.pieces[piece as usize];
        p.done = now;
        let (server, rank, bytes, op, cached) = (p.server, p.rank, p.bytes, p.op, p.cached);
        // A file's removal, committed (not a reaper's removal of objects).
        let removed = (op == Op::Meta(concerto_core::MetaOp::Remove) && p.objects == 0)
            .then_some(p.file)
            .filter(|_| self.sc.cluster.metadata.posix_mount);
        let is_meta = !op.is_data();
        let running = p.req.take().zip(p.ticket.take());
        let s = &mut self.servers[server as usize];
        if let Some((req, ticket)) = running {
            if let Some(report) = s.driver.complete(&req, ticket, now) {
                s.reports_sent += 1;
                self.send_report(server, report, now);
            }
        }
        let s = &mut self.servers[server as usize];
        s.requests += 1;
        s.metadata_ops += is_meta as u64;
        s.bytes += bytes;
        let app = self.ranks[rank as usize].app;
        let f = s.finish.entry(app).or_insert(AppAtServer {
            first: now,
            last: now,
            op: 0,
        });
        f.last = now;
        let a = &mut self.apps[app as usize];
        if self.sc.apps[a.spec].barrier && f.op != a.next_call + 1 {
            // The operation's first piece to finish here.
            f.op = a.next_call + 1;
            a.op_servers.push(server);
        }
        if let Some(t) = a.timeline.as_mut() {
            t.served(now, bytes, is_meta);
        }
        if let Some(t) = s.timeline.as_mut() {
            t[app as usize].bins.served(now, bytes, is_meta);
        }
        if let Some(file) = removed {
            self.orphaned(server, file, rank, now);
        }
        let instant = self.net.is_instant();
        // A data request's reply waits for the server's own handling; the
        // device is free meanwhile.
        let handled = if is_meta {
            now
        } else {
            now + self.sc.cluster.server_data_overhead
        };
        if !instant {
            let wire = self.net.header_bytes() + if op == Op::Read { bytes } else { 0 };
            let reply_from = if op == Op::Read {
                self.net
                    .reply_start(self.pieces[piece as usize].start, handled, wire)
            } else {
                handled
            };
            if self.net.is_shared() {
                let message = sharing::Message::Reply { piece };
                let client = sharing::Nic::Client(self.ranks[rank as usize].nic);
                self.share_send(
                    sharing::Nic::Server(server),
                    client,
                    wire,
                    message,
                    reply_from,
                );
            } else {
                self.reply(server, rank, piece, wire, reply_from);
            }
        }
        self.kick(server);
        if !is_meta && !cached && self.servers[server as usize].elevator {
            self.servers[server as usize].disk_busy = false;
            self.start_disk(server, now);
        }
        if instant && handled > now {
            self.events
                .schedule(handled, Class::Normal, 0, Event::ReachClient { piece });
        } else if instant {
            // No network: the reply is back now, once the server has moved
            // on (the process's next request may come to this server).
            self.reach_client(piece, now);
        }
    }

    /// Sends a piece's reply of `wire` bytes from its server's NIC to its
    /// client's, no earlier than `from`.
    fn reply(&mut self, server: u32, rank: u32, piece: u32, wire: u64, from: Time) {
        let sent = self.net.send(
            from,
            wire,
            End {
                nic: &mut self.servers[server as usize].nic,
                bandwidth: self.net.server_bandwidth(),
            },
            End {
                nic: &mut self.clients[self.ranks[rank as usize].nic as usize],
                bandwidth: self.net.client_bandwidth(),
            },
            &mut self.rng_net,
        );
        self.events
            .schedule(sent.arrival, Class::Normal, 0, Event::ReachClient { piece });
    }

    /// Sends a service report to every other server (one message each,
    /// taking the network latency; reports are small).
    pub(super) fn send_report(&mut self, from: u32, report: ServiceReport, now: Time) {
        let idx = self.reports.len() as u32;
        self.reports.push(report);
        let at = now + self.net.latency();
        for server in (0..self.servers.len() as u32).filter(|&s| s != from) {
            self.events.schedule(
                at,
                Class::Normal,
                0,
                Event::ServiceReport {
                    server,
                    report: idx,
                },
            );
        }
    }
}
