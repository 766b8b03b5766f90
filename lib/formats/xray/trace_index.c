/* XRay trace: the index of thread buffers, and each thread's buffers put in time order. */
#include "formats/xray/trace_internal.h"
#include "tracekit/internal/util.h"

/* ---- index ------------------------------------------------------------------------------ */

static uint64_t thread_key_hash(uint32_t pid, uint32_t tid)
{
	return tk_hash64((uint64_t)pid << 32 | tid);
}

static int thread_index(struct tk_xray *x, uint32_t pid, uint32_t tid, uint32_t *out)
{
	if ((x->nthreads + 1) * 2 > x->thash_cap) {
		size_t cap = x->thash_cap ? x->thash_cap * 2 : 64;
		uint32_t *t = calloc(cap, sizeof *t);
		if (!t)
			return -TK_E_NOMEM;
		for (size_t i = 0; i < x->nthreads; i++) {
			size_t j = thread_key_hash(x->threads[i].pid, x->threads[i].tid) & (cap - 1);
			while (t[j])
				j = (j + 1) & (cap - 1);
			t[j] = (uint32_t)i + 1;
		}
		free(x->thash);
		x->thash = t;
		x->thash_cap = cap;
	}
	size_t j = thread_key_hash(pid, tid) & (x->thash_cap - 1);
	while (x->thash[j]) {
		struct tk_xray_thread_info *ti = &x->threads[x->thash[j] - 1];
		if (ti->pid == pid && ti->tid == tid) {
			*out = x->thash[j] - 1;
			return 0;
		}
		j = (j + 1) & (x->thash_cap - 1);
	}
	if (x->nthreads == x->capthreads) {
		size_t cap = x->capthreads ? x->capthreads * 2 : 16;
		void *t = realloc(x->threads, cap * sizeof *x->threads);
		if (!t)
			return -TK_E_NOMEM;
		x->threads = t;
		x->capthreads = cap;
	}
	struct tk_xray_thread_info *ti = &x->threads[x->nthreads];
	memset(ti, 0, sizeof *ti);
	ti->pid = pid;
	ti->tid = tid;
	x->thash[j] = (uint32_t)x->nthreads + 1;
	*out = (uint32_t)x->nthreads++;
	return 0;
}

/* Room for WANT buffers in all (huge pages: a log of tiny runs has millions, and fresh
 * small pages fault slowly in a VM). Where the count is known ahead, made at once:
 * doubling copied every entry into fresh pages again. */
static int reserve_bufs(struct tk_xray *x, size_t want)
{
	if (want <= x->capbufs)
		return 0;
	void *t = tk_realloc_huge(x->bufs, x->nbufs * sizeof *x->bufs, want * sizeof *x->bufs);
	if (!t)
		return -TK_E_NOMEM;
	x->bufs = t;
	x->capbufs = want;
	return 0;
}

static int add_buf(struct tk_xray *x, const struct xr_buf *b)
{
	int rc;

	if (x->nbufs == x->capbufs && (rc = reserve_bufs(x, x->capbufs ? x->capbufs * 2 : 256)) < 0)
		return rc;
	x->bufs[x->nbufs] = *b;
	x->bufs[x->nbufs].seq = x->nbufs;
	x->nbufs++;
	return 0;
}

static void index_damage(struct tk_xray *x, uint64_t off, uint64_t skipped, const char *msg)
{
	tk_log(TK_LOG_WARN, "offset 0x%llx: %s; skipped %llu bytes", (unsigned long long)off, msg,
	       (unsigned long long)skipped);
	tk_gap_stats_add(&x->index_gaps, off, skipped);
}

/* Read the metadata at the start of an FDR buffer from Q, its first LEN bytes: thread,
 * process, wall clock, first TSC. -1 if it does not start with a NewBuffer record, 1 if the
 * LEN bytes ended the metadata records, 0 if a record did. */
