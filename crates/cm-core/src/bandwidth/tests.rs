//! Packet-bunch estimation end to end on synthetic traces: a sender's
//! bursts cross a bottleneck of known rate, with cross traffic, loss,
//! reordering and duplication.

use proptest::prelude::*;

use super::*;
use crate::time::{Duration, Instant};
use crate::units::{Bytes, Rate};

/// 10 Mbit/s of IP: a 1250-byte packet takes exactly 1 ms.
const C: u64 = 1_250_000;
const PKT: u64 = 1250;

/// One arrival: (time in µs, burst, index, len, wire bytes).
type Arrival = (u64, u32, u8, u8, u64);

/// Bursts of `len` packets sent back to back every `period_us` through a
/// bottleneck of rate `rate`: packet `i` of a burst leaves the bottleneck
/// `i` transmission times after the first.
fn trace(bursts: u32, len: u8, rate: u64, size: u64, period_us: u64) -> Vec<Arrival> {
    let mut v = Vec::new();
    for b in 0..bursts {
        let start = 10_000 + u64::from(b) * period_us;
        for i in 0..len {
            let t = start + u64::from(i) * size * 1_000_000 / rate;
            v.push((t, b, i, len, size));
        }
    }
    v
}

fn run(s: &mut BunchSampler, arrivals: &[Arrival]) -> Vec<Rate> {
    let mut out: Vec<Rate> = arrivals
        .iter()
        .filter_map(|&(t, b, i, n, w)| s.on_packet(Instant::from_micros(t), b, i, n, Bytes(w)))
        .collect();
    out.extend(s.flush());
    out
}

fn samples(arrivals: &[Arrival]) -> Vec<Rate> {
    run(&mut BunchSampler::new(), arrivals)
}

#[test]
fn exact_samples_for_3_4_and_8_packet_bursts() {
    for len in [3u8, 4, 8] {
        let got = samples(&trace(5, len, C, PKT, 100_000));
        assert_eq!(got, vec![Rate::from_bytes_per_sec(C); 5], "len {len}");
    }
}

#[test]
fn complete_bursts_are_sampled_on_their_last_packet() {
    let mut s = BunchSampler::new();
    let tr = trace(1, 4, C, PKT, 100_000);
    let out: Vec<_> = tr
        .iter()
        .map(|&(t, b, i, n, w)| s.on_packet(Instant::from_micros(t), b, i, n, Bytes(w)))
        .collect();
    assert_eq!(out, [None, None, None, Some(Rate::from_bytes_per_sec(C))]);
    assert_eq!(s.flush(), None);
    assert_eq!(s.stats().samples, 1);
}

#[test]
fn the_first_packet_bytes_are_not_counted() {
    // Packets of different sizes: 3 ms for 500 + 1250 + 2000 bytes after
    // the first (whose 4000 bytes do not count) is 1.25 MB/s.
    let arr = [
        (0, 7, 0, 4, 4000),
        (400, 7, 1, 4, 500),
        (1400, 7, 2, 4, 1250),
        (3000, 7, 3, 4, 2000),
    ];
    assert_eq!(samples(&arr), [Rate::from_bytes_per_sec(C)]);
}

#[test]
fn a_t1_rate_is_measured_to_the_microsecond() {
    // iscc §VI-B: 1,510 kb/s of IP over a T1, 1500-byte packets; arrival
    // times are rounded down to whole microseconds.
    let rate = 1_510_000 / 8;
    for s in samples(&trace(10, 8, rate, 1500, 1_000_000)) {
        assert!(s.bytes_per_sec().abs_diff(rate) <= rate / 10_000, "{s:?}");
    }
}

#[test]
fn interleaved_cross_traffic_lowers_a_sample() {
    // One 1500-byte cross-traffic packet queued between packets 2 and 3:
    // the last two arrive 1.2 ms later, so 3 * 1250 B take 4.2 ms.
    let mut arr = trace(1, 4, C, PKT, 100_000);
    arr[2].0 += 1200;
    arr[3].0 += 1200;
    assert_eq!(
        samples(&arr),
        [Rate::from_bytes_per_sec(3 * PKT * 1_000_000 / 4200)]
    );
}

#[test]
fn the_filter_rejects_a_minority_of_cross_traffic_samples() {
    // 32 bursts; every fourth has one to three cross-traffic packets of
    // 1500 bytes interleaved.
    let mut arr = trace(32, 4, C, PKT, 50_000);
    for b in (0..32).step_by(4) {
        let extra = 1200 * (1 + (b / 4) % 3) as u64;
        for i in 1..4 {
            arr[b * 4 + i].0 += extra;
        }
    }
    let got = samples(&arr);
    assert_eq!(got.len(), 32);
    assert_eq!(got.iter().filter(|s| s.bytes_per_sec() < C).count(), 8);
    let mut f = CapacityFilter::default();
    for s in got {
        f.push(s);
    }
    assert_eq!(f.estimate(), Some(Rate::from_bytes_per_sec(C)));
}

