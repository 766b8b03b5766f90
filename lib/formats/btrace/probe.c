#include <stdio.h>
#include <string.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"

int tk_btrace_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	if (n < 16 || memcmp(p, TK_BTRACE_MAGIC, 8) != 0)
		return 0;
	fi->id = TK_FMT_TKBT;
	fi->version = tk_le32(p + 8);
	snprintf(fi->detail, sizeof fi->detail, "version %u", fi->version);
	return 100;
}
