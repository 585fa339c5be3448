#!/usr/bin/env python3
"""Generate docs/experiments.md from the experiments' JSON outputs.

    cargo run --release -p cm -- experiment all --out DIR
    cargo run --release -p cm -- experiment list > DIR/list.txt
    scripts/experiments-doc.py --out-dir DIR --list DIR/list.txt --write docs/experiments.md
    scripts/experiments-doc.py --out-dir DIR --list DIR/list.txt --check docs/experiments.md

Inputs:
  --out-dir DIR   the `<name>.json` files of `cm experiment all` (the simulated
                  experiments; deterministic, so the full run is used)
  --real-dir DIR  the checked-in results of the real-network experiments
                  (default experiments/results/real; they need root and are
                  not deterministic, so they are run by hand and checked in)
  --referee-dir DIR  the checked-in ns-2 referee blocks, `<name>.json` each
                  (default experiments/results/referee, written by
                  `scripts/ns2-referee.sh` with OUT=DIR); a block in an
                  experiment's own JSON (`cm experiment --referee`) wins
  --list FILE     the output of `cm experiment list`: every experiment listed
                  must get a section (one without results gets a placeholder)

Each JSON is {"experiment", "metrics", "paper", "checks", "notes"}. The
hand-written prose the JSON does not carry (the claim in words, the paper's
figure) lives in PROSE below, keyed by experiment name; an experiment with no
entry still gets its section from its JSON. The static sections (the real
path, the ns-3 cross-check) are STATIC_* below.

With --check, exits 1 and prints a unified diff when the checked-in file
differs from what the inputs produce (regenerate with --write), or when an
experiment of --list has no section. Python 3 standard library only.
"""

