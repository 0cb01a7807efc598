//! Client and server network interfaces.
//!
//! In the default (`queued`) mode each NIC serializes what it sends and what
//! it receives at its bandwidth, on its own; in `exclusive` mode a transfer
//! holds both NICs at once (every node does one transfer at a time, the
//! model of Clusterfile's I/O scheduling); in `shared` mode every message
//! is a flow at its max-min fair share of the sender's and the receiver's
//! NIC, as TCP connections share the links they cross ([`Fabric`]). A
//! message also takes the link
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
            NetworkMode::Shared => unreachable!("a shared network's messages go through a Fabric"),
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

    /// Whether messages are flows sharing the NICs they cross (`shared`
    /// mode: sends go through a [`Fabric`], not [`Network::send`]).
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
            NetworkMode::Queued => {
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
            // The transfer held the receiver (exclusive), or had its share
            // of it (shared).
            NetworkMode::Exclusive | NetworkMode::Shared | NetworkMode::Ideal => now,
        }
    }
}

/// The messages on the wire in `shared` mode, as flows: each gets its
/// max-min fair share of the two ports it crosses (its sender's sending
/// side and its receiver's receiving side; a NIC is full duplex), as TCP
/// connections share the links they cross. A flow's end depends on the
/// flows that start after it, so the next end is an event that later
/// changes move: each change bumps `generation`, and an end event of an
/// older generation is stale.
pub struct Fabric<T> {
    flows: Vec<Flow<T>>,
    /// Each port's capacity, bytes/s: port `2n` is NIC n's sending side,
    /// `2n + 1` its receiving side.
    capacity: Vec<f64>,
    /// When the flows' bytes left were last brought up to date.
    last: Time,
    generation: u32,
}

struct Flow<T> {
    left: f64,
    ports: [u32; 2],
    rate: f64,
    what: T,
}

/// A flow this close to its end is done (the shares' floating point).
const SENT_WITHIN_BYTES: f64 = 0.5;

impl<T> Fabric<T> {
    /// A fabric of NICs with these bandwidths (each way).
    pub fn new(nics: impl IntoIterator<Item = Bandwidth>) -> Fabric<T> {
        Fabric {
            flows: Vec::new(),
            capacity: nics.into_iter().flat_map(|b| [b.0, b.0]).collect(),
            last: Time::ZERO,
            generation: 0,
        }
    }

    /// Starts `bytes` for `what` from NIC `src` to NIC `dst` at `now`;
    /// returns when the next flow ends and that end's generation (to
    /// schedule).
    pub fn send(&mut self, now: Time, bytes: u64, [src, dst]: [u32; 2], what: T) -> (Time, u32) {
        self.advance(now);
        self.flows.push(Flow {
            left: bytes as f64,
            ports: [2 * src, 2 * dst + 1],
            rate: 0.0,
            what,
        });
        self.share();
        self.next_end(now).expect("a flow is on the wire")
    }

    /// At an end event of `generation`: the flows done by `now` (none if
    /// the event is stale), in the order they started, and the next end
    /// to schedule, if any.
    pub fn ended(&mut self, now: Time, generation: u32, done: &mut Vec<T>) -> Option<(Time, u32)> {
        if generation != self.generation {
            return None;
        }
        self.advance(now);
        let mut i = 0;
        while i < self.flows.len() {
            if self.flows[i].left <= SENT_WITHIN_BYTES {
                done.push(self.flows.remove(i).what);
            } else {
                i += 1;
            }
        }
        self.share();
        self.next_end(now)
    }

    fn advance(&mut self, now: Time) {
        let secs = (now - self.last).as_secs_f64();
        for f in &mut self.flows {
            f.left -= f.rate * secs;
        }
        self.last = now;
    }

