//! The binomial family in both clockings, ISCC's bounds, and the paper's
//! model claims (iscc §III–§V) checked on the shipped controllers.

use proptest::prelude::*;

use super::*;
use crate::controller::{
    AckEvent, Aimd, AimdConfig, CongestionEvent, CongestionKind, Controller, ControllerConfig,
    IsccConfig, Law, OpenLoop,
};
use crate::time::Instant;
use crate::units::Bytes;

const MTU: Bytes = Bytes(1000);

fn t(ms: u64) -> Instant {
    Instant::from_micros(ms * 1000)
}

/// A report at `now`: `acked` received and, if `lost > 0`, a loss.
fn report<C: Controller>(c: &mut C, now: Instant, acked: u64, lost: u64, srtt: Option<Duration>) {
    c.on_ack(&AckEvent::new(now, Bytes(acked), c.window(), srtt).with_lost_in_report(Bytes(lost)));
    if lost > 0 {
        c.on_congestion(&CongestionEvent::new(
            now,
            CongestionKind::Transient,
            Bytes(lost),
            Bytes::ZERO,
            srtt,
        ));
    }
}

/// Rates in packets per interval: MTU 1000 B, R = 1 s, MTU/RTT = 1000 B/s.
fn unit_scheme(k: f64, l: f64) -> BinomialConfig {
    BinomialConfig {
        mtu_per_rtt: Some(Rate::from_bytes_per_sec(1000)),
        interval: Some(Duration::from_secs(1)),
        slow_start: false,
        min_rate: Some(Rate::from_bytes_per_sec(100)),
        ..BinomialConfig::new(k, l, 1.0, 0.5)
    }
}

/// The single-flow model of [2] (iscc §II) with immediate feedback: each
/// interval the flow sends `x` packets; above capacity `w` the interval
/// has one loss event and its report says so. Returns (mean packets per
/// interval, loss events per packet) over `steps` intervals after a
/// warm-up: the `p` of TCP's `1/√p` law.
fn model(c: &BinomialConfig, w: f64, steps: u64) -> (f64, f64) {
    let mut ol = OpenLoop::new(Law::Binomial(c.clone()), MTU);
    ol.set_rate_bytes_per_sec(w * 1000.0 / 2.0);
    let (mut sent, mut lost) = (0.0, 0.0);
    for i in 0..steps * 2 {
        let x = ol.rate_bytes_per_sec() / 1000.0;
        let over = (x - w).max(0.0);
        if i >= steps {
            sent += x;
            lost += if over > 0.0 { 1.0 } else { 0.0 };
        }
        let (a, l) = ((x - over) * 1000.0, over * 1000.0);
        report(&mut ol, t(i * 1000), a as u64, l.ceil() as u64, None);
    }
    (sent / steps as f64, lost / sent)
}

#[test]
fn presets_are_the_papers_schemes() {
    assert_eq!(BinomialConfig::aimd().name(), "aimd");
    assert_eq!(BinomialConfig::iiad().name(), "iiad");
    assert_eq!(BinomialConfig::sqrt().name(), "sqrt");
    assert_eq!(BinomialConfig::new(0.2, 0.8, 1.0, 0.5).name(), "binomial");
    for c in [
        BinomialConfig::aimd(),
        BinomialConfig::iiad(),
        BinomialConfig::sqrt(),
    ] {
        assert!(c.validate().is_ok());
        assert!((c.k + c.l - 1.0).abs() < 1e-12, "TCP-friendly: k + l = 1");
    }
    assert!(BinomialConfig::new(-1.0, 1.0, 1.0, 0.5).validate().is_err());
    assert!(BinomialConfig::new(0.0, 2.0, 1.0, 0.5).validate().is_err());
    assert!(BinomialConfig::new(0.0, 1.0, 1.0, 1.0).validate().is_err());
    assert!(
        BinomialConfig::new(0.0, 1.0, f64::NAN, 0.5)
            .validate()
            .is_err()
    );
}

