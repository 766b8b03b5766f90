/* The library's own helpers that its commands, recorders and tests share: not part of the
 * stable API (include/tracekit/internal/ is neither installed nor exported by
 * libtracekit.so; link the static library to use it). */
#ifndef TRACEKIT_INTERNAL_UTIL_H
#define TRACEKIT_INTERNAL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tracekit/common.h"
#include "tracekit/event.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- background writer: write() of one buffer overlaps the filling of the next ------ */
/* Writing GBs of text into a file costs the kernel about as much as formatting it (the
 * page-cache copy): a writer thread writes each handed-over buffer to FD, in order, while
 * the caller fills another. Past the first 64 MiB, a regular file is written with
 * O_DIRECT where the filesystem allows it (whole aligned blocks, staged; the flags are
 * restored and the tail written normally at tk_writer_stop), so the rest of a huge
 * output costs neither the copy nor write-back throttling. */
struct tk_writer;
struct tk_writer *tk_writer_start(int fd, int *err);
/* Hand B's bytes to the writer (waiting while it still writes the previous ones); B goes
 * on in an empty buffer of at least the same capacity and keeps its fd. Returns the first
 * write error (also stored in b->err), else 0. */
int tk_writer_submit(struct tk_writer *w, struct tk_buf *b);
/* Wait until everything handed over is written, end the thread; its first error (with
 * -TK_E_IO, errno is set to the failed write's). */
int tk_writer_stop(struct tk_writer *w);

/* ---- text buffers kept for the thread that filled them ---------------------------------- */
/* Chunks formatted at once and written in order each need a buffer until their turn; one
 * filled on a core and then on another brings each of its cache lines across, written
 * back and fetched (the XRay YAML's -j 2 spent 13-24 % more CPU than -j 1 on that).
 * tk_bufs_take gives the calling thread a free buffer it filled itself if there is one,
 * else a new one while fewer than MOST were made, else any free one (or a new one: none
 * is free); NULL only without memory. tk_bufs_give puts it back (from any thread); the
 * memory stays until tk_bufs_free. */
struct tk_bufs;
struct tk_bufs *tk_bufs_new(size_t most);
struct tk_buf *tk_bufs_take(struct tk_bufs *p);
/* The same, with room for BYTES (made on huge pages from 1 MiB): for a chunk's text. NULL
 * without memory for it. */
struct tk_buf *tk_bufs_take_room(struct tk_bufs *p, size_t bytes);
void tk_bufs_give(struct tk_bufs *p, struct tk_buf *b);
void tk_bufs_free(struct tk_bufs *p);
/* A chunk whose turn has come needs no buffer: once the chunks before it are out (*NEXT,
 * the next chunk the merge outputs, is CHUNK; stored with release by the merging thread
 * after its output), TEXT's bytes so far go onto OUT and TEXT is emptied, so that a chunk's
 * text is written in pieces while it is hot, as in order, not held whole (a chunk's text
 * is often larger than a core's L2). Only for a file's OUT: the merging thread leaves OUT
 * alone while it waits for this chunk. Call it as TEXT grows, every tk_bufs_stream_bytes()
 * (1 MiB; the environment's TK_BUFS_STREAM for tests). */
size_t tk_bufs_stream_bytes(void);
void tk_bufs_stream(struct tk_buf *text, struct tk_buf *out, const size_t *next, size_t chunk);
/* A chunk's text (megabytes, past the L2) is written where no line is in the cache: each
 * store waited for its line. Called as the text grows (a record at a time), this asks for
 * the line TK_BUF_AHEAD bytes on, to be written, so that it is there when the text is. */
#define TK_BUF_AHEAD 1024
static inline void tk_buf_write_ahead(const struct tk_buf *b)
{
	if (b->cap - b->len > TK_BUF_AHEAD)
		__builtin_prefetch(b->data + b->len + TK_BUF_AHEAD, 1, 3);
}

