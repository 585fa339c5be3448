//! Loopback throughput and CPU per MB: TCP/CM (embedded CM, or the daemon
//! at $CM_SOCKET) vs Linux TCP. Loopback is CPU-bound: this measures
//! per-packet cost, not a network.
//!
//! `cargo run --release -p cm-ttcp --example loopback_bench -- [MB] [tcpcm|reno|cubic|all]`
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use cm_ttcp::{Receiver, ReceiverOptions, SendSpec, Transport, cm_config, send};

fn run(t: &Transport, bytes: u64) -> anyhow::Result<()> {
    let rx = Receiver::bind("127.0.0.1:0".parse()?, t, ReceiverOptions::default())?;
    let dst = rx.local_addr();
    let h = rx.spawn();
    let mut cm = match std::env::var_os("CM_SOCKET") {
        Some(p) => libcm::Cm::connect(p)?,
        None => libcm::Cm::embedded(cm_config())?,
    };
    let spec = SendSpec::new(dst, bytes, t.clone()).progress(Duration::from_millis(100));
    let s = send(&spec, Some(&mut cm))?;
    std::thread::sleep(Duration::from_millis(50));
    let r = h.stop()?;
    println!("send: {s}  ({:.4} cpu-s/MB)", s.cpu_per_mb());
    if let Some(d) = &s.tcpcm {
        println!(
            "      segments {} timeouts {} fast-rexmits {} srtt {:?}",
            d.segments_sent, d.timeouts, d.fast_retransmits, d.srtt_s
        );
    }
    for x in r {
        println!("recv: {x}  ({:.4} cpu-s/MB)", x.cpu_per_mb());
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mb: u64 = args.get(1).map_or(Ok(200), |s| s.parse())?;
    let which = args.get(2).map_or("all", String::as_str);
    let bytes = mb * 1_000_000;
    let ts: Vec<Transport> = match which {
        "tcpcm" => vec![Transport::TcpCm],
        "all" => vec![Transport::TcpCm, Transport::linux("reno")],
        cc => vec![Transport::linux(cc)],
    };
    for t in &ts {
        run(t, bytes)?;
    }
    Ok(())
}
