//! Wake-up coalescing for the TCP/CM loops: with a transfer under way, a
//! loop's next pass comes no sooner than its gap after the last one began,
//! so that one pass handles several arrivals and one send carries several
//! segments.
//!
//! Linux sizes its TSO bursts the same way (`tcp_tso_autosize`: about 1 ms
//! at the pacing rate), and NICs coalesce receive interrupts for the same
//! reason. On a VM each wake-up (a sleep, a receive, a send) costs tens of
//! microseconds, which is most of a user-space stack's CPU per MB on a
//! path of 100 Mbit/s. On a short path the gaps are a few microseconds and
//! change nothing.
//!
//! Both ends coalesce, the receiver with half the sender's gap. When only
//! the sender did, a wider sender gap cut the sender's CPU per MB and
//! raised the receiver's by half: woken for every segment, the receiver
//! found one per wake-up more often. With equal gaps, the two loops drift
//! in and out of phase and the sender often wakes just before the
//! receiver's batch of ACKs arrives, then again when it does. With the
//! sender's gap twice the receiver's, a batch is waiting whenever the
//! sender wakes. These comparisons came from paired runs of temporary
//! builds with other gaps; `docs/benchmarks.md` has the paired runs of the
//! committed builds, which any build can repeat.

use std::time::Duration;

/// The sender's longest gap.
pub(crate) const SENDER_MAX: Duration = Duration::from_millis(2);
/// The receiver's longest gap.
pub(crate) const RECEIVER_MAX: Duration = Duration::from_millis(1);
/// The shortest gap worth a sleep: one shorter than the kernel's timer
/// slack (50 µs) would last the slack, so on such short paths every pass
/// runs at once.
pub(crate) const MIN: Duration = Duration::from_micros(200);

/// The sender's gap for a smoothed RTT of `srtt`: an eighth of it, at most
/// [`SENDER_MAX`]; none under [`MIN`].
pub(crate) fn sender_gap(srtt: Duration) -> Option<Duration> {
    gap(srtt, SENDER_MAX)
}

/// The receiver's gap for a round trip of `rtt` (measured from timestamp
/// echoes): an eighth of it, at most [`RECEIVER_MAX`]; none under [`MIN`].
pub(crate) fn receiver_gap(rtt: Duration) -> Option<Duration> {
    gap(rtt, RECEIVER_MAX)
}

fn gap(rtt: Duration, max: Duration) -> Option<Duration> {
    Some((rtt / 8).min(max)).filter(|&g| g >= MIN)
}

/// Sleep until `pass_start + gap`, if that is still ahead.
pub(crate) fn sleep_until(pass_start: std::time::Instant, gap: Duration) {
    let until = pass_start + gap;
    let now = std::time::Instant::now();
    if until > now {
        std::thread::sleep(until - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eighth_of_the_rtt_between_the_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(sender_gap(ms(4)), Some(Duration::from_micros(500)));
        assert_eq!(sender_gap(ms(12)), Some(Duration::from_micros(1500)));
        assert_eq!(sender_gap(ms(40)), Some(SENDER_MAX));
        assert_eq!(receiver_gap(ms(40)), Some(RECEIVER_MAX));
        assert_eq!(sender_gap(Duration::from_micros(800)), None);
        assert_eq!(receiver_gap(Duration::from_micros(1600)), Some(MIN));
    }
}
