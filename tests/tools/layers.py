#!/usr/bin/env python3
"""Check tracekit's dependency rule (tests/tools/layers.rules) on a source tree.

Reads every #include "..." in include/, lib/, cli/, recorder/ and examples/ and, given
--objects folders of a build (object files named like their source, e.g. lib/isa/x86.c.o),
the calls between object files (nm). Prints one line per use against the rule, naming the
file, the header or function, and the edge; exits 1 if there is any.

usage: layers.py --rules FILE --root TREE [--objects DIR]...
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

SCANNED = ("include", "lib", "cli", "recorder", "examples")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


class Rules:
    def __init__(self, path):
        self.modules = []          # (path, module), longest first after load
        self.layer = {}            # module -> layer index (0 = top)
        self.allow = []            # (from pattern, to pattern, include_only)
        self.clients = {}          # module -> set of tiers
        with open(path) as f:
            for n, line in enumerate(f, 1):
                words = line.split("#", 1)[0].split()
                if not words:
                    continue
                kind, args = words[0], words[1:]
                if kind == "module" and len(args) >= 2:
                    self.modules += [(p.rstrip("/"), args[0]) for p in args[1:]]
                elif kind == "layer" and args:
                    depth = len(set(self.layer.values()))
                    for m in args:
                        self.layer[m] = depth
                elif kind == "allow" and len(args) >= 2:
                    inc = args[0] == "include"
                    if inc:
                        args = args[1:]
                    self.allow.append((args[0], args[1], inc))
                elif kind == "client" and args:
                    self.clients[args[0]] = set(args[1:])
                else:
                    sys.exit(f"{path}:{n}: cannot read this line")
        self.modules.sort(key=lambda pm: -len(pm[0]))

    def module(self, rel):
        for p, m in self.modules:
            if rel == p or rel.startswith(p + "/"):
                return m
        return None

    def allowed(self, src, dst, call):
        for a, b, inc in self.allow:
            if fnmatch.fnmatchcase(src, a) and fnmatch.fnmatchcase(dst, b) and not (call and inc):
                return True
        return False

    def why_not(self, src, dst, call):
        """None when module SRC may use module DST, else the reason."""
        if src == dst or self.allowed(src, dst, call):
            return None
        if src in self.clients:
            return f"{src} is not part of the library"  # clients are checked by tier
        ls, ld = self.layer.get(src), self.layer.get(dst)
        if ls is None or ld is None:
            return f"{src if ls is None else dst} is in no layer"
        if ls == ld:
            return "modules of one layer never use each other"
        if ls > ld:
            return f"{dst} is a layer above {src}"
        return None


def tier(rel):
    if rel.startswith("include/tracekit/internal/"):
        return "internal"
    if rel.startswith("include/"):
        return "public"
    if rel.startswith("lib/"):
        return "private"
    return "local"


def an(word):
    return ("an " if word[0] in "aeiou" else "a ") + word


def sources(root):
    for top in SCANNED:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), root)


def resolve(root, rel, name):
    for base in (os.path.dirname(rel), "include", "lib"):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def check_includes(rules, root, errors):
    count = 0
    for rel in sources(root):
        src = rules.module(rel)
        if src is None:
            errors.append(f"{rel}: in no module of the rules")
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            text = f.read()
        for name in INCLUDE_RE.findall(text):
            count += 1
            where = f"{rel}: includes \"{name}\""
            dst_rel = resolve(root, rel, name)
            if dst_rel is None:
                errors.append(f"{where}: no such file")
                continue
            dst, t = rules.module(dst_rel), tier(dst_rel)
            if dst is None:
                errors.append(f"{where}: {dst_rel} is in no module of the rules")
                continue
            st = tier(rel)
            if st == "public" and t != "public":
                errors.append(f"{where}: a public header includes {an(t)} header ({src} -> {dst})")
            elif st == "internal" and t not in ("public", "internal"):
                errors.append(f"{where}: an internal header includes {an(t)} header ({src} -> {dst})")
            elif src in rules.clients:
                if dst != src and t not in rules.clients[src]:
                    errors.append(f"{where}: {src} -> {dst}: {src} may include only "
                                  f"{' and '.join(sorted(rules.clients[src]))} headers, not {t} ones")
            else:
                why = rules.why_not(src, dst, False)
                if why:
                    errors.append(f"{where}: {src} -> {dst}: {why}")
                elif src != dst and t == "private" and rules.allowed(src, dst, False):
                    errors.append(f"{where}: {src} -> {dst} is allowed through public headers only")
    return count


def nm(paths):
    """{object: (defined, undefined)}, from one run of nm over all of them."""
    out = subprocess.run(["nm", "-P", "-A"] + paths, capture_output=True, text=True,
                         check=True).stdout
    syms = {p: (set(), set()) for p in paths}
    for line in out.splitlines():
        obj, _, rest = line.partition(": ")
        w = rest.split()
        if obj not in syms or len(w) < 2:
            continue
        if w[1] == "U":
            syms[obj][1].add(w[0])
        elif w[1] in "TDBRVWGS":
            syms[obj][0].add(w[0])
    return syms


def check_calls(rules, root, objdirs, errors):
    paths = {}
    for od in objdirs:
        for d, _, files in os.walk(od):
            for f in files:
                if f.endswith(".o"):
                    src = os.path.relpath(os.path.join(d, f), od)[:-2]
                    # (a build keeps the objects of files since moved or deleted)
                    if src.split("/")[0] in SCANNED and os.path.isfile(os.path.join(root, src)):
                        paths[os.path.join(d, f)] = src
    objs = {paths[p]: v for p, v in nm(sorted(paths)).items()} if paths else {}
    owner = {}
    for src, (defined, _) in objs.items():
        for s in defined:
            owner.setdefault(s, src)
    # what a client may call: names that its header tiers declare
    declared = {}
    for rel in sources(root):
        if rel.endswith(".h"):
            with open(os.path.join(root, rel), errors="replace") as f:
                declared.setdefault(tier(rel), []).append(f.read())
    words = {t: set(re.findall(r"\btk_\w+", "\n".join(v))) for t, v in declared.items()}
    graph, count = {}, 0
    for src, (_, undefined) in sorted(objs.items()):
        sm = rules.module(src)
        if sm is None:
            errors.append(f"{src}.o: in no module of the rules")
            continue
        for sym in sorted(undefined):
            dst = owner.get(sym)
            if dst is None or dst == src:
                continue
            count += 1
            dm = rules.module(dst)
            where = f"{src}: calls {sym} ({dst})"
            if sm in rules.clients:
                if dm == sm:
                    continue
                ok = sym.startswith("tk_") and any(sym in words.get(t, ()) for t in rules.clients[sm])
                if not ok:
                    errors.append(f"{where}: {sm} -> {dm}: {sm} may call only tk_ functions of "
                                  f"{' and '.join(sorted(rules.clients[sm]))} headers")
                continue
            why = rules.why_not(sm, dm, True)
            if why:
                errors.append(f"{where}: {sm} -> {dm}: {why}")
            graph.setdefault(src, set()).add(dst)
    for comp in circles(graph):
        errors.append(f"{comp[0]}: files that call each other (a circle): {', '.join(comp)}")
    return count


def circles(graph):
    """Strongly connected parts of more than one file (Tarjan), each as a path."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rules", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--objects", action="append", default=[])
    a = ap.parse_args()
    rules = Rules(a.rules)
    errors = []
    n_inc = check_includes(rules, a.root, errors)
    n_call = check_calls(rules, a.root, a.objects, errors) if a.objects else 0
    for e in errors:
        print(f"layers: {e}")
    if errors:
        print(f"layers: {len(errors)} uses against {a.rules}")
        return 1
    print(f"layers: ok ({n_inc} includes, {n_call} calls between files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