#[test]
fn eq4_converts_window_constants_to_rate_constants() {
    // λ = α u^(k+1), σ = β u^(1-l): IIAD with u = 10 kbit/s at x = 1 Mbit/s
    // increases by α u² / x = 100 bit/s and decreases by β u = 5 kbit/s.
    let c = BinomialConfig::iiad();
    assert!((c.increase(1e6, 1e4) - 100.0).abs() < 1e-9);
    assert!((c.decrease(1e6, 1e4) - 5000.0).abs() < 1e-9);
    // AIMD: increase α u, decrease β x.
    let a = BinomialConfig::aimd();
    assert!((a.increase(1e6, 5000.0) - 5000.0).abs() < 1e-9);
    assert!((a.decrease(1e6, 5000.0) - 5e5).abs() < 1e-9);
}

#[test]
fn rate_mode_steps_once_per_interval_and_not_up_on_a_lossy_report() {
    let mut c = OpenLoop::new(Law::Binomial(unit_scheme(0.0, 1.0)), MTU);
    c.set_rate_bytes_per_sec(10_000.0);
    report(&mut c, t(0), 5000, 0, None);
    assert_eq!(c.rate_bytes_per_sec(), 11_000.0, "+α u");
    report(&mut c, t(500), 5000, 0, None);
    assert_eq!(
        c.rate_bytes_per_sec(),
        11_000.0,
        "half an interval later: no step"
    );
    report(&mut c, t(1000), 5000, 1000, None);
    assert_eq!(
        c.rate_bytes_per_sec(),
        5500.0,
        "a lossy report only decreases"
    );
    assert_eq!(c.steps(), (1, 1));
}

#[test]
fn rate_mode_ignores_loss_echoes_within_an_rtt_of_a_decrease() {
    let srtt = Some(Duration::from_millis(200));
    let mut cfg = unit_scheme(0.0, 1.0);
    cfg.interval = Some(Duration::from_millis(100));
    let mut c = OpenLoop::new(Law::Binomial(cfg), MTU);
    c.set_rate_bytes_per_sec(40_000.0);
    report(&mut c, t(0), 1000, 1000, srtt);
    assert_eq!(c.rate_bytes_per_sec(), 20_000.0);
    report(&mut c, t(100), 1000, 1000, srtt);
    assert_eq!(c.rate_bytes_per_sec(), 20_000.0, "data sent before the cut");
    report(&mut c, t(200), 1000, 1000, srtt);
    assert_eq!(c.rate_bytes_per_sec(), 10_000.0, "a new loss one RTT later");
}

#[test]
fn rate_mode_slow_start_doubles_until_the_first_loss() {
    let mut cfg = unit_scheme(0.0, 1.0);
    cfg.slow_start = true;
    cfg.initial_rate = Some(Rate::from_bytes_per_sec(1000));
    let mut c = OpenLoop::new(Law::Binomial(cfg), MTU);
    for i in 0..4 {
        // Each report shows the last interval's rate received.
        let got = c.rate_bytes_per_sec() as u64;
        report(&mut c, t(i * 1000), got, 0, None);
    }
    assert_eq!(c.rate_bytes_per_sec(), 16_000.0);
    // A report showing less received caps the doubling at twice that.
    report(&mut c, t(4000), 5000, 0, None);
    assert_eq!(c.rate_bytes_per_sec(), 10_000.0, "2 x_recv (RFC 5348 §4.3)");
    report(&mut c, t(5000), 10_000, 0, None);
    assert_eq!(c.rate_bytes_per_sec(), 20_000.0);
    assert!(c.in_slow_start());
    report(&mut c, t(6000), 1000, 1000, None);
    assert_eq!(c.rate_bytes_per_sec(), 10_000.0);
    assert!(!c.in_slow_start());
    report(&mut c, t(7000), 1000, 0, None);
    assert_eq!(c.rate_bytes_per_sec(), 11_000.0, "then additive");
}

