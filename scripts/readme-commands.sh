#!/usr/bin/env bash
# Runs the README's short commands as they are written there (each is first
# looked up verbatim in README.md, so the README cannot drift from what is
# run): the daemon with `cm flow` and `cm stat`, the CC-UDP example, the C
# example, `cm demo --help`, one simulated scenario, `cm select`, the
# build of `cm wrap`, `cm vat` and `cm stream` (layered and `--nack`), the
# QUIC example. The demo itself, the
# experiments, the benchmarks and the root-only commands have their own
# steps in scripts/test.sh. Bounded: every command but the daemon has a
# timeout, and the daemon is stopped on every exit.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

in_readme() {
  grep -qF -- "$1" README.md || { echo "error: not in README.md as written: $1" >&2; exit 1; }
  printf '$ %s\n' "$1"
}
run() {
  in_readme "$1"
  timeout 300 bash -c "$1"
}

daemon_pid=""
cleanup() {
  pkill -f 'release/cmd --socket /tmp/cm.sock' 2>/dev/null || true
  [ -n "$daemon_pid" ] && wait "$daemon_pid" 2>/dev/null || true
  rm -f alf_sender
}
trap cleanup EXIT

# The daemon block: the daemon, a flow through it, and cm stat.
timeout 900 cargo build --release --locked -q -p cm-daemon -p cm
in_readme 'cargo run --release --bin cmd -- --socket /tmp/cm.sock &'
cargo run --release --locked -q --bin cmd -- --socket /tmp/cm.sock &
daemon_pid=$!
for _ in $(seq 100); do [ -S /tmp/cm.sock ] && break; sleep 0.1; done
[ -S /tmp/cm.sock ] || { echo "error: the daemon did not create /tmp/cm.sock" >&2; exit 1; }
in_readme 'CM_SOCKET=/tmp/cm.sock cargo run --release -p cm -- flow 127.0.0.1:9201 --secs 5 &'
CM_SOCKET=/tmp/cm.sock timeout 60 cargo run --release --locked -q -p cm -- flow 127.0.0.1:9201 --secs 5 >/tmp/cm-readme-flow.log 2>&1 &
flow_pid=$!
sleep 1
run 'CM_SOCKET=/tmp/cm.sock cargo run --release -p cm -- stat'
wait "$flow_pid" || { cat /tmp/cm-readme-flow.log >&2; exit 1; }
tail -n 3 /tmp/cm-readme-flow.log

run 'cargo run --release -p libcm --example ccudp_pair'
run 'cargo build --release -p cm-ffi'
run 'cc -I crates/cm-ffi/include crates/cm-ffi/examples/c/alf_sender.c target/release/libcm.a -lpthread -ldl -lm -lgcc_s -o alf_sender && ./alf_sender 400'
run 'cargo run --release -p cm -- demo --help' >/dev/null
run 'cargo run --release -p cm -- sim experiments/scenarios/web4-cm.toml' >/dev/null
run 'cargo run --release -p cm -- select --profile datagram --delay-ms 150 --rate 64k --behaviour app-limited'
run 'cargo build --release -p cm -p cm-wrap'

# The vat pair: the receiver stops at the sender's end message.
in_readme 'cargo run --release -p cm -- vat recv --listen 127.0.0.1:5004 &'
timeout 60 cargo run --release --locked -q -p cm -- vat recv --listen 127.0.0.1:5004 >/tmp/cm-readme-vat.json 2>/dev/null &
vat_pid=$!
sleep 1
run 'cargo run --release -p cm -- vat send --to 127.0.0.1:5004 --secs 10' >/dev/null
wait "$vat_pid"
grep -q '"frames": *[1-9]' /tmp/cm-readme-vat.json || { echo "error: cm vat recv got no frames" >&2; cat /tmp/cm-readme-vat.json >&2; exit 1; }

# The stream pair: the client stops 3 s after the server's last packet.
in_readme 'cargo run --release -p cm -- stream play --listen 127.0.0.1:5020 &'
timeout 60 cargo run --release --locked -q -p cm -- stream play --listen 127.0.0.1:5020 >/tmp/cm-readme-stream.json 2>/dev/null &
stream_pid=$!
sleep 1
run 'cargo run --release -p cm -- stream serve --to 127.0.0.1:5020 --api alf --secs 10' >/dev/null
wait "$stream_pid"
grep -q '"played": *[1-9]' /tmp/cm-readme-stream.json || { echo "error: cm stream play played nothing" >&2; cat /tmp/cm-readme-stream.json >&2; exit 1; }

# The NACK video pair: the client stops 3 s after the server's last packet.
in_readme 'cargo run --release -p cm -- stream play --nack --listen 127.0.0.1:5030 &'
timeout 60 cargo run --release --locked -q -p cm -- stream play --nack --listen 127.0.0.1:5030 >/tmp/cm-readme-nack.json 2>/dev/null &
nack_pid=$!
sleep 1
run 'cargo run --release -p cm -- stream serve --nack --to 127.0.0.1:5030 --controller iscc:l=2 --secs 10' >/dev/null
wait "$nack_pid"
grep -q '"pictures": *[1-9]' /tmp/cm-readme-nack.json || { echo "error: cm stream play --nack saw no pictures" >&2; cat /tmp/cm-readme-nack.json >&2; exit 1; }
# The QUIC pair: a server on the CM (embedded: no daemon at the default
# socket here) and a 5 s download; the server is stopped afterwards.
rm -f /tmp/cert.der
in_readme 'cargo run --release -p cm-quic --example quic_transfer -- serve 127.0.0.1:4433 /tmp/cert.der &'
timeout 120 cargo run --release --locked -q -p cm-quic --example quic_transfer -- serve 127.0.0.1:4433 /tmp/cert.der 2>/dev/null &
quic_pid=$!
for _ in $(seq 300); do [ -s /tmp/cert.der ] && break; sleep 0.1; done
run 'cargo run --release -p cm-quic --example quic_transfer -- fetch 127.0.0.1:4433 /tmp/cert.der 5' | tee /tmp/cm-readme-quic.txt
kill "$quic_pid" 2>/dev/null || true
wait "$quic_pid" 2>/dev/null || true
grep -q 'Mbit/s' /tmp/cm-readme-quic.txt || { echo "error: the QUIC fetch printed no rate" >&2; exit 1; }
echo "ok: the README's short commands run as written"
