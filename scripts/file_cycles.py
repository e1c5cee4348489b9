#!/usr/bin/env python3
"""Finds file cycles inside each Rust crate of the workspace (issue 14: "no file cycle in any
crate"): file A depends on file B when A names an item of B's module through a `crate::`,
`super::` or `self::` path, in a `use` (braces expanded) or inline. A module is one unit with
its ancestors (a directory's mod.rs re-exports its files and they use its shared types), so a
file naming its own ancestor, or the crate root (lib.rs, main.rs), is no dependency. Unit test
modules (`mod tests` under `#[cfg(test)]`, and `tests.rs` files) are left out.

Usage: scripts/file_cycles.py [DIR...] (default: crates/* and loadtest). Prints each crate's
cycles; exits 1 if there is any.
"""
import os
import re
import sys


def strip(text):
    """The code of a file without comments, strings, and its #[cfg(test)] mod tests."""
    text = re.sub(r"#\[cfg\(test\)\]\s*mod\s+tests\s*\{.*", "", text, flags=re.S)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def expand(tree):
    """Paths of a use tree such as `super::{a, b::{c, d}}` (no `use`, no `;`)."""
    tree = tree.strip()
    depth, cut = 0, None
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0 and cut is None:
                cut = i
            depth += 1
        elif ch == "}":
            depth -= 1
    if cut is None:
        return [tree.split(" as ")[0].strip()]
    prefix, inner = tree[:cut], tree[cut + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    out = []
    for p in parts:
        if p.strip():
            out += [(prefix + q).rstrip(":") if q != "self" else prefix.rstrip(":") for q in expand(p)]
    return out


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def crate_cycles(src):
    files = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".rs")]
    mods = {module_of(src, f): f for f in files}
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        if not m or m[-1] == "tests":
            continue
        # The module `super` and `self` are relative to.
        here = m
        code = strip(open(f, encoding="utf-8").read())
        paths = []
        for tree in re.findall(r"\buse\s+([^;]+);", code):
            paths += expand(tree)
        paths += ["".join(p) for p in re.findall(r"\b(crate|super|self)((?:::\w+)+)", code)]
        for p in paths:
            segs = [s for s in p.replace(" ", "").split("::") if s]
            if not segs or segs[0] not in ("crate", "super", "self"):
                continue
            base = {"crate": (), "super": here[:-1], "self": here}[segs[0]]
            rest = segs[1:]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
            target, best = base, base if base in mods else None
            for s in rest:
                target = target + (s,)
                if target in mods:
                    best = target
            # A module and its ancestors are one unit: a directory's mod.rs re-exports its
            # files and they use its shared types (the layout the circuit split asks for).
            if best and best != m[: len(best)] and m != best[: len(m)]:
                edges[m].add(best)
    # Strongly connected components (Tarjan), iteratively.
    index, low, on, stack, sccs, n = {}, {}, set(), [], [], 0
    for root in mods:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(sorted(comp))
    return mods, edges, sccs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    dirs = sys.argv[1:] or sorted(
        [os.path.join(root, "crates", c) for c in os.listdir(os.path.join(root, "crates"))]
        + [os.path.join(root, "loadtest")]
    )
    bad = False
    for d in dirs:
        src = os.path.join(d, "src")
        if not os.path.isdir(src):
            continue
        mods, edges, sccs = crate_cycles(src)
        name = os.path.basename(os.path.normpath(d))
        if not sccs:
            print(f"{name}: {len(mods)} files, no file cycle")
        for comp in sccs:
            bad = True
            names = {c: "::".join(c) for c in comp}
            print(f"{name}: file cycle among {', '.join(names.values())}")
            for c in comp:
                deps = sorted(names[t] for t in edges[c] if t in names)
                print(f"  {names[c]} -> {', '.join(deps)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