static int head_parse(const uint8_t *q, size_t len, int be, struct xr_buf *b, uint32_t *pid_out,
		      uint32_t *tid_out)
{
	size_t o = 0;
	int32_t tid;
	uint32_t pid = 0;
	int rc = 1;

	if (len < 16 || q[0] != xr_meta_byte(TK_XRAY_NEW_BUFFER, be))
		return -1;
	tid = (int32_t)xr_rd32(q + 1, be);
	for (o = 16; o + 16 <= len; o += 16) {
		unsigned k = xr_meta_kind(q[o], be);
		rc = 0;
		if (!xr_is_meta(q[o], be))
			break;
		if (k == TK_XRAY_WALLTIME) {
			b->sec = xr_rd64(q + o + 1, be);
			b->nanos = xr_rd32(q + o + 9, be);
		} else if (k == TK_XRAY_PID) {
			pid = xr_rd32(q + o + 1, be);
		} else if (k == TK_XRAY_NEW_CPU) {
			b->first_tsc = xr_rd64(q + o + 3, be);
			b->self_contained = 1;
			break;
		} else if (k == TK_XRAY_TSC_WRAP) {
			b->first_tsc = xr_rd64(q + o + 1, be);
			b->self_contained = 1;
			break;
		} else {
			break;
		}
		rc = 1;
	}
	*pid_out = pid;
	*tid_out = (uint32_t)tid;
	return rc;
}

static int fdr_buffer_read(const struct tk_xray *x, struct xr_buf *b, uint32_t *pid_out,
			   uint32_t *tid_out)
{
	return head_parse(x->p + b->start, b->end - b->start, x->h.big_endian, b, pid_out,
			  tid_out) < 0 ? -1 : 0;
}

/* ---- buffer heads read with pread ----------------------------------------------------
 * Walking the chain of buffers needs a few bytes at each buffer's start: its BufferExtents
 * record, the metadata after NewBuffer, and the next buffer's first bytes. Reading them
 * through the mapping faults in a page per buffer, and its fault-around neighbours, which
 * the decoding workers fault in again once the index has given them back; pread copies
 * the bytes alone (docs/PERFORMANCE.md, "Parallel scaling on other shapes"). */
#define HEAD_BYTES 256
struct head {
	uint64_t off;              /* UINT64_MAX: none */
	size_t len;
	uint8_t b[HEAD_BYTES];
};

/* The bytes at OFF, min(HEAD_BYTES, bytes left) of them, kept in H; NULL when they cannot
 * be read from the file (the mapped walk decides). */
static const uint8_t *head_at(const struct tk_xray *x, struct head *h, uint64_t off)
{
	size_t want = x->n - off < HEAD_BYTES ? x->n - off : HEAD_BYTES;

	if (h->off == off)
		return h->b;
	h->off = UINT64_MAX;
	if (!x->opts.in || tk_input_pread(x->opts.in, h->b, want, off) != (long)want)
		return NULL;
	h->off = off;
	h->len = want;
	return h->b;
}

/* The buffer whose BufferExtents record is at OFF, from heads read with pread, when it is
 * regular: its extent lies in the file and ends at the file's end or a plausible buffer
 * start, and its metadata records fit in the head. Then 1, with B, *PID and *TID as the
 * mapped walk sets them (B empty for an empty buffer); 0 when the mapped walk decides.
 * H[C] may hold OFF's head already; H[C ^ 1] gets the next buffer's, and C moves to it. */
static int chain_step(const struct tk_xray *x, struct head *h, int *c, uint64_t off,
		      struct xr_buf *b, uint32_t *pid, uint32_t *tid)
{
	size_t n = x->n;
	int be = x->h.big_endian;
	const uint8_t *q, *r;

	if (x->h.version < 2 || n - off < 16 || !(q = head_at(x, &h[*c], off)))
		return 0;
	uint64_t size = xr_rd64(q + 1, be), end = off + 16 + size;
	if (q[0] != xr_meta_byte(TK_XRAY_BUFFER_EXTENTS, be) || size > n - off - 16)
		return 0;
	if (end < n && (!(r = head_at(x, &h[*c ^ 1], end)) || !xr_buffer_start_bytes(r, n - end, &x->h)))
		return 0;
	memset(b, 0, sizeof *b);
	b->start = off + 16;
	b->end = end;
	size_t have = h[*c].len - 16 < size ? h[*c].len - 16 : size;
	int rc = size ? head_parse(q + 16, have, be, b, pid, tid) : 0;
	if (rc < 0 || (rc == 1 && have < size))
		return 0;
	*c ^= 1;
	return 1;
}

