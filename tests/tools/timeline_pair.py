#!/usr/bin/env python3
"""The slices of one timeline written twice, as Perfetto protobuf (decoded by protoc into its
text form) and as Chrome JSON, compared: per track, the same names over the same spans.

The two encodings share nothing past the writer's pass: Perfetto's times are deltas on each
packet sequence and its names are interned per sequence, Chrome's are absolute microseconds
(since the origin it states) with names spelled out. A formatter that loses a sequence's
last time or the names it sent shows here as slices that differ.

usage: timeline_pair.py TRACE.txt TRACE.json [TICKS_PER_SECOND]
(TRACE.txt: protoc --decode=perfetto.Trace; the clock, when Chrome's times start at an
origin and a tick is not a ns). Times are compared to within 1 ns: Chrome's are converted
from ticks after the origin is taken off, Perfetto's before, and with a clock other than
1 GHz the two floors may differ by one."""
import collections
import decimal
import json
import sys


def protoc_packets(path):
    packets, stack = [], []
    for line in open(path):
        line = line.strip()
        if line.endswith("{"):
            d = {}
            if stack:
                stack[-1].setdefault(line[:-1].strip(), []).append(d)
            stack.append(d)
        elif line == "}":
            d = stack.pop()
            if not stack:
                packets.append(d)
        elif line:
            k, v = line.split(": ", 1)
            stack[-1][k] = json.loads(v) if v.startswith('"') else v
    return packets


def perfetto_slices(path, origin_ns):
    names, labels, seq_time, open_ = {}, {}, {}, collections.defaultdict(list)
    out = []
    for p in protoc_packets(path):
        seq = p.get("trusted_packet_sequence_id")
        if p.get("sequence_flags") == "1":
            seq_time[seq] = 0
        for td in p.get("track_descriptor", []):
            if "thread" in td:
                th = td["thread"][0]
                labels[td["uuid"]] = "thread %s:%s" % (th.get("pid"), th.get("tid"))
            elif "name" in td and "parent_uuid" in td:
                labels[td["uuid"]] = "pipeline %d:%s" % (int(td["parent_uuid"]) - 0x200000000,
                                                         td["name"])
        for idata in p.get("interned_data", []):
            for en in idata.get("event_names", []):
                names[(seq, en["iid"])] = en["name"]
        for te in p.get("track_event", []):
            seq_time[seq] += int(p.get("timestamp", "0"))
            ts = seq_time[seq] - origin_ns
            u = te["track_uuid"]
            if te["type"] == "TYPE_SLICE_BEGIN":
                open_[u].append((names[(seq, te["name_iid"])], ts))
            else:
                name, b = open_[u].pop()
                out.append((labels[u], name, b, ts))
    return out, sum(len(s) for s in open_.values())


def chrome_slices(path):
    doc = json.load(open(path), parse_float=decimal.Decimal)
    ns = lambda us: int(us * 1000)
    tnames, open_, out = {}, collections.defaultdict(list), []
    for e in doc["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "thread_name":
            tnames[(e["pid"], e["tid"])] = e["args"]["name"]
    for e in doc["traceEvents"]:
        key = (e.get("pid"), e.get("tid"))
        if e["ph"] == "B":
            open_[key].append((e["name"], ns(e["ts"])))
        elif e["ph"] == "E":
            name, b = open_[key].pop()
            out.append(("thread %s:%s" % key, name, b, ns(e["ts"])))
        elif e["ph"] == "X":
            b = ns(e["ts"])
            out.append(("pipeline %s:%s" % (e["pid"], tnames[key]), e["name"], b,
                        b + ns(e["dur"])))
    return out, sum(len(s) for s in open_.values()), doc


def main():
    want, want_open, doc = chrome_slices(sys.argv[2])
    origin = int(doc.get("otherData", {}).get("time_origin_ticks", "0"))
    tps = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    got, got_open = perfetto_slices(sys.argv[1], origin * 10**9 // tps if tps else origin)
    if not want:
        print("FAIL: no slices in the Chrome JSON")
        return 1
    if want_open or got_open:
        print("FAIL: slices left open: %d in Chrome, %d in Perfetto" % (want_open, got_open))
        return 1
    if len(got) != len(want):
        print("FAIL: %d slices in Perfetto, %d in Chrome" % (len(got), len(want)))
        return 1
    got.sort(key=lambda s: (s[0], s[2], s[3], s[1]))
    want.sort(key=lambda s: (s[0], s[2], s[3], s[1]))
    for g, w in zip(got, want):
        if g[0] != w[0] or g[1] != w[1] or abs(g[2] - w[2]) > 1 or abs(g[3] - w[3]) > 1:
            print("FAIL: Perfetto %r, Chrome %r" % (g, w))
            return 1
    print("ok: %d slices on %d tracks, the same in both" % (len(got), len({s[0] for s in got})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
