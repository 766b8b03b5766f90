#include <stdio.h>
#include <string.h>

#include "tracekit/kanata.h"

/* The first line is "Kanata<TAB>0004"; real producers add spaces and trailing tabs. */
int tk_kanata_probe(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	size_t i = 0;
	if (n >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)
		i = 3;
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	if (n - i < 6 || memcmp(p + i, "Kanata", 6) != 0)
		return 0;
	i += 6;
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	unsigned version = 0;
	size_t digits = 0;
	while (i < n && p[i] >= '0' && p[i] <= '9' && digits < 8) {
		version = version * 10 + (unsigned)(p[i++] - '0');
		digits++;
	}
	fi->id = TK_FMT_KANATA;
	fi->version = version;
	if (!digits)
		snprintf(fi->detail, sizeof fi->detail, "no version number");
	return 100;
}
