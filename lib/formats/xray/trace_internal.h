/* The XRay trace's private state, shared by its files: trace.c (expanding buffers and
 * delivering records in order), trace_index.c (the buffer index) and trace_parallel.c
 * (chunks decoded on workers and merged). */
#ifndef TK_FORMATS_XRAY_TRACE_INTERNAL_H
#define TK_FORMATS_XRAY_TRACE_INTERNAL_H

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "formats/xray/internal.h"

struct xr_buf {
	uint64_t start, end;       /* record bytes (after BufferExtents) */
	uint64_t sec;
	uint32_t nanos;
	uint32_t thread;
	uint64_t first_tsc;
	uint64_t seq;
	int self_contained;        /* sets its base TSC before any record: needs no carry */
};

/* Flags of a record expanded without the inherited state. */
enum { FIX_BASE = 1, FIX_CPU = 2, FIX_FUNC = 4, FIX_RT = 8, FIX_PID = 16 };

struct xr_rec {
	struct tk_xray_rec r;
	uint32_t argi;
	uint8_t fix;
};

/* The output of expanding one buffer. */
struct xr_out {
	struct xr_rec *recs;
	size_t n, cap;
	uint64_t *args;
	size_t nargs, capargs;
	/* state at the end of the buffer; *_known = set inside the buffer */
	int base_known, cpu_known, func_known, rt_known, pid_known;
	uint64_t base;             /* absolute if base_known, else the sum of deltas */
	uint16_t cpu, rt;
	int32_t func;
	uint32_t pid;
	/* damage: the buffer was cut at err_off */
	const char *err;
	uint64_t err_off, err_skip;
	int err_reason;
	int nomem;
};

/* The state a thread carries from buffer to buffer. */
struct xr_carry {
	uint64_t base;
	uint16_t cpu, rt;
	int32_t func;
	uint32_t pid;
	uint64_t depth;
	int wrapped;
};

struct tk_xray {
	const uint8_t *p;
	size_t n;
	struct tk_xray_header h;
	struct tk_xray_opts opts;
	struct xr_buf *bufs;
	size_t nbufs, capbufs;
	struct tk_xray_thread_info *threads;
	size_t nthreads, capthreads;
	uint32_t *thash;           /* (pid, tid) -> thread index + 1 */
	size_t thash_cap;
	uint32_t *rank;            /* FDR: thread order of llvm-xray's block index */
	struct tk_gap_stats index_gaps;
	struct tk_xray_stats stats;
	uint8_t cpu_seen[8192];
};

/* Counts of one chunk of buffers decoded on a worker, merged in order. */
struct xr_tstat {
	uint32_t thread;
	uint64_t records, first, last;
	uint64_t clamped;          /* exits seen at (chunk-relative) depth 0 */
	uint64_t end_depth;
	size_t clamp_first;        /* its clamped exits' offsets: the chunk's clamps[] from here */
};
struct xr_err {
	uint64_t off, skip;
	const char *msg;
};
struct xr_chunk_stats {
	struct tk_xray_stats s;
	uint8_t cpu_seen[8192];
	struct xr_tstat *ts;
	size_t nts, capts;
	struct xr_err *errs;
	size_t nerrs, caperrs;
	uint64_t *clamps;          /* offsets of the exits clamped, in order (the merge reports
				      the first orphan's: any one, however deep the carried depth) */
	size_t nclamps, capclamps;
	int nomem;
};

struct deliver {
	struct tk_xray *x;
	struct xr_chunk_stats *cst; /* chunk mode: count here, log nothing */
	struct xr_carry carry;
	uint32_t thread;
	int have_thread;
	tk_xray_rec_fn cb;
	void *cb_ctx;
	/* neutral events */
	struct tk_event_batch *batch;
};

#define RELEASE_SPAN ((uint64_t)4 << 20)
void xr_release(const struct tk_xray *x, uint64_t start, uint64_t end);
/* Buffers' input given back together, adjacent ones in one madvise: each call flushes the
 * TLB of every CPU the process ran on, 35 µs here at -j 1 and 85 µs at -j 2 (2,360 calls,
 * one per buffer, were 12 % of the YAML's -j 1 time and a sixth of its merging thread's). */
#define RELEASE_BATCH 64
struct xr_span { uint64_t start, end; };
struct xr_release_batch {
	struct xr_span r[RELEASE_BATCH];
	size_t n;
	uint64_t bytes;
};
void xr_release_add(const struct tk_xray *x, struct xr_release_batch *rb, uint64_t start,
		    uint64_t end);
void xr_release_flush(const struct tk_xray *x, struct xr_release_batch *rb);
int xr_walk_records(struct tk_xray *x, tk_xray_rec_fn cb, void *ctx);
void xr_stats_reset(struct tk_xray *x);
void xr_stats_finish(struct tk_xray *x);
void xr_log_err(struct tk_xray *x, uint64_t off, uint64_t skip, const char *msg);
void xr_expand(const struct tk_xray *x, const struct xr_buf *b, struct xr_out *o);
void xr_out_free(struct xr_out *o);
int xr_deliver_buf(struct deliver *d, const struct xr_buf *b, struct xr_out *o);
/* P + offset addresses the bytes at a file offset of B (x->p, or xr_buf_read's base). */
int xr_expand_deliver_fdr(struct deliver *d, const struct xr_buf *b, struct xr_out *o,
			  const uint8_t *p);
/* B's bytes read with pread into *COPY (grown to *CAP as needed), when the index was given
 * the input: the base to give xr_expand_deliver_fdr, or NULL (read the mapping). A worker
 * thus reads its thread's buffers without faulting in the mapping, whose fault-around
 * windows straddle other threads' buffers and came back after each release. */
#define XR_READ_MAX ((size_t)16 << 20)
const uint8_t *xr_buf_read(const struct tk_xray *x, const struct xr_buf *b, uint8_t **copy,
			   size_t *cap);
void xr_basic_resume(const struct xr_out *o, struct xr_buf *b);

#endif
