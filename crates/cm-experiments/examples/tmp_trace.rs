#![allow(clippy::unwrap_used, missing_docs)]
use cm_experiments::{scenario::Scenario, simulate::run_traced};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mut s = Scenario::from_toml(&std::fs::read_to_string(&a[1]).unwrap()).unwrap();
    s.seed = a[2].parse().unwrap();
    for f in &mut s.flows {
        f.trace = true;
    }
    let (r, tr) = run_traced(&s).unwrap();
    eprintln!(
        "{:?}",
        r.flows
            .iter()
            .map(|f| (f.timeouts, f.retransmits))
            .collect::<Vec<_>>()
    );
    let c = &tr[0].conns[0];
    let mut maxseq = 0.0f64;
    for p in &c.seq {
        if p.v < maxseq {
            println!("rtx {:.4} {:.0}", p.t, p.v / 1460.0);
        }
        maxseq = maxseq.max(p.v);
    }
    let (lo, hi): (f64, f64) = (a[3].parse().unwrap(), a[4].parse().unwrap());
    for p in &c.acked {
        if p.t >= lo && p.t <= hi {
            println!("ack {:.4} {:.2}", p.t, p.v / 1460.0);
        }
    }
    for p in &c.seq {
        if p.t >= lo && p.t <= hi {
            println!("snd {:.4} {:.2}", p.t, p.v / 1460.0);
        }
    }
    for p in &c.window {
        if p.t >= lo && p.t <= hi {
            println!("cwnd {:.4} {:.2}", p.t, p.v / 1460.0);
        }
    }
    let mut last = 0.0;
    for p in &c.window {
        if (p.v - last).abs() > 0.0 && p.v <= 2920.0 {
            println!("win {:.4} {:.0}", p.t, p.v / 1460.0);
        }
        last = p.v;
    }
}