#[test]
fn window_mode_binomial_aimd_tracks_the_integer_aimd() {
    // The AIMD preset run through the binomial law must give the papers'
    // AIMD trajectory (within rounding) under the same feedback.
    let mut plain = Aimd::new(AimdConfig::default(), MTU);
    let mut law = Aimd::binomial(AimdConfig::default(), BinomialConfig::aimd(), MTU);
    let srtt = Some(Duration::from_millis(100));
    for rtt in 0..200u64 {
        let now = t(rtt * 100);
        let lossy = rtt % 37 == 36;
        for c in [&mut plain, &mut law] {
            let w = c.window().get();
            report(c, now, w, if lossy { 1000 } else { 0 }, srtt);
        }
        let (a, b) = (plain.window().get(), law.window().get());
        assert!(a.abs_diff(b) <= 1, "rtt {rtt}: {a} vs {b}");
    }
    assert_eq!(law.name(), "aimd");
}

#[test]
fn window_mode_iiad_grows_by_alpha_over_w_per_window() {
    let cfg = BinomialConfig::iiad().with_mode(Mode::Window);
    let mut c = ControllerConfig::Binomial(cfg).build(MTU);
    assert_eq!(c.name(), "iiad");
    let srtt = Some(Duration::from_millis(100));
    // Leave slow start with a loss, then one window of acks adds α/w MTUs.
    for i in 0..3 {
        let w = c.window().get();
        report(&mut c, t(i * 100), w, 0, srtt);
    }
    report(&mut c, t(300), 1000, 1000, srtt);
    let w0 = c.window().get();
    assert!(!c.in_slow_start());
    // IIAD's reduction is additive: β w^0 = ½ MTU (floored at 2 MTU).
    report(&mut c, t(500), w0, 0, srtt);
    let w1 = c.window().get();
    let expect = (1000.0 / (w0 as f64 / 1000.0)) as u64;
    assert!(
        w1 - w0 >= expect.saturating_sub(1) && w1 - w0 <= expect + 1,
        "{w0} -> {w1}"
    );
}

#[test]
fn tcp_friendly_schemes_scale_throughput_as_one_over_root_p() {
    // iscc §II and [2]: k + l = 1 makes throughput ∝ 1/√p, as TCP's. In
    // the fluid model, a binomial scheme's throughput goes as
    // p^(-1/(k+l+1)): -½ exactly when k + l = 1.
    for (k, l) in [(0.0, 1.0), (0.5, 0.5), (1.0, 0.0), (0.25, 0.75)] {
        let c = unit_scheme(k, l);
        let (b1, p1) = model(&c, 200.0, 60_000);
        let (b2, p2) = model(&c, 800.0, 200_000);
        let slope = (b2 / b1).ln() / (p2 / p1).ln();
        assert!((slope + 0.5).abs() < 0.12, "k={k} l={l}: slope {slope}");
    }
    // A scheme with k + l = 0.5 is not: its slope is -1/(k+l+1) = -2/3.
    let (b1, p1) = model(&unit_scheme(0.0, 0.5), 200.0, 60_000);
    let (b2, p2) = model(&unit_scheme(0.0, 0.5), 800.0, 200_000);
    let slope = (b2 / b1).ln() / (p2 / p1).ln();
    assert!((slope + 2.0 / 3.0).abs() < 0.12, "k+l=0.5: slope {slope}");
}

