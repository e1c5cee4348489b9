#!/usr/bin/env python3
"""Checks the documentation: its links, its anchors and the README's commands.

    scripts/check-docs.py [REPO_DIR]     (default: the folder above this script's)

1. Every relative link in README.md, BENCHMARKS.md and docs/*.md resolves: `[text](path)`
   names a file or folder that exists, and `path#anchor` (or `#anchor` alone) names a heading
   of that Markdown file, by GitHub's rule for heading anchors (lower case, punctuation
   dropped, spaces to hyphens, `-1`, `-2`… for repeats). Links in code blocks and inline code
   are not links; web links (http, https, mailto) are not fetched.
2. Every command in the README's shell code blocks names something that exists: a path
   (`scripts/x.sh`) is a file, executable when it is run directly; `python3 X` names a file;
   `cargo run -p P -- SUB` names a workspace package P and, when P's binary declares clap
   subcommands, one of them; `cargo nextest run -p P --test T` names P and its test target
   T; `scripts/test.sh AREA` names an area the script knows (`scripts/test.sh --areas`); any
   other command is a prerequisite the docs name (curl, jq, the Postgres client, …), on PATH,
   or a shell builtin. Command substitutions (`$(…)`) are checked too.

Prints one line per problem and exits 1 if there is any. Standard library only.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


# ---- Markdown: headings, anchors and links -------------------------------------------------

FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, line


def slug(heading):
    """GitHub's anchor of a heading's text."""
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts as its text
    h = re.sub(r"<[^>]+>", "", h).strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, out = {}, set()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for _, line in prose_lines(text):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                k = seen.get(s, 0)
                seen[s] = k + 1
                out.add(s if k == 0 else f"{s}-{k}")
            for a in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line):
                out.add(a)
        _anchors[path] = out
    return _anchors[path]


LINK = re.compile(r"(?<!\!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def check_links(path):
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in prose_lines(text):
        line = re.sub(r"`[^`]*`", "", line)  # inline code
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                problem(f"{rel}:{n}", f"link to {target}: {os.path.relpath(dest, ROOT)} does not exist")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problem(f"{rel}:{n}", f"link to {target}: no heading with anchor #{anchor} in "
                        f"{os.path.relpath(dest, ROOT)}")


# ---- The README's commands -----------------------------------------------------------------

# Tools the docs name as prerequisites (curl, jq, the Postgres client): known by name, since the
# check may run before they are installed.
KNOWN_TOOLS = {"curl", "jq", "createdb", "dropdb", "psql", "openssl", "git", "npm", "pip"}
BUILTINS = {"export", "cd", "set", "unset", "source", ".", "echo", "printf", "for", "do", "done",
            "if", "then", "else", "fi", "while", "true", "false", "read", "test", "[", "exit"}


def packages():
    """Workspace package name → its folder."""
    out = {}
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        members = re.search(r"members\s*=\s*\[([^\]]*)\]", f.read()).group(1)
    for m in re.findall(r"\"([^\"]+)\"", members):
        with open(os.path.join(ROOT, m, "Cargo.toml")) as f:
            name = re.search(r"^name\s*=\s*\"([^\"]+)\"", f.read(), re.M).group(1)
        out[name] = os.path.join(ROOT, m)
    return out


def subcommands(pkg_dir):
    """The clap subcommands of a package's binary (src/main.rs), kebab-case; None if it has none."""
    main = os.path.join(pkg_dir, "src", "main.rs")
    if not os.path.exists(main):
        return None
    with open(main) as f:
        src = f.read()
    m = re.search(r"#\[derive\([^)]*Subcommand[^)]*\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\s+)?enum\s+\w+\s*\{", src)
    if not m:
        return None
    depth, i, body = 1, m.end(), []
    while depth and i < len(src):
        c = src[i]
        depth += c == "{"
        depth -= c == "}"
        body.append(c if depth == 1 else ("\0" if c in "{}" else " "))
        i += 1
    body = "".join(body)
    body = re.sub(r"//[^\n]*", "", body)
    body = re.sub(r"#\[[^\]]*\]", "", body)
    names = set()
    for v in re.findall(r"(?:^|,|\0)\s*([A-Z]\w*)", body):
        names.add(re.sub(r"(?<!^)([A-Z])", r"-\1", v).lower())
    return names


def test_targets(pkg_dir):
    with open(os.path.join(pkg_dir, "Cargo.toml")) as f:
        toml = f.read()
    out = set(re.findall(r"\[\[test\]\]\s*name\s*=\s*\"([^\"]+)\"", toml))
    tests = os.path.join(pkg_dir, "tests")
    if os.path.isdir(tests):
        out |= {f[:-3] for f in os.listdir(tests) if f.endswith(".rs")}
    return out


