//! What the ensemble experiments share (`real-ensemble`, `kernel-ensemble`,
//! `quic-ensemble`): a run's rates, the outside flow's share, means over
//! runs, CSV rows, summary lines and the per-run scatter series.

use std::fmt::Write as _;

use cm_experiments::plot::{Series, Style};
use cm_report::stats::jain;

/// One run of a set: the inner flows' rates and the outside flow's (bit/s).
#[derive(Clone, Debug)]
pub struct Rates {
    /// The ensemble's flows.
    pub inner: Vec<f64>,
    /// The outside flow.
    pub outside: f64,
}

impl Rates {
    /// The outside flow's share of everything moved.
    pub fn outside_share(&self) -> f64 {
        self.outside / (self.outside + self.inner.iter().sum::<f64>())
    }

    /// The inner flows together.
    pub fn together(&self) -> f64 {
        self.inner.iter().sum()
    }

    /// `"<label> run <k>: <what> a b c d Mbit/s, outside Reno x Mbit/s, outside share s"`.
    pub fn line(&self, label: &str, k: usize, what: &str) -> String {
        format!(
            "{label} run {k}: {what} {} Mbit/s, outside Reno {:.2} Mbit/s, outside share {:.2}",
            self.inner
                .iter()
                .map(|r| format!("{:.2}", r / 1e6))
                .collect::<Vec<_>>()
                .join(" "),
            self.outside / 1e6,
            self.outside_share()
        )
    }
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    sum / n.max(1) as f64
}

/// The outside share, averaged over runs.
pub fn mean_share(runs: &[Rates]) -> f64 {
    mean(runs.iter().map(Rates::outside_share))
}

/// Jain's index among the inner flows, averaged over runs.
pub fn mean_jain(runs: &[Rates]) -> f64 {
    mean(runs.iter().map(|r| jain(&r.inner)))
}

/// `set,run,flow,rate_bps` rows of every run of every labelled set (the
/// inner flows named `<inner><i>`), and one summary line per run.
pub fn table(sets: &[(&str, &[Rates])], inner: &str, what: &str) -> (String, Vec<String>) {
    let mut csv = String::from("set,run,flow,rate_bps\n");
    let mut summary = Vec::new();
    for (label, runs) in sets {
        for (k, s) in runs.iter().enumerate() {
            for (i, r) in s.inner.iter().enumerate() {
                let _ = writeln!(csv, "{label},{k},{inner}{i},{r:.0}");
            }
            let _ = writeln!(csv, "{label},{k},outside,{:.0}", s.outside);
            summary.push(s.line(label, k, what));
        }
    }
    (csv, summary)
}

/// Per run (x = 1, 2, ...): each set's flows together and its outside flow,
/// in Mbit/s; `names` are the set's (together, outside) legend labels.
pub fn scatter(sets: &[(&[Rates], &str, &str)]) -> Vec<Series> {
    let points = |runs: &[Rates], f: fn(&Rates) -> f64| {
        runs.iter()
            .enumerate()
            .map(|(k, r)| ((k + 1) as f64, f(r) / 1e6))
            .collect()
    };
    sets.iter()
        .flat_map(|(runs, together, outside)| {
            [
                Series {
                    label: (*together).into(),
                    points: points(runs, Rates::together),
                    style: Style::Scatter,
                },
                Series {
                    label: (*outside).into(),
                    points: points(runs, |r| r.outside),
                    style: Style::Scatter,
                },
            ]
        })
        .collect()
}
