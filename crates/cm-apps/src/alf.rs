//! Application-level framing over the CC-UDP wire: the request/callback
//! sender of cm-implementation-linux §3.5 ("defer data collection until
//! they know they can send it").
//!
//! [`AlfChannel`] asks the CM for a grant ([`AlfChannel::request`]); when
//! the grant comes, the application chooses the datagram *then* (the
//! freshest frame, the layer `cm_query` allows now) through the closure it
//! passes to [`AlfChannel::drive`]. The datagram goes out at once from a
//! connected UDP socket with CC-UDP's data header, and the peer's
//! CC-UDP acknowledgements (a [`CcUdpSocket`] at the other end) become
//! `cm_update`s through the same sans-IO accounting `CcUdpSocket` uses
//! (`cm_transport::ccudp::feedback`). Unlike `CcUdpSocket::send`, nothing
//! is committed before the grant.
//!
//! [`AlfChannel::drive`] takes only its own flow's events
//! (`Cm::poll_event_for`), so several channels, and other flows, can share
//! one `Cm`; an application that also waits for other flows' events takes
//! them with `Cm::poll_event` as usual. Of its own flow's events it uses
//! the grants and grant expiries and discards the rest (rate updates: ask
//! `cm_query` instead, as an ALF sender does).
//!
//! [`CcUdpSocket`]: libcm::ccudp::CcUdpSocket

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration as StdDuration;

use cm_core::FlowId;
use cm_transport::ccudp::feedback::{Accounting, Counters};
use cm_transport::ccudp::wire::{self, DATA_HEADER_LEN, DataHeader, Packet};
use libcm::{Cm, CmEvent};

/// How long a request may go unanswered before it is made again.
pub const REQUEST_RETRY: StdDuration = StdDuration::from_secs(1);

fn cm_err(e: libcm::CmError) -> io::Error {
    io::Error::other(e)
}

/// A request/callback sender to one peer.
pub struct AlfChannel {
    sock: UdpSocket,
    flow: FlowId,
    session: u16,
    acct: Accounting,
    /// When the outstanding request was made.
    requested: Option<std::time::Instant>,
    max_payload: usize,
    out: Vec<u8>,
    buf: Vec<u8>,
    declined: u64,
    /// Datagrams from the peer that are not CC-UDP (its application's own
    /// messages), oldest first.
    inbox: std::collections::VecDeque<Vec<u8>>,
}

/// Most datagrams [`AlfChannel::take_datagram`] keeps waiting; older ones
/// are dropped when more arrive.
pub const INBOX: usize = 64;

