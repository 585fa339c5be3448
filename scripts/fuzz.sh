#!/usr/bin/env bash
# Fuzz the control-socket decoder (cm_ipc::decode_frame for ToDaemon and
# ToClient, with an encode/decode round-trip check) for CM_FUZZ_SECS seconds
# (default 60), then the daemon's reading of a client's shared-memory ring
# (cm_ipc::shm, ring_consume) for CM_FUZZ_RING_SECS (default 30). Exits
# non-zero if the fuzzer finds a crash or a round-trip mismatch; the input
# is then in fuzz/artifacts/<target>/. Then the CM protocol's decoders and
# state machines (cm_proto, proto_decode) for CM_FUZZ_PROTO_SECS (default 30).
#
# Runs on STABLE Rust: cargo-fuzz with `-s none` only passes stable rustc
# flags (-Cpasses=sancov-module, -Cllvm-args=-sanitizer-coverage-*,
# --cfg fuzzing, debug assertions), which is all libFuzzer needs for
# coverage feedback. AddressSanitizer (cargo-fuzz's default `-s address`)
# needs `-Zsanitizer`, i.e. nightly, or RUSTC_BOOTSTRAP=1 on a stable
# compiler; it is not used here: cm-ipc has no unsafe code, so ASan would
# add little, and the round-trip assertions are the oracle.
#
# Needs: a C++ compiler (libfuzzer-sys builds libFuzzer with the `cc`
# crate: g++ is enough, clang is not needed) and cargo-fuzz from crates.io.
# Installs either if missing (apt needs root, as in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

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
  local SEEDS="fuzz/corpus/$TARGET"            # committed seed corpus (read only)
  local CORPUS="fuzz/corpus-generated/$TARGET" # what the fuzzer finds (not committed)
  cargo fuzz build --fuzz-dir fuzz -s none "$TARGET"

  mkdir -p "$CORPUS"
  log="$(mktemp)"
  trap 'rm -f "$log"' EXIT
  # The first corpus dir receives new inputs; the seeds are only read.
  set +e
  cargo fuzz run --fuzz-dir fuzz -s none "$TARGET" "$CORPUS" "$SEEDS" -- \
    -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
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
  echo "fuzz $TARGET: ${SECS}s without a crash; start: ${first#INITED }; end: $last"
  rm -f "$log"
}

run_target control_decode "${CM_FUZZ_SECS:-60}"
run_target ring_consume "${CM_FUZZ_RING_SECS:-30}"
run_target proto_decode "${CM_FUZZ_PROTO_SECS:-30}"
