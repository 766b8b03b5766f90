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
#include "formats/xray/trace_internal.h"

const struct tk_xray_header *tk_xray_header(const struct tk_xray *x) { return &x->h; }
size_t tk_xray_thread_count(const struct tk_xray *x) { return x->nthreads; }
const struct tk_xray_thread_info *tk_xray_thread(const struct tk_xray *x, size_t i)
{
	return i < x->nthreads ? &x->threads[i] : NULL;
}
const struct tk_xray_stats *tk_xray_stats(const struct tk_xray *x) { return &x->stats; }
uint64_t tk_xray_first_tsc(const struct tk_xray *x)
{
	uint64_t first = UINT64_MAX;

	for (size_t i = 0; i < x->nbufs; i++)
		if (x->bufs[i].first_tsc && x->bufs[i].first_tsc < first)
			first = x->bufs[i].first_tsc;
	return first == UINT64_MAX ? 0 : first;
}

/* With opts.release_input, give back the pages under [start, end), rounded out to
 * RELEASE_ALIGN: the data is a read-only file mapping, so a page that a neighbouring buffer
 * still needs just comes back from the page cache when read again. Rounding out to the
 * kernel's fault-around window also drops the neighbours that a fault mapped ahead (other
 * threads' buffers, read much later in thread order). This keeps the resident size
 * independent of the log size. */
#define RELEASE_ALIGN ((uintptr_t)64 << 10)
void xr_release(const struct tk_xray *x, uint64_t start, uint64_t end)
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

/* The batch's spans in order of offset, those less than RELEASE_GAP apart joined: the
 * buffers between, other threads' ones mostly given back already or soon, come back from
 * the page cache if read again (a fault per 64 KiB: the kernel's fault-around). */
#define RELEASE_GAP ((uint64_t)1 << 20)
static void release_join(struct xr_release_batch *rb)
{
	for (size_t i = 1; i < rb->n; i++)   /* (a few dozen, mostly in order) */
		for (size_t k = i; k && rb->r[k].start < rb->r[k - 1].start; k--) {
			struct xr_span t = rb->r[k];
			rb->r[k] = rb->r[k - 1];
			rb->r[k - 1] = t;
		}
	size_t n = 0;
	rb->bytes = 0;
	for (size_t i = 0; i < rb->n;) {
		struct xr_span sp = rb->r[i];
		while (++i < rb->n && rb->r[i].start < sp.end + RELEASE_GAP)
			sp.end = rb->r[i].end > sp.end ? rb->r[i].end : sp.end;
		rb->r[n++] = sp;
		rb->bytes += sp.end - sp.start;
	}
	rb->n = n;
}

void xr_release_add(const struct tk_xray *x, struct xr_release_batch *rb, uint64_t start,
		    uint64_t end)
{
	if (!x->opts.release_input || end <= start)
		return;
	if (rb->n && rb->r[rb->n - 1].end == start) {   /* the common case: the next buffer */
		rb->r[rb->n - 1].end = end;
	} else {
		/* full: joined first (basic mode's runs of a record or two, threads taking
		 * turns, fill it long before 4 MiB: given back then, one madvise per 2 KiB
		 * of log), given back if that frees nothing */
		if (rb->n == RELEASE_BATCH)
			release_join(rb);
		if (rb->n == RELEASE_BATCH)
			xr_release_flush(x, rb);
		rb->r[rb->n].start = start;
		rb->r[rb->n++].end = end;
	}
	if ((rb->bytes += end - start) >= RELEASE_SPAN)
		xr_release_flush(x, rb);
}

void xr_release_flush(const struct tk_xray *x, struct xr_release_batch *rb)
{
	release_join(rb);
	for (size_t i = 0; i < rb->n; i++)
		xr_release(x, rb->r[i].start, rb->r[i].end);
	rb->n = 0;
	rb->bytes = 0;
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

void xr_out_free(struct xr_out *o)
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
void xr_expand(const struct tk_xray *x, const struct xr_buf *b, struct xr_out *o)
{
	out_reset(o);
	if (x->h.type == TK_XRAY_FDR)
		expand_fdr(x, b, o);
	else
		expand_basic(x, b, o);
}

/* ---- delivering records in order ---------------------------------------------------------- */

void xr_stats_reset(struct tk_xray *x)
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

void xr_stats_finish(struct tk_xray *x)
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

void xr_log_err(struct tk_xray *x, uint64_t off, uint64_t skip, const char *msg)
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
			k->ts->clamp_first = cst->nclamps;
		} else {
			k->ts = &cst->ts[cst->nts - 1];
		}
	}
	return 0;
}

