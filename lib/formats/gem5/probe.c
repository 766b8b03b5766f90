#include <stdio.h>
#include <string.h>

#include "tracekit/gem5.h"

/* gem5's O3PipeView trace: lines "O3PipeView:fetch:...", "O3PipeView:decode:..." etc.
 * Debug-flag output may prefix lines with "<tick>: system.cpu: ", so look inside lines. */
int tk_gem5_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	size_t lim = n < 4096 ? n : 4096;
	int lines = 0, hits = 0;
	size_t i = 0;

	while (i < lim && lines < 16) {
		const uint8_t *nl = memchr(p + i, '\n', lim - i);
		size_t end = nl ? (size_t)(nl - p) : lim;
		if (end > i) {
			lines++;
			if (memmem(p + i, end - i, "O3PipeView:", 11))
				hits++;
		}
		i = end + 1;
	}
	if (!hits)
		return 0;
	fi->id = TK_FMT_GEM5_O3;
	fi->version = 0;
	snprintf(fi->detail, sizeof fi->detail, "O3PipeView text");
	return hits * 2 >= lines ? 95 : 50;
}
