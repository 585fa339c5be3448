#!/usr/bin/env bash
# Does a DropTail queue of one bandwidth-delay product drop smooth
# constant-rate traffic less often than TCP's bursts? Runs the same path in
# ns-3.37 (ns3/droptail_bias.cc) and in our simulator
# (experiments/scenarios/droptail-bias.toml): 0.5 Mbit/s, 60 ms one way,
# two NewReno (SACK) bulk flows, 150 kbit/s CBR and an 80 kbit/s "audio"
# stream of 1000-byte datagrams, 60 s, seeds 1..10; once with the 7500-byte
# queue of the layered-audio experiment and once with a 5-packet queue
# (where the two simulators admit packets alike). Prints each flow's mean
# loss rate (dropped / offered at the bottleneck) side by side.
#
# This is the evidence behind the layered-audio finding (sigcomm1999 §5.2,
# Fig 15; the experiment's notes): the CM host's audio is a smooth stream, the
# CM backs off only for the losses its flows see, and DropTail drops smooth
# streams several times less often than TCP.
#
#   scripts/ns3-droptail-bias.sh
#
# Environment: SEEDS="1 2 3" (default 1..10).
# Exit status: 0 = both simulators drop the smooth streams (CBR and audio
# together) at most half as often as TCP, in both queue modes; 1 = not;
# other = build/run error.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
SEEDS="${SEEDS:-$(seq -s ' ' 1 10)}"
OUT="$ROOT/target/ns3/droptail-bias"
mkdir -p "$OUT"

echo "==> building the ns-3 program (ns3/build.sh droptail_bias) and ours (cargo build -p cm)"
"$ROOT/ns3/build.sh" droptail_bias
cargo build --release -q -p cm
NS3_BIN="$ROOT/target/ns3/droptail_bias"
CM_BIN="$ROOT/target/release/cm"
SCEN="$ROOT/experiments/scenarios/droptail-bias.toml"
# The packet-limited variant: the same file with queue_packets = 5.
sed 's/^queue_bytes = 7500$/queue_packets = 5/' "$SCEN" >"$OUT/droptail-bias-5p.toml"
grep -q '^queue_packets = 5$' "$OUT/droptail-bias-5p.toml"

for mode in bytes packets; do
    if [[ $mode == bytes ]]; then
        ns3_arg="--queuePackets=0"
        scen="$SCEN"
    else
        ns3_arg="--queuePackets=5"
        scen="$OUT/droptail-bias-5p.toml"
    fi
    echo "==> queue in $mode, seeds: $SEEDS"
    for s in $SEEDS; do
        "$NS3_BIN" --seed="$s" "$ns3_arg" >"$OUT/ns3-$mode-$s.json"
        "$CM_BIN" sim "$scen" --seed "$s" >"$OUT/ours-$mode-$s.json"
    done
done

python3 - "$OUT" "$SEEDS" <<'EOF'
import json, sys
out, seeds = sys.argv[1], sys.argv[2].split()
ok = True
for mode, label in (("bytes", "7500-byte queue"), ("packets", "5-packet queue")):
    rows = {}
    for side in ("ns3", "ours"):
        acc = {}
        for s in seeds:
            d = json.load(open(f"{out}/{side}-{mode}-{s}.json"))
            for f in d["flows"]:
                if side == "ns3":
                    offered, dropped = f["offered"], f["dropped"]
                else:
                    offered, dropped = f["sent_packets"], f["dropped_packets"]
                a = acc.setdefault(f["name"], [0, 0, 0.0])
                a[0] += offered
                a[1] += dropped
                a[2] += f["goodput_bps"] / len(seeds)
        rows[side] = acc
    print(f"\n{label}: loss = dropped / offered at the bottleneck, over {len(seeds)} seeds of 60 s")
    print(f"{'flow':8} {'ns-3 loss':>10} {'ours loss':>10} {'ns-3 kbit/s':>12} {'ours kbit/s':>12}")
    for name in ("tcp1", "tcp2", "cbr", "audio"):
        n, o = rows["ns3"][name], rows["ours"][name]
        print(f"{name:8} {n[1]/n[0]:10.3%} {o[1]/o[0]:10.3%} {n[2]/1e3:12.1f} {o[2]/1e3:12.1f}")
    for side in ("ns3", "ours"):
        a = rows[side]
        tcp = (a["tcp1"][1] + a["tcp2"][1]) / (a["tcp1"][0] + a["tcp2"][0])
        smooth = (a["cbr"][1] + a["audio"][1]) / (a["cbr"][0] + a["audio"][0])
        verdict = smooth * 2 <= tcp
        ok &= verdict
        print(f"  {side}: smooth streams {smooth:.3%} vs TCP {tcp:.3%} = {smooth/tcp:.2f}x "
              f"({'at most half: biased against TCP' if verdict else 'NOT at most half'})")
print("\nPASS: both simulators' DropTail drops the smooth streams at most half as often as TCP"
      if ok else "\nFAIL: see above")
sys.exit(0 if ok else 1)
EOF
