//! Client and server network interfaces.
//!
//! Each NIC serializes what it sends and what it receives at its bandwidth;
//! a message also takes the link latency plus a uniform random jitter. The
//! jitter is what makes one client's pieces reach different servers at
//! different times, so that independent servers see different arrival
//! orders: the problem server-side coordination solves.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use concerto_core::units::Bandwidth;
use concerto_core::Time;

use crate::config::NetworkConfig;

#[derive(Clone, Copy, Default)]
pub struct Nic {
    tx_free: Time,
    rx_free: Time,
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

    /// Puts `bytes` on the wire from `src` (at `src_bw`) no earlier than
    /// `now`; returns when they would reach the receiver if it were idle.
    pub fn transmit(
        &self,
        now: Time,
        bytes: u64,
        src: &mut Nic,
        src_bw: Bandwidth,
        rng: &mut ChaCha8Rng,
    ) -> Time {
        let tx_end = now.max(src.tx_free) + src_bw.transfer_time(bytes);
        src.tx_free = tx_end;
        let jitter = match self.cfg.jitter.as_nanos() {
            0 => Time::ZERO,
            j => Time::from_nanos(rng.gen_range(0..=j)),
        };
        tx_end + self.cfg.latency + jitter
    }

    /// The receiving side, called at the uncontended arrival time `now` in
    /// arrival order: returns when the message has fully arrived, after the
    /// ones the receiver is still taking in.
    pub fn receive(&self, now: Time, bytes: u64, dst: &mut Nic, dst_bw: Bandwidth) -> Time {
        let done = now.max(dst.rx_free + dst_bw.transfer_time(bytes));
        dst.rx_free = done;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn transfers_serialize_on_both_ends() {
        let net = Network::new(NetworkConfig {
            latency: Time::from_micros(10),
            jitter: Time::ZERO,
            client_bandwidth: Bandwidth(1e9),
            server_bandwidth: Bandwidth(1e9),
            header_bytes: concerto_core::units::Bytes(0),
        });
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (mut a, mut b, mut c) = (Nic::default(), Nic::default(), Nic::default());
        let bw = Bandwidth(1e9);
        // 1 MB takes 1 ms on the wire plus 10 us latency.
        let w1 = net.transmit(Time::ZERO, 1_000_000, &mut a, bw, &mut rng);
        let w2 = net.transmit(Time::ZERO, 1_000_000, &mut b, bw, &mut rng);
        assert_eq!((w1, w2), (Time::from_micros(1010), Time::from_micros(1010)));
        assert_eq!(
            net.receive(w1, 1_000_000, &mut c, bw),
            Time::from_micros(1010)
        );
        // The second message reaches a busy receiver and queues behind the first.
        assert_eq!(
            net.receive(w2, 1_000_000, &mut c, bw),
            Time::from_micros(2010)
        );
        // A sender serializes its own messages.
        assert_eq!(
            net.transmit(Time::ZERO, 1_000_000, &mut a, bw, &mut rng),
            Time::from_micros(2010)
        );
    }
}
