#!/usr/bin/env bash
# Installs what building and testing the CM needs on Debian 12, and only
# what is missing: a C toolchain and the headers libbpf builds against
# (the `cm` TCP congestion control, crates/cm-kernel), iproute2 for the
# emulated paths, clang for the BPF program, the programs the experiments
# run unmodified (ns-2, iperf3, GStreamer, curl), Rust with rustfmt and
# clippy if cargo is absent, and cargo-fuzz. Idempotent: a second run
# installs nothing. Needs root to install; run as another user it lists
# what is missing, and fails only if the build cannot go on without it.
#
#   scripts/setup.sh          everything (the tests' needs)
#   scripts/setup.sh --build  only what `cargo build` needs
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

build_only=false
case "${1:-}" in
  --build) build_only=true ;;
  "") ;;
  -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/setup.sh [--build]" >&2; exit 2 ;;
esac

# What `cargo build` cannot do without.
need=()
command -v cc >/dev/null || need+=(build-essential)
command -v c++ >/dev/null || need+=(g++)
command -v pkg-config >/dev/null || need+=(pkg-config)
# libbpf-sys builds libbpf from source against libelf and zlib.
[ -f /usr/include/libelf.h ] || need+=(libelf-dev)
[ -f /usr/include/zlib.h ] || need+=(zlib1g-dev)
command -v cargo >/dev/null || need+=(cargo rustc rustfmt rust-clippy)

# What the build and the demo use when present.
want=()
# Real paths (cm-netem: namespaces, veth, tbf, TUN) use iproute2.
command -v ip >/dev/null && command -v tc >/dev/null || want+=(iproute2)
# The BPF congestion control compiles with clang (without it cm-kernel
# builds but reports the program as not built).
command -v clang >/dev/null || want+=(clang)

# What the tests need besides.
if ! $build_only; then
  command -v python3 >/dev/null || want+=(python3)
  command -v ns >/dev/null || want+=(ns2)
  command -v iperf3 >/dev/null || want+=(iperf3)
  command -v gst-launch-1.0 >/dev/null ||
    want+=(gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good)
  command -v curl >/dev/null || want+=(curl)
fi

missing=("${need[@]}" "${want[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
  else
    echo "setup: missing: ${missing[*]}" >&2
    echo "setup: as root: apt-get install ${missing[*]}" >&2
    [ ${#need[@]} -eq 0 ] || exit 1
  fi
fi

# Dependencies come from crates.io (the lockfile pins them).
cargo fetch --locked
$build_only && exit 0

# Fuzzing (scripts/fuzz.sh): cargo-fuzz comes from crates.io.
cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked --version 0.13.2
cargo fetch --locked --manifest-path fuzz/Cargo.toml
