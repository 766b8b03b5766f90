#include <stdio.h>

#include "tracekit/common.h"
#include "tracekit/xtrace.h"

#include "formats/xtrace/internal.h"

size_t tk_xtrace_item_len(const uint8_t *p, size_t n)
{
	return xt_item_len(p, n);
}

/* Old snapshot files have no header: accept when some vector length puts a matching length
 * field at the end of the first snapshot and its counts are sane. */
static int probe_old_snapshot(const uint8_t *p, size_t n)
{
	/* the counts first: each vector length's field is on a page of its own, up to 64 KiB
	 * into the file, and most files are no snapshots */
	if (n < 32 || tk_le64(p) >= 1024 || tk_le64(p + 16) > tk_le64(p + 24))
		return 0;
	for (uint32_t vl = 128; vl <= 2048; vl += 128) {
		struct tk_xtrace_snap_layout l;
		tk_xtrace_snap_layout(vl, &l);
		if (n < l.size)
			return 0;
		if (tk_le64(p + l.off_vl) == vl)
			return 1;
	}
	return 0;
}

/* Instruction files have no header: they start at a PCINST (the writer's rule at every
 * sync point) followed by valid tokens. A damaged token later in the peek window does not
 * reject the file (the reader reports it with its offset). */
int tk_xtrace_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	if (n >= 8 && tk_le32(p) == TK_XTRACE_SNAP_MAGIC) {
		fi->id = TK_FMT_XTRACE_SNAP;
		fi->version = n >= 16 ? (unsigned)tk_le64(p + 8) : 0;   /* a header cut short */
		snprintf(fi->detail, sizeof fi->detail, "register snapshots");
		return 95;
	}
	if (probe_old_snapshot(p, n)) {
		fi->id = TK_FMT_XTRACE_SNAP;
		fi->version = 0;
		snprintf(fi->detail, sizeof fi->detail, "register snapshots, no header (old trace)");
		return 60;
	}
	size_t off = 0, tokens = 0, insns = 0;
	int bad = 0;
	while (off < n && tokens < 256) {
		size_t len = xt_item_len(p + off, n - off);
		if (len == 0) {
			bad = 1;
			break;
		}
		if (len == SIZE_MAX || off + len > n)
			break; /* the peek window ends inside an item */
		if ((p[off] & 7) == 1)
			insns++;
		off += len;
		tokens++;
	}
	int starts_pcinst = n >= 13 && (p[0] & 0x3f) == 0x09 && (p[0] >> 6) <= 1;
	if (insns == 0)
		return 0;
	if (bad && !(starts_pcinst && tokens >= 8))
		return 0;
	if (!bad && tokens < 16 && off < n)
		return 0;
	fi->id = TK_FMT_XTRACE_INSN;
	fi->version = 0;
	snprintf(fi->detail, sizeof fi->detail, "instruction stream");
	return bad ? 30 : tokens >= 64 ? 70 : 40;
}