/* ---- where a run's CPU time goes: the serial part and the parallel part -------------- */
/* Every parallel path runs on tk_pool_run, so the pool can tell them apart for any
 * format: CPU of its workers (parallel), CPU of the process's main thread inside pool runs
 * (the in-order merges: one thread however many workers) and outside them (open, planning
 * scans, output: serial). Thread CPU clocks, so a loaded machine does not change them much.
 * The CLI prints them with TK_PHASES set (docs/PERFORMANCE.md, "Serial fraction"). */
struct tk_pool_times {
	double worker_cpu;      /* seconds, summed over pool workers */
	double merge_cpu;       /* the main thread inside pool runs (merging, or jobs at -j 1) */
	double inline_work_cpu; /* of which jobs run on the main thread (pools of one thread) */
	double ordered_cpu;     /* threads outside the pools whose work goes in order (a
				   timeline's formatter, a relay's consumer): tk_pool_add_ordered */
	uint64_t runs, jobs;
};
void tk_pool_times(struct tk_pool_times *t);
/* A thread outside the pools did SECONDS of work that only one thread can do, in order:
 * serial like the merges, though beside the workers (TK_PHASES, bench/scaling.sh's model). */
void tk_pool_add_ordered(double seconds);
/* The calling thread's CPU seconds so far. */
double tk_thread_cpu(void);
/* Account the pools' CPU time from now on (the CLI, when TK_PHASES is set); off, the
 * per-job clocks are not read and tk_pool_times stays zero. */
void tk_pool_timing(int on);
int tk_pool_timed(void);
/* Tests only: a pause of US microseconds at the pool's two hand-overs of parked threads
 * (a worker between its pool's end and its next wait; the caller between choosing threads
 * and waking them), to make the interleavings that a loaded machine makes; 0: none. */
void tk_pool_test_pause(unsigned us);
/* How the profile runner's chunk seams went (lib/analysis/run.c), for TK_PHASES too: a
 * chunk's profile merged (exact), its recorded events replayed into the total instead
 * (replayed; given_up of them stopped making their profile part-way), or the chunk decoded
 * again on the merging thread (decoded_again). GRAFTED: the merged profiles' call-tree
 * nodes, MADE: those of them new to the total (the rest repeat a call path it had). */
struct tk_seam_counts {
	uint64_t exact, replayed, given_up, decoded_again;
	uint64_t grafted, made;
};
void tk_seam_counts(struct tk_seam_counts *c);

/* ---- output files: never over an input, never half-written over a good file -------- */
/* The index of the first of the N INPUTS that is the file PATH names (same device and
 * inode: a hard link or another spelling counts), or -1. Inputs that cannot be stat'ed
 * are ignored. */
int tk_outfile_same(const char *path, const char *const *inputs, size_t n);
/* Open PATH for writing. A regular file (or a new one) is written under a temporary name
 * in the same directory and renamed over PATH by tk_outfile_close, so an error never
 * leaves a half-written file in place of the one before; anything else (a terminal, a
 * pipe, a device) is written directly. NULL and *err = -TK_E_IO with errno kept on
 * failure. */
struct tk_outfile;
struct tk_outfile *tk_outfile_open(const char *path, int *err);
int tk_outfile_fd(const struct tk_outfile *f);
/* Close; KEEP: rename the temporary file over the path (else remove it). -TK_E_IO with
 * errno kept if the rename (or close) fails. */
int tk_outfile_close(struct tk_outfile *f, int keep);
/* SIGINT, SIGTERM and SIGHUP (unless ignored) remove the temporary files of the outputs
 * open at that moment, then end the process as the signal would. */
int tk_outfile_catch_signals(void);

/* calloc for a table whose first use reads it (hash probing): each page is written once
 * here. A page of a large calloc read first maps the shared zero page, and the write after
 * it is a copy-on-write fault that flushes the TLB of every CPU running another thread of
 * the process (9% of `profile -j 2` on libLLVM). */
void *tk_calloc_written(size_t n, size_t size);