import argparse
import difflib
import json
import math
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Per experiment: the paper's figure and the claim in words. Order here is
# the order of the sections (experiments not listed follow, by name).
PROSE = {
    "tcp-friendly": {
        "figure": "sigcomm1999 Fig 6, §4.1",
        "claim": "A TCP whose congestion control is delegated to the CM "
        "(TCP/CM) gets the throughput of TCP NewReno at the same loss rate, "
        "from 100 kbit/s to 10 Mbit/s.",
    },
    "sharing": {
        "figure": "cm-implementation-linux Fig 7, §4.3",
        "claim": "Nine sequential 128 KB retrievals on fresh connections: "
        "with the CM, the later ones complete about 40% faster, because the "
        "macroflow remembers the path's window and RTT.",
    },
    "web4": {
        "figure": "sigcomm1999 Fig 14, §5.1",
        "claim": "Four concurrent TCP/CM connections to one host share their "
        "macroflow fairly (Jain 1.0 against NewReno's 0.952) and together "
        "take about one TCP's share.",
    },
    "seq-trace": {
        "figure": "sigcomm1999 Fig 5",
        "claim": "The sequence traces of TCP/CM and TCP NewReno against web "
        "background traffic look alike.",
    },
    "aging": {
        "figure": "sigcomm1999 Fig 12, §4.4",
        "claim": "When feedback is scarce, exponential aging with the minimum "
        "RTT as half-life loses fewer packets than with the smoothed RTT.",
    },
    "scheduler": {
        "figure": "sigcomm1999 Fig 13, §4.6",
        "claim": "Flows of one macroflow that start at different times "
        "converge to equal shares, and weights (1:2:4) apportion the rate.",
    },
    "layered-audio": {
        "figure": "sigcomm1999 Fig 15, §5.2",
        "claim": "A layered audio server on rate callbacks plus a TCP/CM "
        "transfer on one CM together get what one NewReno gets, and the "
        "audio spends most of its time at 80 kbit/s.",
    },
    "real-tcp-friendly": {
        "figure": "cm-implementation-linux Fig 3",
        "claim": "On a real 10 Mbit/s, 60 ms path with random loss, TCP/CM "
        "tracks Linux TCP (Reno without SACK, as in the paper) from 0 to 5% "
        "loss.",
    },
    "real-throughput": {
        "figure": "cm-implementation-linux Figs 4-5",
        "claim": "On an uncongested 100 Mbit/s path, TCP/CM's throughput "
        "matches Linux TCP's; its CPU cost per MB is reported.",
    },
    "real-sharing": {
        "figure": "cm-implementation-linux Fig 7",
        "claim": "Nine sequential 128 KB retrievals on a real 80 ms path: "
        "TCP/CM's later retrievals are about 40% faster than fresh Linux TCP "
        "connections.",
    },
    "collapse": {
        "figure": "transport-selection-middleware Figs 2-3, §3",
        "claim": "Two unresponsive CBR sources whose rates ramp up collapse "
        "the Fig 1 network: the sender whose packets mostly die at a 10 "
        "kbit/s link takes the shared 0.3 Mbit/s link from the other, and the "
        "total falls to about 10 kbit/s; with congestion control (here the "
        "same sources behind AIMD proxies on the CM) the total stays near 0.3 "
        "Mbit/s.",
    },
    "voip-proxy": {
        "figure": "transport-selection-middleware Figs 6-7, Table 1, §4.3",
        "claim": "VoIP-like CBR senders forced through TFRC proxies (MAXQ 1) "
        "keep the Fig 1 network's throughput at what its bottleneck carries "
        "whatever the number of senders, with Table 1's one-way delays; "
        "without proxies the throughput falls as senders are added.",
    },
    "real-collapse": {
        "figure": "transport-selection-middleware Figs 2-3, §3 (real Fig 1 topology)",
        "claim": "On the Fig 1 topology built in network namespaces (cm-netem "
        "topo), two ramping UDP sources waste most of the 0.3 Mbit/s bottleneck "
        "on packets the 10 kbit/s link behind it drops, and the same sources "
        "through CM proxies (AIMD, MAXQ 1) keep the bottleneck busy with "
        "packets that arrive. Datagram sizes vary (120 ± 20 B) so that no "
        "DropTail phase lock decides which branch the full queue serves; the "
        "paper's fall to 1.25 kB/s is such a lock-out of the upper branch.",
    },
    "real-voip-proxy": {
        "figure": "transport-selection-middleware Figs 6-7, Table 1, §4.3 (real Fig 1 topology)",
        "claim": "VoIP senders (120 B at 100/s) through `cm proxy` pairs (TFRC, "
        "MAXQ 1) keep the total at what the network can carry for the offered "
        "load, the drops moving from the routers to the proxies; Table 1's "
        "one-way delays beside ours.",
    },
    "real-layered": {
        "figure": "cm-implementation-linux Figs 8-9, §3.4-3.5 (layered streaming)",
        "claim": "On a path whose rate goes 4 -> 1 -> 2.5 -> 4 Mbit/s beside one "
        "Linux Reno flow, a layered server's layer follows the rate the path "
        "leaves it, both when it reads cm_query at each grant (ALF) and when "
        "it follows rate callbacks; ALF switches layers more often.",
    },
    "real-bw-estimate": {
        "figure": "iscc Fig 5, §VI-B (real T1)",
        "claim": "the packet-bunch capacity samples that 2 and 32 NACK-based AIMD "
        "streams take on an emulated T1 sit near the line rate (tighter with 2 "
        "flows, each sending faster), and the streams' filtered estimates agree.",
    },
    "real-delayed-feedback": {
        "figure": "cm-implementation-linux Fig 10, §4.4",
        "claim": "a receiver that delays its feedback by min(500 acks, 2 s) makes "
        "the bandwidth the CM reports bursty: slow start waits 2 s for the first "
        "report, the rate then moves in the steps of each batch, and once 500 "
        "packets fit in flight the batches come quickly and the stream fills the "
        "path (on a CM without aging; with sigcomm1999's aging the held-back "
        "feedback ages the window away).",
    },
    "real-scalability-t1": {
        "figure": "iscc Fig 6, §VI-C (real T1)",
        "claim": "n NACK-based video streams (cm stream --nack: base layer plus "
        "FGS enhancement, packet bunches, NACKs, capacity samples) of one scheme "
        "share an emulated T1; as n grows, AIMD's, IIAD's and TFRC's loss at the "
        "bottleneck climbs while ISCC(2), running on the capacity measured from "
        "the bunches, keeps it low.",
    },
    "real-vat": {
        "figure": "cm-implementation-linux §3.6, Fig 2 (vat interactive audio)",
        "claim": "vat through the CM, policed to the CM's long-term rate and sent "
        "from a drop-from-head buffer, delays its frames less than the same "
        "sender with a FIFO buffer of the same size at the same load, without "
        "sending more; plain UDP beside them for comparison.",
    },
    "real-wrap": {
        "figure": "transport-selection-middleware §3, §4.3 (an unmodified program)",
        "claim": "An unmodified `iperf3 -u -b 50M` takes a 10 Mbit/s link from "
        "Linux Reno; under `cm wrap` (LD_PRELOAD, MAXQ 1, feedback from the "
        "counting receiver CM) it gets about Reno's share.",
    },
    "real-probe-feedback": {
        "figure": "sigcomm1999 §4.2-4.3",
        "claim": "On a real 10 Mbit/s, 60 ms path with random loss, CC-UDP "
        "whose receiving application sends nothing (feedback from the CM "
        "protocol's probes alone) competes with Linux Reno like a TCP; a "
        "receiver without a CM gets data at once and the sender falls back "
        "to acknowledgements; a restarted receiver is resynchronised by RST.",
    },
    "real-ensemble": {
        "figure": "sigcomm1999 §1, §5.1",
        "claim": "A macroflow of four TCP/CM connections competes like one "
        "TCP: an outside Reno flow keeps about half the bottleneck, against "
        "a fifth next to four Linux connections.",
    },
}