#[test]
fn iscc_loss_does_not_depend_on_the_link() {
    // Eq. 37: ISCC's single-flow loss is the same on any capacity.
    let run = |cap: u64| {
        let cfg = IsccConfig {
            capacity: Some(Rate::from_bytes_per_sec(cap)),
            interval: Some(Duration::from_secs(1)),
            slow_start: false,
            ..IsccConfig::default()
        };
        let mut c = OpenLoop::new(Law::Iscc(cfg), MTU);
        // Measure against a link slightly below the capacity estimate, so
        // the cap does not hide every overshoot.
        let w = cap as f64 * 0.98;
        c.set_rate_bytes_per_sec(w / 2.0);
        let (mut sent, mut lost) = (0.0, 0.0);
        for i in 0..40_000u64 {
            let x = c.rate_bytes_per_sec();
            let over = (x - w).max(0.0);
            if i > 2000 {
                sent += x;
                lost += over;
            }
            report(
                &mut c,
                t(i * 1000),
                (x - over) as u64,
                over.ceil() as u64,
                None,
            );
        }
        lost / sent
    };
    let (a, b) = (run(200_000), run(20_000_000));
    assert!(a > 0.0 && b > 0.0);
    assert!((a / b - 1.0).abs() < 0.25, "{a} vs {b}");
}

#[test]
fn iscc_falls_back_to_aimd_until_it_knows_the_capacity() {
    let cfg = IsccConfig {
        interval: Some(Duration::from_secs(1)),
        slow_start: false,
        ..IsccConfig::default()
    };
    let mut c = OpenLoop::new(Law::Iscc(cfg), MTU);
    c.set_rate_bytes_per_sec(100_000.0);
    report(&mut c, t(0), 1000, 1000, Some(Duration::from_secs(1)));
    assert_eq!(c.rate_bytes_per_sec(), 50_000.0, "AIMD halves");
    c.set_capacity(Some(Rate::from_bytes_per_sec(60_000)));
    report(&mut c, t(1000), 1000, 0, Some(Duration::from_secs(1)));
    // ISCC(2): + (x/20) √(x/C).
    let x: f64 = 50_000.0;
    let expect = x + x / 20.0 * (x / 60_000.0).sqrt();
    assert!((c.rate_bytes_per_sec() - expect).abs() < 1e-6);
    c.set_capacity(Some(Rate::from_bytes_per_sec(40_000)));
    assert_eq!(c.rate_bytes_per_sec(), 40_000.0, "capped at C");
}

#[test]
fn a_configured_capacity_outlives_a_missing_estimate() {
    let cfg = IsccConfig {
        capacity: Some(Rate::from_bytes_per_sec(10_000)),
        ..IsccConfig::default()
    };
    let mut c = OpenLoop::new(Law::Iscc(cfg), MTU);
    c.set_capacity(None);
    c.set_rate_bytes_per_sec(1e9);
    assert_eq!(c.rate_bytes_per_sec(), 10_000.0);
}

#[test]
fn iscc_predicted_loss_matches_eq37() {
    // ISCC(2), m_D = 2, m_I = 20: k = -1.5, (k+2) = 0.5.
    let p = IsccConfig::default().predicted_loss();
    let expect = 0.5 / (400.0 * (1.0 - 0.5f64.powf(0.5)) + 0.5);
    assert!((p - expect).abs() < 1e-12);
}

