//! Optional per-packet trace records and their CSV form.
//!
//! Tracing is off by default; the engine checks a flag before building a
//! record, so disabled tracing costs one branch per hook.

use std::io;

use cm_core::Instant;

use crate::packet::{FlowTag, LinkId, NodeId};

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropKind {
    /// The DropTail queue was full.
    Overflow,
    /// Bernoulli random loss on departure.
    Random,
}

/// What happened to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceKind {
    /// A host handed the packet to the engine.
    Send,
    /// The packet was accepted by a link (queued or sent straight away).
    Enqueue,
    /// The packet was dropped.
    Drop(DropKind),
    /// The link started serializing the packet.
    TxStart,
    /// The packet reached its destination host.
    Deliver,
}

impl TraceKind {
    /// Short lowercase name used in CSV output.
    pub fn name(self) -> &'static str {
        match self {
            TraceKind::Send => "send",
            TraceKind::Enqueue => "enqueue",
            TraceKind::Drop(DropKind::Overflow) => "drop_overflow",
            TraceKind::Drop(DropKind::Random) => "drop_random",
            TraceKind::TxStart => "tx_start",
            TraceKind::Deliver => "deliver",
        }
    }
}

/// One trace record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// When it happened.
    pub time: Instant,
    /// What happened.
    pub kind: TraceKind,
    /// The node where it happened (link source, or the receiving host).
    pub node: NodeId,
    /// The link involved, if any.
    pub link: Option<LinkId>,
    /// Packet id.
    pub packet: u64,
    /// Packet flow tag.
    pub flow: FlowTag,
    /// Packet source host.
    pub src: NodeId,
    /// Packet destination host.
    pub dst: NodeId,
    /// Wire length in bytes.
    pub size: u32,
}

/// Where trace records go.
#[derive(Default)]
pub enum TraceMode {
    /// No tracing (the default).
    #[default]
    Off,
    /// Keep records in memory; take them with [`Sim::take_trace`](crate::Sim::take_trace).
    Collect,
    /// Stream each record to a callback.
    Sink(Box<dyn FnMut(&TraceRecord)>),
}

/// CSV header written by [`write_csv`].
pub const CSV_HEADER: &str = "time_us,kind,node,link,packet,flow,src,dst,size";

/// Writes one record as a CSV line (no header).
pub fn write_csv_record<W: io::Write>(w: &mut W, r: &TraceRecord) -> io::Result<()> {
    let link = r.link.map(|l| l.0.to_string()).unwrap_or_default();
    writeln!(
        w,
        "{},{},{},{},{},{},{},{},{}",
        r.time.as_micros(),
        r.kind.name(),
        r.node.0,
        link,
        r.packet,
        r.flow.0,
        r.src.0,
        r.dst.0,
        r.size
    )
}

/// Writes records as CSV with a header line.
pub fn write_csv<W: io::Write>(w: &mut W, records: &[TraceRecord]) -> io::Result<()> {
    writeln!(w, "{CSV_HEADER}")?;
    for r in records {
        write_csv_record(w, r)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_header_and_one_line_per_record() {
        let r = TraceRecord {
            time: Instant::from_micros(1500),
            kind: TraceKind::Drop(DropKind::Overflow),
            node: NodeId(2),
            link: Some(LinkId(3)),
            packet: 7,
            flow: FlowTag(9),
            src: NodeId(0),
            dst: NodeId(5),
            size: 1000,
        };
        let mut out = Vec::new();
        write_csv(&mut out, &[r, TraceRecord { link: None, ..r }]).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(
            s,
            format!(
                "{CSV_HEADER}\n1500,drop_overflow,2,3,7,9,0,5,1000\n1500,drop_overflow,2,,7,9,0,5,1000\n"
            )
        );
    }
}
