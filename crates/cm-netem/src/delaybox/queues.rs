//! The delay box's queues: each packet's deadline (the line's spacing, the
//! one-way delay, a hold-back), and writing packets when they are due.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, ErrorKind, Read, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Controls, Counters, MAX_QUEUED, READ_BATCH, SplitMix64};

/// A packet waiting in the box.
pub(super) struct Slot {
    /// When to write it.
    due: Instant,
    /// Write it twice (duplication).
    twice: bool,
    pkt: Vec<u8>,
}

/// When a packet of `bytes` read at `arrival` left the line behind the box, given
/// when the previous one left (`prev`) and the line's rate (0: no line).
///
/// A packet cannot leave a serial line sooner than one transmission time after
/// the packet before it. The box stamps a packet when it reads it, which can be
/// some microseconds after `tbf` released it (the thread was waking up, or busy
/// writing), so two packets of a back-to-back bunch could otherwise leave the box
/// closer together than the line sent them, and a receiver timing the bunch would
/// read a capacity above the line's (iscc §VI-B's packet bunches). The departure
/// is therefore at least `prev` plus this packet's transmission time, but never
/// more than one transmission time after its own arrival: if the `tbf`'s real
/// rate were a little above the nominal one, spacing at the nominal rate must not
/// add up to a growing delay. Departures never go backwards, so the FIFO stays
/// sorted by deadline.
fn departure(arrival: Instant, prev: Option<Instant>, bytes: usize, rate_bps: u64) -> Instant {
    let Some(prev) = prev.filter(|_| rate_bps > 0) else {
        return arrival;
    };
    let tx = Duration::from_nanos((bytes as u64 * 8).saturating_mul(1_000_000_000) / rate_bps);
    (prev + tx).clamp(arrival, arrival + tx).max(prev)
}

/// The slot due at `now` from the FIFO `q` and the sorted held-back queue `h` (the
/// earlier head of the two; the FIFO's on ties), or else the next deadline, if any.
fn pop_due(
    q: &mut VecDeque<Slot>,
    h: &mut VecDeque<Slot>,
    now: Instant,
) -> std::result::Result<Slot, Option<Instant>> {
    let src = match (q.front(), h.front()) {
        (None, None) => return Err(None),
        (Some(a), Some(b)) if b.due < a.due => h,
        (Some(_), _) => q,
        (None, Some(_)) => h,
    };
    match src.front() {
        Some(s) if s.due > now => Err(Some(s.due)),
        _ => src.pop_front().ok_or(None),
    }
}

/// The box's packets and scratch space, per direction where it matters.
pub(super) struct State {
    /// The one-way delay.
    delay: Duration,
    /// Packets at the one-way delay (FIFO, sorted by deadline).
    queues: [VecDeque<Slot>; 2],
    /// Held-back packets (sorted by deadline).
    held: [VecDeque<Slot>; 2],
    /// When the last packet read in each direction left its line ([`departure`]).
    left: [Option<Instant>; 2],
    rng: SplitMix64,
    pool: Vec<Vec<u8>>,
    buf: Vec<u8>,
}

impl State {
    /// Empty queues for a box with one-way delay `delay`.
    pub(super) fn new(delay: Duration) -> Self {
        State {
            delay,
            queues: [VecDeque::new(), VecDeque::new()],
            held: [VecDeque::new(), VecDeque::new()],
            left: [None, None],
            rng: SplitMix64::from_clock(),
            pool: Vec::new(),
            buf: vec![0u8; 65536],
        }
    }

