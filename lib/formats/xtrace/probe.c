#include <stdio.h>

#include "tracekit/common.h"
#include "tracekit/xtrace.h"

#include "formats/xtrace/internal.h"

size_t tk_xtrace_item_len(const uint8_t *p, size_t n)
{
	return xt_item_len(p, n);
}

/* Instruction files have no header: walk the first tokens and require them all to be
 * valid, with instructions among them. Snapshot files carry a magic (or, in old traces,
 * nothing we can recognise with confidence). */
int tk_xtrace_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	if (n >= 8 && tk_le32(p) == TK_XTRACE_SNAP_MAGIC) {
		fi->id = TK_FMT_XTRACE_SNAP;
		fi->version = (unsigned)tk_le64(p + 8);
		snprintf(fi->detail, sizeof fi->detail, "register snapshots");
		return 95;
	}
	size_t off = 0, tokens = 0, insns = 0;
	while (off < n && tokens < 256) {
		size_t len = tk_xtrace_item_len(p + off, n - off);
		if (len == 0)
			return 0;
		if (len == SIZE_MAX || off + len > n)
			break; /* the peek window ends inside an item */
		if ((p[off] & 7) == 1)
			insns++;
		off += len;
		tokens++;
	}
	if (insns == 0 || (tokens < 16 && off < n))
		return 0;
	fi->id = TK_FMT_XTRACE_INSN;
	fi->version = 0;
	snprintf(fi->detail, sizeof fi->detail, "instruction stream");
	return tokens >= 64 ? 70 : 40;
}
