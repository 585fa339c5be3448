//! A response to a probe turned into `cm_update` feedback (sigcomm1999
//! §4.2.2 Fig 8, with cumulative counts): which bytes it resolves, how
//! many of them arrived, the losses the receiver declared, one RTT sample.

use cm_core::{Bytes, Duration, Feedback, Instant, LossMode};

use super::{PeerState, Prober, Rejected, Report};
use crate::wire::Response;

impl Prober {
    pub(super) fn on_response(&mut self, now: Instant, r: &Response) -> Result<(), Rejected> {
        if self.state != PeerState::Negotiated
            || r.this_probe <= self.answered
            || r.this_probe >= self.next_probe_seq
        {
            self.counters.stale += 1;
            return Err(Rejected::Stale);
        }
        let Some(pos) = self.records.iter().position(|p| p.seq == r.this_probe) else {
            self.counters.stale += 1;
            return Err(Rejected::Stale);
        };
        // Refuse the whole response if any flow claims the impossible.
        for e in &r.flows {
            let ok = self.flows.get(&e.flow).is_some_and(|f| {
                e.bytes <= f.sent
                    && u64::from(e.lost) + u64::from(e.packets) <= f.packets
                    && e.lost >= f.lost_seen
            });
            if !ok {
                self.counters.forged += 1;
                return Err(Rejected::Forged);
            }
        }
        let rec = self.records[pos].clone();
        self.records.drain(..=pos);
        self.counters.unanswered += r.this_probe - self.answered - 1;
        self.answered = r.this_probe;
        self.last_heard = now;
        self.counters.responses += 1;
        let rtt = now
            .saturating_since(rec.sent_at)
            .as_micros()
            .saturating_sub(u64::from(r.delay_us));
        let rtt = (rtt > 0).then(|| Duration::from_micros(rtt));
        if let Some(s) = rtt {
            self.rtt.on_sample(s);
        }
        let mut rtt_once = rtt;
        for &(flow, upto) in &rec.snapshot {
            let Some(f) = self.flows.get_mut(&flow) else {
                continue;
            };
            let entry = r.flows.iter().find(|e| e.flow == flow);
            let peer_now = entry.map_or(f.peer_bytes, |e| e.bytes.max(f.peer_bytes));
            let interval = (
                upto.saturating_sub(f.interval_base.0),
                peer_now.saturating_sub(f.interval_base.1),
            );
            f.interval_base = (upto.max(f.interval_base.0), peer_now);
            if let Some(e) = entry {
                f.peer_bytes = f.peer_bytes.max(e.bytes);
                f.peer_packets = f.peer_packets.max(u64::from(e.packets));
            }
            let new_lost = entry.map_or(0, |e| e.lost - f.lost_seen);
            if let Some(e) = entry {
                f.lost_seen = e.lost;
            }
            self.packets_lost += u64::from(new_lost);
            // A flow with nothing new since the last response (no data
            // sent between the two probes) is reported too, with zero
            // bytes: a response closes the open loop whatever it resolves
            // (§4.4 ages only when no response arrives), and its interval
            // may carry bytes received late, which §4.2.2's undo counts.
            let nsent = upto.saturating_sub(f.resolved);
            let nrecd = f.peer_bytes.min(upto).saturating_sub(f.credited).min(nsent);
            f.resolved = f.resolved.max(upto);
            f.credited += nrecd;
            let hint = entry.map(|e| e.hint).filter(|h| *h != f.hint);
            if let Some(h) = hint {
                f.hint = h;
            }
            self.reports.push_back(Report {
                flow,
                feedback: Feedback {
                    nsent: Bytes(nsent),
                    nrecd: Bytes(nrecd),
                    loss: if new_lost > 0 {
                        LossMode::Transient
                    } else {
                        LossMode::None
                    },
                    rtt: rtt_once.take(),
                    lost_sent: None,
                },
                hint,
                interval,
            });
        }
        // The next probe goes at once, after the data this response lets
        // the sender send (the driver sends it in the same pass): probes
        // clocked by responses stay about two per RTT (§4.2.1) and in phase
        // with the data. Left to the timer, a response arriving just after
        // a probe would leave the data it releases unresolved until the
        // probe after, half an RTT later, which slows a window-limited flow
        // to about 2/3 of TCP's rate. The timer (srtt/2 after each probe)
        // still covers lost probes and responses.
        if self.next_probe_at.is_none() && self.unresolved() {
            self.next_probe_at = Some(now + self.probe_interval());
        }
        Ok(())
    }
}
