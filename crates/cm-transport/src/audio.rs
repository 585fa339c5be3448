//! The layered audio server of sigcomm1999 §3.2.2 and §5.2, and its receiver.
//!
//! The sender is self-clocked: it sends fixed-size packets at its current
//! encoding's rate on its own timer, and every packet is charged to the
//! macroflow with [`CmCall::Notify`] ("the CM does not shape such traffic by
//! forcing transmissions at particular times; instead, it shapes all other
//! traffic around those events", sigcomm1999 §3.2.2). It adapts on rate
//! callbacks (`cmapp_update`, cm-implementation-linux §3.4) by picking the
//! highest encoding that does not exceed the CM's rate. The receiver returns
//! application-level feedback, which the sender turns into `cm_update`
//! calls (sigcomm1999 §4.2.2 "application notification").

use std::collections::VecDeque;

use cm_core::{Bytes, Duration, Feedback, Instant, LossMode, PathEstimate};
use thiserror::Error;

use crate::CmCall;
use crate::cbr::UDP_IP_HEADER;
use crate::wire::{DecodeError, Reader, VERSION, zeros};

/// The encodings of sigcomm1999 §5.2, kbit/s.
pub const PAPER_ENCODINGS_KBPS: [u32; 6] = [10, 20, 40, 80, 160, 320];

/// Bytes of the encoded audio packet header (version, seq, len, kbps, sent_at).
pub const AUDIO_ENCODED_HEADER: usize = 1 + 8 + 4 + 4 + 8;

/// Bytes of an encoded feedback report.
pub const FEEDBACK_ENCODED_LEN: usize = 1 + 8 * 5;

/// One audio datagram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AudioPacket {
    /// Sequence number, from 0.
    pub seq: u64,
    /// Payload bytes.
    pub len: u32,
    /// The encoding this packet belongs to, kbit/s.
    pub encoding_kbps: u32,
    /// When it was sent.
    pub sent_at: Instant,
}

impl AudioPacket {
    /// Bytes on the wire: payload plus IP and UDP headers.
    pub fn wire_len(&self) -> u32 {
        self.len.saturating_add(UDP_IP_HEADER)
    }

    /// Append the encoding: fixed header, then `len` zero bytes.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.push(VERSION);
        buf.extend_from_slice(&self.seq.to_be_bytes());
        buf.extend_from_slice(&self.len.to_be_bytes());
        buf.extend_from_slice(&self.encoding_kbps.to_be_bytes());
        buf.extend_from_slice(&self.sent_at.as_micros().to_be_bytes());
        zeros(buf, self.len);
    }

    /// Decode one packet occupying all of `buf`.
    pub fn decode(buf: &[u8]) -> Result<AudioPacket, DecodeError> {
        let mut r = Reader::new(buf);
        r.version()?;
        let p = AudioPacket {
            seq: r.u64()?,
            len: r.u32()?,
            encoding_kbps: r.u32()?,
            sent_at: Instant::from_micros(r.u64()?),
        };
        r.payload(p.len)?;
        Ok(p)
    }
}

/// The receiver's report, cumulative so that lost reports lose nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AudioFeedback {
    /// Highest sequence number received.
    pub highest_seq: u64,
    /// Packets received so far (cumulative).
    pub received_count: u64,
    /// Payload bytes received so far (cumulative).
    pub received_bytes: u64,
    /// `sent_at` of the packet with `highest_seq`.
    pub echo_ts: Instant,
    /// Time that packet waited at the receiver before this report.
    pub echo_delay: Duration,
}

impl AudioFeedback {
    /// Bytes on the wire, with IP and UDP headers.
    pub fn wire_len(&self) -> u32 {
        FEEDBACK_ENCODED_LEN as u32 + UDP_IP_HEADER
    }

    /// Append the encoding.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.push(VERSION);
        for v in [
            self.highest_seq,
            self.received_count,
            self.received_bytes,
            self.echo_ts.as_micros(),
            self.echo_delay.as_micros(),
        ] {
            buf.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// Decode one report occupying all of `buf`.
    pub fn decode(buf: &[u8]) -> Result<AudioFeedback, DecodeError> {
        let mut r = Reader::new(buf);
        r.version()?;
        let f = AudioFeedback {
            highest_seq: r.u64()?,
            received_count: r.u64()?,
            received_bytes: r.u64()?,
            echo_ts: Instant::from_micros(r.u64()?),
            echo_delay: Duration::from_micros(r.u64()?),
        };
        r.payload(0)?;
        Ok(f)
    }
}

/// Why an audio configuration is unusable.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum AudioConfigError {
    /// No encodings, a zero encoding, or not strictly ascending.
    #[error("encodings must be non-empty, non-zero and strictly ascending")]
    BadEncodings,
    /// Zero-byte packets.
    #[error("packet length must be > 0")]
    ZeroPacket,
}

