//! `cm query <host>`: the caller's macroflow state towards a host (the
//! `cm_query` estimate of cm-implementation-linux §2.1, by destination
//! rather than by flow).

use std::net::{IpAddr, ToSocketAddrs};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::stat_view::{MacroflowView, SocketArg, render_macroflows};

/// Options of `cm query`.
#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// Destination host: an IP address or a name to resolve.
    pub host: String,
    #[command(flatten)]
    pub daemon: SocketArg,
    /// Print JSON: `{"host": ..., "macroflows": [...]}`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct QueryView<'a> {
    host: &'a str,
    macroflows: Vec<MacroflowView>,
}

/// The addresses `host` names.
fn addresses(host: &str) -> Result<Vec<IpAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
    let mut ips: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host:?}"))?
        .map(|a| a.ip())
        .collect();
    ips.sort();
    ips.dedup();
    Ok(ips)
}

/// Run `cm query`; exit status 1 when there is no macroflow to the host.
pub fn run(args: &QueryArgs) -> Result<ExitCode> {
    let ips = addresses(&args.host)?;
    let mut cm = args.daemon.connect()?;
    let mut macroflows = Vec::new();
    for ip in ips {
        macroflows.extend(cm.query_host(ip)?.iter().map(MacroflowView::new));
    }
    macroflows.sort_by_key(|m| m.id);
    let found = !macroflows.is_empty();
    if args.json {
        let v = QueryView {
            host: &args.host,
            macroflows,
        };
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if found {
        print!("{}", render_macroflows(&macroflows));
    } else {
        println!("no macroflow to {}", args.host);
    }
    Ok(if found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