STATIC_REAL = """\
The real-network experiments run the same sans-IO TCP and CM core over real
sockets, on paths that `cm-netem` builds between network namespaces: sender
→ router (kernel `tbf`: rate and DropTail queue) → TUN delay box (user
space, real-time priority) → receiver, with random loss from a classic-BPF
`tc` filter (direct action) at the receiver's ingress. They need root.
`cm experiment real` runs all four and writes `report-real.md`; `--quick`
is the short version the tests run as root. Their results are checked in
under `experiments/results/real/` (JSON, CSV, SVG) and the sections below
are generated from those JSON files. Real runs are not deterministic (the
kernel's random loss, timers, a busy 2-core machine); each JSON's notes say
how it was run. Ctrl-C or SIGTERM ends a run cleanly: the programs it
started are stopped and its namespaces deleted before it exits.

The path measures what it is configured to be
(`cargo run --release -p cm-netem -- selftest`, exit 1 if more than 5% off):
10 Mbit/s, 30 ms, 1% loss gave a rate of 9.997 Mbit/s (−0.03%), an added
delay of 60.16 ms against 60.05 (+0.18%) and 0.989% loss (−1.1%, 535,714
packets); 100 Mbit/s, 5 ms gave 99.93 Mbit/s and 10.12 ms against 10.01. The
delay box forwards about 210,000 small packets per second (two runs of
`cargo run --release -p cm-netem --example delaybox_rate`: 207,000 and
213,000), 25 times what 100 Mbit/s of full-size packets needs, and
1200-byte packets at 959–994 Mbit/s.

```sh
cargo run --release -p cm-netem -- selftest --rate 10mbit --delay 30ms --loss 0.01   # measure a path
cargo run --release -p cm-netem -- up --rate 100mbit --delay 5ms --queue 100pkt      # keep one up until Ctrl-C
cargo run --release -p cm-netem -- cleanup                                           # remove paths of killed runs
```

`cm ttcp` moves bulk data over TCP/CM (the project's TCP over UDP, its
congestion control by an embedded CM or the daemon, `--cm`) or Linux TCP,
ttcp-style, with a progress line and a summary (bytes, seconds,
throughput, retransmissions, CPU); the real experiments use the same
library (`cm-ttcp`):

```sh
cm ttcp recv --listen 0.0.0.0:5001 --transport tcpcm &
cm ttcp send 127.0.0.1:5001 --bytes 100MB --transport tcpcm
cm ttcp recv --listen 0.0.0.0:5002 --transport tcp &
cm ttcp send 127.0.0.1:5002 --bytes 100MB --transport tcp --cc reno
cm ttcp recv --listen 0.0.0.0:5003 --count 1 --out copy.iso &   # --out writes what arrives
cm ttcp send 127.0.0.1:5003 --file debian.iso                   # TCP/CM segments carry the file
```

Congestion-controlled UDP on the same kind of path
(`crates/cm-real/tests/ccudp_path.rs`, 8 Mbit/s, 20 ms each way): a
`CcUdpSocket` sender offering far more than the bottleneck gets 0.92 of its
payload rate with 1.2% loss; a plain UDP socket offering four times the
rate loses 75%.
"""