/* ---- the FDR index on several threads ----------------------------------------------------
 * The index walks from buffer to buffer, each BufferExtents giving the next one's offset:
 * one page fault per buffer on the main thread, the largest serial part of a parallel
 * profile (docs/PERFORMANCE.md, "Serial fraction"). The workers take slices of the file;
 * each starts at the first plausible buffer from its cut and walks the buffers that start
 * before the next slice's cut. When every walk ends exactly where the next one began, the
 * chain from the file's start passes through every slice's start, so the slices' buffers
 * are the serial walk's; anything else (damage, a plausible start that is not one, LLVM's
 * short extents) leaves the decision to the serial walk, which reports what it finds. */
/* From this size on, the index (FDR or basic) is made in slices on the workers. */
#define INDEX_SLICES_FROM ((size_t)16 << 20)
/* Slices per worker, taken as workers free up: one each left a worker idle while the other
 * finished when their halves or cores ran at different speeds (one vCPU here at times
 * runs 1.6 times slower than the other). */
#define SLICES_PER_WORKER 4

struct slice {
	size_t cut;                /* where the search for its first buffer starts */
	size_t from, stop, end;    /* walked [from, end): the buffers that start before stop */
	struct xr_buf *bufs;
	uint32_t (*ids)[2];        /* pid, tid of each buffer: threads are numbered in order */
	size_t n, cap;
};

struct par_index {
	struct tk_xray *x;
	struct slice *s;
};

static int slice_add(struct slice *s, const struct xr_buf *b, uint32_t pid, uint32_t tid)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		struct xr_buf *nb = realloc(s->bufs, cap * sizeof *nb);
		if (nb)
			s->bufs = nb;
		uint32_t(*ni)[2] = realloc(s->ids, cap * sizeof *ni);
		if (ni)
			s->ids = ni;
		if (!nb || !ni)
			return -TK_E_NOMEM;
		s->cap = cap;
	}
	s->bufs[s->n] = *b;
	s->ids[s->n][0] = pid;
	s->ids[s->n][1] = tid;
	s->n++;
	return 0;
}

static int slice_walk(void *ctx, size_t k)
{
	struct par_index *P = ctx;
	const struct tk_xray *x = P->x;
	struct slice *s = &P->s[k];
	const uint8_t *p = x->p;
	size_t n = x->n;
	/* here, not on the calling thread: the search first touches the mapping's pages (at -j
	 * 64, 256 searches were 37 ms of the calling thread's 50) */
	if (k)
		s->from = xr_find_buffer(p, n, s->cut, &x->h);
	size_t off = s->from, released = off;
	struct head h[2] = { { .off = UINT64_MAX }, { .off = UINT64_MAX } };
	int rc, c = 0;

	while (off < s->stop) {
		struct xr_extent ex;
		struct xr_buf b;
		uint32_t pid, tid;
		int head = chain_step(x, h, &c, off, &b, &pid, &tid);
		if (off - released >= (8u << 20)) {
			xr_release(x, released, off);
			released = off;
		}
		if (!head) {
			if (n - off < 16 || p[off] != xr_meta_byte(TK_XRAY_BUFFER_EXTENTS, x->h.big_endian))
				break;
			memset(&b, 0, sizeof b);
			b.start = off + 16;
			b.end = xr_buffer_end(p, n, off, &x->h, &ex);
			if (ex.typed_short || xr_extent_msg(&ex))
				break;
		}
		off = b.end;
		if (b.end == b.start)
			continue;
		if (!head && fdr_buffer_read(x, &b, &pid, &tid) < 0) {
			off = b.start;  /* not where the chain should go on */
			break;
		}
		if ((rc = slice_add(s, &b, pid, tid)) < 0)
			return rc;
	}
	s->end = off;
	return 0;
}

