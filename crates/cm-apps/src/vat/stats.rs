//! What a vat receiver measures: one-way delay (mean, 95th percentile,
//! maximum), the RFC 3550 §6.4.1 interarrival jitter, loss, and a row per
//! second.

use serde::Serialize;

use super::Frame;
use super::samples::Samples;
use super::seen::{Seen, SeenSet};

/// Delay figures of the frames that arrived, ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DelayStats {
    /// Mean one-way delay.
    pub mean_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl DelayStats {
    /// The figures of `delays_ms` (all zero when empty), in linear time:
    /// the 95th percentile is the ⌈0.95 n⌉-th smallest, found by selection
    /// rather than a sort, since receivers and senders report it every
    /// second over up to 2¹⁸ kept samples.
    pub fn of(delays_ms: &[f64]) -> DelayStats {
        if delays_ms.is_empty() {
            return DelayStats::default();
        }
        let mut v = delays_ms.to_vec();
        let rank = ((0.95 * v.len() as f64).ceil() as usize).clamp(1, v.len());
        let (_, p95, _) = v.select_nth_unstable_by(rank - 1, f64::total_cmp);
        let p95_ms = *p95;
        DelayStats {
            mean_ms: delays_ms.iter().sum::<f64>() / delays_ms.len() as f64,
            p95_ms,
            max_ms: delays_ms.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// One second at the receiver.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Second {
    /// Seconds since the first frame (this row covers `[t, t + 1)`).
    pub t: u32,
    /// Frames that arrived.
    pub frames: u64,
    /// Their mean one-way delay, ms (0 when none arrived).
    pub mean_delay_ms: f64,
}

/// The receiver's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VatReport {
    /// Frames that arrived (duplicates not counted).
    pub frames: u64,
    /// Frames the sender numbered up to the highest that arrived, or all
    /// it made once its [`super::End`] came.
    pub expected: u64,
    /// `expected − frames`: lost anywhere (policer, buffer, network).
    pub lost: u64,
    /// `lost / expected`.
    pub loss: f64,
    /// Duplicated frames.
    pub duplicates: u64,
    /// Frames that came more than 4096 frames (82 s at 20 ms) behind the
    /// newest: ignored, too late to play and too old to tell apart from
    /// duplicates.
    pub too_old: u64,
    /// Datagrams that were not vat frames (or not CC-UDP, through the CM).
    pub malformed: u64,
    /// One-way delay.
    pub delay: DelayStats,
    /// RFC 3550 interarrival jitter at the end, ms.
    pub jitter_ms: f64,
    /// Whether the sender's [`super::End`] came: the session ended, not
    /// the receiver's patience.
    pub ended: bool,
    /// Per second.
    pub seconds: Vec<Second>,
}

/// Accumulates a [`VatReport`].
#[derive(Debug, Default)]
pub(crate) struct Tally {
    report: VatReport,
    delays_ms: Samples,
    seen: SeenSet,
    /// The previous frame's (arrival − made), ns, for the jitter.
    last_transit: Option<i128>,
    jitter_ns: f64,
    first_arrival_ns: Option<u64>,
    second_sums: Vec<f64>,
    channel_malformed: u64,
    /// Frames the sender made, from its end message.
    made: Option<u64>,
}

impl Tally {
    /// A frame arrived at `now_ns` (Unix ns).
    pub(crate) fn frame(&mut self, f: Frame, now_ns: u64) {
        match self.seen.insert(f.seq) {
            Seen::New => {}
            Seen::Duplicate => {
                self.report.duplicates += 1;
                return;
            }
            Seen::TooOld => {
                self.report.too_old += 1;
                return;
            }
        }
        self.report.frames += 1;
        let transit = i128::from(now_ns) - i128::from(f.made_ns);
        self.delays_ms.push(transit as f64 / 1e6);
        if let Some(prev) = self.last_transit {
            // J += (|D| − J) / 16 (RFC 3550 §6.4.1).
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
        let first = *self.first_arrival_ns.get_or_insert(now_ns);
        let t = (now_ns.saturating_sub(first) / 1_000_000_000) as usize;
        if self.report.seconds.len() <= t {
            self.report.seconds.resize_with(t + 1, Second::default);
            self.second_sums.resize(t + 1, 0.0);
        }
        self.report.seconds[t].frames += 1;
        self.second_sums[t] += transit as f64 / 1e6;
    }

    /// The sender's end message: it made `made` frames.
    pub(crate) fn end(&mut self, made: u64) {
        self.report.ended = true;
        self.made = Some(made);
    }

    /// Whether the sender's end message came.
    pub(crate) fn ended(&self) -> bool {
        self.report.ended
    }

    /// A datagram that was not a frame.
    pub(crate) fn malformed(&mut self) {
        self.report.malformed += 1;
    }

    /// Datagrams the CC-UDP channel itself refused as malformed (a
    /// running count, replaced on every call).
    pub(crate) fn set_channel_malformed(&mut self, n: u64) {
        self.channel_malformed = n;
    }

    /// The report so far.
    pub(crate) fn report(&self) -> VatReport {
        let mut r = self.report.clone();
        r.malformed += self.channel_malformed;
        r.expected = self
            .seen
            .highest()
            .map_or(0, |h| h.saturating_add(1))
            .max(self.made.unwrap_or(0));
        r.lost = r.expected.saturating_sub(r.frames);
        r.loss = r.lost as f64 / r.expected.max(1) as f64;
        r.delay = self.delays_ms.stats();
        r.jitter_ms = self.jitter_ns / 1e6;
        for (i, s) in r.seconds.iter_mut().enumerate() {
            s.t = i as u32;
            s.mean_delay_ms = self.second_sums[i] / s.frames.max(1) as f64;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_mean_and_max() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let d = DelayStats::of(&v);
        assert_eq!((d.mean_ms, d.p95_ms, d.max_ms), (50.5, 95.0, 100.0));
        assert_eq!(DelayStats::of(&[]), DelayStats::default());
        assert_eq!(DelayStats::of(&[7.0]).p95_ms, 7.0);
        // Order does not matter: the same figures from the values reversed
        // and interleaved.
        let mut w: Vec<f64> = v.iter().rev().copied().collect();
        w.rotate_left(37);
        assert_eq!(DelayStats::of(&w), d);
    }

    #[test]
    fn loss_duplicates_and_jitter() {
        let mut t = Tally::default();
        let ms = 1_000_000u64;
        // Frames 0..10 made 20 ms apart; 3 and 7 lost; 5 arrives twice;
        // transit alternates 30 and 40 ms.
        for seq in (0..10u64).filter(|s| *s != 3 && *s != 7) {
            let made = 1_000 * ms + seq * 20 * ms;
            let transit = if seq % 2 == 0 { 30 } else { 40 } * ms;
            t.frame(Frame { seq, made_ns: made }, made + transit);
            if seq == 5 {
                t.frame(Frame { seq, made_ns: made }, made + transit);
            }
        }
        t.malformed();
        let r = t.report();
        assert_eq!(
            (r.frames, r.expected, r.lost, r.duplicates, r.malformed),
            (8, 10, 2, 1, 1)
        );
        assert!((r.loss - 0.2).abs() < 1e-9);
        assert!((r.delay.mean_ms - 35.0).abs() < 1.5, "{:?}", r.delay);
        assert!(r.jitter_ms > 0.0 && r.jitter_ms < 10.0, "{}", r.jitter_ms);
        assert_eq!(r.seconds.len(), 1);
        assert_eq!(r.seconds[0].frames, 8);
        assert!(!r.ended);
        // The sender made 12: the two after the last that arrived are lost
        // too. An end message claiming fewer than arrived changes nothing.
        t.end(12);
        let r = t.report();
        assert_eq!((r.expected, r.lost, r.ended), (12, 4, true));
        t.end(3);
        assert_eq!(t.report().expected, 10);
    }
}
