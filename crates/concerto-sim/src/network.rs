//! Client and server network interfaces.
//!
//! In the default (`queued`) mode each NIC serializes what it sends and what
//! it receives at its bandwidth, on its own; in `exclusive` mode a transfer
//! holds both NICs at once (every node does one transfer at a time, the
//! model of Clusterfile's I/O scheduling); in `shared` mode a NIC shares
//! its bandwidth equally among the messages it is sending at once, as TCP
//! shares a link among its flows ([`Flows`]), and takes in what it receives
//! as in `queued` mode. A message also takes the link
//! latency plus a uniform random jitter. The jitter is what makes one
//! client's pieces reach different servers at different times, so that
//! independent servers see different arrival orders: the problem
//! server-side coordination solves. In `ideal` mode there is no network:
//! messages take no time and no randomness is drawn for them.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use concerto_core::units::Bandwidth;
use concerto_core::Time;

use crate::scenario::{NetworkConfig, NetworkMode};

#[derive(Clone, Copy, Default)]
pub struct Nic {
    tx_free: Time,
    rx_free: Time,
}

/// One end of a message: its NIC and that NIC's bandwidth.
pub struct End<'n> {
    pub nic: &'n mut Nic,
    pub bandwidth: Bandwidth,
}

/// When a message sent with [`Network::send`] leaves and arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// The sender's NIC has put the last byte on the wire.
    pub sent: Time,
    /// The message reaches the receiver (before, in `queued` mode, waiting
    /// for the receiver's NIC: see [`Network::receive`]).
    pub arrival: Time,
}

pub struct Network {
    cfg: NetworkConfig,
}

impl Network {
    pub fn new(cfg: NetworkConfig) -> Network {
        Network { cfg }
    }

    pub fn header_bytes(&self) -> u64 {
        self.cfg.header_bytes.0
    }
    pub fn client_bandwidth(&self) -> Bandwidth {
        self.cfg.client_bandwidth
    }
    pub fn server_bandwidth(&self) -> Bandwidth {
        self.cfg.server_bandwidth
    }
    /// Messages take no time (`ideal` mode): the model delivers them
    /// where they are sent, without events of their own.
    pub fn is_instant(&self) -> bool {
        self.cfg.mode == NetworkMode::Ideal
    }
    /// A small message's one-way delay (without jitter).
    pub fn latency(&self) -> Time {
        if self.is_instant() {
            Time::ZERO
        } else {
            self.cfg.latency
        }
    }

    /// Sends `bytes` from `src` to `dst`, no earlier than `now`.
    pub fn send(
        &self,
        now: Time,
        bytes: u64,
        src: End<'_>,
        dst: End<'_>,
        rng: &mut ChaCha8Rng,
    ) -> Sent {
        let sent = match self.cfg.mode {
            NetworkMode::Ideal => {
                return Sent {
                    sent: now,
                    arrival: now,
                }
            }
            NetworkMode::Queued => {
                let end = now.max(src.nic.tx_free) + src.bandwidth.transfer_time(bytes);
                src.nic.tx_free = end;
                end
            }
            NetworkMode::Shared => unreachable!("a shared NIC's messages go through Flows"),
            NetworkMode::Exclusive => {
                let rate = Bandwidth(src.bandwidth.0.min(dst.bandwidth.0));
                let end = now.max(src.nic.tx_free).max(dst.nic.rx_free) + rate.transfer_time(bytes);
                src.nic.tx_free = end;
                dst.nic.rx_free = end;
                end
            }
        };
        Sent {
            sent,
            arrival: sent + self.one_way(rng),
        }
    }

    /// A message's way from one NIC to the other once sent: the latency
    /// and a uniform draw of the jitter.
    pub fn one_way(&self, rng: &mut ChaCha8Rng) -> Time {
        let jitter = match self.cfg.jitter.as_nanos() {
            0 => Time::ZERO,
            j => Time::from_nanos(rng.gen_range(0..=j)),
        };
        self.cfg.latency + jitter
    }

