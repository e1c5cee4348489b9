#!/usr/bin/env python3
"""Fails when a crate's modules depend on each other in a cycle (issue 14: "no file cycle in any
crate"): within each crate under crates/, every source file counts as part of its top-level
module (`src/circuit/attempt.rs` is `circuit`), a reference `crate::x::…` (in a `use` or a path)
from module `a` to another top-level module `x` is an edge a → x, and any cycle of edges is an
error, printed with the files that make each of its edges. The crate root (lib.rs, main.rs) is
not a node: it declares the modules and re-exports their items. Comments, doc comments, string
literals and `#[cfg(test)]` modules (and `tests.rs` files) are left out, so a doc link or a test
helper makes no edge.

cargo-modules (`dependencies --acyclic`) was tried first: it counts a child's `use super::*`
and its parent's `pub use child::*` as a cycle, and the items sqlx's macros generate as others,
so it fails on every crate for reasons that are not a dependency between modules.

Usage: scripts/module-cycles.py [CRATES_DIR]   (default: crates/ beside this script's folder)
"""

import pathlib
import re
import sys


def strip_code(text: str) -> str:
    """The code of a Rust file without comments, string literals and #[cfg(test)] modules."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not text[i - 1:i].isalnum():
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            i = n if end < 0 else end + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            i = text.find("'", i + 2) + 1
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    # Drop `#[cfg(test)] mod name { … }` blocks (balanced braces; strings are gone already).
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", code)
        if not m:
            return code
        depth, k = 1, m.end()
        while k < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[k], 0)
            k += 1
        code = code[:m.start()] + code[k:]


def top_module(src: pathlib.Path, path: pathlib.Path):
    """The top-level module a file belongs to, or None for the crate root and test files."""
    rel = path.relative_to(src).with_suffix("")
    if rel.name == "tests" or rel.parts in (("lib",), ("main",)):
        return None
    return rel.parts[0]


def crate_refs(code: str):
    """Every `crate::x` first segment the code names, `use crate::{a, b::c}` groups included."""
    for m in re.finditer(r"\bcrate::(\{[^}]*\}|[A-Za-z_]\w*)", code):
        group = m.group(1)
        if group.startswith("{"):
            for item in group[1:-1].split(","):
                name = item.strip().split("::")[0].split(" as ")[0].strip()
                if name and name not in ("self", "*"):
                    yield name
        else:
            yield group


def cycles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def check_crate(src: pathlib.Path) -> list:
    modules = {p.stem if p.parent == src else p.relative_to(src).parts[0]
               for p in src.rglob("*.rs")}
    edges, why = {}, {}
    for path in sorted(src.rglob("*.rs")):
        here = top_module(src, path)
        if here is None:
            continue
        for name in crate_refs(strip_code(path.read_text())):
            if name in modules and name != here:
                edges.setdefault(here, set()).add(name)
                why.setdefault((here, name), set()).add(str(path.relative_to(src)))
    problems = []
    for comp in cycles(edges):
        lines = [f"  {a} -> {b}: {', '.join(sorted(why[(a, b)]))}"
                 for a in comp for b in sorted(edges.get(a, ())) if b in comp]
        problems.append(f"{src.parent.name}: modules {', '.join(comp)} form a cycle\n"
                        + "\n".join(lines))
    return problems


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1
                        else pathlib.Path(__file__).resolve().parent.parent / "crates")
    crates = sorted(p / "src" for p in root.iterdir() if (p / "src").is_dir())
    problems = [p for src in crates for p in check_crate(src)]
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"module cycles: none in {len(crates)} crates")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