    /// Max-min fair rates by progressive filling: the port that can give
    /// its unfixed flows the least fixes them at that share, and their
    /// other ports lose what they take, until every flow is fixed.
    fn share(&mut self) {
        let mut left = self.capacity.clone();
        let mut fixed = vec![false; self.flows.len()];
        let mut unfixed = vec![0u32; left.len()];
        for f in &self.flows {
            for p in f.ports {
                unfixed[p as usize] += 1;
            }
        }
        while let Some((port, share)) = unfixed
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(p, &n)| (p, left[p] / n as f64))
            .min_by(|a, b| a.1.total_cmp(&b.1))
        {
            for (i, f) in self.flows.iter_mut().enumerate() {
                if !fixed[i] && f.ports.contains(&(port as u32)) {
                    fixed[i] = true;
                    f.rate = share;
                    for p in f.ports {
                        left[p as usize] -= share;
                        unfixed[p as usize] -= 1;
                    }
                }
            }
        }
    }

    fn next_end(&mut self, now: Time) -> Option<(Time, u32)> {
        self.generation = self.generation.wrapping_add(1);
        let secs = self
            .flows
            .iter()
            .map(|f| f.left.max(0.0) / f.rate)
            .reduce(f64::min)?;
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
    fn flows_share_the_ports_they_cross_max_min_fairly() {
        let gb = Bandwidth(1e9);
        // Seven NICs of 1 GB/s each way.
        let mut fabric = Fabric::new([gb; 7]);
        let mut done = Vec::new();
        // 1 MB alone: 1 ms.
        let (end, _) = fabric.send(Time::ZERO, 1_000_000, [0, 2], 'a');
        assert_eq!(end, Time::from_millis(1));
        // A second sender to the same receiver at 0.5 ms halves both: the
        // first ends at 1.5 ms, the second at 2 ms (half, then alone).
        let (end, generation) = fabric.send(Time::from_micros(500), 1_000_000, [1, 2], 'b');
        assert_eq!(end, Time::from_micros(1500));
        assert_eq!(
            fabric.ended(Time::from_millis(1), generation - 1, &mut done),
            None,
            "stale"
        );
        let (end, generation) = fabric
            .ended(Time::from_micros(1500), generation, &mut done)
            .unwrap();
        assert_eq!((done.as_slice(), end), (&['a'][..], Time::from_millis(2)));
        assert_eq!(
            fabric.ended(end, generation, &mut done),
            None,
            "nothing left"
        );
        // Sixteen from one sender to four receivers all end together,
        // at sixteen's time: the sender's port is what they share; a flow
        // on other ports does not wait for them, and one into a receiver of
        // theirs takes what they leave of it.
        let t = Time::from_millis(10);
        let mut end = Time::ZERO;
        for i in 0..16 {
            end = fabric.send(t, 100_000, [0, 1 + i % 4], 'c').0;
        }
        assert_eq!(end, Time::from_micros(11_600));
        // Into NIC 4, beside four of the sixteen at 1/16 each: 0.75 GB/s.
        let (first, _) = fabric.send(t, 100_000, [6, 4], 'e');
        assert_eq!(first, Time::from_nanos(10_133_334));
        let (first, _) = fabric.send(t, 100_000, [5, 6], 'd');
        assert_eq!(first, Time::from_micros(10_100));
    }

    #[test]
    fn a_flow_held_back_elsewhere_leaves_its_share_to_the_others() {
        // a: NIC 0 -> NIC 2; b: NIC 1 -> NIC 2; c and d: NIC 1 -> NIC 3.
        // NIC 1 sends three flows, a third each; a gets the rest of NIC 2's
        // receiving side (two thirds), not half of it.
        let gb = Bandwidth(1e9);
        let mut fabric = Fabric::new([gb; 4]);
        fabric.send(Time::ZERO, 1_000_000, [1, 2], 'b');
        fabric.send(Time::ZERO, 1_000_000, [1, 3], 'c');
        fabric.send(Time::ZERO, 1_000_000, [1, 3], 'd');
        let (end, _) = fabric.send(Time::ZERO, 500_000, [0, 2], 'a');
        assert_eq!(end, Time::from_micros(750));
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
