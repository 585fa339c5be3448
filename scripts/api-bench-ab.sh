#!/usr/bin/env bash
# A/B of the libcm API benchmark (crates/libcm/benches/api_overhead/)
# between this working tree and another revision, at 1200 B.
#
#   scripts/api-bench-ab.sh REV [ROUNDS] [VARIANTS]
#
# REV is built in a temporary git worktree with *this* tree's benchmark
# files copied in, so both sides measure the same way and only the code
# under test differs (REV's libcm must offer what the file calls). Then the
# two binaries run alternately, ROUNDS times each (default 4), on VARIANTS
# (CM_BENCH_ONLY syntax, default alf/shm,buffered/shm,alf-bulk/shm): every
# run is itself 5 pairs of raw UDP then the variant. Printed: per side and
# variant, the median, lower and upper quartile of all its pairs' ratios
# (variant throughput / raw UDP throughput of the run just before it).
#
# Against HEAD (identical code both sides) it shows the machine's noise
# floor: medians 0.03-0.05 apart with 20 pairs on the 2-core VM here.
set -euo pipefail

rev=${1:?usage: scripts/api-bench-ab.sh REV [ROUNDS] [VARIANTS]}
rounds=${2:-4}
variants=${3:-alf/shm,buffered/shm,alf-bulk/shm}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

bench_binary() { # $1: source tree, $2: target dir -> path of the bench binary
    local out path
    out=$(cd "$1" && CARGO_TARGET_DIR=$2 cargo bench -p libcm --bench api_overhead --no-run 2>&1) || {
        echo "$out" >&2
        echo "api-bench-ab: the benchmark does not build in $1" >&2
        exit 1
    }
    path=$(echo "$out" | grep -o '(.*api_overhead-[0-9a-f]*)' | tr -d '()' | head -1)
    [ -n "$path" ] || { echo "api-bench-ab: no benchmark binary in cargo's output" >&2; exit 1; }
    case $path in /*) echo "$path" ;; *) echo "$1/$path" ;; esac
}

echo "building $rev (with this tree's benchmark files) ..." >&2
git -C "$root" worktree add -q --detach "$work/tree" "$rev"
rm -rf "$work/tree/crates/libcm/benches/api_overhead" "$work/tree/crates/libcm/benches/api_overhead.rs"
cp -r "$root/crates/libcm/benches/api_overhead" "$work/tree/crates/libcm/benches/"
old=$(bench_binary "$work/tree" "$work/target")
echo "building this tree ..." >&2
new=$(bench_binary "$root" "$root/target")
cp "$new" "$work/new"
cp "$old" "$work/old"

for r in $(seq 1 "$rounds"); do
    for side in old new; do
        echo "round $r/$rounds: $side" >&2
        CM_BENCH_SIZE=1200 CM_BENCH_ONLY=$variants "$work/$side" --bench 2>&1 |
            awk -v side="$side" '$2 == "B" { print side, $3, $4 }' >>"$work/runs"
    done
done

label_old="$rev"
label_new="this tree"
awk -v lo="$label_old" -v ln="$label_new" '
    $2 == "raw-udp" { base[$1] = $3; next }
    { key = $1 " " $2; n[key]++; r[key, n[key]] = base[$1] / $3 }
    END {
        for (key in n) {
            m = n[key]
            for (i = 1; i <= m; i++) v[i] = r[key, i]
            for (i = 2; i <= m; i++) { x = v[i]; j = i - 1; while (j >= 1 && v[j] > x) { v[j + 1] = v[j]; j-- } v[j + 1] = x }
            split(key, k, " ")
            printf "%-14s %-10s pairs %3d  median %.3f  quartiles %.3f-%.3f\n", k[2], (k[1] == "old" ? lo : ln), m, v[int(m / 2) + 1], v[int(m / 4) + 1], v[int(3 * m / 4) + 1]
        }
    }' "$work/runs" | sort