/* 1: the index is made; 0: left to the serial walk; < 0: out of memory. */
static int index_fdr_parallel(struct tk_xray *x)
{
	unsigned workers = x->opts.nthreads, k = workers * SLICES_PER_WORKER;
	size_t n = x->n;
	int rc;

	if (workers < 2 || x->h.version < 2 || n < INDEX_SLICES_FROM)
		return 0;
	struct slice *s = calloc(k, sizeof *s);
	if (!s)
		return -TK_E_NOMEM;
	s[0].from = 32;
	for (unsigned i = 1; i < k; i++)
		s[i - 1].stop = s[i].cut = 32 + (n - 32) / k * i;
	s[k - 1].stop = n;
	struct par_index P = { x, s };
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = workers };
	rc = tk_pool_run(&po, k, slice_walk, NULL, &P);
	/* a walk that stopped short or ran past where the next one began: not the chain */
	for (unsigned i = 0; rc == 0 && i < k; i++)
		if (s[i].end != (i + 1 < k ? s[i + 1].from : n))
			rc = -1;
	size_t total = x->nbufs;   /* the index's array at its size at once: no copies */
	for (unsigned i = 0; rc == 0 && i < k; i++)
		total += s[i].n;
	if (rc == 0)
		rc = reserve_bufs(x, total);
	for (unsigned i = 0; rc == 0 && i < k; i++)
		for (size_t j = 0; rc == 0 && j < s[i].n; j++) {
			struct xr_buf b = s[i].bufs[j];
			if ((rc = thread_index(x, s[i].ids[j][0], s[i].ids[j][1], &b.thread)) == 0 &&
			    (rc = add_buf(x, &b)) == 0)
				x->threads[b.thread].buffers++;
		}
	for (unsigned i = 0; i < k; i++) {
		free(s[i].bufs);
		free(s[i].ids);
	}
	free(s);
	if (rc == -1)
		return 0;   /* nothing was added: the serial walk decides */
	return rc < 0 ? rc : 1;
}

static int index_fdr(struct tk_xray *x)
{
	const uint8_t *p = x->p;
	size_t n = x->n, off = 32;
	int be = x->h.big_endian, rc;
	uint64_t short_bufs = 0, short_first = 0;
	struct head h[2] = { { .off = UINT64_MAX }, { .off = UINT64_MAX } };
	int c = 0;

	if ((rc = index_fdr_parallel(x)) != 0)
		return rc < 0 ? rc : 0;
	size_t released = 0;
	while (off < n) {
		struct xr_buf b;
		uint32_t pid, tid;
		int head = chain_step(x, h, &c, off, &b, &pid, &tid);
		if (off - released >= (8u << 20)) {
			/* reading a buffer's head maps its neighbours too (fault-around) */
			xr_release(x, released, off);
			released = off;
		}
		if (head) {
			/* b is set */
		} else if (x->h.version >= 2) {
			memset(&b, 0, sizeof b);
			if (n - off < 16 || p[off] != xr_meta_byte(TK_XRAY_BUFFER_EXTENTS, be)) {
				size_t to = xr_find_buffer(p, n, off + 1, &x->h);
				index_damage(x, off, to - off,
					     n - off < 16 ? "truncated BufferExtents record"
							  : "expected a BufferExtents record");
				off = to;
				continue;
			}
			struct xr_extent ex;
			b.start = off + 16;
			b.end = xr_buffer_end(p, n, off, &x->h, &ex);
			const char *msg = xr_extent_msg(&ex);
			if (ex.typed_short) {
				if (!short_bufs++)
					short_first = off;
			} else if (msg)
				index_damage(x, off, ex.missing, msg);
		} else {
			memset(&b, 0, sizeof b);
			if (p[off] != xr_meta_byte(TK_XRAY_NEW_BUFFER, be)) {
				size_t to = xr_find_buffer(p, n, off + 1, &x->h);
				index_damage(x, off, to - off, "expected a NewBuffer record");
				off = to;
				continue;
			}
			b.start = off;
			uint64_t bs = x->h.v1_buffer_size;
			if (bs >= 16 && bs <= n - off) {
				b.end = off + bs;
			} else {
				b.end = xr_find_buffer(p, n, off + 1, &x->h);
				if (bs >= 16 && b.end == n)
					index_damage(x, off, bs - (n - off), "buffer past end of file");
			}
		}
		off = b.end;
		if (b.end == b.start)
			continue;
		if (!head && fdr_buffer_read(x, &b, &pid, &tid) < 0) {
			index_damage(x, b.start, b.end - b.start,
				     "buffer does not start with a NewBuffer record");
			continue;
		}
		if ((rc = thread_index(x, pid, tid, &b.thread)) < 0 || (rc = add_buf(x, &b)) < 0)
			return rc;
		x->threads[b.thread].buffers++;
	}
	if (short_bufs)  /* one warning: a runtime writes every such buffer so */
		tk_log(TK_LOG_WARN, "offset 0x%llx: %s (%llu buffers)", (unsigned long long)short_first,
		       XR_MSG_TYPED_SHORT, (unsigned long long)short_bufs);
	return 0;
}

