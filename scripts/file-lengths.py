#!/usr/bin/env python3
"""Check that every Rust file under crates/ is short enough to read.

Usage: scripts/file-lengths.py [--limit N] [--test-limit N]

Source files, benches and examples: at most --limit lines (600); integration
tests (files under a crate's tests/ directory): at most --test-limit (800).
Prints every file over its limit and exits 1 if there is one.
"""

import argparse
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=600)
    ap.add_argument("--test-limit", type=int, default=800)
    ap.add_argument("--root", default=Path(__file__).resolve().parent.parent / "crates")
    args = ap.parse_args()
    root = Path(args.root)
    over = []
    count = 0
    for f in sorted(root.rglob("*.rs")):
        if "target" in f.parts:
            continue
        count += 1
        rel = f.relative_to(root)
        limit = args.test_limit if len(rel.parts) > 1 and rel.parts[1] == "tests" else args.limit
        n = sum(1 for _ in f.open(encoding="utf-8", errors="replace"))
        if n > limit:
            over.append((n, limit, rel))
    for n, limit, rel in sorted(over, reverse=True):
        print(f"crates/{rel}: {n} lines (limit {limit})")
    if over:
        print(f"{len(over)} of {count} files over their limit: split them along the concepts they mix",
              file=sys.stderr)
        return 1
    print(f"ok: {count} files, none over {args.limit} lines ({args.test_limit} under tests/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
