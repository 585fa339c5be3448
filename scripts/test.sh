#!/usr/bin/env bash
# The project's test command (README "Run the tests"); .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

step() { printf '\n==> %s\n' "$*"; }

step "what the tests need (scripts/setup.sh: installs only what is missing)"
./scripts/setup.sh

step "cm-core stays sans-IO (no clock, sockets or global RNG)"
if grep -rnE 'Instant::now|SystemTime|std::net|thread_rng' crates/cm-core/src; then
  echo "error: cm-core must not read clocks, open sockets or use a global RNG" >&2
  exit 1
fi
echo ok

step "layout: no file over 600 lines (800 in tests/), no import cycle between modules"
python3 scripts/file-lengths.py
python3 scripts/module-cycles.py

step "rustfmt"
cargo fmt --all -- --check

step "clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "tests (property tests at ${PROPTEST_CASES:=10000} cases each)"
export PROPTEST_CASES
# The LD_PRELOAD library is a cdylib, which `cargo test` does not build;
# cm-wrap's and real-wrap's tests preload it from target/release.
cargo build --release --locked -p cm-wrap
# Doc tests first: they take seconds, and cargo runs them only after every
# test binary (and again there, for a few seconds).
cargo test --workspace --release --locked --doc
cargo test --workspace --release --locked

step "libcm's tokio adapter (feature tokio): awaited grants, embedded and daemon"
cargo clippy -p libcm --features tokio --all-targets --locked -- -D warnings
cargo test -p libcm --features tokio --release --locked --test tokio_adapter

step "doc tests and docs build"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

step "docs/experiments.md is what scripts/experiments-doc.py makes of the experiments"
# The simulated experiments are deterministic and take about 15 seconds in
# full; the real ones come from experiments/results/real (checked in).
exp_out=target/experiments-doc
rm -rf "$exp_out"
if ! cargo run --release --locked -q -p cm -- experiment all --out "$exp_out" >"$exp_out.log" 2>&1; then
  cat "$exp_out.log" >&2
  exit 1
fi
cargo run --release --locked -q -p cm -- experiment list >"$exp_out/list.txt"
python3 scripts/experiments-doc.py --out-dir "$exp_out" --list "$exp_out/list.txt" \
  --check docs/experiments.md
echo ok

step "ns-2 referee: the simulated figures' baselines in ns-2 and here, side by side (full, ~40 s)"
./scripts/ns2-referee.sh

step "the README's short commands, as written (daemon + cm flow + cm stat, CC-UDP example, C example)"
./scripts/readme-commands.sh

step "benchmark (quick): request/grant/notify/update cycle"
cargo bench -p cm-core --bench cycle --locked -- --quick

step "benchmark (quick): simulator events per second"
CM_SIM_BENCH_SECS=10 cargo bench -p cm-sim --bench events --locked

step "benchmark: the daemon's cost per ALF packet against the core's (frames in, grants out)"
cargo bench -p cm-daemon --bench calls --locked

step "benchmark (quick): API overhead vs raw UDP on loopback (cm-implementation-linux Fig 6)"
CM_BENCH_QUICK=1 cargo bench -p libcm --bench api_overhead --locked

step "benchmark (quick): the data path, every transport against raw UDP and Linux TCP (cm ttcp bench)"
cargo build --release --locked -q -p cm-daemon
cargo run --release --locked -q -p cm -- ttcp bench --bytes 100MB --datagrams 100000 --repeat 1

step "fuzz: control-message decoder (${CM_FUZZ_SECS:-60} s)"
./scripts/fuzz.sh