/* ---- basic mode: runs of one thread's records act as buffers ---------------------------
 * Every record is read for its thread: from a plain file with pread, a megabyte at a time
 * (through the mapping, its page faults were most of the scan), on the workers in slices
 * of whole records from 16 MB on. Each slice lists the longest runs of one thread's records
 * in it; the calling thread joins the runs that go on across a seam and cuts them at 64K
 * records from their starts (not before an argument record), numbering threads in the
 * file's order, as one scan would. */
#define BASIC_RUN_MAX ((uint64_t)32 * 65536)
#define BASIC_READ ((size_t)1 << 20)

struct brun {
	uint64_t start, end, first_tsc;
	uint32_t pid, tid;
};

struct bslice {
	size_t from, stop;
	struct brun *r;
	size_t n, cap;
};

struct bpar {
	struct tk_xray *x;
	struct bslice *s;
};

/* The LEN bytes of the log at OFF: read into BUF from the file, or in the mapping. */
static const uint8_t *basic_bytes(const struct tk_xray *x, uint8_t *buf, size_t len, uint64_t off)
{
	if (x->opts.in && buf && tk_input_pread(x->opts.in, buf, len, off) == (long)len)
		return buf;
	return x->p + off;
}

static int bslice_scan(void *ctx, size_t k)
{
	struct bpar *P = ctx;
	const struct tk_xray *x = P->x;
	struct bslice *s = &P->s[k];
	int be = x->h.big_endian;
	uint8_t *buf = x->opts.in ? malloc(BASIC_READ) : NULL;
	size_t released = s->from;

	for (size_t at = s->from; at < s->stop;) {
		size_t len = s->stop - at < BASIC_READ ? s->stop - at : BASIC_READ;
		const uint8_t *q = basic_bytes(x, buf, len, at);
		if (q != buf && at - released >= (8u << 20)) {
			xr_release(x, released, at);
			released = at;
		}
		for (size_t i = 0; i < len; i += 32, q += 32) {
			int arg = xr_rd16(q, be) == 1;
			uint32_t tid = xr_rd32(q + (arg ? 8 : 16), be), pid = xr_rd32(q + (arg ? 12 : 20), be);
			if (s->n && s->r[s->n - 1].tid == tid && s->r[s->n - 1].pid == pid)
				continue;
			if (s->n == s->cap) {
				size_t cap = s->cap ? 2 * s->cap : 1024;
				struct brun *nr = tk_realloc_huge(s->r, s->n * sizeof *nr, cap * sizeof *nr);
				if (!nr) {
					free(buf);
					return -TK_E_NOMEM;
				}
				s->r = nr;
				s->cap = cap;
			}
			if (s->n)
				s->r[s->n - 1].end = at + i;
			s->r[s->n++] = (struct brun){ at + i, 0, xr_rd64(q + 8, be), pid, tid };
		}
		at += len;
	}
	if (s->n)
		s->r[s->n - 1].end = s->stop;
	free(buf);
	return 0;
}

/* The run R as buffers of 64K records (and the argument records that follow the last: an
 * argument belongs to the function record before it, so no buffer may begin with one). */
