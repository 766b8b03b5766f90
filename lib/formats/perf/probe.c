#include <stdio.h>
#include <string.h>

#include "tracekit/common.h"
#include "tracekit/perf.h"

int tk_perf_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	if (n < 16)
		return 0;
	if (memcmp(p, "PERFILE2", 8) == 0) {
		fi->big_endian = 0;
	} else if (memcmp(p, "2ELIFREP", 8) == 0) {
		fi->big_endian = 1;
	} else {
		return 0;
	}
	fi->id = TK_FMT_PERF;
	fi->version = 2;
	uint64_t hdr = fi->big_endian ? tk_be64(p + 8) : tk_le64(p + 8);
	snprintf(fi->detail, sizeof fi->detail, "header size %llu", (unsigned long long)hdr);
	return 100;
}
