#!/usr/bin/env bash
# The branch recorder's trap path calls no other library: with libc traced, any libc code it
# ran would trap inside the SIGTRAP handler (SIGTRAP blocked there: the kernel kills the
# process), or record the recorder's own work. From the handler, the trampolines' recording
# function, the wrapper of the program's signal handlers and the fatal-signal handler,
# follow every direct call and jump in libtkbtrace.so: none may reach a PLT slot or call
# through the GOT. Indirect calls
# through a register are the program's own handlers (wrap_handler) and are allowed.
# The trampolines' stub saves no vector register (btrace.c, make_stub): nothing it calls
# (tramp_hit, tramp_deferred, trigger_hit) may use an xmm, ymm, zmm, mm or x87 register.
set -euo pipefail
lib="$BUILD/recorder/btrace/libtkbtrace.so"
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
objdump -d --no-show-raw-insn "$lib" | python3 -c '
import re, sys
funcs, cur = {}, None
for line in sys.stdin:
    m = re.match(r"[0-9a-f]+ <([^>]+)>:", line)
    if m:
        cur = m.group(1)
        funcs[cur] = []
        continue
    if cur and re.match(r"\s+[0-9a-f]+:", line):
        funcs[cur].append(line.rstrip())
roots = ["on_trap", "tramp_hit", "tramp_deferred", "wrap_handler", "on_fatal"]
missing = [r for r in roots if r not in funcs]
if missing:
    sys.exit("roots not found (inlined or renamed?): %s" % missing)
def reach(roots):
    """The functions reachable from ROOTS by direct calls and jumps, and the calls and
    jumps among them that leave the library (PLT or GOT)."""
    seen, todo, out = set(), list(roots), []
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for ins in funcs.get(f, []):
            m = re.search(r"\b(?:call|jmp|j[a-z]+)\s+[0-9a-f]+ <([^>+]+)(\+0x[0-9a-f]+)?>", ins)
            if m:
                if m.group(1).endswith("@plt"):
                    out.append("%s: %s" % (f, ins.strip()))
                elif m.group(1) != f:
                    todo.append(m.group(1))
            elif re.search(r"\b(call|jmp)\s+\*.*\(%rip\)", ins):
                out.append("%s: %s (through the GOT)" % (f, ins.strip()))
    return seen, out
if "trigger_hit" not in funcs:
    sys.exit("trigger_hit not found (inlined or renamed?)")
vec = []
for f in sorted(reach(["tramp_hit", "tramp_deferred", "trigger_hit"])[0]):
    for ins in funcs.get(f, []):
        if re.search(r"%[xyz]mm|%mm[0-7]|%st\b|\bf(x|)(save|rstor)|\bxsave|\bxrstor", ins):
            vec.append("%s: %s" % (f, ins.strip()))
if vec:
    print("code the trampolines call uses vector or x87 registers, which their stub does not save:")
    print("\n".join(vec[:20]))
    sys.exit(1)
seen, bad = reach(roots)
if bad:
    print("the trap path of libtkbtrace.so calls other libraries:")
    print("\n".join(bad))
    sys.exit(1)
print("trap path: %d functions, no PLT or GOT call" % len(seen))
'