static int basic_run_add(struct tk_xray *x, const struct brun *r)
{
	int be = x->h.big_endian;

	for (uint64_t at = r->start, end; at < r->end; at = end) {
		uint8_t rec[32];
		end = r->end - at > BASIC_RUN_MAX ? at + BASIC_RUN_MAX : r->end;
		while (end < r->end && xr_rd16(basic_bytes(x, rec, 32, end), be) == 1)
			end += 32;
		struct xr_buf b = { .start = at, .end = end,
				    .first_tsc = at == r->start ? r->first_tsc
						 : xr_rd64(basic_bytes(x, rec, 32, at) + 8, be),
				    .self_contained = 1 };
		int rc = thread_index(x, r->pid, r->tid, &b.thread);
		if (rc < 0 || (rc = add_buf(x, &b)) < 0)
			return rc;
		x->threads[b.thread].buffers++;
	}
	return 0;
}

static int index_basic(struct tk_xray *x)
{
	size_t n = x->n, end = 32 + (n - 32) / 32 * 32, records = (end - 32) / 32;
	unsigned workers = x->opts.nthreads > 1 && n >= INDEX_SLICES_FROM ? x->opts.nthreads : 1;
	unsigned k = workers > 1 ? workers * SLICES_PER_WORKER : 1;
	struct bslice *s = calloc(k, sizeof *s);
	int rc = 0;

	if (!s)
		return -TK_E_NOMEM;
	for (unsigned i = 0; i < k; i++) {
		s[i].from = 32 + records * i / k * 32;
		s[i].stop = 32 + records * (i + 1) / k * 32;
	}
	struct bpar P = { x, s };
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = workers };
	rc = k > 1 ? tk_pool_run(&po, k, bslice_scan, NULL, &P) : bslice_scan(&P, 0);
	/* at most the slices' runs, and a cut every BASIC_RUN_MAX bytes */
	size_t most = (end - 32) / BASIC_RUN_MAX + 1;
	for (unsigned i = 0; i < k; i++)
		most += s[i].n;
	if (rc >= 0)
		rc = reserve_bufs(x, most);
	struct brun run = { 0 };
	for (unsigned i = 0; rc >= 0 && i < k; i++)
		for (size_t j = 0; rc >= 0 && j < s[i].n; j++) {
			const struct brun *r = &s[i].r[j];
			if (run.end == r->start && run.tid == r->tid && run.pid == r->pid) {
				run.end = r->end;   /* (it goes on across the seam) */
				continue;
			}
			if (run.end)
				rc = basic_run_add(x, &run);
			run = *r;
		}
	if (rc >= 0 && run.end)
		rc = basic_run_add(x, &run);
	for (unsigned i = 0; i < k; i++)
		free(s[i].r);
	free(s);
	if (rc >= 0 && end < n)
		index_damage(x, end, n - end, "truncated record (basic-mode records are 32 bytes)");
	return rc < 0 ? rc : 0;
}

static int cmp_buf(const void *a, const void *b)
{
	const struct xr_buf *l = a, *r = b;
#define CMP(f) if (l->f != r->f) return l->f < r->f ? -1 : 1
	CMP(thread);
	CMP(sec);
	CMP(nanos);
	CMP(first_tsc);
	CMP(seq);
#undef CMP
	return 0;
}

/* Basic mode's runs, in file order, grouped by thread and kept in file order within each:
 * a counting sort, where qsort's comparisons and copies of 56-byte entries took 60 % of
 * `info` on a log of one-record runs (1.2 M runs). */
static int group_by_thread(struct tk_xray *x)
{
	size_t *at = calloc(x->nthreads + 1, sizeof *at);
	struct xr_buf *to = tk_malloc_huge(x->nbufs * sizeof *to);

	if (!at || !to) {
		free(at);
		free(to);
		return -TK_E_NOMEM;
	}
	for (size_t i = 0; i < x->nbufs; i++)
		at[x->bufs[i].thread + 1]++;
	for (size_t t = 0; t < x->nthreads; t++)
		at[t + 1] += at[t];
	for (size_t i = 0; i < x->nbufs; i++)
		to[at[x->bufs[i].thread]++] = x->bufs[i];
	free(at);
	free(x->bufs);
	x->bufs = to;
	x->capbufs = x->nbufs;
	return 0;
}

/* llvm-xray keeps a thread's blocks in a DenseMap keyed by (process id, thread id) and
 * writes threads in that map's bucket order, which decides the order of records with equal
 * TSCs. Rebuild that order: LLVM's pair hash, quadratic probing, 64 buckets doubling at
 * 3/4 load, keys inserted in the file order of their first buffer. */
