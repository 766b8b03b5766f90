#!/usr/bin/env bash
# Generate a big valid Kanata log by tiling kanata-sample-2: each copy shifts instruction ids
# and retire ids, drops the header, and flushes the instructions the sample leaves in flight,
# so the result is one valid log (tracekit check reports only L-after-R warnings).
# usage: kanata-gen.sh SAMPLE.log.gz COPIES OUT
set -euo pipefail
sample=$1 copies=$2 out=$3
zcat -f "$sample" | awk -F'\t' -v OFS='\t' -v copies="$copies" '
{ line[NR] = $0 }
$1 == "I" { live[$2] = 1; n_ids++ }
$1 == "R" { delete live[$2]; if ($4 == 0) n_rid++ }
END {
	for (k = 0; k < copies; k++) {
		off = k * n_ids; roff = k * n_rid
		for (i = 1; i <= NR; i++) {
			split(line[i], f, "\t")
			c = f[1]
			if (c == "Kanata" || c == "C=") { if (k == 0) print line[i]; continue }
			if (c == "C") { print line[i]; continue }
			if (c == "R") { print c, f[2] + off, f[3] + roff, f[4]; continue }
			if (c == "W") { print c, f[2] + off, f[3] + off, f[4]; continue }
			f[2] = f[2] + off
			s = f[1]
			for (j = 2; j in f; j++) s = s "\t" f[j]
			print s
		}
		print "C", 1
		for (id in live) print "R", id + off, 0, 1
	}
}' > "$out"
