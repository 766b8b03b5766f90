#include <stdio.h>
#include <string.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"

int tk_btrace_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	if (n < 16 || memcmp(p, TK_BTRACE_MAGIC, 8) != 0)
		return 0;
	uint32_t hsize = tk_le32(p + 12);
	fi->id = TK_FMT_TKBT;
	fi->version = tk_le32(p + 8);
	if (n >= 24)
		snprintf(fi->detail, sizeof fi->detail, "pid %u%s", tk_le32(p + 16),
			 tk_le32(p + 20) ? " (forked child)" : "");
	/* the magic is unambiguous; a bad header size still names the format (the reader
	 * then reports the damage) */
	return hsize >= 40 && hsize % 8 == 0 ? 100 : 90;
}
