#!/usr/bin/env bash
# ns-2 (the papers' own simulator) as referee of the simulated figures: runs
# the baseline half of every simulated experiment (NewReno with and without
# SACK, web-like and CBR sources) in ns-2.35 and in this simulator, over the
# same scenarios (the Tcl is generated from the experiments' own scenario
# values: crates/cm-experiments/src/ns2/tcl.rs), and prints ours, ns-2's and
# the paper's figure side by side with the deltas (`cm referee`).
#
#   scripts/ns2-referee.sh            # full: every condition, 10 seeds, with and without SACK
#   scripts/ns2-referee.sh --quick    # the tests' variant: short scenarios, 2 seeds
#   OUT=dir scripts/ns2-referee.sh    # also write referee.md and <experiment>.json there
#   CHECK=1 scripts/ns2-referee.sh    # exit 1 unless every condition is within
#                                     # 10% (metric) and 20% (drops) of ns-2
#
# Installs Debian's ns2 package when `ns` is missing and this runs as root.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

if ! command -v "${CM_NS2:-ns}" >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]]; then
        echo "ns2-referee: installing ns2 (apt-get)" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq ns2 >&2
    else
        echo "ns2-referee: ns-2 is missing (run: sudo apt-get install -y ns2)" >&2
        exit 3
    fi
fi

args=(--sack)
[[ "${1:-}" == "--quick" ]] && args+=(--quick)
[[ -n "${OUT:-}" ]] && args+=(--out "$OUT")
[[ "${CHECK:-0}" == 1 ]] && args+=(--check)
cargo build --release --locked -q -p cm
exec "$ROOT/target/release/cm" referee "${args[@]}"
