/* XRay trace: index the file into thread buffers, order each thread's buffers in time,
 * and expand them into llvm-xray's records or neutral events.
 *
 * The expansion follows what llvm-xray's reader does (facts from its TraceExpander): a
 * per-thread "current record" whose function id, CPU and typed-event type persist until
 * overwritten, a base TSC set by NewCPUId/TSCWrap and advanced by deltas, CallArgument
 * records that attach to the record before them. Buffers are expanded independently (in
 * parallel) with the state they inherit marked unknown; the in-order merge patches it in.
 *
 * Buffer order: llvm-xray sorts a thread's buffers with a comparator that needs both the
 * seconds and the nanoseconds of the wall-clock marker to be smaller, which is no strict
 * weak ordering, so std::sort scrambles threads with more than 16 buffers. We sort by
 * (seconds, nanoseconds, first TSC, file offset), which is a total order. */
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

const struct tk_xray_header *tk_xray_header(const struct tk_xray *x) { return &x->h; }
size_t tk_xray_thread_count(const struct tk_xray *x) { return x->nthreads; }
const struct tk_xray_thread_info *tk_xray_thread(const struct tk_xray *x, size_t i)
{
	return i < x->nthreads ? &x->threads[i] : NULL;
}
const struct tk_xray_stats *tk_xray_stats(const struct tk_xray *x) { return &x->stats; }

/* With opts.release_input, give back the pages under [start, end), rounded out to
 * RELEASE_ALIGN: the data is a read-only file mapping, so a page that a neighbouring buffer
 * still needs just comes back from the page cache when read again. Rounding out to the
 * kernel's fault-around window also drops the neighbours that a fault mapped ahead (other
 * threads' buffers, read much later in thread order). This keeps the resident size
 * independent of the log size. */
#define RELEASE_ALIGN ((uintptr_t)64 << 10)
#define RELEASE_SPAN ((uint64_t)4 << 20)
static void release(const struct tk_xray *x, uint64_t start, uint64_t end)
{
	if (!x->opts.release_input || end <= start)
		return;
	uintptr_t lo = (uintptr_t)x->p, hi = lo + x->n;
	uintptr_t a = ((uintptr_t)x->p + start) & ~(RELEASE_ALIGN - 1);
	uintptr_t e = ((uintptr_t)x->p + end + RELEASE_ALIGN - 1) & ~(RELEASE_ALIGN - 1);
	/* the mapping starts on a page; its last page may be partial */
	a = a < lo ? lo : a;
	e = e > hi ? hi : e;
	if (e > a)
		madvise((void *)a, e - a, MADV_DONTNEED);
}

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

