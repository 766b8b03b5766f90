#!/usr/bin/env python3
"""Check a decoding of a trace with pieces missing (perf.data buffers lost, snapshots) against
the decoding of the whole trace, and against perf's decoding of the same perf.data.

usage: ptsegments.py TRUTH TK [PERF]
  TRUTH  `tracekit decode --no-disasm` of the whole trace: what the program executed
  TK     `tracekit decode --no-disasm` of the perf.data: pieces separated by the lines that
         say trace is missing ([overflow ...], [trace not kept ...])
  PERF   `perf script --itrace=i0ns -F ip` of the perf.data, one address a line
Each piece must be a run of TRUTH, the runs in order. perf's list must be the pieces one
after the other, except that tracekit may go on a little at the end of a piece: as libipt
does, it walks on from the last packet to the next instruction that needs one (a branch
whose outcome the missing trace held), where perf stops at the last packet; those
instructions are the program's next ones (TRUTH says so)."""
import sys

MAX_TAIL = 200     # instructions a piece may go on past perf's end


def addr(line):
    return line.split()[0].lstrip('0')


def main():
    truth = [addr(l) for l in open(sys.argv[1]) if l.strip() and not l.startswith('[')]
    pieces = [[]]
    for l in open(sys.argv[2]):
        if l.startswith('[overflow') or l.startswith('[trace not kept'):
            pieces.append([])
        elif l.strip() and not l.startswith('['):
            pieces[-1].append(addr(l))
    pieces = [p for p in pieces if p]
    # each piece a run of the truth, in order
    where = {}
    for i, a in enumerate(truth):
        where.setdefault(a, []).append(i)
    pos = -1
    for k, p in enumerate(pieces):
        at = next((i for i in where.get(p[0], []) if i > pos and truth[i:i + len(p)] == p), None)
        if at is None:
            sys.exit('piece %d (%d instructions from %s) is not what the program executed '
                     'after instruction %d' % (k, len(p), p[0], pos))
        pos = at
    print('%d pieces, %d instructions, all runs of the %d executed' %
          (len(pieces), sum(map(len, pieces)), len(truth)))
    if len(sys.argv) < 4:
        return
    perf = [l.split()[0] for l in open(sys.argv[3]) if l.strip()]
    pi, tails = 0, 0
    for k, p in enumerate(pieces):
        m = 0
        while m < len(p) and pi + m < len(perf) and perf[pi + m] == p[m]:
            m += 1
        last = k + 1 == len(pieces)
        # the longest agreement after which perf goes on with the next piece (or ends)
        while m >= 0 and len(p) - m <= MAX_TAIL and not (
                (last and pi + m == len(perf)) or
                (not last and pi + m < len(perf) and perf[pi + m] == pieces[k + 1][0])):
            m -= 1
        if m < 0 or len(p) - m > MAX_TAIL:
            sys.exit('piece %d: perf and tracekit differ after %d of its %d instructions '
                     '(perf line %d)' % (k, m, len(p), pi + 1))
        tails += len(p) - m
        pi += m
    print('perf: the same %d instructions; tracekit %d more at the ends of pieces' % (pi, tails))


main()