_areas = None


def test_areas():
    global _areas
    if _areas is None:
        r = subprocess.run([os.path.join(ROOT, "scripts", "test.sh"), "--areas"], capture_output=True,
                           text=True, cwd=ROOT)
        _areas = set(r.stdout.split()) if r.returncode == 0 else set()
    return _areas


def substitutions(line):
    """The `$(…)` command substitutions of `line`, and the line with each replaced by `X`."""
    subs, out, i = [], [], 0
    while i < len(line):
        if line.startswith("$(", i):
            depth, j = 1, i + 2
            while j < len(line) and depth:
                depth += line[j] == "("
                depth -= line[j] == ")"
                j += 1
            subs.append(line[i + 2:j - 1])
            out.append("X")
            i = j
        else:
            out.append(line[i])
            i += 1
    return subs, "".join(out)


def check_command_line(where, line, pkgs):
    subs, line = substitutions(line)
    for s in subs:
        check_command_line(where, s, pkgs)
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        lex.commenters = "#"
        tokens = list(lex)
    except ValueError as e:
        problem(where, f"cannot parse `{line.strip()}`: {e}")
        return
    cmd = []
    for t in tokens + [";"]:
        if t in (";", "&&", "||", "|", "&"):
            if cmd:
                check_simple(where, cmd, pkgs)
            cmd = []
        else:
            cmd.append(t)


def check_simple(where, words, pkgs):
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]  # VAR=value before a command (or alone)
    if not words:
        return
    w = words[0]
    if w in BUILTINS or w in KNOWN_TOOLS:
        return
    if w == "cargo":
        return check_cargo(where, words, pkgs)
    if w in ("python3", "python", "bash", "sh") and len(words) > 1 and not words[1].startswith("-"):
        if not os.path.isfile(os.path.join(ROOT, words[1])):
            problem(where, f"`{' '.join(words)}`: {words[1]} does not exist")
        return
    if "/" in w:
        path = os.path.join(ROOT, w)
        if not os.path.isfile(path):
            problem(where, f"`{' '.join(words)}`: {w} does not exist")
        elif not os.access(path, os.X_OK):
            problem(where, f"`{' '.join(words)}`: {w} is not executable")
        elif w == "scripts/test.sh":
            for a in words[1:]:
                if a.startswith("-"):
                    break
                if a not in test_areas():
                    problem(where, f"`{' '.join(words)}`: no test area {a!r} (scripts/test.sh --areas)")
        return
    if shutil.which(w) is None:
        problem(where, f"`{' '.join(words)}`: {w} is neither a file of the repository nor on PATH")


def check_cargo(where, words, pkgs):
    shown = " ".join(words)
    args = words[1:]
    pkg = None
    for i, a in enumerate(args):
        if a in ("-p", "--package") and i + 1 < len(args):
            pkg = args[i + 1]
        elif a.startswith("--package="):
            pkg = a.split("=", 1)[1]
    if pkg is not None and pkg not in pkgs:
        problem(where, f"`{shown}`: no workspace package {pkg!r}")
        return
    if args[:1] == ["run"] and "--" in args:
        rest = args[args.index("--") + 1:]
        subs = subcommands(pkgs[pkg]) if pkg else None
        if subs:
            positional = [a for a in rest if not a.startswith("-") and "/" not in a]
            if not positional or positional[0] not in subs:
                problem(where, f"`{shown}`: {pkg} has no subcommand "
                        f"{positional[0] if positional else '(none given)'!r} (it has {', '.join(sorted(subs))})")
    if args[:2] == ["nextest", "run"] and "--test" in args and pkg:
        t = args[args.index("--test") + 1]
        if t not in test_targets(pkgs[pkg]):
            problem(where, f"`{shown}`: {pkg} has no test target {t!r}")


def check_readme_commands(path, pkgs):
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    in_sh, start, buf = False, 0, ""
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m:
            lang = line.strip()[3:].strip().lower()
            if not in_sh and lang in ("sh", "bash", "shell", "console"):
                in_sh = True
            elif in_sh:
                in_sh = False
            continue
        if not in_sh:
            continue
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        if buf.strip() and not buf.strip().startswith("#"):
            check_command_line(f"{rel}:{start}", buf, pkgs)
        buf = ""


def main():
    docs = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "BENCHMARKS.md")]
    docs_dir = os.path.join(ROOT, "docs")
    docs += sorted(os.path.join(docs_dir, f) for f in os.listdir(docs_dir) if f.endswith(".md"))
    for d in docs:
        if os.path.exists(d):
            check_links(d)
    check_readme_commands(os.path.join(ROOT, "README.md"), packages())
    for p in problems:
        print(p)
    print(f"check-docs: {len(docs)} pages, {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
