//! Packet size and buffering (paper §4.2, "Additional tasks"), as
//! formulas with their sources.
//!
//! **Packet size.** Large packets cost less header overhead as long as
//! they fit the path MTU; small packets are delayed less (§4.2). A packet
//! of `s` payload bytes from an application producing `R` bytes/s adds
//! `s / R` of delay three times on its way: filling it (packetization),
//! waiting behind one queued packet at the sender (MAXQ 1, §4.3.1), and one
//! packet of receiver playout buffering. Those three may use
//! [`DELAY_SHARE_NUM`]/[`DELAY_SHARE_DEN`] (2/5) of the one-way target `D`,
//! the rest being left to propagation and network queueing (ITU-T G.114
//! puts interactive voice at 150 ms one-way). So
//!
//! ```text
//! s = floor(2/5 · D · R / 3)        bounded by [MIN_PAYLOAD, MTU payload]
//! ```
//!
//! which gives 160 bytes, the classic 20 ms G.711 frame, for 64 kbit/s and
//! 150 ms (`cm select --profile datagram --delay-ms 150 --rate 64k` prints
//! it). A target that leaves less than [`MIN_PAYLOAD`] is impossible
//! (the 44 bytes of IP, UDP and CC-UDP headers would dominate), not
//! rounded up.
//!
//! **On/off buffering.** TCP and the CM's AIMD decay the congestion window
//! while a sender is idle (RFC 2861 §3: halve it per idle RTO), so a greedy
//! sender with short pauses restarts slowly after each. When delay matters
//! less than throughput (§4.1), the middleware bridges the pauses: it sends
//! at the mean rate `R·on/(on+off)` throughout, which needs a buffer of the
//! backlog built up during a sending phase:
//!
//! ```text
//! B = (R − R·on/(on+off)) · on = R · on · off / (on + off)
//! ```
//!
//! **Delay-critical queue.** Delay-sensitive traffic gets a sender queue of
//! one packet: the paper's proxy settles on MAXQ 1 because longer queues
//! add their length to the one-way delay (§4.3.1, Fig. 6).

use cm_core::{Duration, Rate};

/// Largest UDP payload on a 1500-byte Ethernet path: 1500 − 20 (IPv4) − 8
/// (UDP).
pub const MTU_PAYLOAD: usize = 1472;
/// IPv4 and UDP headers.
pub const IP_UDP_HEADER: usize = 28;
/// The CC-UDP data header (`libcm::ccudp::wire::DATA_HEADER_LEN`).
pub const CCUDP_HEADER: usize = libcm::ccudp::wire::DATA_HEADER_LEN;
/// The smallest payload the tuning picks: below it the 44 bytes of IPv4,
/// UDP and CC-UDP headers are more than 40% of each packet.
pub const MIN_PAYLOAD: usize = 64;
/// Numerator of the share of the one-way delay target that packetization
/// and one-packet queues may use.
pub const DELAY_SHARE_NUM: u64 = 2;
/// Denominator of that share.
pub const DELAY_SHARE_DEN: u64 = 5;
/// Packet times of delay a packet of size `s` adds (packetization, one
/// queued at the sender, one of playout).
pub const PACKET_DELAYS: u64 = 3;
/// Largest on/off buffer the tuning sets (16 MiB).
pub const MAX_BUFFER: u64 = 16 << 20;

/// The payload size that fits a delay target at a rate (module docs):
/// `floor(2/5 · D · R / 3)`, at most `max_payload`. `None` when that is
/// below [`MIN_PAYLOAD`].
pub fn payload_for_delay(delay: Duration, rate: Rate, max_payload: usize) -> Option<usize> {
    let num = u128::from(delay.as_micros())
        * u128::from(rate.bytes_per_sec())
        * u128::from(DELAY_SHARE_NUM);
    let den = 1_000_000u128 * u128::from(DELAY_SHARE_DEN) * u128::from(PACKET_DELAYS);
    let s = usize::try_from(num / den).unwrap_or(usize::MAX);
    (s >= MIN_PAYLOAD).then_some(s.min(max_payload))
}

/// The delay one packet of `payload` bytes adds per packet time at `rate`
/// (`s / R`); `None` for a zero rate.
pub fn packet_time(payload: usize, rate: Rate) -> Option<Duration> {
    rate.time_to_send(cm_core::Bytes(payload as u64))
}

/// Fraction of each packet's bytes that are headers, for a payload behind
/// `header` bytes of transport header (plus IPv4 and UDP).
pub fn header_overhead(payload: usize, header: usize) -> f64 {
    let h = (header + IP_UDP_HEADER) as f64;
    h / (h + payload as f64)
}

/// The buffer that carries an on/off sender at its mean rate through its
/// pauses (module docs): `R · on · off / (on + off)` bytes, at most
/// [`MAX_BUFFER`].
pub fn on_off_buffer(rate: Rate, on: Duration, off: Duration) -> u64 {
    let cycle = u128::from(on.as_micros()) + u128::from(off.as_micros());
    if cycle == 0 {
        return 0;
    }
    let b =
        u128::from(rate.bytes_per_sec()) * u128::from(on.as_micros()) * u128::from(off.as_micros())
            / cycle
            / 1_000_000;
    u64::try_from(b).unwrap_or(u64::MAX).min(MAX_BUFFER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voice_at_64k_and_150ms_is_160_bytes() {
        // 2/5 * 0.150 s * 8000 B/s / 3 = 160.
        let r = Rate::from_bits_per_sec(64_000);
        assert_eq!(
            payload_for_delay(Duration::from_millis(150), r, 1456),
            Some(160)
        );
        assert_eq!(packet_time(160, r), Some(Duration::from_millis(20)));
    }

    #[test]
    fn video_is_capped_by_the_mtu() {
        // 2/5 * 0.1 s * 250000 B/s / 3 = 3333 -> 1456.
        let r = Rate::from_bits_per_sec(2_000_000);
        assert_eq!(
            payload_for_delay(Duration::from_millis(100), r, 1456),
            Some(1456)
        );
    }

    #[test]
    fn too_tight_is_none() {
        // 2/5 * 0.01 s * 8000 B/s / 3 = 10 < 64.
        let r = Rate::from_bits_per_sec(64_000);
        assert_eq!(payload_for_delay(Duration::from_millis(10), r, 1456), None);
        // 2/5 * 0.060 s * 8000 / 3 = 64: exactly the floor.
        assert_eq!(
            payload_for_delay(Duration::from_millis(60), r, 1456),
            Some(64)
        );
    }

    #[test]
    fn on_off_buffer_by_hand() {
        // 1 MB/s, on 2 s, off 1 s: 1e6 * 2 * 1 / 3 = 666666 bytes.
        let b = on_off_buffer(
            Rate::from_bytes_per_sec(1_000_000),
            Duration::from_secs(2),
            Duration::from_secs(1),
        );
        assert_eq!(b, 666_666);
        assert_eq!(
            on_off_buffer(
                Rate::from_bytes_per_sec(1 << 30),
                Duration::from_secs(9),
                Duration::from_secs(9)
            ),
            MAX_BUFFER
        );
    }

    #[test]
    fn overhead_by_hand() {
        // 44 / (44 + 160) = 0.2157
        assert!((header_overhead(160, 16) - 44.0 / 204.0).abs() < 1e-12);
    }
}
