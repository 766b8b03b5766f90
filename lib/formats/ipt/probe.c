#include <stdio.h>
#include <string.h>

#include "tracekit/ipt.h"

/* A PSB is 02 82 repeated 8 times; a raw stream (perf's AUX data, a ptdump input) has one
 * within its first few KiB, possibly after PAD bytes. */
static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
				 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };

int tk_ipt_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	size_t lim = n < 16384 ? n : 16384;
	const uint8_t *hit = lim >= 16 ? memmem(p, lim, psb, sizeof psb) : NULL;
	if (!hit)
		return 0;
	size_t off = (size_t)(hit - p);
	size_t pads = 0;
	while (pads < off && p[pads] == 0)
		pads++;
	fi->id = TK_FMT_IPT;
	fi->version = 0;
	snprintf(fi->detail, sizeof fi->detail, "first PSB at offset 0x%zx", off);
	/* Starting with a PSB (after PADs) is what every real stream does. */
	return pads == off ? 95 : 60;
}