/// Parameters of the layered audio sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AudioConfig {
    /// Available encodings, kbit/s, ascending.
    pub encodings_kbps: Vec<u32>,
    /// Payload bytes per packet (sigcomm1999 §5.2: always 1 KB).
    pub packet_len: u32,
}

impl Default for AudioConfig {
    /// The paper's ladder, 1000-byte packets.
    fn default() -> Self {
        AudioConfig {
            encodings_kbps: PAPER_ENCODINGS_KBPS.to_vec(),
            packet_len: 1000,
        }
    }
}

/// A self-clocked layered audio sender.
#[derive(Clone, Debug)]
pub struct AudioSender {
    cfg: AudioConfig,
    level: usize,
    next_send: Instant,
    next_seq: u64,
    /// Sent packets not yet covered by feedback: (seq, len).
    unreported: VecDeque<(u64, u32)>,
    calls: VecDeque<CmCall>,
    /// Cumulative counters of the last feedback used.
    last_fb: Option<(u64, u64)>,
    level_since: Instant,
    time_at: Vec<Duration>,
    packets_at: Vec<u64>,
    stopped: bool,
}

impl AudioSender {
    /// A sender that starts at the lowest encoding (no estimate yet) and
    /// sends its first packet at `now`.
    pub fn new(cfg: AudioConfig, now: Instant) -> Result<Self, AudioConfigError> {
        let e = &cfg.encodings_kbps;
        if e.is_empty() || e[0] == 0 || e.windows(2).any(|w| w[0] >= w[1]) {
            return Err(AudioConfigError::BadEncodings);
        }
        if cfg.packet_len == 0 {
            return Err(AudioConfigError::ZeroPacket);
        }
        let n = e.len();
        Ok(AudioSender {
            cfg,
            level: 0,
            next_send: now,
            next_seq: 0,
            unreported: VecDeque::new(),
            calls: VecDeque::new(),
            last_fb: None,
            level_since: now,
            time_at: vec![Duration::ZERO; n],
            packets_at: vec![0; n],
            stopped: false,
        })
    }

    /// The current encoding, kbit/s.
    pub fn encoding_kbps(&self) -> u32 {
        self.cfg.encodings_kbps[self.level]
    }

    /// Time between packets at the current encoding.
    fn interval(&self) -> Duration {
        let bits = u64::from(self.cfg.packet_len) * 8;
        // bits / (kbps * 1000) seconds = bits * 1000 / kbps microseconds.
        Duration::from_micros(bits * 1_000 / u64::from(self.encoding_kbps()))
    }

    /// The next packet if one is due; queues its [`CmCall::Notify`].
    pub fn poll_transmit(&mut self, now: Instant) -> Option<AudioPacket> {
        if self.stopped || now < self.next_send {
            return None;
        }
        let p = AudioPacket {
            seq: self.next_seq,
            len: self.cfg.packet_len,
            encoding_kbps: self.encoding_kbps(),
            sent_at: now,
        };
        self.next_seq += 1;
        self.packets_at[self.level] += 1;
        self.unreported.push_back((p.seq, p.len));
        // Charge the macroflow (sigcomm1999 §3.2.2): no request, no grant.
        self.calls
            .push_back(CmCall::Notify(Bytes(u64::from(p.len))));
        // Clock from the due time, not `now`, so the rate does not drift;
        // never burst to catch up after a late call.
        let next = self.next_send + self.interval();
        self.next_send = if next <= now {
            now + self.interval()
        } else {
            next
        };
        Some(p)
    }

