//! `cm_update`'s feedback on the wire: [`ToDaemon::Update`] from and back
//! to cm-core's [`Feedback`], as [`Estimate`](super::Estimate) is to
//! `PathEstimate`. When the lost data left travels as an age, because the
//! client's and the daemon's clocks have different epochs.

use cm_core::{Bytes, Duration, Feedback, Instant};

use super::ToDaemon;

impl ToDaemon {
    /// `cm_update(flow, fb)`, sent at `now` on the client's clock.
    pub fn update(flow: u64, fb: &Feedback, now: Instant) -> ToDaemon {
        ToDaemon::Update {
            flow,
            nsent: fb.nsent.get(),
            nrecd: fb.nrecd.get(),
            loss: fb.loss,
            rtt_us: fb.rtt.map(Duration::as_micros),
            lost_age_us: fb.lost_sent.map(|t| now.saturating_since(t).as_micros()),
        }
    }

    /// The feedback an `Update` carries, received at `now` on the
    /// receiver's clock (the message's transit counts as age); `None` for
    /// any other message.
    pub fn feedback(&self, now: Instant) -> Option<Feedback> {
        let ToDaemon::Update {
            nsent,
            nrecd,
            loss,
            rtt_us,
            lost_age_us,
            ..
        } = *self
        else {
            return None;
        };
        Some(Feedback {
            nsent: Bytes(nsent),
            nrecd: Bytes(nrecd),
            loss,
            rtt: rtt_us.map(Duration::from_micros),
            lost_sent: lost_age_us.map(|a| Instant::from_micros(now.as_micros().saturating_sub(a))),
        })
    }
}

#[cfg(test)]
mod tests {
    use cm_core::LossMode;

    use super::*;

    /// The lost data's send time crosses as an age: sent 30 ms before the
    /// message, it is 30 ms before the message's arrival on the receiver's
    /// clock, whatever that clock's epoch.
    #[test]
    fn feedback_crosses_the_wire_with_the_lost_datas_age() {
        let at = |us: u64| Instant::from_micros(us);
        let fb = Feedback {
            lost_sent: Some(at(70_000)),
            ..Feedback::lossy(2920, 1460, LossMode::Transient)
        };
        let m = ToDaemon::update(7, &fb, at(100_000));
        let back = m.feedback(at(5_000_000)).unwrap();
        assert_eq!(back.lost_sent, Some(at(4_970_000)));
        assert_eq!(
            (back.nsent, back.nrecd, back.loss),
            (fb.nsent, fb.nrecd, fb.loss)
        );
        let none = ToDaemon::update(7, &Feedback::acked(1460, Duration::from_millis(40)), at(1));
        assert_eq!(
            none.feedback(at(9)),
            Some(Feedback::acked(1460, Duration::from_millis(40)))
        );
        assert_eq!(ToDaemon::Close { flow: 7 }.feedback(at(9)), None);
    }
}
