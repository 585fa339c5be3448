//! `cm select`: state requirements and behaviour, print the transport the
//! middleware picks (crate cm-select) and why, in one line.

use anyhow::{Result, anyhow};
use cm_select::{Buffering, Requirements, select};

const EXAMPLES: &str = "\
Levels: require, prefer, no-preference, avoid, prohibit (RFC 9622 §6.2).
Rates are bit/s with k, M, G suffixes; durations take us, ms or s.

Examples:
  cm select
      a reliable ordered stream (TAPS defaults): Linux TCP
  cm select --profile datagram --delay-ms 150 --rate 64k --behaviour app-limited
      voice: CC-UDP with TFRC, 160-byte packets, queue 1
  cm select --profile datagram --behaviour app-limited --steps 32k,64k,128k
      layered media: CC-UDP with binomial SQRT
  cm select --profile datagram --feedback nack --rate 1M
      NACK-based streaming: CC-UDP with ISCC(l=2)
  cm select --rate 8M --behaviour greedy+on-off:on=2s,off=500ms --json
      greedy on/off stream: Linux TCP with a 400000-byte send buffer
  cm select --profile datagram --congestion-control prohibit
      raw UDP (only when congestion control is prohibited)

Impossible or contradictory requirements are an error (exit status 2),
e.g. --reliability require --congestion-control prohibit.";

/// Options of `cm select`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct SelectArgs {
    /// Start from `stream` (TAPS defaults: reliable, ordered) or `datagram`
    /// (reliability and ordering avoided, message boundaries required).
    #[arg(long, default_value = "stream")]
    pub profile: String,
    /// TAPS `reliability`.
    #[arg(long, value_name = "LEVEL")]
    pub reliability: Option<String>,
    /// TAPS `preserveOrder`.
    #[arg(long, value_name = "LEVEL")]
    pub preserve_order: Option<String>,
    /// TAPS `preserveMsgBoundaries`.
    #[arg(long, value_name = "LEVEL")]
    pub preserve_msg_boundaries: Option<String>,
    /// TAPS `congestionControl` (raw UDP only with `prohibit`).
    #[arg(long, value_name = "LEVEL")]
    pub congestion_control: Option<String>,
    /// One-way delay target in milliseconds (delay-sensitive).
    #[arg(long, value_name = "MS", conflicts_with = "delay")]
    pub delay_ms: Option<String>,
    /// One-way delay target with a unit, e.g. 150ms.
    #[arg(long, value_name = "DURATION")]
    pub delay: Option<String>,
    /// Target rate (what an application-limited sender produces), e.g. 64k.
    #[arg(long, value_name = "BIT/S")]
    pub rate: Option<String>,
    /// Minimum usable rate (TAPS `minSendRate`), e.g. 32k.
    #[arg(long, value_name = "BIT/S")]
    pub min_rate: Option<String>,
    /// greedy, app-limited, on-off:on=2s,off=1s; join with `+`.
    #[arg(long, alias = "behavior", value_name = "BEHAVIOUR")]
    pub behaviour: Option<String>,
    /// Layered media: the usable rates, ascending, e.g. 32k,64k,128k.
    #[arg(long, value_name = "RATES", conflicts_with = "bounds")]
    pub steps: Option<String>,
    /// Adaptive media: the usable range, e.g. 32k..256k.
    #[arg(long, value_name = "MIN..MAX")]
    pub bounds: Option<String>,
    /// Loss feedback: ack (per packet) or nack (receivers report losses).
    #[arg(long, value_name = "ack|nack")]
    pub feedback: Option<String>,
    /// Print JSON instead of the line.
    #[arg(long)]
    pub json: bool,
}

/// The requirements the flags state, in the cm-select text form's order.
fn requirements(a: &SelectArgs) -> Result<Requirements> {
    let mut r = Requirements::stream();
    let flags = [
        ("profile", Some(&a.profile)),
        ("reliability", a.reliability.as_ref()),
        ("preserve-order", a.preserve_order.as_ref()),
        (
            "preserve-msg-boundaries",
            a.preserve_msg_boundaries.as_ref(),
        ),
        ("congestion-control", a.congestion_control.as_ref()),
        ("delay-ms", a.delay_ms.as_ref()),
        ("delay", a.delay.as_ref()),
        ("rate", a.rate.as_ref()),
        ("min-rate", a.min_rate.as_ref()),
        ("behaviour", a.behaviour.as_ref()),
        ("steps", a.steps.as_ref()),
        ("bounds", a.bounds.as_ref()),
        ("feedback", a.feedback.as_ref()),
    ];
    for (key, value) in flags {
        if let Some(v) = value {
            r.set(key, v).map_err(|e| anyhow!("--{key}: {e}"))?;
        }
    }
    Ok(r)
}

/// Run `cm select`.
pub fn run(a: &SelectArgs) -> Result<()> {
    let req = requirements(a)?;
    let c = select(&req)?;
    if a.json {
        let buffering = match c.buffering {
            Buffering::Default => serde_json::json!({"kind": "default"}),
            Buffering::Packets(n) => serde_json::json!({"kind": "packets", "packets": n}),
            Buffering::Bytes(b) => serde_json::json!({"kind": "bytes", "bytes": b}),
        };
        let v = serde_json::json!({
            "transport": c.transport.name(),
            "controller": c.controller.map(|c| c.name()),
            "controller_spec": c.controller_spec(),
            "packet_size": c.packet_size,
            "buffering": buffering,
            "nodelay": c.nodelay,
            "reason": c.reason(),
            "summary": c.summary(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{c}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: SelectArgs,
    }

    fn choose(args: &[&str]) -> Result<cm_select::Choice> {
        let cli = Cli::try_parse_from(std::iter::once("select").chain(args.iter().copied()))?;
        Ok(select(&requirements(&cli.a)?)?)
    }

    #[test]
    fn flags_reach_the_selection() {
        let c = choose(&[
            "--profile",
            "datagram",
            "--delay-ms",
            "150",
            "--rate",
            "64k",
            "--behaviour",
            "app-limited",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.summary(),
            "transport=ccudp controller=tfrc:s=176 packet=160 queue=1p"
        );
        let c = choose(&["--profile", "datagram", "--steps", "32k,64k,128k"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.controller, Some(cm_select::Controller::Sqrt));
    }

    #[test]
    fn bad_flags_are_errors() {
        for bad in [
            &["--reliability", "maybe"][..],
            &["--rate", "fast"],
            &[
                "--reliability",
                "require",
                "--congestion-control",
                "prohibit",
            ],
            &["--steps", "1k", "--bounds", "1k..2k"],
        ] {
            assert!(choose(bad).is_err(), "{bad:?}");
        }
    }
}
