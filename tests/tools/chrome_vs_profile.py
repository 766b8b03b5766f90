#!/usr/bin/env python3
"""chrome_vs_profile.py JSON CSV MAXDEPTH: the slices of a Chrome JSON timeline (B/E pairs)
agree with `tracekit profile --to csv` of the same trace: as many slices per function as
calls, nesting no deeper than MAXDEPTH. Exits 1, saying what differs, if not."""
import csv
import json
import sys

path, csv_path, maxdepth = sys.argv[1], sys.argv[2], int(sys.argv[3])
slices, depth, deepest = {}, 0, 0
for e in json.load(open(path))["traceEvents"]:
    if e["ph"] == "B":
        depth += 1
        deepest = max(deepest, depth)
        slices[e["name"]] = slices.get(e["name"], 0) + 1
    elif e["ph"] == "E":
        depth -= 1
calls = {r["function"]: int(r["calls"]) for r in csv.DictReader(open(csv_path)) if int(r["calls"])}
bad = [f"{n}: {slices.get(n, 0)} slices, {c} calls" for n, c in calls.items() if slices.get(n, 0) != c]
bad += [f"{n}: {c} slices, no calls" for n, c in slices.items() if n not in calls]
if deepest > maxdepth:
    bad.append(f"slices nest {deepest} deep (at most {maxdepth} expected)")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