#[test]
fn compression_raises_a_sample_and_the_filter_rejects_it() {
    // The last two packets of one burst queued after the bottleneck and
    // left that queue back to back at 10x the rate.
    let mut arr = trace(4, 4, C, PKT, 50_000);
    arr[2].0 -= 900;
    arr[3].0 -= 1800;
    let got = samples(&arr);
    assert!(got[0].bytes_per_sec() > C);
    let mut f = CapacityFilter::default();
    for s in got {
        f.push(s);
    }
    assert_eq!(f.estimate(), Some(Rate::from_bytes_per_sec(C)));
}

#[test]
fn a_lost_middle_packet_ends_the_run() {
    // Burst of 8, index 5 lost: the run 0..=4 (5 packets) is sampled when
    // the burst ends, at the next burst's first packet.
    let mut arr = trace(2, 8, C, PKT, 100_000);
    arr.remove(5);
    let mut s = BunchSampler::new();
    let at_next: Vec<_> = arr
        .iter()
        .map(|&(t, b, i, n, w)| s.on_packet(Instant::from_micros(t), b, i, n, Bytes(w)))
        .collect();
    assert_eq!(at_next[7], Some(Rate::from_bytes_per_sec(C)));
    assert_eq!(at_next.iter().flatten().count(), 2);

    // Burst of 4, index 2 lost: a run of 2 is too short.
    let mut arr = trace(1, 4, C, PKT, 100_000);
    arr.remove(2);
    let mut s = BunchSampler::new();
    assert!(run(&mut s, &arr).is_empty());
    assert_eq!(s.stats().short, 1);
}

#[test]
fn a_lost_first_or_last_packet_still_leaves_a_bunch() {
    let mut arr = trace(1, 4, C, PKT, 100_000);
    arr.remove(0);
    assert_eq!(samples(&arr), [Rate::from_bytes_per_sec(C)]);
    let mut arr = trace(1, 4, C, PKT, 100_000);
    arr.remove(3);
    assert_eq!(samples(&arr), [Rate::from_bytes_per_sec(C)]);
}

#[test]
fn reordering_discards_the_burst() {
    let mut arr = trace(2, 4, C, PKT, 100_000);
    arr.swap(1, 2);
    let mut s = BunchSampler::new();
    assert_eq!(run(&mut s, &arr), [Rate::from_bytes_per_sec(C)]);
    assert_eq!(s.stats().discarded, 1);

    // A packet thought lost turns up after its successor.
    let mut arr = trace(1, 8, C, PKT, 100_000);
    arr.swap(5, 6);
    let mut s = BunchSampler::new();
    assert!(run(&mut s, &arr).is_empty());
    assert_eq!(s.stats().discarded, 1);
}

#[test]
fn duplicates_discard_the_burst() {
    let mut arr = trace(1, 4, C, PKT, 100_000);
    arr.insert(2, arr[1]);
    let mut s = BunchSampler::new();
    assert!(run(&mut s, &arr).is_empty());
    assert_eq!(s.stats().discarded, 1);
}

#[test]
fn a_packet_of_an_earlier_burst_is_stale() {
    let mut arr = trace(2, 4, C, PKT, 100_000);
    let late = arr.remove(3);
    arr.insert(5, late);
    let mut s = BunchSampler::new();
    // Burst 0 closes with its run of 3 when burst 1 starts.
    assert_eq!(run(&mut s, &arr).len(), 2);
    assert_eq!(s.stats().stale, 1);
}

#[test]
fn burst_ids_wrap_around() {
    let mut s = BunchSampler::new();
    let mut out = Vec::new();
    for (k, b) in [u32::MAX, 0].into_iter().enumerate() {
        for i in 0..3u8 {
            let t = Instant::from_micros(k as u64 * 100_000 + u64::from(i) * 1000);
            out.extend(s.on_packet(t, b, i, 3, Bytes(PKT)));
        }
    }
    assert_eq!(out.len(), 2);
    assert_eq!(s.stats().stale, 0);
}

