#!/usr/bin/env bash
# Install libcm (the C API): libcm.so, libcm.a, cm.h, cm_compat.h and cm.pc.
#
#   crates/cm-ffi/install.sh [--prefix DIR] [--from TARGET_PROFILE_DIR]
#
# --prefix  where to install (default /usr/local): DIR/lib, DIR/include,
#           DIR/lib/pkgconfig/cm.pc
# --from    take libcm.so / libcm.a from this directory (e.g. target/release)
#           instead of building them with `cargo build --release -p cm-ffi`
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
prefix=/usr/local
from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --from) from="$2"; shift 2 ;;
    *) echo "usage: $0 [--prefix DIR] [--from DIR]" >&2; exit 2 ;;
  esac
done
if [ -z "$from" ]; then
  (cd "$here" && cargo build --release -p cm-ffi --locked)
  from="${CARGO_TARGET_DIR:-$here/../../target}/release"
fi
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/../../Cargo.toml" | head -n1)"
libdir="$prefix/lib"
includedir="$prefix/include"
install -d "$libdir/pkgconfig" "$includedir"
install -m 0755 "$from/libcm.so" "$libdir/libcm.so"
install -m 0644 "$from/libcm.a" "$libdir/libcm.a"
install -m 0644 "$here/include/cm.h" "$includedir/cm.h"
install -m 0644 "$here/include/cm_compat.h" "$includedir/cm_compat.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$libdir|" \
    -e "s|@INCLUDEDIR@|$includedir|" -e "s|@VERSION@|$version|" \
    "$here/cm.pc.in" > "$libdir/pkgconfig/cm.pc"
echo "installed libcm $version into $prefix"
