#!/usr/bin/env bash
# Fuzz the Congestion Manager's handling of untrusted input, one cargo-fuzz
# target after another (CONTRIBUTING.md, "Fuzzing", says what each checks):
#
#   control_decode  the control-socket decoder (cm_ipc::decode_frame for
#                   ToDaemon and ToClient, with an encode/decode round-trip
#                   check)                           CM_FUZZ_SECS (default 60)
#   ring_consume    the daemon's reading of a client's shared-memory ring
#                   (cm_ipc::shm)               CM_FUZZ_RING_SECS (default 30)
#   proto_decode    the CM protocol's decoders and state machines
#                   (cm_proto)                 CM_FUZZ_PROTO_SECS (default 30)
#   session         the daemon serving arbitrary sequences of client
#                   messages from several clients on a simulated clock
#                   (cm_daemon::Harness)     CM_FUZZ_SESSION_SECS (default 30)
#
# Long runs, one line:
#
#   scripts/fuzz.sh --long                      # each target for an hour
#   CM_FUZZ_LONG_SECS=600 scripts/fuzz.sh --long  # ... for 10 minutes each
#   CM_FUZZ_RUNS=1000000 scripts/fuzz.sh        # each for 1e6 executions
#
# CM_FUZZ_RUNS (libFuzzer's -runs=N) replaces the time limits when set.
# CM_FUZZ_MAX_LEN (libFuzzer's -max_len=N) caps the input length (default:
# libFuzzer's, growing to 4096); proto_decode runs about 5,000
# executions/s at 2048 and 1,200/s once its inputs reach 4096.
# CM_FUZZ_TARGETS="session proto_decode" runs only those targets.
#
# Each run reads the checked-in seeds fuzz/seeds/<target>/ (regenerate them
# with `cargo run --bin gen_corpus` in fuzz/) and grows the corpus
# fuzz/corpus/<target>/ (not committed; kept between runs). Exits non-zero
# if the fuzzer finds a crash or a broken invariant; the input is then in
# fuzz/artifacts/<target>/ (replay it: `cargo fuzz run --fuzz-dir fuzz -s
# none <target> <file>`; shrink it: `cargo fuzz tmin ...`).
#
# Runs on STABLE Rust: cargo-fuzz with `-s none` only passes stable rustc
# flags (-Cpasses=sancov-module, -Cllvm-args=-sanitizer-coverage-*,
# --cfg fuzzing, debug assertions), which is all libFuzzer needs for
# coverage feedback. AddressSanitizer (cargo-fuzz's default `-s address`)
# needs `-Zsanitizer`, i.e. nightly, or RUSTC_BOOTSTRAP=1 on a stable
# compiler; it is not used here: cm-ipc has no unsafe code, so ASan would
# add little, and the targets' assertions are the oracle.
#
# Needs: a C++ compiler (libfuzzer-sys builds libFuzzer with the `cc`
# crate: g++ is enough, clang is not needed) and cargo-fuzz from crates.io.
# Installs either if missing (apt needs root, as in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

LONG=""
case "${1:-}" in
  --long) LONG="${CM_FUZZ_LONG_SECS:-3600}" ;;
  "") ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "error: unknown argument $1 (try --long or --help)" >&2
    exit 2
    ;;
esac

CARGO_FUZZ_VERSION=0.13.2

if ! command -v c++ >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq g++
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi
cargo fuzz --version

# fuzz/ is its own workspace with its own lockfile; refuse a stale one.
cargo fetch --locked --manifest-path fuzz/Cargo.toml

run_target() {
  local TARGET="$1" SECS="$2"
  local SEEDS="fuzz/seeds/$TARGET"   # committed seed corpus (read only)
  local CORPUS="fuzz/corpus/$TARGET" # what the fuzzer finds (not committed)
  cargo fuzz build --fuzz-dir fuzz -s none "$TARGET"

  mkdir -p "$CORPUS"
  log="$(mktemp)"
  trap 'rm -f "$log"' EXIT
  # The first corpus dir receives new inputs; the seeds are only read.
  set +e
  local limit=(-max_total_time="$SECS")
  if [ -n "${CM_FUZZ_RUNS:-}" ]; then
    limit=(-runs="$CM_FUZZ_RUNS")
  fi
  if [ -n "${CM_FUZZ_MAX_LEN:-}" ]; then
    limit+=(-max_len="$CM_FUZZ_MAX_LEN")
  fi
  cargo fuzz run --fuzz-dir fuzz -s none "$TARGET" "$CORPUS" "$SEEDS" -- \
    "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    2>&1 | tee "$log" \
    | grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^Done|^stat::|panicked|ERROR|SUMMARY|Test unit written|^Base64'
  status="${PIPESTATUS[0]}"
  set -e

  if [ "$status" -ne 0 ]; then
    echo "error: fuzz target $TARGET failed (exit $status):" >&2
    grep -A8 -m1 'panicked' "$log" >&2 || true
    echo "..." >&2
    tail -n 25 "$log" >&2
    exit "$status"
  fi
  if ! grep -q '^Done [0-9]* runs' "$log"; then
    echo "error: libFuzzer did not report a finished run" >&2
    tail -n 60 "$log" >&2
    exit 1
  fi
  # Coverage at start (seeds only) and at the end, to show the feedback works.
  first="$(grep -m1 -oE 'INITED cov: [0-9]+ ft: [0-9]+' "$log" || true)"
  last="$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n1 || true)"
  runs="$(grep -m1 -oE '^Done [0-9]+ runs in [0-9]+ second\(s\)' "$log" || true)"
  echo "fuzz $TARGET: ${runs#Done } without a crash; start: ${first#INITED }; end: $last"
  rm -f "$log"
}

secs() { echo "${LONG:-$1}"; }
wanted() { [ -z "${CM_FUZZ_TARGETS:-}" ] || [[ " $CM_FUZZ_TARGETS " == *" $1 "* ]]; }

wanted control_decode && run_target control_decode "$(secs "${CM_FUZZ_SECS:-60}")"
wanted ring_consume && run_target ring_consume "$(secs "${CM_FUZZ_RING_SECS:-30}")"
wanted proto_decode && run_target proto_decode "$(secs "${CM_FUZZ_PROTO_SECS:-30}")"
wanted session && run_target session "$(secs "${CM_FUZZ_SESSION_SECS:-30}")"
exit 0