    /// Whether NICs share their bandwidth among the messages they send
    /// (`shared` mode: sends go through [`Flows`], not [`Network::send`]).
    pub fn is_shared(&self) -> bool {
        self.cfg.mode == NetworkMode::Shared
    }

    /// When a read reply of `bytes` may start leaving the server, for a
    /// request the disk served from `disk_start` to `done`: at `done`, or
    /// with `flow_buffer`, as early as the disk start allows while ending
    /// no earlier than one buffer's transfer after `done`.
    pub fn reply_start(&self, disk_start: Time, done: Time, bytes: u64) -> Time {
        match self.cfg.flow_buffer {
            Some(flow) if bytes > flow.0 => {
                let bw = self.cfg.server_bandwidth;
                let behind =
                    (done + bw.transfer_time(flow.0)).saturating_sub(bw.transfer_time(bytes));
                disk_start.max(behind).min(done)
            }
            _ => done,
        }
    }

    /// With `flow_buffer`, a message of `bytes` streams: the bytes behind
    /// its first buffer (which the receiver need not wait for to start).
    pub fn streamed(&self, bytes: u64) -> Option<u64> {
        self.cfg
            .flow_buffer
            .filter(|flow| bytes > flow.0)
            .map(|flow| bytes - flow.0)
    }

    /// The receiving side, called at the arrival time `now` in arrival
    /// order: returns when the message has fully arrived. In `queued` mode
    /// that is after the messages the receiver is still taking in; in
    /// `exclusive` mode the transfer already held the receiver.
    pub fn receive(&self, now: Time, bytes: u64, dst: &mut Nic, dst_bw: Bandwidth) -> Time {
        match self.cfg.mode {
            NetworkMode::Queued | NetworkMode::Shared => {
                let transfer = dst_bw.transfer_time(bytes);
                if let Some(incast) = &self.cfg.incast {
                    // Bytes the receiver's port holds ahead of this message.
                    let waiting = dst.rx_free.saturating_sub(now).as_secs_f64() * dst_bw.0;
                    if waiting > 0.0 && waiting + bytes as f64 > incast.buffer.0 as f64 {
                        // Lost: it comes again after the timeout, when the
                        // port has long drained (its own transfer then is
                        // not queued behind anything).
                        return now + incast.timeout + transfer;
                    }
                }
                let done = now.max(dst.rx_free + transfer);
                dst.rx_free = done;
                done
            }
            NetworkMode::Exclusive | NetworkMode::Ideal => now,
        }
    }
}

/// The messages one NIC is sending in `shared` mode, each at an equal
/// share of its bandwidth (processor sharing). A message's end depends on
/// the messages sent after it, so the NIC's next end is an event that a
/// later send moves: each change bumps `generation`, and an end event of
/// an older generation is stale.
pub struct Flows<T> {
    /// Bytes still to send, and what the message is for.
    sending: Vec<(f64, T)>,
    /// When `sending` was last brought up to date.
    last: Time,
    generation: u32,
}

impl<T> Default for Flows<T> {
    fn default() -> Self {
        Flows {
            sending: Vec::new(),
            last: Time::ZERO,
            generation: 0,
        }
    }
}

/// A message this close to its end is sent (the shares' floating point).
const SENT_WITHIN_BYTES: f64 = 0.5;

impl<T> Flows<T> {
    /// Starts sending `bytes` for `what` at `now`; returns when the NIC's
    /// next message ends and that end's generation (to schedule).
    pub fn send(&mut self, now: Time, bytes: u64, bw: Bandwidth, what: T) -> (Time, u32) {
        self.advance(now, bw);
        self.sending.push((bytes as f64, what));
        self.next_end(now, bw).expect("a message is being sent")
    }

    /// At an end event of `generation`: the messages sent by `now` (none if
    /// the event is stale), and the next end to schedule, if any.
    pub fn ended(
        &mut self,
        now: Time,
        generation: u32,
        bw: Bandwidth,
        sent: &mut Vec<T>,
    ) -> Option<(Time, u32)> {
        if generation != self.generation {
            return None;
        }
        self.advance(now, bw);
        let mut i = 0;
        while i < self.sending.len() {
            if self.sending[i].0 <= SENT_WITHIN_BYTES {
                // In the order they were sent: ties keep it.
                sent.push(self.sending.remove(i).1);
            } else {
                i += 1;
            }
        }
        self.next_end(now, bw)
    }