impl AlfChannel {
    /// A flow to `to` on `cm`, from a fresh UDP socket.
    pub fn open(cm: &mut Cm, to: SocketAddr) -> io::Result<AlfChannel> {
        let any: SocketAddr = if to.is_ipv4() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            SocketAddr::from(([0u16; 8], 0))
        };
        let sock = UdpSocket::bind(any)?;
        sock.connect(to)?;
        sock.set_nonblocking(true)?;
        let local = sock.local_addr()?;
        let flow = cm.open(Some(local), to).map_err(cm_err)?;
        let mtu = cm.mtu(flow).map_err(cm_err)? as usize;
        let session = (std::process::id() as u16) ^ local.port().rotate_left(7);
        Ok(AlfChannel {
            sock,
            flow,
            session,
            acct: Accounting::new(),
            requested: None,
            max_payload: mtu.saturating_sub(28 + DATA_HEADER_LEN),
            out: Vec::with_capacity(2048),
            buf: vec![0u8; 2048],
            declined: 0,
            inbox: std::collections::VecDeque::new(),
        })
    }

    /// The peer holds its acknowledgements back for up to `hold` (it
    /// reports in batches): the retransmission timeout stays above it
    /// (`Accounting::feedback_hold`). Call before sending; it keeps
    /// [`AlfChannel::set_acks_once_per_rtt`], whichever comes first.
    pub fn set_feedback_hold(&mut self, hold: StdDuration) {
        let hold = cm_core::Duration::from_micros(hold.as_micros() as u64);
        self.acct = std::mem::take(&mut self.acct).feedback_hold(hold);
    }

    /// The peer acknowledges once per round trip (a NACK-based receiver
    /// reporting once per control interval): the retransmission timeout
    /// waits one smoothed RTT longer (`Accounting::acks_once_per_rtt`).
    /// Call before sending.
    pub fn set_acks_once_per_rtt(&mut self) {
        self.acct = std::mem::take(&mut self.acct).acks_once_per_rtt();
    }

    /// The CM flow.
    pub fn flow(&self) -> FlowId {
        self.flow
    }

    /// The largest payload one grant carries.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// What the acknowledgements resolved so far.
    pub fn counters(&self) -> Counters {
        self.acct.counters
    }

    /// The smoothed RTT of the acknowledgements, once there is one.
    pub fn srtt(&self) -> Option<StdDuration> {
        self.acct
            .srtt()
            .map(|d| StdDuration::from_micros(d.as_micros()))
    }

    /// Grants declined (the application had nothing to send at all).
    pub fn declined(&self) -> u64 {
        self.declined
    }

    /// `cm_request`: ask for one grant, unless one is outstanding. A
    /// request unanswered for [`REQUEST_RETRY`] is made again: one can be
    /// lost when the CM behind the handle changes (the daemon went away or
    /// came back), and a spare grant is only declined.
    pub fn request(&mut self, cm: &mut Cm) -> io::Result<()> {
        if self.requested.is_none_or(|t| t.elapsed() >= REQUEST_RETRY) {
            cm.request(self.flow).map_err(cm_err)?;
            self.requested = Some(std::time::Instant::now());
        }
        Ok(())
    }

    /// `cm_request` for `k` MTUs at once (a packet bunch, iscc §VI-B): the
    /// shaper releases them back to back when it has the credit, and
    /// [`AlfChannel::drive`] asks `fill` for datagrams until the grant's
    /// bytes are used.
    pub fn request_mtus(&mut self, cm: &mut Cm, k: u32) -> io::Result<()> {
        cm.request_mtus(self.flow, k.max(1)).map_err(cm_err)?;
        self.requested = Some(std::time::Instant::now());
        Ok(())
    }

    /// The next datagram from the peer that was not CC-UDP (the peer
    /// application's own messages, e.g. reports), at most [`INBOX`] kept.
    pub fn take_datagram(&mut self) -> Option<Vec<u8>> {
        self.inbox.pop_front()
    }

    /// Read acknowledgements, report timeouts, and serve grants. A grant
    /// lets the flow send up to its bytes (whole MTUs; "any mtu (or less)
    /// bytes", sigcomm1999 §3.1), counted as the CM counts them: CC-UDP's
    /// data header and the payload. `fill` is asked for datagrams while the
    /// grant has room for a header and one payload byte; it is given the
    /// largest payload that still fits (at most
    /// [`AlfChannel::max_payload`]) and returns one no larger, or `None` to
    /// leave the rest of the grant. So a sender of small datagrams (vat's
    /// frames) sends several per grant and can use the window `cm_query`'s
    /// rate reports, not one datagram per MTU of it. A payload larger than
    /// the room is a bug in `fill`: it is not sent and ends the grant.
    pub fn drive(
        &mut self,
        cm: &mut Cm,
        mut fill: impl FnMut(&mut Cm, usize) -> Option<Vec<u8>>,
    ) -> io::Result<()> {
        self.read_acks(cm)?;
        let now = cm_clock::now();
        if self.acct.poll_timeout().is_some_and(|t| t <= now) {
            if let Some(fb) = self.acct.handle_timeout(now) {
                cm.update(self.flow, fb).map_err(cm_err)?;
            }
        }
        while let Some(ev) = cm.poll_event_for(self.flow).map_err(cm_err)? {
            let bytes = match ev {
                CmEvent::Send { bytes, .. } => bytes,
                // Answered too late: the request is gone, ask again.
                CmEvent::GrantExpired { .. } => {
                    self.requested = None;
                    continue;
                }
                _ => continue,
            };
            self.requested = None;
            let mut left = usize::try_from(bytes.get()).unwrap_or(usize::MAX);
            let mut sent = 0u64;
            loop {
                let room = left.saturating_sub(DATA_HEADER_LEN).min(self.max_payload);
                if room == 0 {
                    break;
                }
                match fill(cm, room) {
                    Some(payload) if payload.len() <= room => {
                        let n = self.send(&payload);
                        sent += n as u64;
                        left = left.saturating_sub(n);
                    }
                    Some(_) => break,
                    None => {
                        if sent == 0 {
                            self.declined += 1;
                        }
                        break;
                    }
                }
            }
            cm.notify(self.flow, sent).map_err(cm_err)?;
        }
        Ok(())
    }

    /// Sends one datagram; returns the bytes the CM is told of.
    fn send(&mut self, payload: &[u8]) -> usize {
        let now = cm_clock::now();
        let bytes = DATA_HEADER_LEN + payload.len();
        let seq = self.acct.on_queued(bytes);
        DataHeader {
            session: self.session,
            seq,
            ts: wire::timestamp(now),
        }
        .encode(payload, &mut self.out);
        // A full socket buffer or an ICMP error loses the datagram like
        // the network would; the accounting finds it out.
        let _ = self.sock.send(&self.out);
        self.acct.on_departed(now);
        bytes
    }

    fn read_acks(&mut self, cm: &mut Cm) -> io::Result<()> {
        loop {
            let n = match self.sock.recv(&mut self.buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            match wire::decode(&self.buf[..n]) {
                Ok(Packet::Ack(ack)) if ack.session == self.session => {
                    if let Some(fb) = self.acct.on_ack(cm_clock::now(), &ack) {
                        cm.update(self.flow, fb).map_err(cm_err)?;
                    }
                }
                Ok(_) => {}
                Err(_) => {
                    if self.inbox.len() == INBOX {
                        self.inbox.pop_front();
                    }
                    self.inbox.push_back(self.buf[..n].to_vec());
                }
            }
        }
    }

    /// How long until the accounting's retransmission timeout, if data is
    /// in flight.
    pub fn next_timeout(&self) -> Option<StdDuration> {
        let t = self.acct.poll_timeout()?;
        let now = cm_clock::now();
        Some(StdDuration::from_micros(
            t.saturating_since(now).as_micros(),
        ))
    }
}

