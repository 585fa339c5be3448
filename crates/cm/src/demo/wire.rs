//! The demo's datagrams: data (flow, sequence, send time, padding to the
//! granted size) and per-packet acknowledgements echoing the send time.

/// Bytes before the payload of a data datagram / the size of an ack.
pub const DATA_HEADER: usize = 23;
const MAGIC: [u8; 2] = *b"CM";
const DATA: u8 = 1;
const ACK: u8 = 2;

/// A data datagram's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Data {
    pub flow: u32,
    pub seq: u64,
    pub sent_us: u64,
}

/// An acknowledgement: `len` bytes of `flow`'s packet `seq` passed the
/// bottleneck; `echo_us` is that packet's send time (for an RTT sample).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    pub flow: u32,
    pub seq: u64,
    pub echo_us: u64,
    pub len: u32,
}

fn header(buf: &mut Vec<u8>, kind: u8, flow: u32, seq: u64, us: u64) {
    buf.clear();
    buf.extend_from_slice(&MAGIC);
    buf.push(kind);
    buf.extend_from_slice(&flow.to_be_bytes());
    buf.extend_from_slice(&seq.to_be_bytes());
    buf.extend_from_slice(&us.to_be_bytes());
}

fn fields(buf: &[u8], kind: u8) -> Option<(u32, u64, u64)> {
    if buf.len() < DATA_HEADER || buf[..2] != MAGIC || buf[2] != kind {
        return None;
    }
    let flow = u32::from_be_bytes(buf[3..7].try_into().ok()?);
    let seq = u64::from_be_bytes(buf[7..15].try_into().ok()?);
    let us = u64::from_be_bytes(buf[15..23].try_into().ok()?);
    Some((flow, seq, us))
}

impl Data {
    /// Encode into `buf`, zero-padded to `len` bytes (at least the header).
    pub fn encode(&self, len: usize, buf: &mut Vec<u8>) {
        header(buf, DATA, self.flow, self.seq, self.sent_us);
        buf.resize(len.max(DATA_HEADER), 0);
    }

    /// Decode; `None` for anything that is not a demo data datagram.
    pub fn decode(buf: &[u8]) -> Option<Data> {
        let (flow, seq, sent_us) = fields(buf, DATA)?;
        Some(Data { flow, seq, sent_us })
    }
}

impl Ack {
    /// Encode into `buf`.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        header(buf, ACK, self.flow, self.seq, self.echo_us);
        buf.extend_from_slice(&self.len.to_be_bytes());
    }

    /// Decode; `None` for anything that is not a demo ack.
    pub fn decode(buf: &[u8]) -> Option<Ack> {
        let (flow, seq, echo_us) = fields(buf, ACK)?;
        let len = u32::from_be_bytes(buf.get(23..27)?.try_into().ok()?);
        Some(Ack {
            flow,
            seq,
            echo_us,
            len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let mut b = Vec::new();
        let d = Data {
            flow: 7,
            seq: 1 << 40,
            sent_us: 99,
        };
        d.encode(1460, &mut b);
        assert_eq!(b.len(), 1460);
        assert_eq!(Data::decode(&b), Some(d));
        assert_eq!(Ack::decode(&b), None);
        let a = Ack {
            flow: 3,
            seq: 5,
            echo_us: 6,
            len: 1460,
        };
        a.encode(&mut b);
        assert_eq!(Ack::decode(&b), Some(a));
        assert_eq!(Data::decode(&b[..5]), None);
        assert_eq!(Ack::decode(&b[..25]), None);
    }
}