proptest! {
    #[test]
    fn iscc_steps_are_bounded_for_every_state(
        l in 1.01f64..4.0, extra_md in 0.0f64..5.0, m_i in 1.0f64..100.0,
        c in 1.0f64..1e10, frac in 1e-9f64..=1.0,
    ) {
        // iscc eqs. 34–36: increase ≤ x/m_I, decrease ≤ x/m_D for x ≤ C.
        let cfg = IsccConfig { l, m_d: l + extra_md, m_i, ..IsccConfig::default() };
        let x = c * frac;
        prop_assert!(cfg.increase(x, c) <= x / m_i * (1.0 + 1e-12));
        prop_assert!(cfg.decrease(x, c) <= x / cfg.m_d * (1.0 + 1e-12));
        prop_assert!(cfg.increase(x, c) >= 0.0 && cfg.decrease(x, c) >= 0.0);
    }

    #[test]
    fn rates_never_reach_zero_negative_or_infinity(
        k in -0.99f64..3.0, l in -1.0f64..=1.0, beta in 0.01f64..0.99,
        iscc in any::<bool>(), cap in 1_000u64..1_000_000_000,
        events in proptest::collection::vec((0u64..3_000, 0u8..4, 0u64..100_000), 1..200),
    ) {
        // iscc §III: x_{i+1} > 0 for every state (eq. 17), whatever the
        // feedback, for binomial schemes with l ≤ 1 and for ISCC with C.
        let law = if iscc {
            Law::Iscc(IsccConfig {
                capacity: Some(Rate::from_bytes_per_sec(cap)), ..IsccConfig::default()
            })
        } else {
            Law::Binomial(BinomialConfig::new(k, l, 1.0, beta))
        };
        let mut c = OpenLoop::new(law, MTU);
        let mut now = 0u64;
        for (dt, what, bytes) in events {
            now += dt;
            let srtt = Some(Duration::from_millis(50));
            match what {
                0 => report(&mut c, t(now), bytes, 0, srtt),
                1 => report(&mut c, t(now), bytes, bytes / 2 + 1, srtt),
                2 => c.on_congestion(&CongestionEvent::new(
                    t(now), CongestionKind::Persistent, Bytes(bytes), Bytes::ZERO, srtt)),
                _ => c.on_feedback_timeout(&crate::controller::AgingEvent::new(t(now), 1)),
            }
            let x = c.rate_bytes_per_sec();
            prop_assert!(x.is_finite() && x > 0.0, "rate {}", x);
            prop_assert!(c.window() >= Bytes(4 * MTU.get()));
            if iscc { prop_assert!(x <= cap as f64); }
        }
    }

    #[test]
    fn specs_round_trip(k in 0.0f64..2.0, l in 0.0f64..=1.0, iscc_l in 1.1f64..4.0) {
        for c in [
            ControllerConfig::Binomial(BinomialConfig::new(k, l, 1.0, 0.5)),
            ControllerConfig::Iscc(IsccConfig::with_l(iscc_l)),
        ] {
            let text = c.to_string();
            let back: ControllerConfig = text.parse().map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(back, c);
        }
    }
}

#[test]
fn specs_parse_and_explain_their_errors() {
    let ok = |s: &str| {
        s.parse::<ControllerConfig>()
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    };
    assert_eq!(ok("aimd"), ControllerConfig::default());
    assert_eq!(
        ok(" iiad "),
        ControllerConfig::Binomial(BinomialConfig::iiad())
    );
    let ControllerConfig::Binomial(b) = ok("aimd:mode=rate,mtu_rtt=5k,interval=100ms") else {
        panic!("aimd with keys is the binomial preset")
    };
    assert_eq!(b.mtu_per_rtt, Some(Rate::from_bits_per_sec(5000)));
    assert_eq!(b.interval, Some(Duration::from_millis(100)));
    let ControllerConfig::Tfrc(f) = ok("tfrc:s=180") else {
        panic!("tfrc")
    };
    assert_eq!(f.equation_packet_size, Some(Bytes(180)));
    assert_eq!(ok("tfrc:s=180").to_string(), "tfrc:s=180");
    assert!("tfrc:s=0".parse::<ControllerConfig>().is_err());
    let ControllerConfig::Iscc(i) = ok("iscc:l=3,capacity=1.544M") else {
        panic!()
    };
    assert_eq!((i.l, i.m_d), (3.0, 3.0), "m_d defaults to max(2, l)");
    assert_eq!(i.capacity, Some(Rate::from_bits_per_sec(1_544_000)));
    for bad in [
        "reno",
        "binomial",
        "binomial:k=1",
        "iiad:k",
        "iiad:speed=3",
        "sqrt:alpha=-1",
        "iscc:l=1",
        "iscc:l=2,m_d=1",
        "iscc:capacity=fast",
        "aimd:interval=0",
        "aimd:mode=bursty",
    ] {
        let e = bad.parse::<ControllerConfig>().expect_err(bad);
        assert!(!e.why.is_empty(), "{bad}");
    }
}