STATIC_NS3 = """\
## Cross-check against ns-3

`scripts/ns3-crosscheck.sh` runs the same NewReno dumbbell (two bulk flows,
60 ms one way, DropTail queue of one BDP, 20 s) in ns-3.37 and in this
project's simulator over 10 seeds and prints goodput and drops side by side;
as root it installs Debian's `ns3 libns3-dev libgsl-dev`. It passes when
goodput agrees within 10% and drops within 25%.

```sh
scripts/ns3-crosscheck.sh          # SACK on both sides (ns-3's default TCP)
SACK=0 scripts/ns3-crosscheck.sh   # no SACK on either side
scripts/ns3-droptail-bias.sh       # the layered-audio path without the CM
```

| mode | rate | ns-3 goodput / drops | this simulator | Δ goodput | Δ drops |
|---|---|---|---|---|---|
| SACK | 1 Mbit/s | 906.9 kbit/s / 41.1 | 956.0 / 44.0 | +5.4% | +7.1% |
| SACK | 10 Mbit/s | 9072.1 kbit/s / 206.0 | 9402.8 / 206.0 | +3.6% | +0.0% |
| no SACK | 1 Mbit/s | 737.9 / 89.9 | 889.4 / 50.0 | +20.5% | −44.4% |
| no SACK | 10 Mbit/s | 5703.7 / 225.0 | 7118.4 / 255.0 | +24.8% | +13.3% |

The project's TCP (NewReno and TCP/CM alike) has SACK as an option
(`TcpConfig::sack`: RFC 2018 blocks, RFC 6675 recovery; `sack = true` per
flow in a scenario; `cm ttcp send --sack`); the papers' experiments keep it
off, as the papers did. Without SACK, ns-3 does not run RFC 6582 NewReno:
it drives its RFC 6675 scoreboard from emulated SACK and retransmits the
head segment on new ACKs outside recovery (130 spurious copies per run at
1 Mbit/s, 2,503 at 10 Mbit/s). With real SACK on both sides that artefact is
gone and the two simulators agree. `ns3/FINDINGS.md` has the analysis.
Without SACK, ns-2 is the referee instead: each simulated experiment's
section above shows its baseline beside ns-2's (`scripts/ns2-referee.sh`,
[referee.md](referee.md)).

`scripts/ns3-droptail-bias.sh` runs the layered-audio path with no CM (two
NewReno flows, 150 kbit/s CBR and an 80 kbit/s stream of 1000-byte
datagrams) in both simulators: DropTail drops the smooth streams less often
than TCP in ns-3 too (0.40 times TCP's loss rate in ns-3, 0.31 in this
simulator), which is the cause the `layered-audio` notes give for its
unreproduced ratio.
"""


# The checked-in ns-2 referee blocks, by experiment (--referee-dir).
REFEREE = {}


def load_dir(d, key="checks"):
    """{name: json} for every <name>.json in d that has `key` (experiment
    outputs have "checks", referee blocks "conditions")."""
    out = {}
    for p in sorted(pathlib.Path(d).glob("*.json")):
        with open(p, encoding="utf-8") as f:
            doc = json.load(f)
        if isinstance(doc, dict) and key in doc:
            out[doc.get("experiment", p.stem)] = doc
    return out


def read_list(path):
    """[(name, description)] from `cm experiment list` output."""
    items = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.strip().split(None, 1)
            if parts:
                items.append((parts[0], parts[1] if len(parts) > 1 else ""))
    return items


def num(x):
    """A number the way the doc prints it: 3 significant digits, integers whole."""
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        if x == int(x) and abs(x) < 1e15:
            return f"{int(x):,}"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        return f"{x:.3g}"
    return str(x)


def flatten(prefix, v, out):
    """Scalar leaves of nested metrics; lists are summarised by length."""
    if isinstance(v, dict):
        for k in sorted(v):
            flatten(f"{prefix}.{k}" if prefix else k, v[k], out)
    elif isinstance(v, list):
        if v and all(isinstance(e, (int, float)) for e in v) and len(v) <= 6:
            out.append((prefix, ", ".join(num(e) for e in v)))
        else:
            out.append((prefix, f"({len(v)} values in the JSON)"))
    else:
        out.append((prefix, num(v)))


