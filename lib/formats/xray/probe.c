#include <stdio.h>

#include "tracekit/common.h"
#include "tracekit/xray.h"

/* XRay logs start with a 32-byte header: u16 version, u16 type (0 basic, 1 FDR), a 32-bit
 * field whose low two bits are constant_tsc/nonstop_tsc, u64 cycle frequency, 16 bytes of
 * free-form data. The first record after it tells basic from FDR a second time. */
int tk_xray_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	if (n < 32)
		return 0;
	for (int be = 0; be <= 1; be++) {
		unsigned version = be ? tk_be16(p) : tk_le16(p);
		unsigned type = be ? tk_be16(p + 2) : tk_le16(p + 2);
		uint32_t bits = be ? tk_be32(p + 4) : tk_le32(p + 4);
		uint64_t freq = be ? tk_be64(p + 8) : tk_le64(p + 8);
		int conf = 50;

		if (version < 1 || version > 5 || type > 1)
			continue;
		/* Only the two TSC flags are defined. The basic-mode runtime leaves the other
		 * bits uninitialised, so only FDR logs are held to it. */
		if (type == 1 && (bits & ~(uint32_t)(be ? 0xc3000003u : 0x03000003u)))
			continue;
		if (type == 0 && n >= 64 && (n - 32) % 32 && n < TK_DETECT_PEEK)
			conf = 30;
		if (n >= 33) {
			uint8_t first = p[32];
			if (type == 1) {
				/* FDR: metadata record NewBuffer (v1) or BufferExtents (v2+); big-endian
				 * bit-fields put the metadata bit on top. */
				if (be ? first != 0x80 && first != 0x87
				       : first != 0x01 && first != 0x0f)
					continue;
				conf = 90;
			} else {
				/* basic: u16 record type 0 (function) or 1 (argument) */
				if (n >= 34) {
					unsigned rt = be ? tk_be16(p + 32) : tk_le16(p + 32);
					if (rt > 1)
						continue;
				}
				conf = 80;
			}
		}
		fi->id = TK_FMT_XRAY;
		fi->version = version;
		fi->big_endian = be;
		snprintf(fi->detail, sizeof fi->detail, "%s mode%s, %llu Hz",
			 type ? "FDR" : "basic", be ? ", big-endian" : "",
			 (unsigned long long)freq);
		return conf;
	}
	return 0;
}
