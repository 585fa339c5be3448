//! Calls that wait for the daemon's reply: one, several in one round trip,
//! or a `Stat` listing. Events that arrive meanwhile stay in the inbox, and
//! the application's descriptor is made readable for them.

use cm_ipc::{ToClient, ToDaemon};

use super::DaemonConn;
use crate::error::CmError;

impl DaemonConn {
    /// Send calls that each carry a fresh `seq` (built by `make`) and wait
    /// for all their replies, in order. Events that arrive meanwhile stay in
    /// the inbox.
    pub(crate) fn call_many(
        &mut self,
        n: usize,
        mut make: impl FnMut(usize, u32) -> ToDaemon,
    ) -> Result<Vec<ToClient>, CmError> {
        let mut seqs = Vec::with_capacity(n);
        for i in 0..n {
            let s = self.seq();
            seqs.push(s);
            self.push(&make(i, s))?;
        }
        self.wait_replies(&seqs)
    }

    /// One call with a reply (a refusal is an error).
    pub(crate) fn call(&mut self, make: impl FnOnce(u32) -> ToDaemon) -> Result<ToClient, CmError> {
        let seq = self.seq();
        self.push(&make(seq))?;
        match self.wait_replies(&[seq])?.pop() {
            Some(ToClient::Error { code, .. }) => Err(CmError::Daemon(code)),
            Some(ToClient::Refused { code, why, .. }) => Err(CmError::Refused { code, why }),
            Some(reply) => Ok(reply),
            None => Err(CmError::Disconnected),
        }
    }

    /// Flush, then wait for one reply per `seq`, returned in `seqs` order.
    fn wait_replies(&mut self, seqs: &[u32]) -> Result<Vec<ToClient>, CmError> {
        self.flush()?;
        let mut replies: Vec<Option<ToClient>> = vec![None; seqs.len()];
        let mut got = 0;
        while got < seqs.len() {
            let mut i = 0;
            while i < self.inbox.len() {
                let seq = reply_seq(&self.inbox[i]);
                match seq.and_then(|s| seqs.iter().position(|&x| x == s)) {
                    Some(slot) if replies[slot].is_none() => {
                        replies[slot] = self.inbox.remove(i);
                        got += 1;
                    }
                    _ => i += 1,
                }
            }
            if got < seqs.len() {
                self.block(None)?;
            }
        }
        self.announce_inbox()?;
        replies
            .into_iter()
            .map(|r| r.ok_or(CmError::Disconnected))
            .collect()
    }

    /// After waiting for a reply: events that came meanwhile wait in the
    /// inbox, not in the ring, so make the application's descriptor
    /// readable for them (it may sleep on it without asking again).
    fn announce_inbox(&mut self) -> Result<(), CmError> {
        match &mut self.rings {
            Some(l) if !self.inbox.is_empty() => l.ring_self(),
            _ => Ok(()),
        }
    }

    /// A `Stat`-shaped call: collect replies up to its `StatEnd`.
    pub(crate) fn call_listing(
        &mut self,
        make: impl FnOnce(u32) -> ToDaemon,
    ) -> Result<Vec<ToClient>, CmError> {
        let seq = self.seq();
        self.push(&make(seq))?;
        self.flush()?;
        let mut out = Vec::new();
        loop {
            let mut i = 0;
            while i < self.inbox.len() {
                if reply_seq(&self.inbox[i]) == Some(seq) {
                    match self.inbox.remove(i) {
                        Some(ToClient::StatEnd { .. }) => {
                            self.announce_inbox()?;
                            return Ok(out);
                        }
                        Some(ToClient::Error { code, .. }) => return Err(CmError::Daemon(code)),
                        Some(m) => out.push(m),
                        None => {}
                    }
                } else {
                    i += 1;
                }
            }
            self.block(None)?;
        }
    }
}

/// The `seq` a reply echoes (0 and events: none).
fn reply_seq(m: &ToClient) -> Option<u32> {
    use ToClient as T;
    match *m {
        T::Opened { seq, .. }
        | T::Estimate { seq, .. }
        | T::Mtu { seq, .. }
        | T::Macroflow { seq, .. }
        | T::StatMacroflow { seq, .. }
        | T::StatFlow { seq, .. }
        | T::StatEnd { seq }
        | T::Pong { seq }
        | T::Done { seq }
        | T::Error { seq, .. }
        | T::Refused { seq, .. }
            if seq != 0 =>
        {
            Some(seq)
        }
        _ => None,
    }
}