/* For readers that read a compressed file in pieces on several threads and may read it
 * again in order (Kanata's statistics): while HOLD, a cut the decompression finds is not
 * told (logged, tk_input_cut) by the reads, and tk_input_cut_found says whether there is
 * one; tk_input_rewind starts a compressed regular file's stream again from its start (0,
 * or -TK_E_BAD_STATE for a pipe, a mapped input or one read ahead); tk_input_tell_cut ends
 * the hold and tells a cut found meanwhile, as a read at the end would. */
void tk_input_hold_cut(struct tk_input *in, int hold);
int tk_input_cut_found(const struct tk_input *in);
int tk_input_rewind(struct tk_input *in);
void tk_input_tell_cut(struct tk_input *in);
/* Whether IN is read from a pipe (or stdin): read once, in order. */
int tk_input_is_pipe(const struct tk_input *in);

/* tk_calloc_written for a table read at random on a hot path: from TK_HUGE_FROM bytes on,
 * on huge pages where the kernel gives them (madvise; one TLB entry instead of hundreds),
 * rounded up to and aligned at 2 MiB. Released with free(). */
#define TK_HUGE_FROM ((size_t)1 << 20)
#define TK_HUGE_PAGE ((size_t)2 << 20)
void *tk_calloc_huge(size_t n, size_t size);
/* BYTES not zeroed, written before read (a buffer filled at once): from TK_HUGE_FROM on,
 * on huge pages as tk_calloc_huge's, else malloc's. Released with free(). */
void *tk_malloc_huge(size_t bytes);
/* realloc for a buffer that grows large: from TK_HUGE_FROM bytes on, the new BYTES come
 * from tk_malloc_huge with the first USED bytes of OLD copied (OLD freed), so that fresh
 * memory faults in 2 MiB at a time; below, realloc. On failure NULL, OLD kept. */
void *tk_realloc_huge(void *old, size_t used, size_t bytes);
/* BYTES of zeros from a mapping of their own, for a large array written sparsely: only the
 * pages written are ever backed. calloc would clear it whole when glibc takes it from the
 * heap, as it does for blocks under its mmap threshold, which rises to 32 MiB once a mapped
 * block is freed. NULL on failure; released with tk_unmap(P, BYTES). */
void *tk_map_zeroed(size_t bytes);
void tk_unmap(void *p, size_t bytes);

/* ---- memory work ahead, on a helper thread (lib/common/ahead.c) --------------------- */
/* A structure that grows by millions of new entries (a random walk's call paths) spends
 * much of its time in the kernel, zeroing the pages it writes into. A helper thread does
 * that ahead of its owner, on another core; its tasks run in order (but those queued while
 * a table is made run between its slices), and one that does not fit in its queue is done
 * by the owner or dropped. NULL if no thread could start. */
struct tk_ahead;
struct tk_ahead *tk_ahead_start(void);
/* Make the pages in [ADDR, ADDR + LEN) writable (MADV_POPULATE_WRITE): their contents are
 * kept, so the owner may write there meanwhile. Wait (tk_ahead_wait) before the range is
 * unmapped or moved. */
void tk_ahead_populate(struct tk_ahead *a, void *addr, size_t len);
/* free(P) on the helper; tk_unmap(P, BYTES) on it. */
void tk_ahead_free(struct tk_ahead *a, void *p);
void tk_ahead_unmap(struct tk_ahead *a, void *p, size_t bytes);
/* Every queued populate, free and unmap done (a table being made is not waited for: it
 * runs them between its slices). */
void tk_ahead_wait(struct tk_ahead *a);
/* Make a table of BYTES zero bytes (tk_calloc_huge), unless one is asked for already;
 * take it with tk_ahead_take_table(A, BYTES) (waits until it is made; NULL if none of
 * that size was asked for or it could not be made). Freed with free(). */
