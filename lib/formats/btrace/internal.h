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

/* The same into *OUT, a buffer of *CAP bytes the caller keeps (grown as needed; NULL and
 * 0 at first): parts joined one after another fault no page in again. */
int btrace_thread_part_into(const struct tk_btrace *bt, size_t i, size_t *next, size_t max,
			    uint8_t **out, size_t *cap, size_t *len, size_t *part_len);

/* The extent of that part without joining it: its pieces [NEXT, *END), *LEN bytes with
 * the piece read on into, *PART_LEN without. */
int btrace_part_extent(const struct tk_btrace *bt, size_t i, size_t next, size_t max, size_t *end,
		       size_t *len, size_t *part_len);

/* Thread I's parts of at most MAX bytes, in order: FN(CTX, I, NEXT, BASE, LEN) for each,
 * NEXT its first piece, BASE and LEN where it lies in the thread's stream; a thread
 * without pieces has one, empty (where its cuts are said). FN's error stops the walk. */
typedef int (*btrace_part_fn)(void *ctx, size_t i, size_t next, uint64_t base, uint64_t len);
int btrace_thread_parts(const struct tk_btrace *bt, size_t i, size_t max, btrace_part_fn fn,
			void *ctx);

/* Where thread I's stream is cut: *START, its first pieces were not kept or lost (a ring
 * snapshot); *END, recording stopped at --max-size (the LIMIT record at *END_OFF) before
 * the thread ended. */
void btrace_thread_cuts(const struct tk_btrace *bt, size_t i, int *start, int *end,
			uint64_t *end_off);

/* A part of a thread's stream decoded at once: a few of the flow decoder's chunks. */
#define BTRACE_PART_BYTES ((size_t)8 << 20)

/* A part joined already (btrace_thread_part of its first piece): its bytes, where the
 * piece read on into begins, and the next part's first piece. */
struct btrace_joined {
	const uint8_t *pt;
	size_t len, part_len, end;
};

/* Thread I's part from piece NEXT on (at most MAX bytes, btrace_thread_part; JOINED if not
 * NULL) as neutral events into SINK (track: the thread id), on NTHREADS of the flow
 * decoder's workers; the container's cuts as gaps, the thread's start before its first
 * part, its end after its last (NEXT at or past its pieces: the end alone). Gaps into GAPS
 * (may be NULL), their offsets in the thread's stream (the part's starts at BASE). */
struct tk_image;
int btrace_part_events(const struct tk_btrace *bt, size_t i, size_t next, size_t max,
		       const struct tk_image *img, unsigned nthreads, struct tk_sink sink,
		       struct tk_gap_stats *gaps, uint64_t base, const struct btrace_joined *joined);

#endif
