//! The records the BPF program and the daemon exchange, mirrored from
//! `bpf/cm_tcp.h` and read field by field (no `unsafe` casts).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Size of `struct cm_event`.
pub const EVENT_LEN: usize = 112;
/// Size of `struct cm_allow`.
pub const ALLOW_LEN: usize = 24;
/// `CM_ALLOW_SLOTS`: a connection's allowance lives in slot `id % ALLOW_SLOTS`.
pub const ALLOW_SLOTS: u64 = 4096;
/// `CM_STALE_NS`: the BPF side ignores an allowance older than this and
/// falls back to Reno on the connection's own state.
pub const STALE: std::time::Duration = std::time::Duration::from_millis(500);

const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;

/// What happened to a connection (`CM_EV_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// It chose `cm`; the event carries its addresses and owner.
    Open,
    /// A batch of ACKs: its counters now (about four times per RTT, and at
    /// once when nothing is left in flight).
    Ack,
    /// It entered fast recovery (a loss).
    Loss,
    /// It entered the loss state (a retransmission timeout).
    Rto,
    /// It entered CWR (an ECN echo, or congestion in the local qdisc).
    Ecn,
    /// It released `cm` (closed, or switched to another control).
    Close,
}

/// One report from the BPF side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The connection's id (1, 2, … in the order connections chose `cm`).
    pub id: u64,
    /// `CLOCK_MONOTONIC` at the report, in ns.
    pub ns: u64,
    /// What happened.
    pub kind: EventKind,
    /// Bytes sent so far, retransmissions included (`tcp_sock.bytes_sent`).
    pub bytes_sent: u64,
    /// Bytes cumulatively acknowledged (`tcp_sock.bytes_acked`).
    pub bytes_acked: u64,
    /// Bytes retransmitted so far.
    pub bytes_retrans: u64,
    /// Local and remote address (`Open` only; unspecified otherwise).
    pub local: SocketAddr,
    /// The peer.
    pub remote: SocketAddr,
    /// The socket's owner (`Open` only).
    pub uid: u32,
    /// Smoothed RTT, µs (0: none yet).
    pub srtt_us: u32,
    /// The latest RTT sample, µs (0: none yet).
    pub rtt_us: u32,
    /// The connection's MSS.
    pub mss: u32,
    /// Its congestion window, packets.
    pub cwnd: u32,
    /// Packets in flight (`tcp_packets_in_flight`).
    pub in_flight: u32,
    /// An ACK since the connection's last report found it held back by
    /// its window (`tcp_is_cwnd_limited`, RFC 7661's "cwnd-limited";
    /// `CM_LIMITED`).
    pub cwnd_limited: bool,
}

/// `CM_LIMITED` in `cm_event.flags`.
const LIMITED: u32 = 1;

/// `CM_ALL_USERS`: the uid of a destination entry every user's new
/// connections start from.
pub const ALL_USERS: u32 = u32::MAX;
/// Size of `struct cm_dest_key`.
pub const DEST_KEY_LEN: usize = 20;
/// Size of `struct cm_dest`.
pub const DEST_LEN: usize = 16;

/// A record that is not a `cm_event` of this version.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than `EVENT_LEN`.
    #[error("event record of {0} bytes, expected {EVENT_LEN}")]
    Short(usize),
    /// An unknown kind.
    #[error("unknown event kind {0}")]
    Kind(u32),
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(a)
}

