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
TK_API int tk_gem5_probe(const uint8_t *p, size_t n, struct tk_format_info *fi);

struct tk_buf;
struct tk_input;

/* O3PipeView -> Kanata. Stages fetch/decode/rename/dispatch/issue/complete/retire become
 * F/Dc/Rn/Ds/Is/Cm/Rt in lane 0; a tick of 0 means the stage was not reached; a retire tick
 * of 0 means the instruction was squashed (R type 1 one cycle after its last stage); a
 * retired instruction gets R one cycle after its Rt. Instructions are sorted by seqNum in a
 * window of `window` completed instructions, and ticks per cycle are detected as the
 * greatest common divisor of the tick differences in the first window.
 *
 * Several CPUs: gem5 prints O3PipeView records raw (no tick or object name), so records of
 * several CPUs in one file can only be told apart when the lines carry a debug prefix
 * naming the CPU ("1000: system.cpu1: O3PipeView:..."; a sub-object such as
 * "system.cpu1.commit" counts as system.cpu1). A CPU is the name's trailing number
 * ("system.cpu1" -> 1, "system.switch_cpus3" -> 3; "system.cpu" and lines without a name
 * -> 0; a line without a name continues the CPU of the line before), and becomes the
 * Kanata thread of its instructions (the I command's thread column). seqNums are per CPU, so each CPU is sorted on its
 * own and the CPUs are merged by fetch tick; Kanata ids are renumbered across CPUs, the I
 * command keeps the seqNum. Without a prefix, a seqNum seen twice on the same CPU is
 * reported (res.duplicates): likely several CPUs that cannot be separated. */
struct tk_gem5_opts {
	size_t sz;
	size_t window;              /* >= 16384; 0 = 16384 */
	uint64_t ticks_per_cycle;   /* 0 = detect */
	int select_cpu;             /* 1: keep only the CPU whose thread id is `cpu` */
	int64_t cpu;
	void (*diag)(void *ctx, uint64_t line, int is_error, const char *msg);
	void *ctx;
};

struct tk_gem5_result {
	uint64_t lines, insns, retired, squashed, skipped_lines;
	uint64_t ticks_per_cycle;
	uint64_t out_of_order;      /* instructions that arrived after the window had passed them */
	uint64_t cpus;              /* CPUs converted */
	uint64_t other_cpu_lines;   /* records of CPUs not selected */
	uint64_t duplicates;        /* seqNums seen twice in a row on one CPU */
};

TK_API int tk_gem5_to_kanata(struct tk_input *in, struct tk_buf *out, const struct tk_gem5_opts *opts,
		      struct tk_gem5_result *res);

#ifdef __cplusplus
}
#endif
#endif