void tk_ahead_table(struct tk_ahead *a, size_t bytes);
void *tk_ahead_take_table(struct tk_ahead *a, size_t bytes);
/* 0 while a table asked for is still being made, else 1 (made, or none asked for): no
 * lock, for a check on a hot path. */
int tk_ahead_table_ready(struct tk_ahead *a);
/* Do what is queued, end the thread, free what it made and nobody took (a table still
 * being made is abandoned). A may be NULL. */
void tk_ahead_stop(struct tk_ahead *a);

uint64_t tk_now_ns(void);

/* Unsigned LEB128; returns bytes consumed, 0 if truncated or longer than 10 bytes. */
size_t tk_uleb128(const uint8_t *p, size_t n, uint64_t *v);

/* qsort comparator for uint64_t; whether X is in V, N values sorted ascending. */
int tk_cmp_u64(const void *a, const void *b);
int tk_sorted_has_u64(const uint64_t *v, size_t n, uint64_t x);
/* Sort V ascending (nothing to do if it is sorted already); 0 or -TK_E_NOMEM (V as it
 * was). */
int tk_sort_u64(uint64_t *v, size_t n);
/* Sort N elements of SIZE bytes at BASE by the uint64_t at byte KEY_OFF of each,
 * ascending and stable (equal keys keep their order); 0 or -TK_E_NOMEM (unchanged). */
int tk_sort_by_u64(void *base, size_t n, size_t size, size_t key_off);

/* A set of 64-bit values (footprints: distinct lines, addresses). Zero-initialise it. The
 * values are in slot[0, cap), stored + 1 (0: empty); n of them. */
struct tk_u64set {
	uint64_t *slot;
	size_t cap, n;
};
/* 1 if X was added, 0 if it was there already, or -TK_E_NOMEM. X < UINT64_MAX. */
int tk_u64set_add(struct tk_u64set *s, uint64_t x);
int tk_u64set_has(const struct tk_u64set *s, uint64_t x);
void tk_u64set_free(struct tk_u64set *s);

/* Where distributions install the separate debug file of a module whose GNU build id is
 * ID (N bytes): /usr/lib/debug/.build-id/ab/cdef....debug (Debian's libc6-dbg for libc).
 * Writes it to BUF; returns 0, or -1 if the id is shorter than 2 bytes or BUF too small.
 * Header-only: the branch recorder uses it too. */
static inline int tk_debug_file_path(char *buf, size_t size, const uint8_t *id, size_t n)
{
	static const char dir[] = "/usr/lib/debug/.build-id/", hex[] = "0123456789abcdef";
	size_t k = sizeof dir - 1;
	if (n < 2 || size < k + 2 * n + sizeof "/.debug")
		return -1;
	memcpy(buf, dir, k);
	for (size_t i = 0; i < n; i++) {
		buf[k++] = hex[id[i] >> 4];
		buf[k++] = hex[id[i] & 15];
		if (i == 0)
			buf[k++] = '/';
	}
	memcpy(buf + k, ".debug", sizeof ".debug");
	return 0;
}

/* N bytes at P after B's contents; in fd mode, a block of at least a quarter of B's
 * capacity is written straight to the file (after what B holds) instead of copied: a
 * chunk's text or timeline bytes handed on in order. */
void tk_buf_put_large(struct tk_buf *b, const void *p, size_t n);

/* Events held in memory until their turn: a chunk decoded ahead of the chunks before it.
 * Events appended with add_thin keep their payloads (copied into BYTES); do not mix them
 * with tk_event_vec_add's in one vector. */