fn ip_at(b: &[u8], at: usize, family: u32) -> IpAddr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    if family == AF_INET6 {
        let v6 = Ipv6Addr::from(a);
        // An IPv4 peer of an IPv6 socket: name it as IPv4, as libcm does.
        v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
    } else if family == AF_INET {
        // Network order in the first four bytes.
        IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

impl Event {
    /// Decode one ring-buffer record.
    pub fn parse(b: &[u8]) -> Result<Event, WireError> {
        if b.len() < EVENT_LEN {
            return Err(WireError::Short(b.len()));
        }
        let kind = match u32_at(b, 40) {
            1 => EventKind::Open,
            2 => EventKind::Ack,
            3 => EventKind::Loss,
            4 => EventKind::Rto,
            5 => EventKind::Ecn,
            6 => EventKind::Close,
            k => return Err(WireError::Kind(k)),
        };
        let family = u32_at(b, 44);
        Ok(Event {
            id: u64_at(b, 0),
            ns: u64_at(b, 8),
            kind,
            bytes_sent: u64_at(b, 16),
            bytes_acked: u64_at(b, 24),
            bytes_retrans: u64_at(b, 32),
            local: SocketAddr::new(ip_at(b, 48, family), u16_at(b, 80)),
            remote: SocketAddr::new(ip_at(b, 64, family), u16_at(b, 82)),
            uid: u32_at(b, 84),
            srtt_us: u32_at(b, 88),
            rtt_us: u32_at(b, 92),
            mss: u32_at(b, 96),
            cwnd: u32_at(b, 100),
            in_flight: u32_at(b, 104),
            cwnd_limited: u32_at(b, 108) & LIMITED != 0,
        })
    }
}

/// The slot of connection `id` in the allowance map.
pub fn allow_slot(id: u64) -> u32 {
    u32::try_from(id % ALLOW_SLOTS).unwrap_or(0)
}

/// A `struct cm_allow`: connection `id` may have `cwnd` packets out, as of
/// `stamp_ns` (`CLOCK_MONOTONIC`).
pub fn allow_record(id: u64, stamp_ns: u64, cwnd: u32) -> [u8; ALLOW_LEN] {
    let mut r = [0u8; ALLOW_LEN];
    r[0..8].copy_from_slice(&id.to_ne_bytes());
    r[8..16].copy_from_slice(&stamp_ns.to_ne_bytes());
    r[16..20].copy_from_slice(&cwnd.to_ne_bytes());
    r
}

/// A `struct cm_dest_key`: destination `addr` (IPv4 in the first word,
/// network order) for connections of `uid` ([`ALL_USERS`]: anyone's).
pub fn dest_key(addr: IpAddr, uid: u32) -> [u8; DEST_KEY_LEN] {
    let mut k = [0u8; DEST_KEY_LEN];
    match addr {
        IpAddr::V4(a) => k[0..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => k[0..4].copy_from_slice(&v4.octets()),
            None => k[0..16].copy_from_slice(&a.octets()),
        },
    }
    k[16..20].copy_from_slice(&uid.to_ne_bytes());
    k
}

/// A `struct cm_dest`: a new connection's window, `bytes`, as of `stamp_ns`.
pub fn dest_record(stamp_ns: u64, bytes: u64) -> [u8; DEST_LEN] {
    let mut r = [0u8; DEST_LEN];
    r[0..8].copy_from_slice(&stamp_ns.to_ne_bytes());
    r[8..16].copy_from_slice(&bytes.to_ne_bytes());
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, family: u32) -> Vec<u8> {
        let mut b = vec![0u8; EVENT_LEN];
        b[0..8].copy_from_slice(&7u64.to_ne_bytes());
        b[16..24].copy_from_slice(&3000u64.to_ne_bytes());
        b[24..32].copy_from_slice(&1500u64.to_ne_bytes());
        b[40..44].copy_from_slice(&kind.to_ne_bytes());
        b[44..48].copy_from_slice(&family.to_ne_bytes());
        b[48..52].copy_from_slice(&[10, 0, 0, 1]);
        b[64..68].copy_from_slice(&[10, 0, 0, 2]);
        b[80..82].copy_from_slice(&40000u16.to_ne_bytes());
        b[82..84].copy_from_slice(&80u16.to_ne_bytes());
        b[96..100].copy_from_slice(&1448u32.to_ne_bytes());
        b
    }

    #[test]
    fn an_open_record_names_the_connection() {
        let e = Event::parse(&record(1, AF_INET)).expect("parses");
        assert_eq!(e.kind, EventKind::Open);
        assert_eq!(e.id, 7);
        assert_eq!(e.local, "10.0.0.1:40000".parse().expect("addr"));
        assert_eq!(e.remote, "10.0.0.2:80".parse().expect("addr"));
        assert_eq!((e.bytes_sent, e.bytes_acked, e.mss), (3000, 1500, 1448));
        assert!(!e.cwnd_limited);
    }

    #[test]
    fn the_limited_flag_is_the_last_word() {
        let mut b = record(2, AF_INET);
        b[108..112].copy_from_slice(&LIMITED.to_ne_bytes());
        assert!(Event::parse(&b).expect("parses").cwnd_limited);
        b[108..112].copy_from_slice(&2u32.to_ne_bytes());
        assert!(!Event::parse(&b).expect("parses").cwnd_limited);
    }

    #[test]
    fn a_mapped_ipv4_peer_of_an_ipv6_socket_reads_as_ipv4() {
        let mut b = record(1, AF_INET6);
        let mapped = Ipv4Addr::new(192, 0, 2, 9).to_ipv6_mapped().octets();
        b[64..80].copy_from_slice(&mapped);
        let e = Event::parse(&b).expect("parses");
        assert_eq!(e.remote.ip(), IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)));
    }

    #[test]
    fn short_records_and_unknown_kinds_are_errors() {
        assert_eq!(Event::parse(&[0; 10]), Err(WireError::Short(10)));
        assert_eq!(Event::parse(&record(9, AF_INET)), Err(WireError::Kind(9)));
    }

    #[test]
    fn destination_keys_name_ipv4_alike_however_written() {
        let v4 = dest_key(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 7);
        let mapped = dest_key(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped()), 7);
        assert_eq!(v4, mapped);
        assert_eq!(&v4[0..4], &[10, 0, 0, 2]);
        assert_eq!(u32_at(&v4, 16), 7);
        let r = dest_record(9, 15_000);
        assert_eq!((u64_at(&r, 0), u64_at(&r, 8)), (9, 15_000));
    }

    #[test]
    fn an_allowance_record_has_the_c_layout() {
        let r = allow_record(4097, 5, 10);
        assert_eq!(allow_slot(4097), 1);
        assert_eq!(u64_at(&r, 0), 4097);
        assert_eq!(u64_at(&r, 8), 5);
        assert_eq!(u32_at(&r, 16), 10);
    }
}
