#!/usr/bin/env python3
"""calltree_calls.py FILE PARENT CHILD: the calls of each CHILD row right under the first
PARENT row of `tracekit profile --to calltree` output, one per line."""
import re
import sys

path, parent, child = sys.argv[1:4]
# a row: calls, inclusive and exclusive cost, then the name indented by its depth
rows = []
for line in open(path):
    m = re.match(r'\s*(\d+)\s+\d+\s+\d+(\s+)(.*)', line)
    if m and not line.startswith('#'):
        rows.append((int(m.group(1)), len(m.group(2)), m.group(3)))
top = next((i for i, r in enumerate(rows) if r[2] == parent), None)
if top is None:
    sys.exit(f"{path}: no row for {parent}")
for calls, indent, name in rows[top + 1:]:
    if indent <= rows[top][1]:
        break
    if indent == rows[top][1] + 2 and name == child:
        print(calls)