    fn advance(&mut self, now: Time, bw: Bandwidth) {
        if !self.sending.is_empty() {
            let each = (now - self.last).as_secs_f64() * bw.0 / self.sending.len() as f64;
            for (left, _) in &mut self.sending {
                *left -= each;
            }
        }
        self.last = now;
    }

    fn next_end(&mut self, now: Time, bw: Bandwidth) -> Option<(Time, u32)> {
        self.generation = self.generation.wrapping_add(1);
        let least = self
            .sending
            .iter()
            .map(|(left, _)| *left)
            .reduce(f64::min)?;
        let secs = least.max(0.0) * self.sending.len() as f64 / bw.0;
        Some((
            now + Time::from_nanos((secs * 1e9).ceil() as u64),
            self.generation,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn network(mode: NetworkMode) -> Network {
        Network::new(NetworkConfig {
            latency: Time::from_micros(10),
            jitter: Time::ZERO,
            client_bandwidth: Bandwidth(1e9),
            server_bandwidth: Bandwidth(1e9),
            header_bytes: concerto_core::units::Bytes(0),
            mode,
            flow_buffer: None,
            incast: None,
        })
    }

    fn end(nic: &mut Nic) -> End<'_> {
        End {
            nic,
            bandwidth: Bandwidth(1e9),
        }
    }

    #[test]
    fn queued_transfers_serialize_on_each_end_separately() {
        let net = network(NetworkMode::Queued);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (mut a, mut b, mut c) = (Nic::default(), Nic::default(), Nic::default());
        // 1 MB takes 1 ms on the wire plus 10 us latency.
        let w1 = net.send(Time::ZERO, 1_000_000, end(&mut a), end(&mut c), &mut rng);
        let w2 = net.send(Time::ZERO, 1_000_000, end(&mut b), end(&mut c), &mut rng);
        assert_eq!(
            (w1.arrival, w2.arrival),
            (Time::from_micros(1010), Time::from_micros(1010))
        );
        assert_eq!(
            w1.sent,
            Time::from_millis(1),
            "the sender does not wait for the receiver"
        );
        let bw = Bandwidth(1e9);
        assert_eq!(
            net.receive(w1.arrival, 1_000_000, &mut c, bw),
            Time::from_micros(1010)
        );
        // The second message reaches a busy receiver and queues behind the first.
        assert_eq!(
            net.receive(w2.arrival, 1_000_000, &mut c, bw),
            Time::from_micros(2010)
        );
        // A sender serializes its own messages.
        let w3 = net.send(Time::ZERO, 1_000_000, end(&mut a), end(&mut b), &mut rng);
        assert_eq!(w3.arrival, Time::from_micros(2010));
    }

    #[test]
    fn a_message_that_overflows_the_receivers_port_arrives_again_after_the_timeout() {
        let mut net = network(NetworkMode::Queued);
        net.cfg.incast = Some(crate::scenario::Incast {
            buffer: concerto_core::units::Bytes(150_000),
            timeout: Time::from_millis(200),
        });
        let mut c = Nic::default();
        let bw = Bandwidth(1e9);
        // 100 KB takes 100 us. The first is taken in by 100 us; the second,
        // arriving at 10 us, finds 90 KB still ahead of it in the port
        // (190 KB: over 150 KB) and is lost.
        let t = Time::from_micros(10);
        assert_eq!(net.receive(t, 100_000, &mut c, bw), Time::from_micros(100));
        assert_eq!(
            net.receive(t, 100_000, &mut c, bw),
            t + Time::from_millis(200) + Time::from_micros(100)
        );
        // A small one fits behind the first (140 KB): it queues, not lost.
        assert_eq!(net.receive(t, 50_000, &mut c, bw), Time::from_micros(150));
        // Once the port has drained, a message passes however large.
        let later = Time::from_millis(1);
        assert_eq!(net.receive(later, 400_000, &mut c, bw), later);
    }

    #[test]
    fn a_streamed_reply_overlaps_the_disk_but_ends_a_buffer_after_it() {
        let mut net = network(NetworkMode::Queued);
        let (start, done) = (Time::from_millis(10), Time::from_millis(20));
        assert_eq!(
            net.reply_start(start, done, 4_000_000),
            done,
            "no flow buffer: after the disk"
        );
        net.cfg.flow_buffer = Some(concerto_core::units::Bytes(250_000));
        // 4 MB at 1 GB/s is 4 ms: it starts 3.75 ms before the disk is done.
        assert_eq!(
            net.reply_start(start, done, 4_000_000),
            Time::from_micros(16_250)
        );
        // Longer on the wire than on the disk: it starts with the disk.
        assert_eq!(net.reply_start(start, done, 40_000_000), start);
        assert_eq!(
            net.reply_start(start, done, 100_000),
            done,
            "within one buffer"
        );
    }

    #[test]
    fn a_shared_nic_sends_its_messages_side_by_side() {
        let bw = Bandwidth(1e9);
        let mut nic = Flows::default();
        // 1 MB alone: 1 ms. A second 1 MB at 0.5 ms halves the rate: the
        // first ends at 1.5 ms (0.5 MB alone, 0.5 MB at half), the second
        // at 2 ms (the first's 0.5 MB at half, then 0.5 MB alone).
        let (end, _) = nic.send(Time::ZERO, 1_000_000, bw, 'a');
        assert_eq!(end, Time::from_millis(1));
        let (end, generation) = nic.send(Time::from_micros(500), 1_000_000, bw, 'b');
        assert_eq!(end, Time::from_micros(1500));
        let mut sent = Vec::new();
        assert_eq!(
            nic.ended(Time::from_millis(1), generation - 1, bw, &mut sent),
            None,
            "stale"
        );
        assert!(sent.is_empty());
        let (end, generation) = nic
            .ended(Time::from_micros(1500), generation, bw, &mut sent)
            .unwrap();
        assert_eq!((sent.as_slice(), end), (&['a'][..], Time::from_millis(2)));
        assert_eq!(
            nic.ended(end, generation, bw, &mut sent),
            None,
            "nothing left"
        );
        assert_eq!(sent, ['a', 'b']);
        // Sixteen sent at once all end together, at sixteen's time.
        let mut end = Time::ZERO;
        for i in 0..16 {
            end = nic.send(Time::from_millis(10), 100_000, bw, 'c').0;
            let _ = i;
        }
        assert_eq!(end, Time::from_micros(11_600));
    }

    #[test]
    fn an_exclusive_transfer_holds_both_ends() {
        let net = network(NetworkMode::Exclusive);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (mut a, mut b, mut c) = (Nic::default(), Nic::default(), Nic::default());
        let w1 = net.send(Time::ZERO, 1_000_000, end(&mut a), end(&mut c), &mut rng);
        // b waits for c to be free: it cannot send meanwhile.
        let w2 = net.send(Time::ZERO, 1_000_000, end(&mut b), end(&mut c), &mut rng);
        assert_eq!(
            (w1.sent, w2.sent),
            (Time::from_millis(1), Time::from_millis(2))
        );
        assert_eq!(w2.arrival, Time::from_micros(2010));
        // The receiver was held by the transfer: nothing more to wait for.
        assert_eq!(
            net.receive(w2.arrival, 1_000_000, &mut c, Bandwidth(1e9)),
            w2.arrival
        );
        // Sending and receiving are separate: b's receiving side is free,
        // so a's next transfer starts when a is, at 1 ms.
        let w3 = net.send(Time::ZERO, 1_000_000, end(&mut a), end(&mut b), &mut rng);
        assert_eq!(w3.sent, Time::from_millis(2));
        // A transfer runs at the slower end's bandwidth.
        let mut d = Nic::default();
        let slow = End {
            nic: &mut d,
            bandwidth: Bandwidth(0.5e9),
        };
        let w4 = net.send(
            Time::from_millis(10),
            1_000_000,
            end(&mut c),
            slow,
            &mut rng,
        );
        assert_eq!(w4.sent, Time::from_millis(12));
    }
}