static unsigned dm_hash(uint64_t pid, int32_t tid)
{
	uint64_t key = (uint64_t)(unsigned)(pid * 37ULL) << 32 | (unsigned)((unsigned)tid * 37U);
	key += ~(key << 32);
	key ^= (key >> 22);
	key += ~(key << 13);
	key ^= (key >> 8);
	key += (key << 3);
	key ^= (key >> 15);
	key += ~(key << 27);
	key ^= (key >> 31);
	return (unsigned)key;
}

static void dm_insert(const struct tk_xray *x, int32_t *b, size_t nb, uint32_t t)
{
	const struct tk_xray_thread_info *ti = &x->threads[t];
	unsigned j = dm_hash((uint64_t)(int64_t)(int32_t)ti->pid, (int32_t)ti->tid) & (unsigned)(nb - 1);
	for (unsigned probe = 1; b[j] >= 0; probe++)
		j = (j + probe) & (unsigned)(nb - 1);
	b[j] = (int32_t)t;
}

static int llvm_thread_rank(struct tk_xray *x)
{
	size_t nb = 64;
	int32_t *b = malloc(nb * sizeof *b);
	if (!b || !(x->rank = calloc(x->nthreads ? x->nthreads : 1, sizeof *x->rank))) {
		free(b);
		return -TK_E_NOMEM;
	}
	memset(b, 0xff, nb * sizeof *b);
	/* threads were numbered in the file order of their first buffer */
	for (uint32_t t = 0; t < x->nthreads; t++) {
		if ((t + 1) * 4 >= nb * 3) {
			size_t nn = nb * 2;
			int32_t *n2 = malloc(nn * sizeof *n2);
			if (!n2) {
				free(b);
				return -TK_E_NOMEM;
			}
			memset(n2, 0xff, nn * sizeof *n2);
			for (size_t i = 0; i < nb; i++)
				if (b[i] >= 0)
					dm_insert(x, n2, nn, (uint32_t)b[i]);
			free(b);
			b = n2;
			nb = nn;
		}
		dm_insert(x, b, nb, t);
	}
	uint32_t r = 0;
	for (size_t i = 0; i < nb; i++)
		if (b[i] >= 0)
			x->rank[b[i]] = r++;
	free(b);
	return 0;
}

struct tk_xray *tk_xray_open(const uint8_t *data, size_t len, const struct tk_xray_opts *opts,
			     int *err)
{
	struct tk_xray *x = calloc(1, sizeof *x);
	int rc;

	if (!x) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	x->p = data;
	x->n = len;
	if (opts)
		memcpy(&x->opts, opts, opts->sz < sizeof x->opts ? opts->sz : sizeof x->opts);
	if ((rc = tk_xray_read_header(data, len, &x->h)) < 0)
		goto fail;
	uint8_t hdr[32];
	if (x->opts.in && (tk_input_pread(x->opts.in, hdr, sizeof hdr, 0) != (long)sizeof hdr ||
			   memcmp(hdr, data, sizeof hdr) != 0))
		x->opts.in = NULL;   /* not a plain file, or not the one DATA maps */
	if (x->h.type == TK_XRAY_FDR && (x->h.version < 1 || x->h.version > 5)) {
		rc = -TK_E_UNSUPPORTED;
		goto fail;
	}
	rc = x->h.type == TK_XRAY_FDR ? index_fdr(x) : index_basic(x);
	if (rc < 0)
		goto fail;
	if (x->h.type == TK_XRAY_FDR && (rc = llvm_thread_rank(x)) < 0)
		goto fail;
	xr_release(x, 0, len);
	if (x->nbufs && x->h.type == TK_XRAY_FDR)
		qsort(x->bufs, x->nbufs, sizeof *x->bufs, cmp_buf);
	else if (x->nbufs && (rc = group_by_thread(x)) < 0)
		goto fail;
	*err = 0;
	return x;
fail:
	tk_xray_free(x);
	*err = rc;
	return NULL;
}

void tk_xray_free(struct tk_xray *x)
{
	if (!x)
		return;
	free(x->bufs);
	free(x->threads);
	free(x->thash);
	free(x->rank);
	free(x);
}
