//! Sending: one transfer, several at once, a sequence, or a schedule.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libcm::Cm;

use crate::error::{Result, TtcpError};
use crate::spec::{Observer, Scheduled, SendSpec};
use crate::summary::{Summary, Transport};
use crate::{ccudp, default_cm, linux_tcp, tcpcm};

/// One transfer. TCP/CM uses `cm` (or [`default_cm`] if `None`); Linux TCP
/// ignores it. A lone CC-UDP transfer uses `cm` if given, else an embedded
/// CM of its own ([`crate::ccudp_config`]); CC-UDP transfers among several
/// run on threads of their own, each with its own embedded CM (a `Cm` is
/// not `Send`). The TCP/CM loop batches its calls
/// with `cm.set_autoflush(false)` and leaves `cm` with autoflush on
/// (libcm's default) when it returns.
pub fn send(spec: &SendSpec, cm: Option<&mut Cm>) -> Result<Summary> {
    send_observed(spec, cm, None)
}

/// [`send`], calling `observer` with each progress sample (for a live
/// progress display).
pub fn send_observed(
    spec: &SendSpec,
    cm: Option<&mut Cm>,
    observer: Option<Observer<'_>>,
) -> Result<Summary> {
    let job = Scheduled {
        at: Duration::ZERO,
        spec: spec.clone(),
    };
    let mut v = match send_scheduled_observed(&[job], cm, observer) {
        Ok(v) => v,
        // One transfer: its error without the "transfer 0" wrapper.
        Err(TtcpError::Transfer { error, .. }) => return Err(*error),
        Err(e) => return Err(e),
    };
    v.pop()
        .ok_or_else(|| TtcpError::Invalid("no result".into()))
}

/// Several transfers at once. All TCP/CM transfers run on one loop sharing
/// `cm`, so transfers to the same host share one macroflow; Linux TCP and
/// CC-UDP transfers run on their own threads. Summaries in input order;
/// the first failure (by index) is the error.
pub fn send_concurrent(specs: &[SendSpec], cm: Option<&mut Cm>) -> Result<Vec<Summary>> {
    let jobs: Vec<Scheduled> = specs
        .iter()
        .map(|s| Scheduled {
            at: Duration::ZERO,
            spec: s.clone(),
        })
        .collect();
    send_scheduled(&jobs, cm)
}

/// `count` fresh connections of `spec`, started `interval` apart whether or
/// not the previous one finished (they overlap then: cm-implementation-linux
/// Fig 7's 9 retrievals 500 ms apart). TCP/CM connections share `cm`, so a
/// later one starts from the macroflow's learned window.
pub fn send_sequence(
    spec: &SendSpec,
    count: usize,
    interval: Duration,
    cm: Option<&mut Cm>,
) -> Result<Vec<Summary>> {
    let jobs: Vec<Scheduled> = (0..count)
        .map(|i| Scheduled {
            at: interval.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX)),
            spec: spec.clone(),
        })
        .collect();
    send_scheduled(&jobs, cm)
}

/// Transfers with start offsets (the general form of [`send_concurrent`]
/// and [`send_sequence`]).
pub fn send_scheduled(jobs: &[Scheduled], cm: Option<&mut Cm>) -> Result<Vec<Summary>> {
    send_scheduled_observed(jobs, cm, None)
}

/// [`send_scheduled`] with a progress observer (called for the TCP/CM
/// transfers, and for a lone Linux TCP or CC-UDP transfer started at once).
pub fn send_scheduled_observed(
    jobs: &[Scheduled],
    cm: Option<&mut Cm>,
    mut observer: Option<Observer<'_>>,
) -> Result<Vec<Summary>> {
    for (index, j) in jobs.iter().enumerate() {
        j.spec.validate().map_err(|e| TtcpError::Transfer {
            index,
            error: Box::new(e),
        })?;
    }
    let mut results: Vec<Option<Result<Summary>>> = (0..jobs.len()).map(|_| None).collect();
    // A lone Linux or CC-UDP transfer right now runs on this thread.
    if let [j] = jobs {
        if j.at.is_zero() {
            match &j.spec.transport {
                Transport::LinuxTcp { cc } => {
                    return linux_tcp::send(&j.spec, cc, 0, observer).map(|s| vec![s]);
                }
                Transport::CcUdp => {
                    return ccudp::sender::send(&j.spec, 0, observer, cm).map(|s| vec![s]);
                }
                Transport::TcpCm => {}
            }
        }
    }
    let t0 = Instant::now();
    let mut threads: Vec<(usize, JoinHandle<Result<Summary>>)> = Vec::new();
    let mut cm_jobs = Vec::new();
    for (index, j) in jobs.iter().enumerate() {
        match &j.spec.transport {
            Transport::LinuxTcp { cc } => {
                let (spec, cc, at) = (j.spec.clone(), cc.clone(), j.at);
                let h = std::thread::Builder::new()
                    .name(format!("ttcp-{index}"))
                    .spawn(move || {
                        std::thread::sleep((t0 + at).saturating_duration_since(Instant::now()));
                        linux_tcp::send(&spec, &cc, index, None)
                    })
                    .map_err(|e| TtcpError::io("spawn sender thread", e))?;
                threads.push((index, h));
            }
            Transport::CcUdp => {
                let (spec, at) = (j.spec.clone(), j.at);
                let h = std::thread::Builder::new()
                    .name(format!("ttcp-{index}"))
                    .spawn(move || {
                        std::thread::sleep((t0 + at).saturating_duration_since(Instant::now()));
                        ccudp::sender::send(&spec, index, None, None)
                    })
                    .map_err(|e| TtcpError::io("spawn sender thread", e))?;
                threads.push((index, h));
            }
            Transport::TcpCm => cm_jobs.push(tcpcm::sender::Job {
                index,
                at: j.at.saturating_sub(t0.elapsed()),
                spec: j.spec.clone(),
            }),
        }
    }
    let mut loop_err = None;
    if !cm_jobs.is_empty() {
        let mut own;
        let cm = match cm {
            Some(c) => c,
            None => {
                own = default_cm()?;
                &mut own
            }
        };
        match tcpcm::sender::run(cm, cm_jobs, observer.take()) {
            Ok(rs) => {
                for (i, r) in rs {
                    if let Some(slot) = results.get_mut(i) {
                        *slot = Some(r);
                    }
                }
            }
            Err(e) => loop_err = Some(e),
        }
    }
    for (i, h) in threads {
        let r = h
            .join()
            .unwrap_or_else(|_| Err(TtcpError::Invalid("sender thread panicked".into())));
        if let Some(slot) = results.get_mut(i) {
            *slot = Some(r);
        }
    }
    if let Some(e) = loop_err {
        return Err(e);
    }
    let mut out = Vec::with_capacity(jobs.len());
    for (index, r) in results.into_iter().enumerate() {
        match r {
            Some(Ok(s)) => out.push(s),
            Some(Err(e)) => {
                return Err(TtcpError::Transfer {
                    index,
                    error: Box::new(e),
                });
            }
            None => {
                return Err(TtcpError::Transfer {
                    index,
                    error: Box::new(TtcpError::Invalid("no result".into())),
                });
            }
        }
    }
    Ok(out)
}
