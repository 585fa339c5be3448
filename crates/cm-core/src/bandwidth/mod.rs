//! Bottleneck-bandwidth estimation from packet bunches (iscc §VI-B, after
//! its refs. \[4\] Carter & Crovella and \[16\] Paxson's packet bunches).
//!
//! ISCC needs the capacity `C` of the path's bottleneck link, and every flow
//! sharing that link must hold a *consistent* estimate of it (iscc §V-C,
//! §VI-B). The paper's estimator: "the server sent its packets in bursts of
//! a pre-defined length. A bandwidth sample was derived from each burst that
//! contained at least three packets" (iscc §VI-B). Packets sent back to back
//! leave the bottleneck spaced by their transmission time at rate `C`, and
//! keep that spacing (their *dispersion*) up to the receiver when nothing
//! disturbs them, so bytes over dispersion measures `C`.
//!
//! Three sans-IO pieces, one per place in the path:
//! - [`BurstSchedule`] (sender): numbers packets as (burst, index, length)
//!   so the receiver can group them, and says when a burst starts.
//! - [`BunchSampler`] (receiver): one rate sample per burst that arrived
//!   with at least three packets in order.
//! - [`CapacityFilter`] (sender, one per macroflow): the robust estimate
//!   from the samples of all the macroflow's flows. The manager keeps one
//!   per macroflow and feeds it through
//!   [`CongestionManager::capacity_sample`](crate::CongestionManager::capacity_sample),
//!   which hands the estimate to the controller
//!   ([`Controller::set_capacity`](crate::controller::Controller::set_capacity)).
//!
//! Samples measure the IP-level rate: the bytes counted are the IP packets'
//! lengths as the caller reports them, without link-layer framing (iscc
//! §VI-B measured 1,510 kb/s on a 1,544 kb/s T1 for that reason).
//!
//! ```
//! use cm_core::bandwidth::{BunchSampler, BurstSchedule, CapacityFilter};
//! use cm_core::{Bytes, Instant, Rate};
//!
//! // Sender: bursts of 4 packets of 1000 bytes.
//! let mut schedule = BurstSchedule::new(4)?;
//! let tags: Vec<_> = (0..8).map(|_| schedule.next_packet()).collect();
//! // Receiver: a 1 MB/s bottleneck spaces them 1 ms apart.
//! let mut sampler = BunchSampler::new();
//! let mut filter = CapacityFilter::default();
//! for (i, tag) in tags.iter().enumerate() {
//!     let now = Instant::from_micros(1_000 * i as u64 + 50_000 * u64::from(tag.burst));
//!     if let Some(sample) = sampler.on_packet(now, tag.burst, tag.index, tag.len, Bytes(1000)) {
//!         // The receiver reports the sample to the sender, which filters.
//!         filter.push(sample);
//!     }
//! }
//! assert_eq!(sampler.stats().samples, 2);
//! // Two samples are fewer than the default minimum of three.
//! assert_eq!(filter.estimate(), None);
//! filter.push(Rate::from_bytes_per_sec(1_000_000));
//! assert_eq!(filter.estimate(), Some(Rate::from_bytes_per_sec(1_000_000)));
//! # Ok::<(), cm_core::ConfigError>(())
//! ```

mod filter;
mod sampler;
mod schedule;

pub use filter::{CapacityFilter, CapacityFilterConfig};
pub use sampler::{BunchSampler, BunchStats, MAX_WIRE_LEN};
pub use schedule::{BurstSchedule, BurstTag, DEFAULT_BURST_LEN, MIN_BUNCH};

#[cfg(test)]
mod tests;
