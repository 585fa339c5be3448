//! The calls on one flow that drive sending: `cm_request`, `cm_notify`,
//! `cm_update`, `cm_query`, `cm_mtu`, rate-update subscriptions and
//! `cm_thresh` (RFC 3124 §4), and the scheduler weight. Each is one core
//! call; the flow's ownership was checked in `calls.rs`.

use cm_core::{Bytes, FlowId, Thresholds};
use cm_ipc::{ErrorCode, ToClient, ToDaemon};

use super::Daemon;
use super::calls::{Reply, answer, done};

impl Daemon {
    /// Apply a call on `flow` of the sending, feedback and query group.
    pub(super) fn flow_call(&mut self, now: cm_core::Instant, flow: FlowId, m: &ToDaemon) -> Reply {
        let core = &mut self.core;
        match *m {
            ToDaemon::Request { k, .. } => done(core.request_mtus(now, flow, k)),
            ToDaemon::Notify { nsent, .. } => done(core.notify(now, flow, Bytes(nsent))),
            ToDaemon::Update { .. } => m
                .feedback(now)
                .map_or(Err(ErrorCode::InvalidArgument), |fb| {
                    done(core.update(now, flow, fb))
                }),
            ToDaemon::Query { seq, .. } => answer(core.query(flow), |e| ToClient::Estimate {
                seq,
                estimate: e.into(),
            }),
            ToDaemon::Mtu { seq, .. } => answer(core.mtu(flow), |b| ToClient::Mtu {
                seq,
                mtu: u32::try_from(b.get()).unwrap_or(u32::MAX),
            }),
            ToDaemon::RateUpdates { on, .. } => done(core.set_rate_updates(now, flow, on)),
            ToDaemon::Thresh {
                rate_down,
                rate_up,
                rtt_down,
                rtt_up,
                ..
            } => {
                let t = Thresholds {
                    rate_down,
                    rate_up,
                    rtt_down,
                    rtt_up,
                };
                done(core.set_thresholds(now, flow, t))
            }
            ToDaemon::SetWeight { weight, .. } => done(core.set_weight(now, flow, weight)),
            _ => Err(ErrorCode::InvalidArgument),
        }
    }
}