#[test]
fn zero_dispersion_and_bad_packets_give_no_sample() {
    let mut s = BunchSampler::new();
    let t = Instant::from_micros(5);
    for i in 0..4 {
        assert_eq!(s.on_packet(t, 0, i, 4, Bytes(PKT)), None);
    }
    assert_eq!(s.stats().short, 1);

    let mut s = BunchSampler::new();
    assert_eq!(s.on_packet(t, 0, 4, 4, Bytes(PKT)), None);
    assert_eq!(s.on_packet(t, 0, 0, 0, Bytes(PKT)), None);
    assert_eq!(s.on_packet(t, 0, 0, 4, Bytes::ZERO), None);
    assert_eq!(s.on_packet(t, 0, 0, 4, Bytes(MAX_WIRE_LEN.0 + 1)), None);
    assert_eq!(s.stats().invalid, 4);
    // An inconsistent length spoils the burst.
    assert_eq!(s.on_packet(t, 1, 0, 4, Bytes(PKT)), None);
    let t1 = t + Duration::from_millis(1);
    assert_eq!(s.on_packet(t1, 1, 1, 5, Bytes(PKT)), None);
    assert_eq!(s.stats().discarded, 1);
}

#[test]
fn schedule_and_sampler_agree() {
    let mut sched = BurstSchedule::new(8).unwrap();
    let mut s = BunchSampler::new();
    let mut got = Vec::new();
    let mut t = 0;
    for _ in 0..40 {
        if sched.starts_burst() {
            t += 50_000;
        }
        let tag = sched.next_packet();
        t += 1000;
        got.extend(s.on_packet(
            Instant::from_micros(t),
            tag.burst,
            tag.index,
            tag.len,
            Bytes(PKT),
        ));
    }
    assert_eq!(got, vec![Rate::from_bytes_per_sec(C); 5]);
}

/// One arrival of the random traces: mostly the next packet of the burst,
/// sometimes a duplicate, a gap, the next burst, or anything at all.
#[derive(Clone, Debug)]
enum Step {
    Next,
    Duplicate,
    Skip,
    NewBurst(u8),
    Any(u32, u8, u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => Just(Step::Next),
        1 => Just(Step::Duplicate),
        1 => Just(Step::Skip),
        2 => prop_oneof![Just(3u8), Just(4), Just(8), any::<u8>()].prop_map(Step::NewBurst),
        1 => (0u32..8, any::<u8>(), any::<u8>()).prop_map(|(b, i, n)| Step::Any(b, i, n)),
    ]
}

proptest! {
    #[test]
    fn no_panic_and_no_zero_or_infinite_rate(
        arrivals in prop::collection::vec(
            (step(), 0u64..5_000, prop_oneof![Just(1250u64), 0u64..70_000], any::<bool>()),
            0..200,
        ),
    ) {
        let mut s = BunchSampler::new();
        let mut f = CapacityFilter::default();
        let (mut t, mut burst, mut index, mut len) = (0u64, 0u32, 0u8, 4u8);
        let mut got = Vec::new();
        for (step, dt, wire, back) in arrivals {
            match step {
                Step::Next => index = index.wrapping_add(1),
                Step::Duplicate => {}
                Step::Skip => index = index.wrapping_add(2),
                Step::NewBurst(n) => (burst, index, len) = (burst.wrapping_add(1), 0, n),
                Step::Any(b, i, n) => (burst, index, len) = (b, i, n),
            }
            // The clock runs backwards now and then.
            t = if back && dt < 100 { t.saturating_sub(dt) } else { t + dt };
            got.extend(s.on_packet(Instant::from_micros(t), burst, index, len, Bytes(wire)));
        }
        got.extend(s.flush());
        for r in &got {
            prop_assert!(*r > Rate::ZERO && r.bytes_per_sec() < u64::MAX);
            f.push(*r);
        }
        let st = s.stats();
        prop_assert_eq!(st.samples, got.len() as u64);
        if let Some(e) = f.estimate() {
            let lo = got.iter().min().copied().unwrap_or(Rate::ZERO);
            let hi = got.iter().max().copied().unwrap_or(Rate::ZERO);
            prop_assert!(lo <= e && e <= hi);
        }
    }

    #[test]
    fn the_filter_stays_within_its_samples(
        samples in prop::collection::vec(any::<u64>(), 0..100),
        window in 1usize..40,
        width_ppm in 1u32..=1_000_000,
    ) {
        let cfg = CapacityFilterConfig { window, min_samples: 1, width_ppm };
        let mut f = CapacityFilter::new(cfg).unwrap();
        let mut held: Vec<u64> = Vec::new();
        for &s in &samples {
            let est = f.push(Rate::from_bytes_per_sec(s));
            if s > 0 {
                held.push(s);
            }
            let recent = &held[held.len().saturating_sub(window)..];
            prop_assert_eq!(est.is_some(), !recent.is_empty());
            if let (Some(e), Some(&lo), Some(&hi)) = (est, recent.iter().min(), recent.iter().max()) {
                prop_assert!(lo <= e.bytes_per_sec() && e.bytes_per_sec() <= hi);
            }
        }
    }
}
