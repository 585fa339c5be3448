#!/usr/bin/env bash
# Our simulator against ns-3 on five SACK dumbbells, once per NewReno
# ssthresh rule (cm_transport::tcp::SsthreshRule: flightsize, pipe, cwnd):
#
#   ns3/ssthresh-dumbbells.sh            # SACK on both sides, seeds 1..5
#   SACK=0 ns3/ssthresh-dumbbells.sh     # no SACK on either side
#
# Dumbbells (rate / one-way delay / bulk flows), DropTail queue of one BDP
# (rate x 2 x delay), 20 s, IW 2, no delayed ACKs, MSS 1460, flows start at
# U[0, 100 ms): 1M/60ms/2, 10M/60ms/2, 10M/60ms/3, 10M/20ms/4, 3M/35ms/2.
# ns-3 side: ns3/dumbbell.cc --flows --delayMs (built by ns3/build.sh); ours:
# `cm sim` on scenario files generated into target/ns3/ssthresh/ from the
# same settings as experiments/scenarios/ns3-dumbbell-10M-sack.toml.
#
# Prints, per dumbbell, mean total goodput (kbit/s), mean Jain fairness index
# of the per-flow goodputs, and mean bottleneck drops over the seeds, ns-3
# and ours per rule, with ours relative to ns-3.
#
# Environment: SEEDS (default "1 2 3 4 5"), RULES (default "flightsize pipe
# cwnd"), SACK (default 1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
SEEDS="${SEEDS:-1 2 3 4 5}"
RULES="${RULES:-flightsize pipe cwnd}"
SACK="${SACK:-1}"
DUMBBELLS="1000000:60:2 10000000:60:2 10000000:60:3 10000000:20:4 3000000:35:2"
OUT="$ROOT/target/ns3/ssthresh-sack$SACK"
mkdir -p "$OUT"
"$ROOT/ns3/build.sh"
cargo build --release -q -p cm
sack_toml=$([[ "$SACK" == 1 ]] && echo true || echo false)

scenario() { # rate delay flows rule -> path
    local f="$OUT/$1-$2-$3-$4.toml"
    {
        echo "name = \"ssthresh-$1-$2-$3-$4\""
        echo "duration = 20.0"
        echo "seed = 1"
        echo "mss = 1460"
        echo "rcv_wnd = 67108864"
        echo "start_jitter_ms = 100.0"
        echo "[bottleneck]"
        echo "rate_bps = $1"
        echo "delay_ms = $2"
        echo "queue = \"bdp\""
        echo "[access]"
        echo "rate_bps = 100_000_000"
        echo "delay_ms = 1"
        for i in $(seq 1 "$3"); do
            echo "[[flow]]"
            echo "name = \"bulk$i\""
            echo "transport = \"newreno\""
            echo "host = \"left$i\""
            echo "dst = \"right$i\""
            echo "initial_window = 2"
            echo "delayed_ack = false"
            echo "sack = $sack_toml"
            echo "ssthresh = \"$4\""
        done
    } >"$f"
    echo "$f"
}

for d in $DUMBBELLS; do
    IFS=: read -r rate delay flows <<<"$d"
    key="$rate-$delay-$flows"
    : >"$OUT/ns3-$key.jsonl"
    for s in $SEEDS; do
        "$ROOT/target/ns3/dumbbell" --seed="$s" --rate="$rate" --delayMs="$delay" --flows="$flows" \
            --duration=20 --sack="$SACK" >>"$OUT/ns3-$key.jsonl"
    done
    for r in $RULES; do
        f=$(scenario "$rate" "$delay" "$flows" "$r")
        : >"$OUT/ours-$key-$r.jsonl"
        for s in $SEEDS; do
            cargo run --release -q -p cm -- sim "$f" --seed "$s" | python3 -c \
                'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$OUT/ours-$key-$r.jsonl"
        done
    done
done

python3 - "$OUT" "$SACK" "$RULES" $DUMBBELLS <<'PY'
import json, statistics, sys
out, sack, rules, dumbbells = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4:]

def jain(xs):
    s = sum(xs)
    return s * s / (len(xs) * sum(x * x for x in xs)) if s > 0 else float("nan")

def load(path, ours):
    rows = []
    for line in open(path):
        d = json.loads(line)
        g = [float(f["goodput_bps"]) for f in d["flows"]]
        drops = d["bottleneck"]["drops"] if ours else d["bottleneck_drops"]
        rows.append((sum(g), jain(g), float(drops)))
    return [statistics.mean(c) for c in zip(*rows)]

print(f"SACK={sack}: means over seeds; goodput = total kbit/s, Jain over flows, drops at the bottleneck")
print(f"{'dumbbell':<14} {'side':<16} {'goodput':>9} {'Jain':>6} {'drops':>7} {'d goodput':>10} {'d drops':>8}")
for d in dumbbells:
    rate, delay, flows = d.split(":")
    key = f"{rate}-{delay}-{flows}"
    name = f"{int(rate) // 1000000}M/{delay}ms/{flows}"
    ns = load(f"{out}/ns3-{key}.jsonl", False)
    print(f"{name:<14} {'ns-3':<16} {ns[0] / 1e3:>9.1f} {ns[1]:>6.3f} {ns[2]:>7.1f}")
    for r in rules:
        o = load(f"{out}/ours-{key}-{r}.jsonl", True)
        dg = (o[0] - ns[0]) / ns[0]
        dd = (o[2] - ns[2]) / ns[2] if ns[2] else float("nan")
        print(f"{'':<14} {'ours ' + r:<16} {o[0] / 1e3:>9.1f} {o[1]:>6.3f} {o[2]:>7.1f} {dg:>+10.1%} {dd:>+8.1%}")
PY
