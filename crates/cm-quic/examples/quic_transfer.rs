//! A QUIC bulk transfer whose sender's congestion control is the CM.
//!
//! ```text
//! cargo run --release -p cm-quic --example quic_transfer -- serve 127.0.0.1:4433 /tmp/cert.der
//! cargo run --release -p cm-quic --example quic_transfer -- fetch 127.0.0.1:4433 /tmp/cert.der 5
//! ```
//!
//! `serve` uses the daemon's CM when `cmd` runs (`$CM_SOCKET`), else an
//! embedded one (`Cm::new`); `serve-newreno` uses quinn's NewReno. `cm
//! stat` shows the server's connections as flows while they run.

use std::net::SocketAddr;

fn usage() -> ! {
    eprintln!(
        "usage: quic_transfer serve|serve-newreno <addr> <cert-out>\n       quic_transfer fetch <addr> <cert> <seconds 1-255>"
    );
    std::process::exit(2)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        usage();
    }
    let addr: SocketAddr = args[1].parse()?;
    let cert = std::path::PathBuf::from(&args[2]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match args[0].as_str() {
        mode @ ("serve" | "serve-newreno") => {
            let cc = if mode == "serve" {
                cm_quic::transfer::Congestion::Cm(cm_quic::CmThread::spawn(libcm::Cm::new)?)
            } else {
                cm_quic::transfer::Congestion::NewReno
            };
            eprintln!(
                "serving on {addr} ({mode}); certificate in {}",
                cert.display()
            );
            rt.block_on(cm_quic::transfer::serve(addr, cc, &cert, || false))?;
        }
        "fetch" => {
            let secs: u8 = args.get(3).map_or(Ok(5), |s| s.parse())?;
            let r = rt.block_on(cm_quic::transfer::fetch(addr, &cert, secs))?;
            println!(
                "{} bytes in {:.2} s: {:.2} Mbit/s",
                r.bytes,
                r.seconds,
                r.bps() / 1e6
            );
        }
        _ => usage(),
    }
    Ok(())
}
