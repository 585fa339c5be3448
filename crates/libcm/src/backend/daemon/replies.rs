//! Calls that wait for the daemon's reply: one, several in one round trip,
//! or a `Stat` listing. Events that arrive meanwhile stay in the inbox, and
//! the application's descriptor is made readable for them.

use std::collections::HashMap;

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
    /// Linear in the replies and the events that arrive meanwhile: each
    /// message in the inbox is looked at once (a bulk call of a million
    /// ids must not rescan or shift the inbox per reply).
    fn wait_replies(&mut self, seqs: &[u32]) -> Result<Vec<ToClient>, CmError> {
        self.flush()?;
        let slot_of: HashMap<u32, usize> = seqs.iter().enumerate().map(|(i, &s)| (s, i)).collect();
        let mut replies: Vec<Option<ToClient>> = vec![None; seqs.len()];
        let mut got = 0;
        let deadline = std::time::Instant::now() + self.reply_timeout;
        // Inbox entries before `kept` were looked at and are not ours.
        let mut kept = 0;
        loop {
            if self.inbox.len() > kept {
                let fresh = self.inbox.split_off(kept);
                for m in fresh {
                    match reply_seq(&m).and_then(|s| slot_of.get(&s)) {
                        Some(&slot) if replies[slot].is_none() => {
                            replies[slot] = Some(m);
                            got += 1;
                        }
                        _ => self.inbox.push_back(m),
                    }
                }
                kept = self.inbox.len();
            }
            if got == seqs.len() {
                break;
            }
            self.block_until(deadline)?;
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
        let mut kept = 0;
        let deadline = std::time::Instant::now() + self.reply_timeout;
        loop {
            if self.inbox.len() > kept {
                let fresh = self.inbox.split_off(kept);
                let mut fresh = fresh.into_iter();
                while let Some(m) = fresh.next() {
                    if reply_seq(&m) != Some(seq) {
                        self.inbox.push_back(m);
                        continue;
                    }
                    match m {
                        ToClient::StatEnd { .. } => {
                            self.inbox.extend(fresh);
                            self.announce_inbox()?;
                            return Ok(out);
                        }
                        ToClient::Error { code, .. } => {
                            self.inbox.extend(fresh);
                            return Err(CmError::Daemon(code));
                        }
                        m => out.push(m),
                    }
                }
                kept = self.inbox.len();
            }
            self.block_until(deadline)?;
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
