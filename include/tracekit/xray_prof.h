/* Stop-gap XRay function profile (llvm-xray account / stack style) over neutral events,
 * used until the shared analysis layer's tk_prof_* is available. */
#ifndef TRACEKIT_XRAY_PROF_H
#define TRACEKIT_XRAY_PROF_H

#include "tracekit/xray.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tk_xray_prof;
struct tk_xray_prof *tk_xray_prof_new(int per_thread);
void tk_xray_prof_free(struct tk_xray_prof *p);
/* Feed it the events of tk_xray_decode(). */
struct tk_sink tk_xray_prof_sink(struct tk_xray_prof *p);
uint64_t tk_xray_prof_orphans(const struct tk_xray_prof *p);

struct tk_xray_prof_opts {
	size_t sz;
	int sort_key;              /* tk_xray_prof_sort_key() */
	uint64_t top;              /* 0 = all rows */
	int csv;
};
/* funcid (0), count, min, med, 90p, 99p, max, sum (7); -1 if unknown. */
int tk_xray_prof_sort_key(const char *name);
int tk_xray_prof_write(struct tk_xray_prof *p, const struct tk_xray *x,
		       const struct tk_xray_map *map, const struct tk_xray_prof_opts *o,
		       struct tk_buf *out);
int tk_xray_prof_write_folded(struct tk_xray_prof *p, const struct tk_xray_map *map,
			      struct tk_buf *out);

#ifdef __cplusplus
}
#endif
#endif