    /// Read what direction `i`'s device holds (at most [`READ_BATCH`] packets) and
    /// queue each packet at its deadline.
    pub(super) fn read_ready(
        &mut self,
        i: usize,
        tun: &File,
        c: &Counters,
        ctl: &Controls,
    ) -> io::Result<()> {
        for _ in 0..READ_BATCH {
            match (&*tun).read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    let arrival = Instant::now();
                    if self.queues[i].len() + self.held[i].len() >= MAX_QUEUED {
                        c.dirs[i].dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let rate = ctl.line_rate_bps[i].load(Ordering::Relaxed);
                    let left = departure(arrival, self.left[i], n, rate);
                    self.left[i] = Some(left);
                    let mut pkt = self.pool.pop().unwrap_or_else(|| Vec::with_capacity(2048));
                    pkt.clear();
                    pkt.extend_from_slice(&self.buf[..n]);
                    self.enqueue(i, left + self.delay, pkt, c, ctl);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Queue `pkt` for `due`, held back or duplicated as the controls say.
    fn enqueue(&mut self, i: usize, mut due: Instant, pkt: Vec<u8>, c: &Counters, ctl: &Controls) {
        let (q, h) = (&mut self.queues[i], &mut self.held[i]);
        // Forward only (the data direction), like the loss filter.
        let (hold, twice) = if i == 0 {
            (
                self.rng.chance(ctl.reorder.load(Ordering::Relaxed)),
                self.rng.chance(ctl.duplicate.load(Ordering::Relaxed)),
            )
        } else {
            (false, false)
        };
        if hold {
            let extra = ctl.reorder_delay_ns.load(Ordering::Relaxed);
            due += Duration::from_nanos(extra);
            c.dirs[i].reordered.fetch_add(1, Ordering::Relaxed);
            // Sorted by deadline (the extra delay may change at run time); almost
            // always an append.
            let at = h.partition_point(|s| s.due <= due);
            h.insert(at, Slot { due, twice, pkt });
        } else {
            q.push_back(Slot { due, twice, pkt });
        }
        c.dirs[i]
            .max_queued
            .fetch_max((q.len() + h.len()) as u64, Ordering::Relaxed);
    }

    /// Write every packet due at `now`; returns the next deadline, if any.
    pub(super) fn deliver_due(
        &mut self,
        tuns: &[File; 2],
        now: Instant,
        c: &Counters,
    ) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for (i, tun) in tuns.iter().enumerate() {
            let (q, h) = (&mut self.queues[i], &mut self.held[i]);
            let dc = &c.dirs[i];
            loop {
                let slot = match pop_due(q, h, now) {
                    Ok(slot) => slot,
                    Err(due) => {
                        if let Some(d) = due {
                            next = Some(next.map_or(d, |n| n.min(d)));
                        }
                        break;
                    }
                };
                let due = slot.due;
                for copy in 0..1 + u8::from(slot.twice) {
                    // A TUN write takes the whole packet or fails.
                    match (&*tun).write(&slot.pkt) {
                        Ok(n) => {
                            dc.packets.fetch_add(1, Ordering::Relaxed);
                            dc.bytes.fetch_add(n as u64, Ordering::Relaxed);
                            if copy == 1 {
                                dc.duplicated.fetch_add(1, Ordering::Relaxed);
                            }
                            let late = now.saturating_duration_since(due).as_nanos() as u64;
                            dc.late_ns_sum.fetch_add(late, Ordering::Relaxed);
                            dc.late_ns_max.fetch_max(late, Ordering::Relaxed);
                        }
                        Err(_) => {
                            dc.dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                self.pool.push(slot.pkt);
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(t0: Instant, ms: u64, tag: u8) -> Slot {
        Slot {
            due: t0 + Duration::from_millis(ms),
            twice: false,
            pkt: vec![tag],
        }
    }

    #[test]
    fn held_packets_are_overtaken_and_written_in_deadline_order() {
        let t0 = Instant::now();
        // FIFO at the one-way delay: packets 1, 3, 4 due at 10, 12, 13 ms; packet 2
        // was held back by 5 ms (due at 16 ms), packet 0 by 1 ms (due at 10 ms).
        let mut q: VecDeque<Slot> = [(10, 1), (12, 3), (13, 4)]
            .map(|(ms, tag)| slot(t0, ms, tag))
            .into();
        let mut h: VecDeque<Slot> = [(10, 0), (16, 2)].map(|(ms, tag)| slot(t0, ms, tag)).into();
        assert_eq!(
            pop_due(&mut q, &mut h, t0).err(),
            Some(Some(t0 + Duration::from_millis(10)))
        );
        let mut order = Vec::new();
        let now = t0 + Duration::from_millis(20);
        while let Ok(s) = pop_due(&mut q, &mut h, now) {
            order.push(s.pkt[0]);
        }
        assert_eq!(
            order,
            [1, 0, 3, 4, 2],
            "FIFO first on ties, then by deadline"
        );
        assert_eq!(pop_due(&mut q, &mut h, now).err(), Some(None));
    }

    #[test]
    fn departures_keep_the_lines_spacing_but_never_add_up() {
        let t0 = Instant::now();
        let us = |n: u64| t0 + Duration::from_micros(n);
        // 1000 bytes at 8 Mbit/s take 1 ms.
        let rate = 8_000_000;
        assert_eq!(departure(us(0), None, 1000, rate), us(0), "first packet");
        assert_eq!(
            departure(us(5000), Some(us(0)), 1000, rate),
            us(5000),
            "idle line"
        );
        // Read 40 µs late, then its successor on time: the successor leaves one
        // transmission time after it, not 960 µs.
        assert_eq!(departure(us(1000), Some(us(40)), 1000, rate), us(1040));
        // A tbf a little faster than nominal: every packet read 0.99 ms after the
        // last still leaves at most 1 ms after its own arrival, however many come.
        let mut prev = us(0);
        for k in 1..=1000u64 {
            let arrival = us(990 * k);
            prev = departure(arrival, Some(prev), 1000, rate);
            assert!(prev <= arrival + Duration::from_millis(1), "packet {k}");
        }
        // No line (rate 0): the arrival.
        assert_eq!(departure(us(10), Some(us(9)), 1000, 0), us(10));
        // Never backwards: a small packet after a large one.
        let big = departure(us(0), Some(us(0)), 1500, rate);
        assert!(departure(us(10), Some(big), 40, rate) >= big);
    }
}
