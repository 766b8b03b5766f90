/* Format detection by content. */
#ifndef TRACEKIT_DETECT_H
#define TRACEKIT_DETECT_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tk_format_id {
	TK_FMT_UNKNOWN = 0,
	TK_FMT_IPT,          /* raw Intel PT packet stream */
	TK_FMT_PERF,         /* perf.data */
	TK_FMT_XRAY,         /* LLVM XRay log, basic or FDR mode */
	TK_FMT_KANATA,       /* Kanata pipeline log */
	TK_FMT_GEM5_O3,      /* gem5 O3PipeView text */
	TK_FMT_XTRACE_INSN,  /* Kunpeng xtrace instruction stream (.xinsndata.bin) */
	TK_FMT_XTRACE_SNAP,  /* Kunpeng xtrace register snapshots (.xsnapshot.bin) */
	TK_FMT_TKBT,         /* tracekit branch trace container */
	TK_FMT__COUNT
};

struct tk_format_info {
	enum tk_format_id id;
	unsigned version;     /* format version where the format has one, else 0 */
	int big_endian;
	int confidence;       /* 0..100: how sure the probe is */
	char detail[96];      /* short description, e.g. "FDR mode" */
};

/* Probe the first bytes of an input (at least 4 KiB where available; less for short files).
 * Returns 0 and fills *fi, or -TK_E_UNKNOWN_FORMAT. */
TK_API int tk_detect_format(const uint8_t *p, size_t n, struct tk_format_info *fi);

/* Short name used on the command line (--format NAME) and in output: "ipt", "xray", ... */
TK_API const char *tk_format_name(enum tk_format_id id);
/* Long human name: "Intel PT raw stream", ... */
TK_API const char *tk_format_description(enum tk_format_id id);
/* TK_FMT_UNKNOWN if NAME is not a format name. */
TK_API enum tk_format_id tk_format_by_name(const char *name);

/* How many bytes detection wants to look at. */
#define TK_DETECT_PEEK TK_INPUT_PEEK

#ifdef __cplusplus
}
#endif
#endif