static int add_buf(struct tk_xray *x, const struct xr_buf *b)
{
	if (x->nbufs == x->capbufs) {
		size_t cap = x->capbufs ? x->capbufs * 2 : 256;
		void *t = realloc(x->bufs, cap * sizeof *x->bufs);
		if (!t)
			return -TK_E_NOMEM;
		x->bufs = t;
		x->capbufs = cap;
	}
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

/* Read the metadata at the start of an FDR buffer: thread, process, wall clock, first TSC. */
static int fdr_buffer_head(struct tk_xray *x, struct xr_buf *b)
{
	const uint8_t *p = x->p;
	int be = x->h.big_endian;
	uint64_t o = b->start;
	int32_t tid;
	uint32_t pid = 0;

	if (b->end - o < 16 || p[o] != xr_meta_byte(TK_XRAY_NEW_BUFFER, be))
		return -1;
	tid = (int32_t)xr_rd32(p + o + 1, be);
	if (x->h.version == 2)
		pid = 0;
	for (o += 16; o + 16 <= b->end && xr_is_meta(p[o], be); o += 16) {
		unsigned k = xr_meta_kind(p[o], be);
		if (k == TK_XRAY_WALLTIME) {
			b->sec = xr_rd64(p + o + 1, be);
			b->nanos = xr_rd32(p + o + 9, be);
		} else if (k == TK_XRAY_PID) {
			pid = xr_rd32(p + o + 1, be);
		} else if (k == TK_XRAY_NEW_CPU) {
			b->first_tsc = xr_rd64(p + o + 3, be);
			b->self_contained = 1;
			break;
		} else if (k == TK_XRAY_TSC_WRAP) {
			b->first_tsc = xr_rd64(p + o + 1, be);
			b->self_contained = 1;
			break;
		} else {
			break;
		}
	}
	return thread_index(x, pid, (uint32_t)tid, &b->thread);
}

static int index_fdr(struct tk_xray *x)
{
	const uint8_t *p = x->p;
	size_t n = x->n, off = 32;
	int be = x->h.big_endian, rc;
	uint64_t short_bufs = 0, short_first = 0;

	size_t released = 0;
	while (off < n) {
		struct xr_buf b;
		if (off - released >= (8u << 20)) {
			/* reading a buffer's head maps its neighbours too (fault-around) */
			release(x, released, off);
			released = off;
		}
		memset(&b, 0, sizeof b);
		if (x->h.version >= 2) {
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
		if ((rc = fdr_buffer_head(x, &b)) < 0) {
			if (rc == -TK_E_NOMEM)
				return rc;
			index_damage(x, b.start, b.end - b.start,
				     "buffer does not start with a NewBuffer record");
			continue;
		}
		if ((rc = add_buf(x, &b)) < 0)
			return rc;
		x->threads[b.thread].buffers++;
	}
	if (short_bufs)  /* one warning: a runtime writes every such buffer so */
		tk_log(TK_LOG_WARN, "offset 0x%llx: %s (%llu buffers)", (unsigned long long)short_first,
		       XR_MSG_TYPED_SHORT, (unsigned long long)short_bufs);
	return 0;
}

/* Basic mode: runs of one thread's records (at most 64K records each) act as buffers. */
static int index_basic(struct tk_xray *x)
{
	const uint8_t *p = x->p;
	size_t n = x->n, off = 32;
	int be = x->h.big_endian, rc;
	struct xr_buf b;
	uint32_t cur_tid = 0, cur_pid = 0;
	int open = 0;

	memset(&b, 0, sizeof b);
	for (; off + 32 <= n; off += 32) {
		const uint8_t *q = p + off;
		if ((off & ((8u << 20) - 1)) == 0 && off >= (8u << 20))
			release(x, off - (8u << 20), off);
		uint32_t tid, pid;
		if (xr_rd16(q, be) == 1) {
			tid = xr_rd32(q + 8, be);
			pid = xr_rd32(q + 12, be);
		} else {
			tid = xr_rd32(q + 16, be);
			pid = xr_rd32(q + 20, be);
		}
		if (open && tid == cur_tid && pid == cur_pid && off - b.start < 32u * 65536)
			continue;
		if (open) {
			b.end = off;
			if ((rc = add_buf(x, &b)) < 0)
				return rc;
			x->threads[b.thread].buffers++;
		}
		memset(&b, 0, sizeof b);
		b.start = off;
		b.first_tsc = xr_rd64(q + 8, be);
		b.self_contained = 1;
		cur_tid = tid;
		cur_pid = pid;
		if ((rc = thread_index(x, pid, tid, &b.thread)) < 0)
			return rc;
		open = 1;
	}
	if (open) {
		b.end = off;
		if ((rc = add_buf(x, &b)) < 0)
			return rc;
		x->threads[b.thread].buffers++;
	}
	if (off < n)
		index_damage(x, off, n - off, "truncated record (basic-mode records are 32 bytes)");
	return 0;
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

static int cmp_buf_seq(const void *a, const void *b)
{
	const struct xr_buf *l = a, *r = b;
	if (l->thread != r->thread)
		return l->thread < r->thread ? -1 : 1;
	return l->seq < r->seq ? -1 : l->seq > r->seq;
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
	if (x->h.type == TK_XRAY_FDR && (x->h.version < 1 || x->h.version > 5)) {
		rc = -TK_E_UNSUPPORTED;
		goto fail;
	}
	rc = x->h.type == TK_XRAY_FDR ? index_fdr(x) : index_basic(x);
	if (rc < 0)
		goto fail;
	if (x->h.type == TK_XRAY_FDR && (rc = llvm_thread_rank(x)) < 0)
		goto fail;
	release(x, 0, len);
	if (x->nbufs)
		qsort(x->bufs, x->nbufs, sizeof *x->bufs,
		      x->h.type == TK_XRAY_FDR ? cmp_buf : cmp_buf_seq);
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

/* ---- expanding one buffer --------------------------------------------------------------- */

static int grow_recs(struct xr_out *o)
{
	size_t cap = o->cap ? o->cap * 2 : 1024;
	void *t = realloc(o->recs, cap * sizeof *o->recs);
	if (!t) {
		o->nomem = 1;
		return -1;
	}
	o->recs = t;
	o->cap = cap;
	return 0;
}

static struct xr_rec *new_rec(struct xr_out *o)
{
	if (o->n == o->cap && grow_recs(o) < 0)
		return NULL;
	struct xr_rec *r = &o->recs[o->n++];
	memset(r, 0, sizeof *r);
	return r;
}

static int add_arg(struct xr_out *o, uint64_t v)
{
	if (o->nargs == o->capargs) {
		size_t cap = o->capargs ? o->capargs * 2 : 64;
		void *t = realloc(o->args, cap * sizeof *o->args);
		if (!t) {
			o->nomem = 1;
			return -1;
		}
		o->args = t;
		o->capargs = cap;
	}
	o->args[o->nargs++] = v;
	return 0;
}

static void out_reset(struct xr_out *o)
{
	o->n = o->nargs = 0;
	o->base_known = o->cpu_known = o->func_known = o->rt_known = o->pid_known = 0;
	o->base = 0;
	o->cpu = o->rt = 0;
	o->func = 0;
	o->pid = 0;
	o->err = NULL;
	o->err_off = o->err_skip = 0;
	o->err_reason = 0;
	o->nomem = 0;
}

static void out_free(struct xr_out *o)
{
	free(o->recs);
	free(o->args);
	memset(o, 0, sizeof *o);
}

/* Fill the fields every record takes from the thread state, marking what is inherited. */
static void stamp(struct xr_out *o, struct xr_rec *r, uint32_t tid)
{
	r->r.tid = tid;
	if (o->pid_known)
		r->r.pid = o->pid;
	else
		r->fix |= FIX_PID;
	if (o->rt_known)
		r->r.rec_type = o->rt;
	else
		r->fix |= FIX_RT;
}

static void set_err(struct xr_out *o, uint64_t off, uint64_t end, const char *msg, int reason)
{
	o->err = msg;
	o->err_off = off;
	o->err_skip = end > off ? end - off : 0;
	o->err_reason = reason;
}

static void expand_fdr(const struct tk_xray *x, const struct xr_buf *b, struct xr_out *o)
{
	struct tk_xray_cursor c;
	struct tk_xray_record rec;
	const char *msg;
	uint64_t skipped;
	uint32_t tid = 0;
	int pending = 0;           /* the last record can still take call arguments */
	unsigned version = x->h.version;

	memset(&c, 0, sizeof c);
	c.p = x->p;
	c.h = x->h;
	c.n = b->end;
	c.off = b->start;
	c.in_buffer = 1;
	c.buf_end = b->end;
	c.v1_buf_start = b->start;
	const uint8_t *p = x->p;
	int be = x->h.big_endian;
	while (c.off < b->end && !o->nomem) {
		struct xr_rec *r;
		/* fast path: a well-formed function record (most of any log) */
		if (!xr_is_meta(p[c.off], be) && b->end - c.off >= 8) {
			uint32_t w = xr_rd32(p + c.off, be);
			unsigned fnt = be ? (w >> 28) & 7 : (w >> 1) & 7;
			int32_t id = (int32_t)(be ? w & 0x0fffffffu : w >> 4);
			if (fnt <= TK_XRAY_ENTER_ARGS && id != 0 &&
			    (x->opts.max_func_id <= 0 || id <= x->opts.max_func_id)) {
				if (o->n == o->cap && grow_recs(o) < 0)
					return;
				r = &o->recs[o->n++];
				o->base += xr_rd32(p + c.off + 4, be);
				r->r.tsc = o->base;
				r->r.offset = c.off;
				r->r.func_id = id;
				r->r.tid = tid;
				r->r.pid = o->pid;
				r->r.cpu = o->cpu;
				r->r.rec_type = o->rt;
				r->r.type = (uint8_t)fnt;
				r->r.orphan = 0;
				r->r.nargs = 0;
				r->r.args = NULL;
				r->r.data = NULL;
				r->r.data_len = 0;
				r->r.thread = 0;
				r->argi = (uint32_t)o->nargs;
				r->fix = (uint8_t)((o->base_known ? 0 : FIX_BASE) |
						   (o->cpu_known ? 0 : FIX_CPU) |
						   (o->rt_known ? 0 : FIX_RT) |
						   (o->pid_known ? 0 : FIX_PID));
				o->func = id;
				o->func_known = 1;
				pending = 1;
				c.off += 8;
				continue;
			}
		}
		int rc = tk_xray_next(&c, &rec, &msg, &skipped);
		if (rc == 0)
			break;
		if (rc < 0) {
			set_err(o, rec.offset, b->end, msg,
				rc == -TK_E_TRUNCATED || strstr(msg, "truncated") ?
				TK_GAP_TRUNCATED : TK_GAP_DECODE_ERROR);
			return;
		}
		switch (rec.kind) {
		case TK_XRAY_NEW_BUFFER:
			tid = (uint32_t)rec.tid;
			if (version == 2) {
				o->pid = tid;
				o->pid_known = 1;
			}
			break;
		case TK_XRAY_END_OF_BUFFER:
			return;
		case TK_XRAY_NEW_CPU:
			o->cpu = rec.cpu;
			o->cpu_known = 1;
			o->base = rec.tsc;
			o->base_known = 1;
			break;
		case TK_XRAY_TSC_WRAP:
			o->base = rec.tsc;
			o->base_known = 1;
			break;
		case TK_XRAY_PID:
			o->pid = (uint32_t)rec.pid;
			o->pid_known = 1;
			break;
		case TK_XRAY_CALL_ARG:
			if (pending && add_arg(o, rec.value) == 0) {
				r = &o->recs[o->n - 1];
				r->r.nargs++;
				r->r.type = TK_XRAY_R_ENTER_ARG;
			}
			break;
		case TK_XRAY_FUNCTION:
			if (rec.func_id == 0 ||
			    (x->opts.max_func_id > 0 && rec.func_id > x->opts.max_func_id)) {
				set_err(o, rec.offset, b->end, "corrupt function id",
					TK_GAP_DECODE_ERROR);
				return;
			}
			if (!(r = new_rec(o)))
				return;
			o->base += rec.delta;
			r->r.tsc = o->base;
			if (!o->base_known)
				r->fix |= FIX_BASE;
			r->r.type = (uint8_t)rec.fn;
			r->r.func_id = rec.func_id;
			o->func = rec.func_id;
			o->func_known = 1;
			r->r.cpu = o->cpu;
			if (!o->cpu_known)
				r->fix |= FIX_CPU;
			r->r.offset = rec.offset;
			r->argi = (uint32_t)o->nargs;
			stamp(o, r, tid);
			pending = 1;
			break;
		case TK_XRAY_CUSTOM:
		case TK_XRAY_TYPED:
			if (!(r = new_rec(o)))
				return;
			r->r.offset = rec.offset;
			r->argi = (uint32_t)o->nargs;
			if (rec.kind == TK_XRAY_TYPED) {
				o->rt = rec.event_type;
				o->rt_known = 1;
			}
			if (rec.kind == TK_XRAY_CUSTOM && version < 5) {
				r->r.tsc = rec.tsc;
				r->r.cpu = rec.cpu;
			} else {
				o->base += (uint64_t)(int64_t)rec.sdelta;
				r->r.tsc = o->base;
				if (!o->base_known)
					r->fix |= FIX_BASE;
				r->r.cpu = o->cpu;
				if (!o->cpu_known)
					r->fix |= FIX_CPU;
			}
			r->r.type = rec.kind == TK_XRAY_TYPED ? TK_XRAY_R_TYPED : TK_XRAY_R_CUSTOM;
			r->r.func_id = o->func;
			if (!o->func_known)
				r->fix |= FIX_FUNC;
			r->r.data = rec.data;
			r->r.data_len = (uint32_t)rec.data_size;
			stamp(o, r, tid);
			pending = 1;
			break;
		default:
			break;
		}
	}
}

static void expand_basic(const struct tk_xray *x, const struct xr_buf *b, struct xr_out *o)
{
	struct tk_xray_cursor c;
	struct tk_xray_record rec;
	const char *msg;
	uint64_t skipped;

	memset(&c, 0, sizeof c);
	c.p = x->p;
	c.h = x->h;
	c.n = b->end;
	c.off = b->start;
	o->base_known = o->cpu_known = o->func_known = o->rt_known = o->pid_known = 1;
	while (c.off < b->end && !o->nomem) {
		int rc = tk_xray_next(&c, &rec, &msg, &skipped);
		if (rc == 0)
			break;
		if (rc < 0) {
			/* One bad 32-byte record: report it and go on with the next. */
			set_err(o, rec.offset, rec.offset + 32, msg, TK_GAP_DECODE_ERROR);
			return;
		}
		if (rec.kind == TK_XRAY_BASIC_ARG) {
			struct xr_rec *last = o->n ? &o->recs[o->n - 1] : NULL;
			if (!last || last->r.func_id != rec.func_id ||
			    last->r.tid != (uint32_t)rec.tid) {
				set_err(o, rec.offset, rec.offset + 32,
					"argument record does not follow its function record",
					TK_GAP_DECODE_ERROR);
				return;
			}
			if (add_arg(o, rec.value) == 0)
				last->r.nargs++;
			continue;
		}
		if (rec.func_id <= 0 ||
		    (x->opts.max_func_id > 0 && rec.func_id > x->opts.max_func_id)) {
			set_err(o, rec.offset, rec.offset + 32, "corrupt function id",
				TK_GAP_DECODE_ERROR);
			return;
		}
		struct xr_rec *r = new_rec(o);
		if (!r)
			return;
		r->r.offset = rec.offset;
		r->r.tsc = rec.tsc;
		r->r.cpu = rec.cpu;
		r->r.type = (uint8_t)rec.fn;
		r->r.func_id = rec.func_id;
		r->r.tid = (uint32_t)rec.tid;
		r->r.pid = (uint32_t)rec.pid;
		r->argi = (uint32_t)o->nargs;
	}
}

/* Expand buffer B. Basic-mode damage ends the run at the bad record; the caller resumes
 * after it, so one bad record costs 32 bytes, not the run. */
static void expand(const struct tk_xray *x, const struct xr_buf *b, struct xr_out *o)
{
	out_reset(o);
	if (x->h.type == TK_XRAY_FDR)
		expand_fdr(x, b, o);
	else
		expand_basic(x, b, o);
}

/* ---- delivering records in order ---------------------------------------------------------- */

/* Counts of one chunk of buffers decoded on a worker, merged in order. */
struct xr_tstat {
	uint32_t thread;
	uint64_t records, first, last;
	uint64_t clamped;          /* exits seen at (chunk-relative) depth 0 */
	uint64_t end_depth;
	uint64_t clamp_off[4];
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

static void stats_reset(struct tk_xray *x)
{
	memset(&x->stats, 0, sizeof x->stats);
	memset(x->cpu_seen, 0, sizeof x->cpu_seen);
	x->stats.first_tsc = UINT64_MAX;
	x->stats.gaps = x->index_gaps;
	for (size_t i = 0; i < x->nthreads; i++) {
		x->threads[i].records = x->threads[i].orphan_exits = 0;
		x->threads[i].first_tsc = UINT64_MAX;
		x->threads[i].last_tsc = 0;
	}
}

static void stats_finish(struct tk_xray *x)
{
	if (x->stats.first_tsc == UINT64_MAX)
		x->stats.first_tsc = 0;
	for (size_t i = 0; i < x->nthreads; i++)
		if (x->threads[i].first_tsc == UINT64_MAX)
			x->threads[i].first_tsc = 0;
	uint64_t cpus = 0;
	for (size_t i = 0; i < sizeof x->cpu_seen; i++)
		cpus += (uint64_t)__builtin_popcount(x->cpu_seen[i]);
	x->stats.cpus = cpus;
	x->stats.buffers = x->nbufs;
}

static int emit_gap(struct deliver *d, uint64_t off, uint64_t skip, int reason, uint32_t track)
{
	int rc = 0;
	if (!d->batch)
		return 0;
	struct tk_event *e = tk_event_batch_next(d->batch, &rc);
	if (!e)
		return rc;
	memset(e, 0, sizeof *e);
	e->time = TK_TIME_NONE;
	e->kind = TK_EV_GAP;
	e->arg = off;
	e->count = skip;
	e->flags = (uint16_t)reason;
	e->track = track;
	return 0;
}

static int emit_rec(struct deliver *d, const struct tk_xray_rec *r)
{
	static const uint16_t kinds[] = {
		[TK_XRAY_R_ENTER] = TK_EV_FUNC_ENTER, [TK_XRAY_R_EXIT] = TK_EV_FUNC_EXIT,
		[TK_XRAY_R_TAIL_EXIT] = TK_EV_FUNC_TAIL_EXIT, [TK_XRAY_R_ENTER_ARG] = TK_EV_FUNC_ENTER,
		[TK_XRAY_R_CUSTOM] = TK_EV_CUSTOM, [TK_XRAY_R_TYPED] = TK_EV_TYPED,
	};
	int rc = 0;
	struct tk_event *e = tk_event_batch_next(d->batch, &rc);
	if (!e)
		return rc;
	e->time = r->tsc;
	e->kind = kinds[r->type];
	e->track = r->thread;
	e->addr2 = 0;
	e->flags = 0;
	if (r->type == TK_XRAY_R_CUSTOM || r->type == TK_XRAY_R_TYPED) {
		e->addr = (uint64_t)(int64_t)r->func_id;
		e->data = r->data;
		e->count = r->data_len;
		if (r->type == TK_XRAY_R_TYPED)
			e->flags = r->rec_type;
		return 0;
	}
	e->addr = (uint64_t)(int64_t)r->func_id;
	e->count = 0;
	e->arg = 0;
	for (unsigned i = 0; i < r->nargs; i++) {
		struct tk_event *a = tk_event_batch_next(d->batch, &rc);
		if (!a)
			return rc;
		memset(a, 0, sizeof *a);
		a->time = r->tsc;
		a->kind = TK_EV_FUNC_ARG;
		a->track = r->thread;
		a->addr = (uint64_t)(int64_t)r->func_id;
		a->arg = r->args[i];
		a->count = i;
	}
	return 0;
}

static void log_err(struct tk_xray *x, uint64_t off, uint64_t skip, const char *msg)
{
	tk_log(TK_LOG_WARN, "offset 0x%llx: %s; skipped %llu bytes to the next %s",
	       (unsigned long long)off, msg, (unsigned long long)skip,
	       x->h.type == TK_XRAY_FDR ? "buffer" : "record");
	tk_gap_stats_add(&x->stats.gaps, off, skip);
}

/* Where one buffer's records are counted (set up by deliver_begin). */
struct dctx {
	struct tk_xray_thread_info *ti;
	struct tk_xray_stats *st;
	uint8_t *cpu_seen;
	struct xr_tstat *ts;       /* chunk mode */
};

static int deliver_begin(struct deliver *d, const struct xr_buf *b, struct dctx *k)
{
	struct tk_xray *x = d->x;
	struct xr_chunk_stats *cst = d->cst;

	if (!d->have_thread || d->thread != b->thread) {
		memset(&d->carry, 0, sizeof d->carry);
		d->thread = b->thread;
		d->have_thread = 1;
	}
	k->ti = &x->threads[b->thread];
	k->st = &x->stats;
	k->cpu_seen = x->cpu_seen;
	k->ts = NULL;
	if (cst) {
		k->st = &cst->s;
		k->cpu_seen = cst->cpu_seen;
		if (!cst->nts || cst->ts[cst->nts - 1].thread != b->thread) {
			if (cst->nts == cst->capts) {
				size_t cap = cst->capts ? cst->capts * 2 : 8;
				void *t = realloc(cst->ts, cap * sizeof *cst->ts);
				if (!t)
					return -TK_E_NOMEM;
				cst->ts = t;
				cst->capts = cap;
			}
			k->ts = &cst->ts[cst->nts++];
			memset(k->ts, 0, sizeof *k->ts);
			k->ts->thread = b->thread;
			k->ts->first = UINT64_MAX;
		} else {
			k->ts = &cst->ts[cst->nts - 1];
		}
	}
	return 0;
}

/* Count one record (its inherited state filled in) and hand it on. */
static inline int deliver_one(struct deliver *d, const struct dctx *k, struct tk_xray_rec *r)
{
	struct xr_carry *cs = &d->carry;
	struct tk_xray_stats *st = k->st;
	struct xr_tstat *ts = k->ts;
	int rc;

	r->orphan = 0;
	switch (r->type) {
	case TK_XRAY_R_ENTER:
	case TK_XRAY_R_ENTER_ARG:
		cs->depth++;
		st->function_records++;
		break;
	case TK_XRAY_R_EXIT:
	case TK_XRAY_R_TAIL_EXIT:
		st->function_records++;
		if (cs->depth) {
			cs->depth--;
		} else if (ts) {
			/* whether it is an orphan depends on earlier chunks: the merge says */
			if (ts->clamped < 4)
				ts->clamp_off[ts->clamped] = r->offset;
			ts->clamped++;
		} else {
			r->orphan = 1;
			k->ti->orphan_exits++;
			st->orphan_exits++;
			if (!cs->wrapped) {
				/* The log lost this thread's older records (ring wrap). */
				cs->wrapped = 1;
				tk_gap_stats_add(&st->gaps, r->offset, 0);
			}
		}
		break;
	case TK_XRAY_R_CUSTOM:
		st->custom_events++;
		break;
	case TK_XRAY_R_TYPED:
		st->typed_events++;
		break;
	}
	st->call_args += r->nargs;
	st->records++;
	if (ts) {
		ts->records++;
		if (r->tsc < ts->first)
			ts->first = r->tsc;
		if (r->tsc > ts->last)
			ts->last = r->tsc;
	} else {
		k->ti->records++;
		if (r->tsc < k->ti->first_tsc)
			k->ti->first_tsc = r->tsc;
		if (r->tsc > k->ti->last_tsc)
			k->ti->last_tsc = r->tsc;
	}
	if (r->tsc < st->first_tsc)
		st->first_tsc = r->tsc;
	if (r->tsc > st->last_tsc)
		st->last_tsc = r->tsc;
	k->cpu_seen[r->cpu >> 3] |= (uint8_t)(1u << (r->cpu & 7));
	if (d->cb && (rc = d->cb(d->cb_ctx, r)) < 0)
		return rc;
	if (d->batch && (rc = emit_rec(d, r)) < 0)
		return rc;
	return 0;
}

/* After a buffer: the state it leaves to the next one of the thread, and its damage. */
static int deliver_end(struct deliver *d, const struct xr_buf *b, const struct xr_out *o,
		       const struct dctx *k)
{
	struct xr_carry *cs = &d->carry;
	struct xr_chunk_stats *cst = d->cst;
	int rc;

	cs->base = o->base_known ? o->base : cs->base + o->base;
	if (o->cpu_known)
		cs->cpu = o->cpu;
	if (o->func_known)
		cs->func = o->func;
	if (o->rt_known)
		cs->rt = o->rt;
	if (o->pid_known)
		cs->pid = o->pid;
	if (k->ts)
		k->ts->end_depth = cs->depth;
	if (o->err && cst) {
		if (cst->nerrs == cst->caperrs) {
			size_t cap = cst->caperrs ? cst->caperrs * 2 : 4;
			void *t = realloc(cst->errs, cap * sizeof *cst->errs);
			if (!t)
				return -TK_E_NOMEM;
			cst->errs = t;
			cst->caperrs = cap;
		}
		cst->errs[cst->nerrs++] = (struct xr_err){ o->err_off, o->err_skip, o->err };
	} else if (o->err) {
		log_err(d->x, o->err_off, o->err_skip, o->err);
	}
	if (o->err) {
		if ((rc = emit_gap(d, o->err_off, o->err_skip, o->err_reason, b->thread)) < 0)
			return rc;
	}
	return 0;
}

/* Deliver the records of one expanded buffer: patch inherited state, count, hand on. */
static int deliver_buf(struct deliver *d, const struct xr_buf *b, struct xr_out *o)
{
	struct xr_carry *cs = &d->carry;
	struct dctx k;
	int rc;

	if (o->nomem)
		return -TK_E_NOMEM;
	if ((rc = deliver_begin(d, b, &k)) < 0)
		return rc;
	for (size_t i = 0; i < o->n; i++) {
		struct xr_rec *xr = &o->recs[i];
		struct tk_xray_rec *r = &xr->r;
		if (xr->fix) {
			if (xr->fix & FIX_BASE)
				r->tsc += cs->base;
			if (xr->fix & FIX_CPU)
				r->cpu = cs->cpu;
			if (xr->fix & FIX_FUNC)
				r->func_id = cs->func;
			if (xr->fix & FIX_RT)
				r->rec_type = cs->rt;
			if (xr->fix & FIX_PID)
				r->pid = cs->pid;
			xr->fix = 0;
		}
		r->thread = b->thread;
		r->args = r->nargs ? o->args + xr->argi : NULL;
		if ((rc = deliver_one(d, &k, r)) < 0)
			return rc;
	}
	return deliver_end(d, b, o, &k);
}

/* FDR buffer B expanded and delivered in one pass, for the chunk decoder: the buffer starts
 * from the state its thread carries (nothing to patch afterwards) and no record array is
 * built. A record is held back until the next one (a CallArgument changes the record
 * before it, even after other metadata). Plain function records (no arguments; an exit
 * that ends a call of this chunk) go straight into the batch with their counts kept in
 * locals; everything else goes through deliver_one. The same records, counts and events
 * as expand() + deliver_buf(). */
static __attribute__((noinline)) int deliver_held_slow(struct deliver *d, const struct dctx *k,
							struct tk_xray_rec *r, struct xr_out *o)
{
	r->args = r->nargs ? o->args : NULL;
	int rc = deliver_one(d, k, r);
	o->nargs = 0;
	return rc;
}

static inline __attribute__((always_inline)) int
expand_deliver_fdr_endian(struct deliver *d, const struct xr_buf *b, struct xr_out *o, const int be)
{
	static const uint16_t kinds[] = {
		[TK_XRAY_R_ENTER] = TK_EV_FUNC_ENTER, [TK_XRAY_R_EXIT] = TK_EV_FUNC_EXIT,
		[TK_XRAY_R_TAIL_EXIT] = TK_EV_FUNC_TAIL_EXIT,
	};
	const struct tk_xray *x = d->x;
	const uint8_t *p = x->p;
	const size_t end = b->end;
	const unsigned version = x->h.version;
	const int32_t max_id = x->opts.max_func_id;
	struct tk_event_batch *batch = d->batch;
	struct xr_carry *cs = &d->carry;
	struct tk_xray_cursor c;
	struct tk_xray_record rec;
	const char *msg;
	uint64_t skipped;
	struct dctx k;
	int rc;

	out_reset(o);
	if ((rc = deliver_begin(d, b, &k)) < 0)
		return rc;
	/* the thread's state; o->*_known say what this buffer set */
	uint64_t base = cs->base;
	uint16_t cpu = cs->cpu, rt = cs->rt;
	uint32_t pid = cs->pid, tid = 0;
	int32_t func = cs->func;
	/* the held record */
	int have = 0;
	uint8_t h_type = 0;
	int32_t h_id = 0;
	uint16_t h_cpu = 0, h_rt = 0, h_nargs = 0;
	uint32_t h_tid = 0, h_pid = 0, h_len = 0;
	uint64_t h_tsc = 0, h_off = 0;
	const uint8_t *h_data = NULL;
	/* counts of the fast path */
	uint64_t nfast = 0, tmin = UINT64_MAX, tmax = 0;
	uint32_t marked_cpu = UINT32_MAX;

	memset(&c, 0, sizeof c);
	c.p = p;
	c.h = x->h;
	c.n = end;
	c.in_buffer = 1;
	c.buf_end = end;
	c.v1_buf_start = b->start;
#define FLUSH()									\
	do {									\
		if (!have)							\
			break;							\
		have = 0;							\
		if (__builtin_expect(h_nargs || h_type > TK_XRAY_R_TAIL_EXIT ||	\
				     (h_type != TK_XRAY_R_ENTER && !cs->depth), 0)) { \
			struct tk_xray_rec r = {				\
				.tsc = h_tsc, .offset = h_off, .func_id = h_id,	\
				.tid = h_tid, .pid = h_pid, .cpu = h_cpu,	\
				.rec_type = h_rt, .type = h_type,		\
				.nargs = h_nargs, .data = h_data,		\
				.data_len = h_len, .thread = b->thread,		\
			};							\
			if ((rc = deliver_held_slow(d, &k, &r, o)) < 0)		\
				return rc;					\
			break;							\
		}								\
		EMIT(h_type, h_id, h_tsc, h_cpu);				\
	} while (0)
/* a plain function record, delivered: counted here, straight into the batch */
#define EMIT(type, id, tsc, cpu_)						\
	do {									\
		cs->depth += (type) == TK_XRAY_R_ENTER ? 1 : (uint64_t)-1;	\
		nfast++;							\
		tmin = (tsc) < tmin ? (tsc) : tmin;				\
		tmax = (tsc) > tmax ? (tsc) : tmax;				\
		if ((cpu_) != marked_cpu) {					\
			k.cpu_seen[(cpu_) >> 3] |= (uint8_t)(1u << ((cpu_) & 7)); \
			marked_cpu = (cpu_);					\
		}								\
		if (batch->n == TK_EVENT_BATCH &&				\
		    (rc = tk_event_batch_flush(batch)) < 0)			\
			return rc;						\
		struct tk_event *e = &batch->ev[batch->n++];			\
		e->time = (tsc);						\
		e->addr = (uint64_t)(int64_t)(id);				\
		e->addr2 = 0;							\
		e->count = 0;							\
		e->arg = 0;							\
		e->track = b->thread;						\
		e->kind = kinds[(type)];					\
		e->flags = 0;							\
	} while (0)
#define HOLD(type, id, tsc, off, cpu_, data, len)				\
	do {									\
		have = 1;							\
		h_type = (uint8_t)(type);					\
		h_id = (id);							\
		h_tsc = (tsc);							\
		h_off = (off);							\
		h_cpu = (cpu_);							\
		h_tid = tid;							\
		h_pid = pid;							\
		h_rt = rt;							\
		h_nargs = 0;							\
		h_data = (data);						\
		h_len = (len);							\
	} while (0)
	size_t off = b->start;
	while (off < end) {
		/* a well-formed function record (most of any log) */
		if (!xr_is_meta(p[off], be) && end - off >= 8) {
			uint32_t w = xr_rd32(p + off, be);
			unsigned fnt = be ? (w >> 28) & 7 : (w >> 1) & 7;
			int32_t id = (int32_t)(be ? w & 0x0fffffffu : w >> 4);
			if (fnt <= TK_XRAY_ENTER_ARGS && id != 0 && (max_id <= 0 || id <= max_id)) {
				FLUSH();
				base += xr_rd32(p + off + 4, be);
				func = id;
				o->func_known = 1;
				/* no hold when a function record or the end follows: nothing
				 * can change this one */
				if (fnt <= TK_XRAY_TAIL_EXIT && (fnt == TK_XRAY_ENTER || cs->depth) &&
				    (end - off < 16 || !xr_is_meta(p[off + 8], be)))
					EMIT(fnt, id, base, cpu);
				else
					HOLD(fnt, id, base, off, cpu, NULL, 0);
				off += 8;
				continue;
			}
		}
		c.off = off;
		rc = tk_xray_next(&c, &rec, &msg, &skipped);
		off = c.off;
		if (rc == 0)
			break;
		if (rc < 0) {
			set_err(o, rec.offset, end, msg,
				rc == -TK_E_TRUNCATED || strstr(msg, "truncated") ?
				TK_GAP_TRUNCATED : TK_GAP_DECODE_ERROR);
			break;
		}
		if (rec.kind == TK_XRAY_END_OF_BUFFER)
			break;
		switch (rec.kind) {
		case TK_XRAY_NEW_BUFFER:
			tid = (uint32_t)rec.tid;
			if (version == 2) {
				pid = tid;
				o->pid_known = 1;
			}
			break;
		case TK_XRAY_NEW_CPU:
			cpu = rec.cpu;
			o->cpu_known = 1;
			base = rec.tsc;
			o->base_known = 1;
			break;
		case TK_XRAY_TSC_WRAP:
			base = rec.tsc;
			o->base_known = 1;
			break;
		case TK_XRAY_PID:
			pid = (uint32_t)rec.pid;
			o->pid_known = 1;
			break;
		case TK_XRAY_CALL_ARG:
			if (have && add_arg(o, rec.value) == 0) {
				h_nargs++;
				h_type = TK_XRAY_R_ENTER_ARG;
			}
			break;
		case TK_XRAY_FUNCTION:
			if (rec.func_id == 0 || (max_id > 0 && rec.func_id > max_id)) {
				set_err(o, rec.offset, end, "corrupt function id",
					TK_GAP_DECODE_ERROR);
				goto out;
			}
			FLUSH();
			base += rec.delta;
			HOLD(rec.fn, rec.func_id, base, rec.offset, cpu, NULL, 0);
			func = rec.func_id;
			o->func_known = 1;
			break;
		case TK_XRAY_CUSTOM:
		case TK_XRAY_TYPED:
			FLUSH();
			if (rec.kind == TK_XRAY_TYPED) {
				rt = rec.event_type;
				o->rt_known = 1;
			}
			if (rec.kind == TK_XRAY_CUSTOM && version < 5) {
				HOLD(TK_XRAY_R_CUSTOM, func, rec.tsc, rec.offset, rec.cpu, rec.data,
				     (uint32_t)rec.data_size);
			} else {
				base += (uint64_t)(int64_t)rec.sdelta;
				HOLD(rec.kind == TK_XRAY_TYPED ? TK_XRAY_R_TYPED : TK_XRAY_R_CUSTOM,
				     func, base, rec.offset, cpu, rec.data, (uint32_t)rec.data_size);
			}
			break;
		default:
			break;
		}
		if (o->nomem)
			return -TK_E_NOMEM;
	}
out:
	if (o->nomem)
		return -TK_E_NOMEM;
	FLUSH();
#undef FLUSH
#undef EMIT
#undef HOLD
	k.st->records += nfast;
	k.st->function_records += nfast;
	k.ts->records += nfast;
	if (nfast) {
		if (tmin < k.ts->first)
			k.ts->first = tmin;
		if (tmax > k.ts->last)
			k.ts->last = tmax;
		if (tmin < k.st->first_tsc)
			k.st->first_tsc = tmin;
		if (tmax > k.st->last_tsc)
			k.st->last_tsc = tmax;
	}
	/* the end state, as expand() leaves it: absolute where set in the buffer, else the
	 * sum of the deltas on top of the carried base */
	o->base = o->base_known ? base : base - cs->base;
	o->cpu = cpu;
	o->rt = rt;
	o->pid = pid;
	o->func = func;
	return deliver_end(d, b, o, &k);
}

/* One copy per byte order: the record reads fold to plain loads. Chunk mode only (a
 * batch, no callback). */
static int expand_deliver_fdr(struct deliver *d, const struct xr_buf *b, struct xr_out *o)
{
	if (d->x->h.big_endian)
		return expand_deliver_fdr_endian(d, b, o, 1);
	return expand_deliver_fdr_endian(d, b, o, 0);
}

/* Basic mode resumes after a bad record inside a run: split the run there. */
static void basic_resume(const struct xr_out *o, struct xr_buf *b)
{
	b->start = o->err_off + 32;
}

/* ---- serial walk ------------------------------------------------------------------------- */

static int walk_serial(struct tk_xray *x, struct deliver *d)
{
	struct xr_out o;
	int rc = 0;

	memset(&o, 0, sizeof o);
	for (size_t i = 0; i < x->nbufs && rc >= 0; i++) {
		struct xr_buf b = x->bufs[i];
		for (;;) {
			expand(x, &b, &o);
			if ((rc = deliver_buf(d, &b, &o)) < 0)
				break;
			if (!o.err || x->h.type == TK_XRAY_FDR || o.err_off + 32 >= b.end)
				break;
			basic_resume(&o, &b);
		}
		release(x, x->bufs[i].start, x->bufs[i].end);
	}
	out_free(&o);
	return rc;
}

int tk_xray_walk(struct tk_xray *x, tk_xray_rec_fn cb, void *ctx)
{
	struct deliver d;
	memset(&d, 0, sizeof d);
	d.x = x;
	d.cb = cb;
	d.cb_ctx = ctx;
	stats_reset(x);
	int rc = walk_serial(x, &d);
	stats_finish(x);
	return rc;
}

/* ---- parallel decode into neutral events ---------------------------------------------------- */

struct pjob {
	struct tk_xray *x;
	struct xr_out *slots;
	size_t nslots;
	struct deliver d;
};

static int pjob_work(void *ctx, size_t i)
{
	struct pjob *j = ctx;
	expand(j->x, &j->x->bufs[i], &j->slots[i % j->nslots]);
	return 0;
}

static int pjob_merge(void *ctx, size_t i)
{
	struct pjob *j = ctx;
	struct tk_xray *x = j->x;
	struct xr_out *o = &j->slots[i % j->nslots];
	struct xr_buf b = x->bufs[i];
	int rc;

	for (;;) {
		if ((rc = deliver_buf(&j->d, &b, o)) < 0)
			return rc;
		if (!o->err || x->h.type == TK_XRAY_FDR || o->err_off + 32 >= b.end) {
			release(x, x->bufs[i].start, x->bufs[i].end);
			return 0;
		}
		/* rare: a damaged basic record; finish the run here, serially */
		basic_resume(o, &b);
		expand(x, &b, o);
	}
}

int tk_xray_decode(struct tk_xray *x, struct tk_sink sink)
{
	struct tk_event_batch *batch = malloc(sizeof *batch);
	struct pjob j;
	int rc;

	if (!batch)
		return -TK_E_NOMEM;
	tk_event_batch_init(batch, sink);
	memset(&j, 0, sizeof j);
	j.x = x;
	j.d.x = x;
	j.d.batch = batch;
	unsigned nt = x->opts.nthreads ? x->opts.nthreads : 1;
	j.nslots = nt > 1 ? 2 * (size_t)nt + 2 : 1;
	j.slots = calloc(j.nslots, sizeof *j.slots);
	if (!j.slots) {
		free(batch);
		return -TK_E_NOMEM;
	}
	stats_reset(x);
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nt, .window = j.nslots };
	rc = tk_pool_run(&po, x->nbufs, pjob_work, pjob_merge, &j);
	if (rc >= 0)
		rc = tk_event_batch_flush(batch);
	stats_finish(x);
	for (size_t i = 0; i < j.nslots; i++)
		out_free(&j.slots[i]);
	free(j.slots);
	free(batch);
	return rc;
}

/* ---- chunks decoded in parallel into per-chunk consumers ------------------------------------ */

struct cjob {
	size_t first, end;         /* buffers */
	struct xr_out o;
	struct deliver d;
	struct xr_chunk_stats st;
	struct tk_event_batch batch;
	void *consumer;
	int rc;
};

struct cctx {
	struct tk_xray *x;
	const struct tk_xray_chunk_ops *ops;
	void *ctx;
	size_t *bounds;            /* chunk i = buffers [bounds[i], bounds[i + 1]) */
	struct cjob *slots;
	size_t nslots;
	uint64_t *depth;           /* per thread, after the chunks merged so far */
	uint8_t *wrapped;
};

static int cjob_work(void *ctx, size_t i)
{
	struct cctx *c = ctx;
	struct tk_xray *x = c->x;
	struct cjob *j = &c->slots[i % c->nslots];
	struct tk_sink sink = { 0 };
	int rc;

	j->first = c->bounds[i];
	j->end = c->bounds[i + 1];
	memset(&j->d, 0, sizeof j->d);
	j->d.x = x;
	j->d.cst = &j->st;
	free(j->st.ts);
	free(j->st.errs);
	memset(&j->st, 0, sizeof j->st);
	j->st.s.first_tsc = UINT64_MAX;
	j->consumer = NULL;
	if ((rc = c->ops->begin(c->ctx, i, &sink, &j->consumer)) < 0)
		return j->rc = rc;
	tk_event_batch_init(&j->batch, sink);
	j->d.batch = &j->batch;
	/* FDR: a thread's buffers lie in file order between other threads' ones; the span
	 * read since REL_FROM is given back every RELEASE_SPAN bytes (the other threads'
	 * buffers in it come back from the page cache when their turn comes), not buffer by
	 * buffer: one madvise and TLB flush per span */
	uint64_t rel_from = UINT64_MAX, rel_to = 0;
	for (size_t k = j->first; k < j->end && rc >= 0; k++) {
		struct xr_buf b = x->bufs[k];
		if (x->h.type == TK_XRAY_FDR) {
			rc = expand_deliver_fdr(&j->d, &b, &j->o);
			if (b.start < rel_from || b.start < rel_to || b.end - rel_from > RELEASE_SPAN) {
				if (rel_from != UINT64_MAX)
					release(x, rel_from, rel_to);
				rel_from = b.start;
			}
			rel_to = b.end;
			continue;
		}
		for (;;) {
			expand(x, &b, &j->o);
			if ((rc = deliver_buf(&j->d, &b, &j->o)) < 0)
				break;
			if (!j->o.err || j->o.err_off + 32 >= b.end)
				break;
			basic_resume(&j->o, &b);
		}
		release(x, x->bufs[k].start, x->bufs[k].end);
	}
	if (rel_from != UINT64_MAX)
		release(x, rel_from, rel_to);
	if (rc >= 0)
		rc = tk_event_batch_flush(&j->batch);
	return j->rc = rc;
}

static int cjob_merge(void *ctx, size_t i)
{
	struct cctx *c = ctx;
	struct tk_xray *x = c->x;
	struct cjob *j = &c->slots[i % c->nslots];
	struct xr_chunk_stats *cs = &j->st;

	if (j->rc < 0)
		return j->rc;
	for (size_t e = 0; e < cs->nerrs; e++)
		log_err(x, cs->errs[e].off, cs->errs[e].skip, cs->errs[e].msg);
	x->stats.function_records += cs->s.function_records;
	x->stats.custom_events += cs->s.custom_events;
	x->stats.typed_events += cs->s.typed_events;
	x->stats.call_args += cs->s.call_args;
	x->stats.records += cs->s.records;
	if (cs->s.first_tsc < x->stats.first_tsc)
		x->stats.first_tsc = cs->s.first_tsc;
	if (cs->s.last_tsc > x->stats.last_tsc)
		x->stats.last_tsc = cs->s.last_tsc;
	for (size_t k = 0; k < sizeof x->cpu_seen; k++)
		x->cpu_seen[k] |= cs->cpu_seen[k];
	for (size_t k = 0; k < cs->nts; k++) {
		struct xr_tstat *t = &cs->ts[k];
		struct tk_xray_thread_info *ti = &x->threads[t->thread];
		uint64_t d = c->depth[t->thread];
		ti->records += t->records;
		if (t->records && t->first < ti->first_tsc)
			ti->first_tsc = t->first;
		if (t->last > ti->last_tsc)
			ti->last_tsc = t->last;
		/* the first D clamped exits ended calls begun in earlier chunks */
		if (t->clamped > d) {
			uint64_t orphans = t->clamped - d;
			ti->orphan_exits += orphans;
			x->stats.orphan_exits += orphans;
			if (!c->wrapped[t->thread]) {
				c->wrapped[t->thread] = 1;
				tk_gap_stats_add(&x->stats.gaps, t->clamp_off[d < 4 ? d : 3], 0);
			}
		}
		c->depth[t->thread] = t->end_depth + (d > t->clamped ? d - t->clamped : 0);
	}
	return c->ops->merge(c->ctx, i, j->consumer);
}

int tk_xray_decode_chunks(struct tk_xray *x, const struct tk_xray_chunk_ops *ops, void *ctx)
{
	struct cctx c;
	unsigned nt = x->opts.nthreads ? x->opts.nthreads : 1;
	int rc = -TK_E_NOMEM;

	memset(&c, 0, sizeof c);
	c.x = x;
	c.ops = ops;
	c.ctx = ctx;
	/* chunks of about nbufs / (8 * workers) buffers, cut only where a buffer needs no
	 * state from the one before it */
	size_t target = x->nbufs / (8 * (size_t)nt) + 1, nchunks = 0;
	if (target < 4)
		target = 4;
	if (nt == 1)
		target = SIZE_MAX;          /* one chunk: nothing to merge */
	c.bounds = malloc((x->nbufs + 2) * sizeof *c.bounds);
	c.nslots = nt > 1 ? 2 * (size_t)nt + 2 : 1;
	c.slots = calloc(c.nslots, sizeof *c.slots);
	c.depth = calloc(x->nthreads + 1, sizeof *c.depth);
	c.wrapped = calloc(x->nthreads + 1, 1);
	if (!c.bounds || !c.slots || !c.depth || !c.wrapped)
		goto out;
	c.bounds[0] = 0;
	for (size_t i = 1; i < x->nbufs; i++) {
		size_t start = c.bounds[nchunks];
		if (i - start >= target &&
		    (x->bufs[i].thread != x->bufs[i - 1].thread || x->bufs[i].self_contained))
			c.bounds[++nchunks] = i;
	}
	if (x->nbufs)
		c.bounds[++nchunks] = x->nbufs;
	stats_reset(x);
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nt, .window = c.nslots };
	rc = tk_pool_run(&po, nchunks, cjob_work, cjob_merge, &c);
	stats_finish(x);
out:
	for (size_t i = 0; c.slots && i < c.nslots; i++) {
		out_free(&c.slots[i].o);
		free(c.slots[i].st.ts);
		free(c.slots[i].st.errs);
	}
	free(c.slots);
	free(c.bounds);
	free(c.depth);
	free(c.wrapped);
	return rc;
}

/* ---- records merged across threads by TSC --------------------------------------------------- */

struct stream {
	struct tk_xray *x;
	size_t next_buf, end_buf;  /* this thread's buffers */
	struct xr_buf cur;
	int cur_open;
	struct xr_out o;
	size_t pos;
	struct deliver d;          /* carries this thread's state */
	uint32_t rank;
};

/* Collects the delivered (patched) records of one buffer in place. */
static int stream_keep(void *ctx, const struct tk_xray_rec *r)
{
	(void)ctx, (void)r;
	return 0;
}

static int cmp_rec_tsc(const void *a, const void *b)
{
	const struct xr_rec *l = a, *r = b;
	if (l->r.tsc != r->r.tsc)
		return l->r.tsc < r->r.tsc ? -1 : 1;
	return l->r.offset < r->r.offset ? -1 : l->r.offset > r->r.offset;
}

/* Records whose TSCs go backwards inside a buffer (custom events before version 5 carry
 * their own absolute TSC) are put in order within the buffer, as llvm-xray's stable sort
 * by TSC would place them. */
static void sort_buffer(struct xr_out *o)
{
	for (size_t i = 1; i < o->n; i++) {
		if (o->recs[i].r.tsc < o->recs[i - 1].r.tsc) {
			qsort(o->recs, o->n, sizeof *o->recs, cmp_rec_tsc);
			return;
		}
	}
}

/* Make s->o hold at least one undelivered record; 0 when the thread is done. */
static int stream_fill(struct stream *s)
{
	struct tk_xray *x = s->x;
	int rc;

	while (s->pos >= s->o.n) {
		if (s->cur_open && s->o.err && x->h.type != TK_XRAY_FDR &&
		    s->o.err_off + 32 < s->cur.end) {
			basic_resume(&s->o, &s->cur);
		} else {
			if (s->cur_open)
				release(x, s->x->bufs[s->next_buf - 1].start, s->x->bufs[s->next_buf - 1].end);
			if (s->next_buf >= s->end_buf)
				return 0;
			s->cur = x->bufs[s->next_buf++];
			s->cur_open = 1;
		}
		expand(x, &s->cur, &s->o);
		s->pos = 0;
		if ((rc = deliver_buf(&s->d, &s->cur, &s->o)) < 0)
			return rc;
		sort_buffer(&s->o);
	}
	return 1;
}

static int stream_less(const struct stream *a, const struct stream *b)
{
	const struct tk_xray_rec *ra = &a->o.recs[a->pos].r, *rb = &b->o.recs[b->pos].r;
	if (ra->tsc != rb->tsc)
		return ra->tsc < rb->tsc;
	/* equal TSCs: llvm-xray's stable sort keeps its pre-sort order (file order in basic
	 * mode, its thread map's order in FDR mode) */
	if (a->rank != b->rank)
		return a->rank < b->rank;
	return ra->offset < rb->offset;
}

int tk_xray_walk_sorted(struct tk_xray *x, tk_xray_rec_fn cb, void *ctx)
{
	size_t ns = x->nthreads;
	struct stream *s = calloc(ns ? ns : 1, sizeof *s);
	struct stream **heap = calloc(ns ? ns : 1, sizeof *heap);
	size_t nh = 0;
	int rc = 0;

	if (!s || !heap) {
		free(s);
		free(heap);
		return -TK_E_NOMEM;
	}
	stats_reset(x);
	/* bufs are sorted thread-major: find each thread's range */
	for (size_t i = 0, t = 0; t < ns; t++) {
		s[t].x = x;
		s[t].rank = x->rank ? x->rank[t] : 0;
		s[t].d.x = x;
		s[t].d.cb = stream_keep;
		s[t].next_buf = i;
		while (i < x->nbufs && x->bufs[i].thread == t)
			i++;
		s[t].end_buf = i;
	}
	for (size_t t = 0; t < ns && rc >= 0; t++) {
		rc = stream_fill(&s[t]);
		if (rc > 0) {
			/* sift up */
			size_t k = nh++;
			heap[k] = &s[t];
			while (k && stream_less(heap[k], heap[(k - 1) / 2])) {
				struct stream *tmp = heap[k];
				heap[k] = heap[(k - 1) / 2];
				heap[(k - 1) / 2] = tmp;
				k = (k - 1) / 2;
			}
		}
	}
	while (nh && rc >= 0) {
		struct stream *top = heap[0];
		struct xr_rec *xr = &top->o.recs[top->pos++];
		if ((rc = cb(ctx, &xr->r)) < 0)
			break;
		rc = stream_fill(top);
		if (rc < 0)
			break;
		if (rc == 0)
			heap[0] = heap[--nh];
		/* sift down */
		size_t k = 0;
		for (;;) {
			size_t l = 2 * k + 1, m = k;
			if (l < nh && stream_less(heap[l], heap[m]))
				m = l;
			if (l + 1 < nh && stream_less(heap[l + 1], heap[m]))
				m = l + 1;
			if (m == k)
				break;
			struct stream *tmp = heap[k];
			heap[k] = heap[m];
			heap[m] = tmp;
			k = m;
		}
		rc = 0;
	}
	stats_finish(x);
	for (size_t t = 0; t < ns; t++)
		out_free(&s[t].o);
	free(s);
	free(heap);
	return rc < 0 ? rc : 0;
}
