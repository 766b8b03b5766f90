/* xtrace file names: xtrace.{timestamp}.{tid|cpuid}.hint{9|13}.{xinsndata|xsnapshot}.bin */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/xtrace.h"

static const char INSN_SUFFIX[] = ".xinsndata.bin";
static const char SNAP_SUFFIX[] = ".xsnapshot.bin";

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

int tk_xtrace_parse_name(const char *path, struct tk_xtrace_name *nm)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	unsigned long long ts, id;
	unsigned hint;
	int used = 0;
	memset(nm, 0, sizeof *nm);
	if (sscanf(base, "xtrace.%llu.%llu.hint%u.%n", &ts, &id, &hint, &used) != 3 || !used)
		return 0;
	if (strcmp(base + used, INSN_SUFFIX + 1) == 0)
		nm->is_snapshot = 0;
	else if (strcmp(base + used, SNAP_SUFFIX + 1) == 0)
		nm->is_snapshot = 1;
	else
		return 0;
	nm->timestamp = ts;
	nm->id = id;
	nm->hint = hint;
	return 1;
}

int tk_xtrace_companion(const char *path, char *buf, size_t len)
{
	const char *from, *to;
	if (ends_with(path, INSN_SUFFIX))
		from = INSN_SUFFIX, to = SNAP_SUFFIX;
	else if (ends_with(path, SNAP_SUFFIX))
		from = SNAP_SUFFIX, to = INSN_SUFFIX;
	else
		return -TK_E_NOT_FOUND;
	size_t stem = strlen(path) - strlen(from);
	if (stem + strlen(to) + 1 > len)
		return -TK_E_LIMIT;
	memcpy(buf, path, stem);
	strcpy(buf + stem, to);
	return 0;
}