def cell(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def checks_table(doc):
    rows = ["| check | measured | paper | accept | pass |", "|---|---|---|---|---|"]
    for c in doc.get("checks", []):
        ours = c.get("ours")
        ours = f"{ours:.3f}" if isinstance(ours, (int, float)) else str(ours)
        rows.append(
            f"| `{cell(c.get('metric'))}` | {ours} | {cell(c.get('paper'))} | "
            f"{cell(c.get('accept'))} | {'yes' if c.get('pass') else '**no**'} |"
        )
    return "\n".join(rows)


def fmt_metric(metric, v):
    if not isinstance(v, (int, float)):
        return "—"
    if metric == "goodput_bps":
        return f"{v / 1e3:.1f} kbit/s"
    if metric == "completion_s":
        return f"{v:.3f} s"
    return f"{v:.3f}"


def pct(x):
    """A relative difference as a signed percentage; JSON null (ns-2's figure
    was 0) as "—"."""
    return f"{100 * x:+.1f}%" if isinstance(x, (int, float)) else "—"


def one(x):
    """A count with one decimal; JSON null (not measured) as "—"."""
    return f"{x:.1f}" if isinstance(x, (int, float)) else "—"


def verdict(c):
    if c.get("judged") is False:
        return "— (not judged)"
    return "yes" if c.get("pass") else "**no**"


def referee_table(block):
    rows = [
        "| condition | seeds | ours | ns-2 | Δ | drops ours / ns-2 | Δ drops | paper | within 10% / 20% |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in block.get("conditions", []):
        m = c.get("metric")
        rows.append(
            f"| {cell(c.get('condition'))} | {c.get('seeds')} | {fmt_metric(m, c.get('ours'))} | "
            f"{fmt_metric(m, c.get('ns2'))} | {pct(c.get('delta'))} | "
            f"{one(c.get('ours_drops'))} / {one(c.get('ns2_drops'))} | "
            f"{pct(c.get('drops_delta'))} | {cell(c.get('paper_text') or '—')} | "
            f"{verdict(c)} |"
        )
    return "\n".join(rows)


def passed(doc):
    cs = doc.get("checks", [])
    return sum(1 for c in cs if c.get("pass")), len(cs)


def claim_of(name, doc):
    p = PROSE.get(name, {})
    if "claim" in p:
        return p["claim"]
    paper = (doc or {}).get("paper", {})
    return paper.get("claim", "") if isinstance(paper, dict) else ""


def command(name, real):
    if real:
        return f"cargo run --release -p cm -- experiment {name} --out out/   # as root; --quick: short"
    return f"cargo run --release -p cm -- experiment {name} --out out/   # --quick: short"


def section(name, doc, real, desc):
    s = [f"### `{name}`", ""]
    fig = PROSE.get(name, {}).get("figure") or desc
    if fig:
        s += [f"Paper: {fig}.", ""]
    claim = claim_of(name, doc)
    if claim:
        s += [f"Claim: {claim}", ""]
    if doc is None:
        s += ["No results are checked in for this experiment yet.", ""]
        s += ["```sh", command(name, real), "```", ""]
        return "\n".join(s)
    paper = doc.get("paper", {})
    if isinstance(paper, dict):
        leaves = []
        flatten("", {k: v for k, v in paper.items() if k != "claim"}, leaves)
        if leaves:
            s.append("The paper's numbers: " + "; ".join(f"`{k}` {v}" for k, v in leaves) + ".")
            s.append("")
    s += [checks_table(doc), ""]
    leaves = []
    flatten("", doc.get("metrics", {}), leaves)
    if leaves:
        s.append("Metrics: " + "; ".join(f"`{k}` {v}" for k, v in leaves) + ".")
        s.append("")
    if real:
        s += [f"Figure: ![{name}](../experiments/results/real/{name}.svg)", ""]
    else:
        s += [f"Figure: `out/{name}.svg` (with `out/{name}.csv`), written by the command.", ""]
    block = doc.get("referee") or REFEREE.get(name)
    if block:
        s.append(
            f"Referee: the baseline in {block.get('simulator', 'ns-2')} and here, "
            "means over seeds (`scripts/ns2-referee.sh`; docs/referee.md):"
        )
        s += ["", referee_table(block), ""]
    notes = doc.get("notes", [])
    if notes:
        s.append("Notes (from the experiment's JSON):")
        s.append("")
        s += [f"- {cell(n)}" for n in notes]
        s.append("")
    s += ["```sh", command(name, real), "```", ""]
    return "\n".join(s)


def order(names):
    known = [n for n in PROSE if n in names]
    return known + sorted(n for n in names if n not in PROSE)


def summary(entries):
    rows = [
        "| experiment | paper | claim | checks passed | first check (measured vs paper) |",
        "|---|---|---|---|---|",
    ]
    for name, doc, _real, desc in entries:
        fig = PROSE.get(name, {}).get("figure") or desc
        claim = claim_of(name, doc)
        if doc is None:
            rows.append(f"| [`{name}`](#{name}) | {cell(fig)} | {cell(claim)} | no results | |")
            continue
        ok, n = passed(doc)
        head = ""
        if doc.get("checks"):
            c = doc["checks"][0]
            ours = c.get("ours")
            ours = f"{ours:.3f}" if isinstance(ours, (int, float)) else str(ours)
            head = f"`{c.get('metric')}` {ours} vs {c.get('paper')}"
        rows.append(
            f"| [`{name}`](#{name}) | {cell(fig)} | {cell(claim)} | {ok}/{n} | {cell(head)} |"
        )
    return "\n".join(rows)


HEADER = """\
# Experiments

<!-- Generated by scripts/experiments-doc.py; do not edit by hand. The
simulated sections come from `cm experiment all` (full run), the real ones
from experiments/results/real/*.json, the prose from the script. -->

Each experiment reruns one of the papers' claims and checks it: the
simulated ones in `cm-sim` (deterministic: the same numbers on every run),
the real ones over emulated paths between network namespaces (root). A
check that does not pass is shown as **no**, and the notes say why. Every
experiment writes `<name>.csv`, `<name>.svg` and `<name>.json`; `cm
experiment all --out out/` runs all the simulated ones (about 15 seconds on two cores)
and also writes `out/report.md`. `cm experiment list` names them all.

Scenarios are data: `experiments/scenarios/*.toml` give the bottleneck
(rate, delay, queue, loss) or a `[topology]` of named nodes and links, the
flows with their transport (`newreno`, `tcpcm`, `cbr`, `audio`, `web`,
`proxy`), start times, sizes, rates and hosts, the seed and the duration;
`cargo run --release -p cm -- sim FILE` runs one and prints its result as
JSON.

This file is regenerated and checked by `scripts/test.sh`:

```sh
cargo run --release -p cm -- experiment all --out out/
cargo run --release -p cm -- experiment list > out/list.txt
scripts/experiments-doc.py --out-dir out --list out/list.txt --write docs/experiments.md
```
"""


def render(sim, real, listed):
    desc = dict(listed)
    names_sim = [n for n in order(set(sim)) if n not in real]
    names_real = order(set(real))
    # Listed experiments without results get a placeholder section.
    for n, _ in listed:
        if n not in sim and n not in real:
            (names_real if n.startswith("real-") else names_sim).append(n)
    sim_entries = [(n, sim.get(n), False, desc.get(n, "")) for n in names_sim]
    real_entries = [(n, real.get(n), True, desc.get(n, "")) for n in names_real]
    out = [HEADER, "## Summary", "", summary(sim_entries + real_entries), ""]
    out += ["## Simulated experiments", ""]
    out += [section(*e) for e in sim_entries]
    out += ["## Real-network experiments", "", STATIC_REAL]
    out += [section(*e) for e in real_entries]
    out += [STATIC_NS3]
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", required=True, help="`cm experiment all --out` directory")
    ap.add_argument("--real-dir", default=str(ROOT / "experiments/results/real"))
    ap.add_argument("--referee-dir", default=str(ROOT / "experiments/results/referee"))
    ap.add_argument("--list", help="output of `cm experiment list`")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", metavar="FILE", help="write the document here")
    g.add_argument("--check", metavar="FILE", help="exit 1 if FILE differs")
    a = ap.parse_args()

    REFEREE.update(load_dir(a.referee_dir, "conditions"))
    real = load_dir(a.real_dir)
    sim = {k: v for k, v in load_dir(a.out_dir).items() if k not in real}
    if not sim:
        sys.exit(f"no experiment JSON in {a.out_dir}")
    listed = read_list(a.list) if a.list else []
    text = render(sim, real, listed)

    missing = [n for n, _ in listed if f"\n### `{n}`\n" not in text]
    if missing:
        sys.exit(f"experiments without a section: {', '.join(missing)}")

    if a.write:
        pathlib.Path(a.write).write_text(text, encoding="utf-8")
    elif a.check:
        p = pathlib.Path(a.check)
        old = p.read_text(encoding="utf-8") if p.exists() else ""
        if old != text:
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(True), text.splitlines(True), str(p), "generated"
                )
            )
            print(
                f"\n{p} is out of date: regenerate it with "
                "scripts/experiments-doc.py --write (see its header)",
                file=sys.stderr,
            )
            sys.exit(1)
        absent = [n for n, _ in listed if f"\n### `{n}`\n" not in old]
        if absent:
            sys.exit(f"{p} has no section for: {', '.join(absent)}")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