    /// When the next packet is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        (!self.stopped).then_some(self.next_send)
    }

    /// The next call the driver must forward to the CM for this flow.
    pub fn poll_cm(&mut self) -> Option<CmCall> {
        self.calls.pop_front()
    }

    /// Stop sending (the stream ended).
    pub fn stop(&mut self, now: Instant) {
        self.switch_level(now, self.level);
        self.stopped = true;
    }

    /// `cmapp_update`: pick the highest encoding whose rate does not exceed
    /// the CM's (sigcomm1999 §3.2.2); the lowest if even that one does.
    /// An estimate without a rate changes nothing.
    pub fn on_rate_update(&mut self, now: Instant, est: PathEstimate) {
        let Some(rate) = est.rate else { return };
        // kbit/s -> bytes/s: * 1000 / 8 = * 125.
        let level = self
            .cfg
            .encodings_kbps
            .iter()
            .rposition(|&k| u64::from(k) * 125 <= rate.bytes_per_sec())
            .unwrap_or(0);
        self.switch_level(now, level);
    }

    fn switch_level(&mut self, now: Instant, level: usize) {
        if !self.stopped {
            self.time_at[self.level] = self.time_at[self.level] + (now - self.level_since);
        }
        self.level_since = now;
        if level != self.level {
            self.level = level;
            // The new encoding's clock starts from the last send.
            let resched = now + self.interval();
            self.next_send = self.next_send.min(resched);
        }
    }

    /// Turn a receiver report into `cm_update` (sigcomm1999 §4.2.2): the
    /// packets up to `highest_seq` not yet reported left the network; the
    /// increase in the received count arrived; any shortfall is a
    /// transient loss.
    pub fn handle_feedback(&mut self, now: Instant, fb: &AudioFeedback) {
        let (last_count, last_bytes) = self.last_fb.unwrap_or((0, 0));
        if fb.received_count < last_count || fb.highest_seq >= self.next_seq {
            return; // stale (reordered) or bogus report
        }
        self.last_fb = Some((fb.received_count, fb.received_bytes));
        let mut nsent = 0u64;
        while let Some(&(seq, len)) = self.unreported.front() {
            if seq > fb.highest_seq {
                break;
            }
            nsent += u64::from(len);
            self.unreported.pop_front();
        }
        let nrecd = fb.received_bytes.saturating_sub(last_bytes).min(nsent);
        let rtt = (now - fb.echo_ts).checked_sub_nonzero(fb.echo_delay);
        if nsent == 0 && rtt.is_none() {
            return;
        }
        let loss = if nrecd < nsent {
            LossMode::Transient
        } else {
            LossMode::None
        };
        self.calls.push_back(CmCall::Update(Feedback {
            nsent: Bytes(nsent),
            nrecd: Bytes(nrecd),
            loss,
            rtt,
            lost_sent: None,
        }));
    }

    /// Time spent at each encoding so far: `(kbit/s, time)`.
    pub fn time_at_encoding(&self, now: Instant) -> Vec<(u32, Duration)> {
        let mut t = self.time_at.clone();
        if !self.stopped {
            t[self.level] = t[self.level] + (now - self.level_since);
        }
        self.cfg.encodings_kbps.iter().copied().zip(t).collect()
    }

    /// Packets sent at each encoding: `(kbit/s, packets)`.
    pub fn packets_at_encoding(&self) -> Vec<(u32, u64)> {
        let p = self.packets_at.iter().copied();
        self.cfg.encodings_kbps.iter().copied().zip(p).collect()
    }

    /// Packets sent so far.
    pub fn packets_sent(&self) -> u64 {
        self.next_seq
    }
}

/// `a - b` if that is positive.
trait CheckedSubNonzero {
    fn checked_sub_nonzero(self, b: Duration) -> Option<Duration>;
}

impl CheckedSubNonzero for Duration {
    fn checked_sub_nonzero(self, b: Duration) -> Option<Duration> {
        let d = self - b;
        (!d.is_zero()).then_some(d)
    }
}

/// When the audio receiver reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AudioReceiverConfig {
    /// Report at most this long after the previous report (default 100 ms).
    pub interval: Duration,
    /// Also report after this many new packets (`None`: time only).
    pub every_packets: Option<u32>,
}

impl Default for AudioReceiverConfig {
    fn default() -> Self {
        AudioReceiverConfig {
            interval: Duration::from_millis(100),
            every_packets: None,
        }
    }
}

/// Receives audio packets and produces [`AudioFeedback`].
#[derive(Clone, Debug, Default)]
pub struct AudioReceiver {
    cfg: AudioReceiverConfig,
    highest: Option<(u64, Instant, Instant)>,
    received_count: u64,
    received_bytes: u64,
    since_report: u32,
    last_report: Option<Instant>,
}

impl AudioReceiver {
    /// A receiver that has seen nothing.
    pub fn new(cfg: AudioReceiverConfig) -> Self {
        AudioReceiver {
            cfg,
            ..Default::default()
        }
    }

    /// Account for an arriving packet.
    pub fn handle_packet(&mut self, now: Instant, p: &AudioPacket) {
        self.received_count += 1;
        self.received_bytes += u64::from(p.len);
        self.since_report += 1;
        if self.highest.is_none_or(|(h, _, _)| p.seq > h) {
            self.highest = Some((p.seq, p.sent_at, now));
        }
    }

    /// A report, if one is due.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<AudioFeedback> {
        let due = self.poll_timeout()?;
        let by_count = self
            .cfg
            .every_packets
            .is_some_and(|n| self.since_report >= n);
        if now < due && !by_count {
            return None;
        }
        let (seq, sent_at, arrived) = self.highest?;
        self.since_report = 0;
        self.last_report = Some(now);
        Some(AudioFeedback {
            highest_seq: seq,
            received_count: self.received_count,
            received_bytes: self.received_bytes,
            echo_ts: sent_at,
            echo_delay: now - arrived,
        })
    }

    /// When the next report is due (only with news to report).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.since_report == 0 {
            return None;
        }
        let (_, _, arrived) = self.highest?;
        Some(match self.last_report {
            Some(t) => t + self.cfg.interval,
            None => arrived,
        })
    }

    /// Packets received.
    pub fn received_count(&self) -> u64 {
        self.received_count
    }
}