impl AsFd for AlfChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// One grant to a fresh channel with a peer socket that only counts
    /// what arrives; `fill` records the room it is offered each time.
    fn one_grant(
        mut fill: impl FnMut(usize) -> Option<Vec<u8>>,
    ) -> (Vec<usize>, usize, u64, AlfChannel, Cm) {
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut cm = Cm::embedded(libcm::Config::default()).unwrap();
        let mut ch = AlfChannel::open(&mut cm, peer.local_addr().unwrap()).unwrap();
        ch.request(&mut cm).unwrap();
        let mut rooms = Vec::new();
        let until = std::time::Instant::now() + StdDuration::from_secs(2);
        while rooms.is_empty() && std::time::Instant::now() < until {
            ch.drive(&mut cm, |_, room| {
                rooms.push(room);
                fill(room)
            })
            .unwrap();
        }
        peer.set_read_timeout(Some(StdDuration::from_millis(200)))
            .unwrap();
        let (mut arrived, mut buf) = (0, [0u8; 2048]);
        while peer.recv(&mut buf).is_ok() {
            arrived += 1;
        }
        let in_flight = cm.stat().unwrap().macroflows[0].in_flight;
        (rooms, arrived, in_flight, ch, cm)
    }

    /// sigcomm1999 §3.1: a grant is for "any mtu (or less) bytes", so a
    /// sender of small datagrams sends as many as the grant's bytes hold,
    /// each offered the room that is left, and the CM is told of them all.
    #[test]
    fn a_grant_carries_as_many_small_datagrams_as_its_bytes_hold() {
        const FRAME: usize = 160;
        let (rooms, arrived, in_flight, ch, mut cm) =
            one_grant(|room| (room >= FRAME).then(|| vec![7u8; FRAME]));
        let mtu = cm.mtu(ch.flow()).unwrap() as usize;
        let per = DATA_HEADER_LEN + FRAME;
        let fit = mtu / per;
        assert!(fit > 1, "the test needs several frames per MTU");
        assert_eq!(rooms[0], ch.max_payload());
        assert_eq!(rooms.len(), fit + 1, "{rooms:?}");
        for (i, &r) in rooms.iter().enumerate() {
            assert_eq!(r, (mtu - i * per - DATA_HEADER_LEN).min(ch.max_payload()));
        }
        assert_eq!(arrived, fit);
        assert_eq!(in_flight, (fit * per) as u64);
        assert_eq!(ch.declined(), 0, "a grant partly used is not declined");
        let _ = cm.close(ch.flow());
    }

    /// A payload larger than the room offered is not sent, and a grant
    /// with nothing to send is declined.
    #[test]
    fn an_oversized_payload_is_not_sent_and_an_unused_grant_is_declined() {
        let (rooms, arrived, in_flight, ch, _cm) = one_grant(|room| Some(vec![0u8; room + 1]));
        assert_eq!((rooms.len(), arrived, in_flight), (1, 0, 0));
        let (rooms, arrived, _, ch2, _cm) = one_grant(|_| None);
        assert_eq!((rooms.len(), arrived, ch2.declined()), (1, 0, 1));
        assert_eq!(ch.declined(), 0);
    }
}
