#!/usr/bin/env python3
"""Report import cycles between the top-level modules of Rust crates.

Usage: scripts/module-cycles.py [CRATE_DIR ...]   (default: every crates/*)

For each crate, every file under src/ belongs to a top-level module: the
first path component below src/ (src/flow.rs -> flow, src/manager/send.rs ->
manager; lib.rs and main.rs are the crate root and are skipped). An edge
a -> b is recorded when a file of module a names `crate::b` (in a `use` or a
path) or, from a top-level file, `super::b`. Cycles among these edges
(strongly connected components with more than one module) are printed; the
exit status is 1 if any crate has one.
"""

import re
import sys
from pathlib import Path

CRATE_PATH = re.compile(r"\bcrate::(\w+)")
# `use crate::{a, b::c}` names several modules at once.
CRATE_GROUP = re.compile(r"\bcrate::\{([^}]*)\}", re.S)
SUPER_PATH = re.compile(r"\bsuper::(\w+)")
SUPER_GROUP = re.compile(r"\bsuper::\{([^}]*)\}", re.S)
COMMENT = re.compile(r"//[^\n]*")


def top_module(src: Path, f: Path):
    rel = f.relative_to(src).parts
    if len(rel) == 1:
        stem = rel[0][:-3]
        return None if stem in ("lib", "main") else stem
    return rel[0]


def group_names(body: str):
    # First component of each item in a brace group.
    for item in re.split(r",", body):
        m = re.match(r"\s*(\w+)", item)
        if m:
            yield m.group(1)


def edges(crate: Path):
    src = crate / "src"
    mods = set()
    files = sorted(src.rglob("*.rs"))
    for f in files:
        m = top_module(src, f)
        if m:
            mods.add(m)
    graph = {m: set() for m in mods}
    for f in files:
        a = top_module(src, f)
        if a is None:
            continue
        text = COMMENT.sub("", f.read_text(encoding="utf-8", errors="replace"))
        names = set(CRATE_PATH.findall(text))
        for g in CRATE_GROUP.findall(text):
            names.update(group_names(g))
        # `super::x` leaves the top-level module only from a top-level file
        # (src/a.rs or src/a/mod.rs).
        depth = len(f.relative_to(src).parts)
        top_file = depth == 1 or (depth == 2 and f.name == "mod.rs")
        if top_file:
            names.update(SUPER_PATH.findall(text))
            for g in SUPER_GROUP.findall(text):
                names.update(group_names(g))
        for b in names:
            if b in mods and b != a:
                graph[a].add(b)
    return graph


def cycles(graph):
    """Tarjan's strongly connected components of size > 1."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv):
    root = Path(__file__).resolve().parent.parent
    crates = [Path(a) for a in argv] or sorted(
        p for p in (root / "crates").iterdir() if (p / "src").is_dir()
    )
    bad = False
    for crate in crates:
        graph = edges(crate)
        found = cycles(graph)
        if not found:
            print(f"{crate.name}: no cycle ({len(graph)} modules)")
            continue
        bad = True
        for comp in found:
            inner = [
                f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp
            ]
            print(f"{crate.name}: cycle {{{', '.join(comp)}}}: {'; '.join(inner)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