struct tk_event_vec {
	struct tk_event *ev;
	size_t n, cap;
	char *bytes;              /* add_thin's payloads */
	size_t nbytes, capbytes;
	size_t *pay;              /* the events that hold one */
	size_t npay, cappay;
	void *prepared;           /* the sink's work done ahead on ev[0..nprepared) */
	size_t nprepared;
	struct tk_sink prepared_for;
	int unprepared;           /* the sink gave up on this chunk (until V is emptied) */
	int lean;                 /* the producer can decode the chunk again: the events the
				     sink's prepare no longer needs are not kept */
	size_t dropped;           /* events not kept: the chunk's index of ev[0] */
	int no_payloads;          /* the producer makes no event with a payload: none looked
				     for (Intel PT's flow: 31 M events a walk's timeline holds) */
};
/* Room in V for N more events. */
int tk_event_vec_reserve(struct tk_event_vec *v, size_t n);
/* *E with TIME for its time into OUT, streamed past the cache where it can (whole lines, not
 * read first): for events that another thread reads once, whose lines that thread's core
 * (or nobody's) holds. Stores so made are ordered only by tk_stream_fence(), which the
 * writer calls before another thread may read them. */
static inline void tk_event_stream(struct tk_event *out, const struct tk_event *e, uint64_t time)
{
#if defined(__SSE2__) && defined(__x86_64__)
	_Static_assert(sizeof *e == 48 && offsetof(struct tk_event, addr) == 8, "three 16-byte stores");
	__m128i a = _mm_set_epi64x((long long)e->addr, (long long)time),
		b = _mm_loadu_si128((const __m128i *)e + 1), c = _mm_loadu_si128((const __m128i *)e + 2);
	if (((uintptr_t)out & 15) == 0) {
		_mm_stream_si128((__m128i *)out, a);
		_mm_stream_si128((__m128i *)out + 1, b);
		_mm_stream_si128((__m128i *)out + 2, c);
		return;
	}
#endif
	*out = *e;
	out->time = time;
}
static inline void tk_stream_fence(void)
{
#if defined(__SSE2__) && defined(__x86_64__)
	_mm_sfence();
#endif
}
/* A sink's events callback: appends to the tk_event_vec CTX (payloads not kept). */
int tk_event_vec_add(void *ctx, const struct tk_event *ev, size_t n);
/* EV[0..n) appended to V as TO's thin keeps them (tk_sink.thin: a chunk's events held
 * for their turn), or all of them when TO is NULL or has no thin; the payloads of
 * custom and typed events are copied (a producer's are valid only during its call); TO's
 * work ahead on them done (tk_sink.prepare). */
int tk_event_vec_add_thin(struct tk_event_vec *v, const struct tk_sink *to, const struct tk_event *ev,
			  size_t n);
/* Hand V's events to SINK (with what was prepared for it), then empty V, keeping its
 * memory for the next chunk. TK_SINK_AGAIN (a lean V only): the producer must hand the
 * chunk's events to SINK's events() itself (decoded again). */
int tk_event_vec_pass(struct tk_event_vec *v, struct tk_sink sink);
void tk_event_vec_free(struct tk_event_vec *v);
/* Empty V without handing its events on (memory kept). */
void tk_event_vec_drop(struct tk_event_vec *v);
/* tk_event_vec_pass, then free V's memory. */
int tk_event_vec_flush(struct tk_event_vec *v, struct tk_sink sink);

/* A chunk's events held until its turn for the sink TO: tk_event_hold_events is the
 * producer's events callback (CTX: the hold), appending as tk_event_vec_add_thin does. */
struct tk_event_hold {
	struct tk_event_vec v;
	const struct tk_sink *to;
};
int tk_event_hold_events(void *ctx, const struct tk_event *ev, size_t n);

/* A sink whose events reach SINK on a thread of its own (lib/common/relay.c): a producer
 * that must run in order overlaps its consumer. Events and their payloads are copied; the
 * relay's sink returns SINK's first error. finish waits until SINK has every event and
 * returns that error (or 0); free also stops the thread. No other call may reach SINK's
 * consumer until finish has returned. */
struct tk_relay;
struct tk_relay *tk_relay_new(struct tk_sink sink, int *err);
struct tk_sink tk_relay_sink(struct tk_relay *r);
int tk_relay_finish(struct tk_relay *r);
void tk_relay_free(struct tk_relay *r);

#ifdef __cplusplus
}
#endif
#endif
