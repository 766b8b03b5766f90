/* Format detection: ask every format's probe and keep the most confident answer. This file
 * is the only place that knows all formats; the formats themselves never include each other. */
#include <string.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"
#include "tracekit/detect.h"
#include "tracekit/gem5.h"
#include "tracekit/ipt.h"
#include "tracekit/kanata.h"
#include "tracekit/perf.h"
#include "tracekit/xray.h"
#include "tracekit/xtrace.h"
#include "tracekit/internal/source.h"

typedef int (*probe_fn)(const uint8_t *p, size_t n, struct tk_format_info *fi);

/* Formats with a magic first, so that a weak probe never wins over a certain one. */
static const probe_fn probes[] = {
	tk_btrace_probe, tk_perf_probe, tk_kanata_probe, tk_gem5_probe,
	tk_xray_probe,   tk_ipt_probe,  tk_xtrace_probe,
};

int tk_detect_format(const uint8_t *p, size_t n, struct tk_format_info *fi)
{
	struct tk_format_info best = { 0 }, cur;
	int best_conf = 0;

	for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
		memset(&cur, 0, sizeof cur);
		int conf = probes[i](p, n, &cur);
		if (conf > best_conf) {
			best = cur;
			best_conf = conf;
		}
		if (best_conf >= 100)   /* certain (a magic): no later probe can win */
			break;
	}
	best.confidence = best_conf;
	*fi = best;
	return best_conf > 0 ? 0 : -TK_E_UNKNOWN_FORMAT;
}

/* The registry: each format's names and its source (tracekit/source.h; NULL: none yet). */
static const struct {
	const char *name, *description;
	const struct tk_source_ops *source;
} formats[TK_FMT__COUNT] = {
	[TK_FMT_UNKNOWN] = { "unknown", "unknown format", NULL },
	[TK_FMT_IPT] = { "ipt", "Intel PT raw stream", &tk_source_ipt },
	[TK_FMT_PERF] = { "perf", "perf.data", &tk_source_ipt },
	[TK_FMT_XRAY] = { "xray", "LLVM XRay log", &tk_source_xray },
	[TK_FMT_KANATA] = { "kanata", "Kanata pipeline log", &tk_source_kanata },
	[TK_FMT_GEM5_O3] = { "gem5", "gem5 O3PipeView trace", NULL },
	[TK_FMT_XTRACE_INSN] = { "xtrace", "Kunpeng xtrace instruction stream", &tk_source_xtrace },
	[TK_FMT_XTRACE_SNAP] = { "xtrace-snapshot", "Kunpeng xtrace register snapshots",
				 &tk_source_xtrace },
	[TK_FMT_TKBT] = { "btrace", "tracekit branch trace", &tk_source_btrace },
};

const struct tk_source_ops *tk_source_ops_of(enum tk_format_id id)
{
	return (unsigned)id < TK_FMT__COUNT ? formats[id].source : NULL;
}

const char *tk_format_name(enum tk_format_id id)
{
	return (unsigned)id < TK_FMT__COUNT ? formats[id].name : "unknown";
}

const char *tk_format_description(enum tk_format_id id)
{
	return (unsigned)id < TK_FMT__COUNT ? formats[id].description : "unknown format";
}

enum tk_format_id tk_format_by_name(const char *name)
{
	for (int i = 1; i < TK_FMT__COUNT; i++)
		if (strcmp(formats[i].name, name) == 0)
			return (enum tk_format_id)i;
	return TK_FMT_UNKNOWN;
}
