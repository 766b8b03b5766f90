/* Between the branch-trace reader and its decoder. */
#ifndef TK_FORMATS_BTRACE_INTERNAL_H
#define TK_FORMATS_BTRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/btrace.h"

/* Part of thread I's stream as tk_btrace_thread_stream joins it: whole pieces from piece
 * *NEXT on, about MAX bytes of them (at least one), each followed by the OVF packet that
 * marks a lost piece after it, then the piece after them (*PART_LEN: where it starts;
 * the decoder reads on into it to finish its last block). *NEXT moves to that piece.
 * The parts up to their *PART_LEN, end to end, are the thread's whole stream. */
int btrace_thread_part(const struct tk_btrace *bt, size_t i, size_t *next, size_t max,
		      uint8_t **out, size_t *len, size_t *part_len);

/* Where thread I's stream is cut: *START, its first pieces were not kept or lost (a ring
 * snapshot); *END, recording stopped at --max-size (the LIMIT record at *END_OFF) before
 * the thread ended. */
void btrace_thread_cuts(const struct tk_btrace *bt, size_t i, int *start, int *end,
			uint64_t *end_off);

#endif
