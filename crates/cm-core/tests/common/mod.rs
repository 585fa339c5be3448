//! Helpers shared by the core's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use cm_core::{Bytes, Config, CongestionManager, FlowId, Instant, MacroflowId, OpenParams};

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

/// A CM whose macroflows run `controller` (a spec, as `cm-core` parses it)
/// with 1472-byte MTUs, and one flow to 192.0.2.1 with its macroflow.
pub fn one_flow_with(controller: &str) -> (CongestionManager, FlowId, MacroflowId) {
    let cfg = Config {
        mtu: Bytes(1472),
        controller: controller.parse().unwrap(),
        ..Config::default()
    };
    let mut cm = CongestionManager::new(cfg).unwrap();
    let f = open_flow(&mut cm, "192.0.2.1:9");
    let mf = cm.macroflow_of(f).unwrap();
    (cm, f, mf)
}
