//! Helpers shared by the core's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use cm_core::{Config, CongestionManager, FlowId, Instant, OpenParams};

/// Open a flow to `dst` for a new client, at time zero.
pub fn open_flow(cm: &mut CongestionManager, dst: &str) -> FlowId {
    let c = cm.register_client(Instant::ZERO).unwrap();
    cm.open(Instant::ZERO, c, OpenParams::to(dst.parse().unwrap()))
        .unwrap()
}

/// A CM with the default configuration and one flow to 127.0.0.1, at time
/// zero.
pub fn one_flow() -> (CongestionManager, FlowId) {
    let mut cm = CongestionManager::new(Config::default()).unwrap();
    let f = open_flow(&mut cm, "127.0.0.1:9");
    (cm, f)
}
