/* gem5 O3PipeView pipeline text. */
#ifndef TRACEKIT_GEM5_H
#define TRACEKIT_GEM5_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/detect.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Content probe: confidence 0..100 (0: not this format). */
int tk_gem5_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

struct tk_buf;
struct tk_input;

/* O3PipeView -> Kanata. Stages fetch/decode/rename/dispatch/issue/complete/retire become
 * F/Dc/Rn/Ds/Is/Cm/Rt in lane 0; a tick of 0 means the stage was not reached; a retire tick
 * of 0 means the instruction was squashed (R type 1 one cycle after its last stage); a
 * retired instruction gets R one cycle after its Rt. Instructions are sorted by seqNum in a
 * window of `window` completed instructions, and ticks per cycle are detected as the
 * greatest common divisor of the tick differences in the first window. */
struct tk_gem5_opts {
	size_t sz;
	size_t window;              /* >= 16384; 0 = 16384 */
	uint64_t ticks_per_cycle;   /* 0 = detect */
	void (*diag)(void *ctx, uint64_t line, int is_error, const char *msg);
	void *ctx;
};

struct tk_gem5_result {
	uint64_t lines, insns, retired, squashed, skipped_lines;
	uint64_t ticks_per_cycle;
	uint64_t out_of_order;      /* instructions that arrived after the window had passed them */
};

int tk_gem5_to_kanata(struct tk_input *in, struct tk_buf *out, const struct tk_gem5_opts *opts,
		      struct tk_gem5_result *res);

#ifdef __cplusplus
}
#endif
#endif
