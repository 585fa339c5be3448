//! sigcomm1999 §4.6 / Fig 13: flows starting at different times converge to
//! equal shares, and weighted flows to their weights (share_error ≤ 5%).

#![allow(clippy::unwrap_used)]

use cm_experiments::experiments::scheduler::simulation::{run, scenarios};

#[test]
fn staggered_flows_converge_to_their_weights() {
    for p in scenarios(true) {
        let r = run(&p).unwrap();
        eprintln!(
            "weights {:?}: shares {:?} share_error {:.4} convergence {:?} s",
            p.weights, r.shares, r.share_error, r.convergence_s
        );
        assert!(
            r.share_error <= 0.05,
            "weights {:?}: share_error {}",
            p.weights,
            r.share_error
        );
        assert!(
            r.convergence_s.is_some_and(|c| c <= 3.0),
            "weights {:?}: {:?}",
            p.weights,
            r.convergence_s
        );
    }
}
