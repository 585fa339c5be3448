//! One TCP/CM connection of the sender loop: its socket, its outgoing
//! run of segments, its [`TcpSender`] and CM flow, the CM calls it makes,
//! and its summary.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cm_core::FlowId;
use cm_transport::{CmCall, TcpSegment, TcpSender};
use cm_udp::UdpIo;
use libcm::{Cm, CmError};

use crate::error::Result;
use crate::outbox::{Run, Sent};
use crate::payload::Source;
use crate::spec::SendSpec;
use crate::summary::{ProgressSample, Role, Summary, TcpCmDetail, Transport, throughput};

pub(crate) struct Conn {
    pub(crate) index: usize,
    pub(crate) spec: SendSpec,
    pub(crate) io: UdpIo,
    /// Segments queued in this pass, sent together.
    pub(crate) out: Run,
    pub(crate) local: SocketAddr,
    pub(crate) tcp: TcpSender,
    pub(crate) flow: FlowId,
    pub(crate) detail: TcpCmDetail,
    pub(crate) started: Instant,
    pub(crate) start_unix: f64,
    pub(crate) cpu0: Duration,
    /// Last time `bytes_acked` grew (or the start).
    pub(crate) progressed: Instant,
    pub(crate) acked: u64,
    pub(crate) next_sample: Option<Instant>,
    pub(crate) samples: Vec<ProgressSample>,
    pub(crate) refused: bool,
    /// The bytes to send (zeros or a file).
    pub(crate) source: Source,
}

impl Conn {
    pub(crate) fn summary(&self, end: Instant, complete: bool) -> Summary {
        let stats = self.tcp.stats();
        let seconds = end.saturating_duration_since(self.started).as_secs_f64();
        let bytes = stats.bytes_acked;
        let mut detail = self.detail.clone();
        detail.segments_sent = stats.segments_sent;
        detail.timeouts = stats.timeouts;
        detail.fast_retransmits = stats.fast_retransmits;
        detail.srtt_s = stats.srtt.map(|d| d.as_secs_f64());
        Summary {
            transport: Transport::TcpCm,
            role: Role::Sender,
            local: self.local.to_string(),
            peer: self.spec.dst.to_string(),
            bytes,
            seconds,
            throughput_bps: throughput(bytes, seconds),
            retransmissions: stats.retransmits,
            cpu_s: cm_clock::thread_cpu()
                .saturating_sub(self.cpu0)
                .as_secs_f64(),
            start_s: cm_clock::secs_since_epoch(self.started),
            end_s: cm_clock::secs_since_epoch(end),
            start_unix_s: self.start_unix,
            complete,
            progress: self.samples.clone(),
            tcpcm: Some(detail),
            ccudp: None,
        }
    }
}

/// Encode `seg` with its payload and queue it on the connection's run.
pub(crate) fn transmit(c: &mut Conn, seg: &TcpSegment) -> Result<()> {
    let source = &mut c.source;
    let sent = c.out.push(&mut c.io, |buf| {
        let start = buf.len();
        seg.encode(buf);
        // The payload is the encoding's last `len` bytes; data starts at
        // sequence number 1 (the SYN takes 0).
        if seg.len > 0 {
            let at = buf.len().saturating_sub(seg.len as usize).max(start);
            if let Some(payload) = buf.get_mut(at..) {
                source.fill(seg.seq.saturating_sub(1), payload)?;
            }
        }
        Ok(())
    })?;
    if sent == Sent::Refused {
        c.refused = true;
    }
    Ok(())
}

/// Send the connection's queued segments.
pub(crate) fn flush(c: &mut Conn) -> Result<()> {
    if c.out.flush(&mut c.io)? == Sent::Refused {
        c.refused = true;
    }
    Ok(())
}

/// One of the connection's CM calls; an error the CM returns for the call
/// is counted, a lost daemon or an I/O error ends the loop.
pub(crate) fn call_cm(cm: &mut Cm, c: &mut Conn, call: CmCall) -> Result<()> {
    let r = match call {
        CmCall::Request => cm.request(c.flow),
        // Two GSO runs are over the CM's limit for one request: refused,
        // the sender would wait for MTUs the CM never registered.
        CmCall::RequestMtus(k) => cm.request_mtus_split(c.flow, k),
        CmCall::Notify(n) => cm.notify(c.flow, n.get()),
        CmCall::Update(fb) => cm.update(c.flow, fb),
    };
    match r {
        Ok(()) => Ok(()),
        Err(e @ (CmError::Disconnected | CmError::Io(_))) => Err(e.into()),
        Err(_) => {
            c.detail.cm_errors += 1;
            Ok(())
        }
    }
}
