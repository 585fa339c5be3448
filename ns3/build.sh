#!/usr/bin/env bash
# Builds ns3/<program>.cc (default: dumbbell) against Debian 12's ns-3.37
# packages into target/ns3/<program>: `ns3/build.sh [program]`. Installs the packages first if they are missing and we
# run as root (apt-get); otherwise tells what to install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/target/ns3"
PROG="${1:-dumbbell}"
SRC="$ROOT/ns3/$PROG.cc"
BIN="$OUT/$PROG"
if [[ ! -f "$SRC" ]]; then
    echo "ns3/build.sh: no such program: $SRC" >&2
    exit 3
fi
PKGS=(ns3 libns3-dev libgsl-dev g++ pkg-config)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        echo "ns3/build.sh: installing ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq "${missing[@]}" >&2
    else
        echo "ns3/build.sh: missing packages: ${missing[*]} (run: sudo apt-get install -y ${missing[*]})" >&2
        exit 1
    fi
fi

mkdir -p "$OUT"
if [[ -x "$BIN" && "$BIN" -nt "$SRC" && "$BIN" -nt "$ROOT/ns3/common.h" && "$BIN" -nt "${BASH_SOURCE[0]}" ]]; then
    exit 0 # up to date
fi

# Debian's ns3*.pc files are broken (`-I/usr\;`, duplicated -l flags), so we
# link the libraries by hand: headers are in /usr/include/ns3, libraries are
# /usr/lib/<triplet>/libns3-<module>.so (SONAME .so.37).
LIBS=(-lns3-applications -lns3-internet -lns3-traffic-control -lns3-point-to-point
      -lns3-network -lns3-bridge -lns3-stats -lns3-core)
echo "ns3/build.sh: compiling $SRC -> $BIN" >&2
g++ -O2 -std=c++17 -I/usr/include -o "$BIN.tmp" "$SRC" "${LIBS[@]}"
mv "$BIN.tmp" "$BIN"
