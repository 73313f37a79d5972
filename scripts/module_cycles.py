#!/usr/bin/env python3
"""Find dependency circles between the top-level modules of one Rust crate.

Usage: python3 scripts/module_cycles.py <crate src dir>

A module is a top-level module of the crate (`src/x.rs` or everything under
`src/x/`). Module A depends on module B when code in A names a path that
starts at `crate::B`, `super::B` (resolving to B), or `crate::Name` where the
crate root re-exports `Name` from B (`pub use B::...Name`). Left out:
comments (so doc links and doc-test imports do not count), string literals,
items under `#[cfg(test)]` (inline test modules and test-only module files)
and items under `#[cfg(doc)]`.

Prints every circle (as `a -> b -> ... -> a`, one per strongly connected
group, with the edges that form it) and exits 1 if there is any, else prints
"no module circles in <dir>" and exits 0. Reads only; writes nothing.
"""

import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(src):
    """Return src with comments removed and string/char literal contents blanked."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c == "r" and re.match(r'r#*"', src[i:]) and (i == 0 or not re.match(r"[A-Za-z0-9_]", src[i - 1])):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            if m:  # char literal; otherwise a lifetime or label
                i += len(m.group(0))
                out.append("' '")
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def item_end(src, start):
    """End index of the item beginning at `start` (after its attributes)."""
    depth = 0
    i = start
    while i < len(src):
        c = src[i]
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
            if depth == 0 and c == "}":
                return i + 1
        elif c == ";" and depth == 0:
            return i + 1
        i += 1
    return len(src)


CFG_ATTR = re.compile(r"#\[\s*cfg\s*\((.*?)\)\s*\]", re.S)


def test_or_doc_only(pred):
    """True if a cfg predicate holds only in test or doc builds (`test`, `all(test, ..)`)."""
    pred = pred.strip()
    if pred in ("test", "doc"):
        return True
    m = re.fullmatch(r"all\s*\((.*)\)", pred, re.S)
    if not m:
        return False
    positive = re.sub(r"not\s*\([^()]*\)", "", m.group(1))
    return re.search(r"\b(test|doc)\b", positive) is not None


def next_cfg_drop(src, pos=0):
    for m in CFG_ATTR.finditer(src, pos):
        if test_or_doc_only(m.group(1)):
            return m
    return None


def drop_cfg_items(src):
    """Remove items carrying `#[cfg(test)]` or `#[cfg(doc)]`; return (src, dropped mod names)."""
    dropped_mods = set()
    while True:
        m = next_cfg_drop(src)
        if not m:
            return src, dropped_mods
        k = m.end()
        # skip further attributes on the same item
        while True:
            a = re.match(r"\s*#\[", src[k:])
            if not a:
                break
            k = item_end(src, k + a.end() - 1)
        end = item_end(src, k)
        mm = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", src[k:end])
        if mm:
            dropped_mods.add(mm.group(1))
        src = src[: m.start()] + " " + src[end:]


def module_files(src_dir):
    """Map each .rs file under src_dir to its module path (list of names)."""
    files = {}
    for root, _, names in os.walk(src_dir):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src_dir)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            files[path] = rel
    return files


def use_targets(text):
    """Yield the paths named in `text` that start at crate/super/self, as segment lists."""
    for m in re.finditer(r"(?<![A-Za-z0-9_:])((?:(?:crate|super|self)\s*::\s*)+)", text):
        prefix = [p.strip() for p in m.group(1).split("::") if p.strip()]
        rest = text[m.end():]
        for tail in group_heads(rest):
            yield prefix + tail


def group_heads(rest):
    """First one or two path segments after `crate::`, expanding one `{...}` group."""
    rest = rest.lstrip()
    if rest.startswith("{"):
        depth, j = 0, 0
        for j, c in enumerate(rest):
            depth += c == "{"
            depth -= c == "}"
            if depth == 0:
                break
        inner = rest[1:j]
        parts, depth, cur = [], 0, ""
        for c in inner:
            if c == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += c == "{"
            depth -= c == "}"
            cur += c
        parts.append(cur)
        for p in parts:
            p = p.strip()
            if not p:
                continue
            yield from ([seg] + more for seg, more in [head_of(p)])
        return
    seg, more = head_of(rest)
    if seg:
        yield [seg] + more


def head_of(text):
    m = re.match(r"\s*(" + IDENT + r"|\*)\s*(::\s*(" + IDENT + r"))?", text)
    if not m:
        return None, []
    return m.group(1), ([m.group(3)] if m.group(3) else [])


def root_reexports(root_src):
    """Names the crate root re-exports, mapped to the top-level module they come from."""
    names = {}
    for m in re.finditer(r"\buse\s+((?:crate\s*::\s*)?)(" + IDENT + r")\s*::([^;]*);", root_src):
        module, tail = m.group(2), m.group(3)
        for leaf in re.findall(r"(?:as\s+)?(" + IDENT + r")\s*(?=[,}]|$)", tail.strip()):
            names[leaf] = module
    return names


def crate_graph(src_dir):
    files = module_files(src_dir)
    texts, test_files = {}, set()
    for path, modpath in files.items():
        with open(path, encoding="utf-8") as f:
            text, dropped = drop_cfg_items(strip_comments_and_strings(f.read()))
        texts[path] = text
        for name in dropped:
            test_files.add(tuple(modpath + [name]))
    tops = {mp[0] for mp in files.values() if mp}
    root = next((p for p, mp in files.items() if not mp), None)
    reexports = root_reexports(texts[root]) if root else {}

    edges = {}
    for path, modpath in files.items():
        if not modpath:
            continue
        if any(tuple(modpath[: k + 1]) in test_files for k in range(len(modpath))):
            continue
        me = modpath[0]
        for target in use_targets(texts[path]):
            cur = list(modpath)
            segs = list(target)
            if segs[0] == "crate":
                cur, segs = [], segs[1:]
            while segs and segs[0] in ("super", "self"):
                if segs.pop(0) == "super":
                    cur = cur[:-1]
            full = cur + segs
            if not full:
                continue
            head = full[0]
            if head in tops:
                dep = head
            elif len(cur) == 0 and head in reexports and reexports[head] in tops:
                dep = reexports[head]
            else:
                continue
            if dep != me:
                edges.setdefault(me, set()).add(dep)
    return tops, edges


def strongly_connected(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
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
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def one_cycle(comp, edges):
    """A shortest circle through the first module of a strongly connected group."""
    start = comp[0]
    members = set(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ())):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: python3 scripts/module_cycles.py <crate src dir>", file=sys.stderr)
        return 2
    src_dir = sys.argv[1]
    tops, edges = crate_graph(src_dir)
    comps = strongly_connected(tops, edges)
    for comp in comps:
        print("circle: " + " -> ".join(one_cycle(comp, edges)))
        for v in comp:
            inside = sorted(w for w in edges.get(v, ()) if w in comp)
            print("  %s uses %s" % (v, ", ".join(inside)))
    if comps:
        return 1
    print("no module circles in %s" % src_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