static int clamp_add(struct xr_chunk_stats *cst, uint64_t offset)
{
	if (cst->nclamps == cst->capclamps) {
		size_t cap = cst->capclamps ? 2 * cst->capclamps : 16;
		uint64_t *c = realloc(cst->clamps, cap * sizeof *c);
		if (!c)
			return -TK_E_NOMEM;
		cst->clamps = c;
		cst->capclamps = cap;
	}
	cst->clamps[cst->nclamps++] = offset;
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
			if ((rc = clamp_add(d->cst, r->offset)) < 0)
				return rc;
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
		xr_log_err(d->x, o->err_off, o->err_skip, o->err);
	}
	if (o->err) {
		if ((rc = emit_gap(d, o->err_off, o->err_skip, o->err_reason, b->thread)) < 0)
			return rc;
	}
	return 0;
}

/* Deliver the records of one expanded buffer: patch inherited state, count, hand on. */
int xr_deliver_buf(struct deliver *d, const struct xr_buf *b, struct xr_out *o)
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
 * as xr_expand() + xr_deliver_buf(). */
static __attribute__((noinline)) int deliver_held_slow(struct deliver *d, const struct dctx *k,
							struct tk_xray_rec *r, struct xr_out *o)
{
	r->args = r->nargs ? o->args : NULL;
	int rc = deliver_one(d, k, r);
	o->nargs = 0;
	return rc;
}

static inline __attribute__((always_inline)) int
expand_deliver_fdr_endian(struct deliver *d, const struct xr_buf *b, struct xr_out *o,
			  const uint8_t *p, const int be)
{
	static const uint16_t kinds[] = {
		[TK_XRAY_R_ENTER] = TK_EV_FUNC_ENTER, [TK_XRAY_R_EXIT] = TK_EV_FUNC_EXIT,
		[TK_XRAY_R_TAIL_EXIT] = TK_EV_FUNC_TAIL_EXIT,
	};
	const struct tk_xray *x = d->x;
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
	/* the end state, as xr_expand() leaves it: absolute where set in the buffer, else the
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
int xr_expand_deliver_fdr(struct deliver *d, const struct xr_buf *b, struct xr_out *o,
			  const uint8_t *p)
{
	if (d->x->h.big_endian)
		return expand_deliver_fdr_endian(d, b, o, p, 1);
	return expand_deliver_fdr_endian(d, b, o, p, 0);
}

const uint8_t *xr_buf_read(const struct tk_xray *x, const struct xr_buf *b, uint8_t **copy,
			   size_t *cap)
{
	size_t len = b->end - b->start;

	if (!x->opts.in || len > XR_READ_MAX)
		return NULL;
	if (len > *cap) {
		uint8_t *t = realloc(*copy, len);
		if (!t)
			return NULL;
		*copy = t;
		*cap = len;
	}
	if (tk_input_pread(x->opts.in, *copy, len, b->start) != (long)len)
		return NULL;
	/* offsets stay the file's: the base lies B->start bytes before the copy */
	return (const uint8_t *)((uintptr_t)*copy - b->start);
}

/* Basic mode resumes after a bad record inside a run: split the run there. */
void xr_basic_resume(const struct xr_out *o, struct xr_buf *b)
{
	b->start = o->err_off + 32;
}

/* ---- serial walk ------------------------------------------------------------------------- */

static int walk_serial(struct tk_xray *x, struct deliver *d)
{
	struct xr_out o;
	int rc = 0;

	struct xr_release_batch rb = { .n = 0 };
	memset(&o, 0, sizeof o);
	for (size_t i = 0; i < x->nbufs && rc >= 0; i++) {
		struct xr_buf b = x->bufs[i];
		for (;;) {
			xr_expand(x, &b, &o);
			if ((rc = xr_deliver_buf(d, &b, &o)) < 0)
				break;
			if (!o.err || x->h.type == TK_XRAY_FDR || o.err_off + 32 >= b.end)
				break;
			xr_basic_resume(&o, &b);
		}
		xr_release_add(x, &rb, x->bufs[i].start, x->bufs[i].end);
	}
	xr_release_flush(x, &rb);
	xr_out_free(&o);
	return rc;
}

/* tk_xray_walk with a callback (records in order, thread after thread) */
int xr_walk_records(struct tk_xray *x, tk_xray_rec_fn cb, void *ctx)
{
	struct deliver d;
	memset(&d, 0, sizeof d);
	d.x = x;
	d.cb = cb;
	d.cb_ctx = ctx;
	xr_stats_reset(x);
	int rc = walk_serial(x, &d);
	xr_stats_finish(x);
	return rc;
}
