/* Timelines: one slice per call, per track. Perfetto protobuf (TracePacket stream with track
 * descriptors, interned event names and incremental timestamps, one packet sequence per
 * track) or Chrome trace-event JSON. A time window and a cap on slices keep huge traces
 * viewable. The protobuf encoding is written by hand: a handful of fields is all we need. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"

enum { PF_CLOCK_ID = 64, PF_BOOTTIME = 6, PROCESS_UUID = 1 };

struct tl_frame {
	uint64_t key, ret;
	uint32_t kind;
	uint8_t emitted;
};

struct tl_track {
	uint32_t id;
	uint32_t seq;             /* Perfetto packet sequence id */
	struct tl_frame *st;
	size_t depth, cap;
	uint64_t t_last;          /* ticks */
	uint64_t last_ns;         /* last timestamp written on this sequence */
	uint8_t *interned;        /* per name id: already sent on this sequence */
	size_t ninterned;
	int started;              /* descriptor and sequence state written */
	int in_window;
	char *name;
};

struct tk_timeline {
	struct tk_timeline_opts o;
	struct tk_buf *b;
	struct names names;
	struct tl_track *tracks;
	size_t ntracks, ctracks;
	size_t last;
	uint64_t slices, dropped, max;
	uint64_t window_end;
	int header_done, finished, nomem;
	int first_json;
};

enum tk_timeline_kind tk_timeline_kind_by_name(const char *name)
{
	if (!name)
		return 0;
	if (!strcmp(name, "perfetto"))
		return TK_TIMELINE_PERFETTO;
	if (!strcmp(name, "chrome") || !strcmp(name, "chrome-json"))
		return TK_TIMELINE_CHROME;
	return 0;
}

/* ---- protobuf encoding ----------------------------------------------------------------- */

static inline size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}
static inline size_t put_tag(uint8_t *p, unsigned field, unsigned wire)
{
	return put_varint(p, (uint64_t)field << 3 | wire);
}
static inline size_t put_uint(uint8_t *p, unsigned field, uint64_t v)
{
	size_t n = put_tag(p, field, 0);
	return n + put_varint(p + n, v);
}
static inline size_t put_bytes(uint8_t *p, unsigned field, const void *d, size_t len)
{
	size_t n = put_tag(p, field, 2);
	n += put_varint(p + n, len);
	memcpy(p + n, d, len);
	return n + len;
}

/* Write one TracePacket (field 1 of Trace) with body P[0..n). */
static void emit_packet(struct tk_buf *b, const uint8_t *p, size_t n)
{
	uint8_t hdr[12];
	size_t h = put_tag(hdr, 1, 2);
	h += put_varint(hdr + h, n);
	if (tk_buf_reserve(b, h + n) < 0)
		return;
	memcpy(b->data + b->len, hdr, h);
	memcpy(b->data + b->len + h, p, n);
	b->len += h + n;
}

static uint64_t to_ns(const struct tk_timeline *t, uint64_t ticks)
{
	uint64_t tps = t->o.clock.ticks_per_second;
	if (!tps || tps == 1000000000u)
		return ticks;
	return (uint64_t)((unsigned __int128)ticks * 1000000000u / tps);
}

/* ---- tracks ---------------------------------------------------------------------------- */

static struct tl_track *get_track(struct tk_timeline *t, uint32_t id)
{
	if (t->last < t->ntracks && t->tracks[t->last].id == id)
		return &t->tracks[t->last];
	for (size_t i = 0; i < t->ntracks; i++)
		if (t->tracks[i].id == id) {
			t->last = i;
			return &t->tracks[i];
		}
	if (t->ntracks == t->ctracks) {
		size_t nc = t->ctracks ? t->ctracks * 2 : 16;
		struct tl_track *nt = realloc(t->tracks, nc * sizeof *nt);
		if (!nt)
			return NULL;
		t->tracks = nt;
		t->ctracks = nc;
	}
	struct tl_track *tr = &t->tracks[t->ntracks];
	memset(tr, 0, sizeof *tr);
	tr->id = id;
	tr->seq = (uint32_t)t->ntracks + 2; /* 1 is the process descriptor's */
	tr->t_last = TK_TIME_NONE;
	t->last = t->ntracks++;
	return tr;
}

static const char *track_label(const struct tl_track *tr, char *buf, size_t n)
{
	if (tr->name)
		return tr->name;
	snprintf(buf, n, "thread %u", tr->id);
	return buf;
}

static void header(struct tk_timeline *t)
{
	struct tk_buf *b = t->b;
	t->header_done = 1;
	const char *pname = t->o.process_name ? t->o.process_name : "trace";
	if (t->o.kind == TK_TIMELINE_CHROME) {
		tk_buf_puts(b, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
		tk_buf_puts(b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":");
		tk_buf_json_str(b, pname, strlen(pname));
		tk_buf_puts(b, "}}");
		return;
	}
	/* the process track */
	uint8_t proc[300], pk[340];
	size_t plen = strlen(pname) > 256 ? 256 : strlen(pname);
	size_t n = put_uint(proc, 1, 1);                      /* pid */
	n += put_bytes(proc + n, 6, pname, plen);             /* process_name */
	uint8_t td[360];
	size_t m = put_uint(td, 1, PROCESS_UUID);             /* uuid */
	m += put_bytes(td + m, 3, proc, n);                   /* process */
	size_t k = put_uint(pk, 10, 1);                       /* trusted_packet_sequence_id */
	k += put_bytes(pk + k, 60, td, m);                    /* track_descriptor */
	emit_packet(b, pk, k);
}

/* First packet of a track's sequence: clears incremental state, defines the incremental
 * clock (ns since the trace's zero), sets defaults, and describes the thread track. */
static void start_track(struct tk_timeline *t, struct tl_track *tr)
{
	struct tk_buf *b = t->b;
	char buf[64];
	const char *label = track_label(tr, buf, sizeof buf);
	tr->started = 1;
	if (t->o.kind == TK_TIMELINE_CHROME) {
		tk_buf_puts(b, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":");
		tk_buf_u64(b, tr->id);
		tk_buf_puts(b, ",\"args\":{\"name\":");
		tk_buf_json_str(b, label, strlen(label));
		tk_buf_puts(b, "}}");
		return;
	}
	uint8_t clk1[32], clk2[32], cs[80], defs[32], pk[512], thr[300], td[360];
	size_t n1 = put_uint(clk1, 1, PF_CLOCK_ID);
	n1 += put_uint(clk1 + n1, 2, 0);
	n1 += put_uint(clk1 + n1, 3, 1);                      /* is_incremental */
	size_t n2 = put_uint(clk2, 1, PF_BOOTTIME);
	n2 += put_uint(clk2 + n2, 2, 0);
	size_t ncs = put_bytes(cs, 1, clk1, n1);
	ncs += put_bytes(cs + ncs, 1, clk2, n2);
	size_t nd = put_uint(defs, 58, PF_CLOCK_ID);          /* timestamp_clock_id */
	size_t k = put_uint(pk, 10, tr->seq);
	k += put_uint(pk + k, 13, 1);                         /* INCREMENTAL_STATE_CLEARED */
	k += put_bytes(pk + k, 6, cs, ncs);                   /* clock_snapshot */
	k += put_bytes(pk + k, 59, defs, nd);                 /* trace_packet_defaults */
	emit_packet(b, pk, k);

	size_t ll = strlen(label) > 256 ? 256 : strlen(label);
	size_t nt = put_uint(thr, 1, 1);                      /* pid */
	nt += put_uint(thr + nt, 2, tr->id);                  /* tid */
	nt += put_bytes(thr + nt, 5, label, ll);              /* thread_name */
	size_t m = put_uint(td, 1, 0x10000ull + tr->id);      /* uuid */
	m += put_uint(td + m, 5, PROCESS_UUID);               /* parent_uuid */
	m += put_bytes(td + m, 4, thr, nt);                   /* thread */
	k = put_uint(pk, 10, tr->seq);
	k += put_bytes(pk + k, 60, td, m);
	emit_packet(b, pk, k);
	tr->last_ns = 0;
}

/* One slice begin or end on TR at TICKS. BEGIN: name of (key, kind). */
static int slice(struct tk_timeline *t, struct tl_track *tr, int begin, uint64_t key, uint32_t kind,
		 uint64_t ticks)
{
	struct tk_buf *b = t->b;
	uint64_t ns = to_ns(t, ticks == TK_TIME_NONE ? 0 : ticks);
	uint32_t name = 0;

	if (!t->header_done)
		header(t);
	if (!tr->started)
		start_track(t, tr);
	if (begin) {
		name = names_frame(&t->names, key, kind);
		if (name == UINT32_MAX)
			return -TK_E_NOMEM;
	}
	if (t->o.kind == TK_TIMELINE_CHROME) {
		tk_buf_puts(b, begin ? ",\n{\"ph\":\"B\",\"pid\":1,\"tid\":" : ",\n{\"ph\":\"E\",\"pid\":1,\"tid\":");
		tk_buf_u64(b, tr->id);
		tk_buf_puts(b, ",\"ts\":");
		tk_buf_fixed(b, (int64_t)ns, 3); /* microseconds */
		if (begin) {
			const char *s = names_str(&t->names, name);
			tk_buf_puts(b, ",\"name\":");
			tk_buf_json_str(b, s, strlen(s));
		}
		tk_buf_putc(b, '}');
		return b->err;
	}
	uint8_t te[32], pk[64 + 600];
	size_t n = put_uint(te, 9, begin ? 1 : 2);             /* type: SLICE_BEGIN / SLICE_END */
	n += put_uint(te + n, 11, 0x10000ull + tr->id);       /* track_uuid */
	if (begin)
		n += put_uint(te + n, 10, name);                  /* name_iid */
	uint64_t delta = ns >= tr->last_ns ? ns - tr->last_ns : 0;
	tr->last_ns += delta;
	size_t k = put_uint(pk, 8, delta);                    /* timestamp (incremental) */
	k += put_uint(pk + k, 10, tr->seq);
	k += put_bytes(pk + k, 11, te, n);                    /* track_event */
	if (begin && (name >= tr->ninterned || !tr->interned[name])) {
		if (name >= tr->ninterned) {
			size_t nc = tr->ninterned ? tr->ninterned : 256;
			while (nc <= name)
				nc *= 2;
			uint8_t *ni = realloc(tr->interned, nc);
			if (!ni)
				return -TK_E_NOMEM;
			memset(ni + tr->ninterned, 0, nc - tr->ninterned);
			tr->interned = ni;
			tr->ninterned = nc;
		}
		tr->interned[name] = 1;
		const char *s = names_str(&t->names, name);
		size_t sl = strlen(s) > 512 ? 512 : strlen(s);
		uint8_t en[540], id[560];
		size_t ne = put_uint(en, 1, name);                /* iid */
		ne += put_bytes(en + ne, 2, s, sl);               /* name */
		size_t ni = put_bytes(id, 2, en, ne);             /* event_names */
		k += put_bytes(pk + k, 12, id, ni);               /* interned_data */
	}
	k += put_uint(pk + k, 13, 2);                         /* SEQ_NEEDS_INCREMENTAL_STATE */
	emit_packet(b, pk, k);
	return b->err;
}

/* ---- the stack ---------------------------------------------------------------------------- */

static int in_window(const struct tk_timeline *t, uint64_t time)
{
	return time >= t->o.time_begin && time < t->window_end;
}

static int push(struct tk_timeline *t, struct tl_track *tr, uint64_t key, uint32_t kind,
		uint64_t ret, uint64_t time)
{
	if (tr->depth == tr->cap) {
		size_t nc = tr->cap ? tr->cap * 2 : 64;
		struct tl_frame *ns = realloc(tr->st, nc * sizeof *ns);
		if (!ns)
			return -TK_E_NOMEM;
		tr->st = ns;
		tr->cap = nc;
	}
	struct tl_frame *f = &tr->st[tr->depth++];
	f->key = key;
	f->kind = kind;
	f->ret = ret;
	f->emitted = 0;
	if (!in_window(t, time))
		return 0;
	if (t->slices >= t->max) {
		t->dropped++;
		return 0;
	}
	f->emitted = 1;
	t->slices++;
	return slice(t, tr, 1, key, kind, time);
}

static int pop_to(struct tk_timeline *t, struct tl_track *tr, size_t depth, uint64_t time)
{
	int rc = 0;
	if (time != TK_TIME_NONE && time > t->window_end)
		time = t->window_end;
	while (tr->depth > depth && rc >= 0) {
		struct tl_frame *f = &tr->st[--tr->depth];
		if (f->emitted)
			rc = slice(t, tr, 0, 0, 0, time);
	}
	return rc;
}

/* Entering the window: open slices for the calls already running (clipped at its start). */
static int enter_window(struct tk_timeline *t, struct tl_track *tr)
{
	int rc = 0;
	tr->in_window = 1;
	for (size_t i = 0; i < tr->depth && rc >= 0; i++) {
		struct tl_frame *f = &tr->st[i];
		if (f->emitted)
			continue;
		if (t->slices >= t->max) {
			t->dropped++;
			continue;
		}
		f->emitted = 1;
		t->slices++;
		rc = slice(t, tr, 1, f->key, f->kind, t->o.time_begin);
	}
	return rc;
}

int tk_timeline_events(struct tk_timeline *t, const struct tk_event *ev, size_t n)
{
	int rc = 0;
	struct tl_track *tr = NULL;
	if (t->finished)
		return -TK_E_BAD_STATE;
	for (size_t i = 0; i < n && rc >= 0; i++) {
		const struct tk_event *e = &ev[i];
		if (!tr || tr->id != e->track) {
			tr = get_track(t, e->track);
			if (!tr)
				return -TK_E_NOMEM;
		}
		uint64_t time = e->time != TK_TIME_NONE ? e->time : tr->t_last;
		if (e->time != TK_TIME_NONE)
			tr->t_last = e->time;
		if (time != TK_TIME_NONE) {
			if (!tr->in_window && in_window(t, time) && tr->depth)
				rc = enter_window(t, tr);
			else if (in_window(t, time))
				tr->in_window = 1;
			if (time >= t->window_end && tr->in_window) {
				/* leaving the window: close what is open, at its end */
				for (size_t k = tr->depth; k > 0 && rc >= 0; k--) {
					struct tl_frame *f = &tr->st[k - 1];
					if (f->emitted) {
						rc = slice(t, tr, 0, 0, 0, t->window_end);
						f->emitted = 0;
					}
				}
				tr->in_window = 0;
			}
		}
		switch (e->kind) {
		case TK_EV_CALL:
			rc = push(t, tr, e->addr2, TK_PROF_KEY_ADDR, e->arg, time);
			break;
		case TK_EV_FUNC_ENTER:
			rc = push(t, tr, e->addr, e->flags & TK_FN_ADDR ? TK_PROF_KEY_ADDR : TK_PROF_KEY_ID, 0, time);
			break;
		case TK_EV_FUNC_EXIT:
		case TK_EV_FUNC_TAIL_EXIT: {
			uint32_t kind = e->flags & TK_FN_ADDR ? TK_PROF_KEY_ADDR : TK_PROF_KEY_ID;
			size_t d = tr->depth;
			while (d && !(tr->st[d - 1].key == e->addr && tr->st[d - 1].kind == kind))
				d--;
			rc = pop_to(t, tr, d ? d - 1 : 0, time);
			break;
		}
		case TK_EV_RETURN: {
			size_t d = tr->depth;
			if (!d)
				break;
			if (tr->st[d - 1].ret != e->addr2) {
				size_t j = d - 1;
				while (j > 0 && tr->st[j - 1].ret != e->addr2)
					j--;
				if (j > 0)
					d = j;
			}
			rc = pop_to(t, tr, d - 1, time);
			break;
		}
		case TK_EV_GAP:
			rc = pop_to(t, tr, 0, time);
			break;
		default:
			break;
		}
	}
	if (rc == -TK_E_NOMEM)
		t->nomem = 1;
	return rc < 0 ? rc : t->b->err;
}

static int tl_sink_fn(void *ctx, const struct tk_event *ev, size_t n)
{
	return tk_timeline_events(ctx, ev, n);
}

struct tk_sink tk_timeline_sink(struct tk_timeline *t)
{
	return (struct tk_sink){ .events = tl_sink_fn, .ctx = t };
}

struct tk_timeline *tk_timeline_new(struct tk_buf *b, const struct tk_timeline_opts *opts, int *err)
{
	struct tk_timeline *t = calloc(1, sizeof *t);
	int rc = -TK_E_NOMEM;
	if (!t)
		goto fail;
	if (opts) {
		size_t n = opts->sz < sizeof t->o ? opts->sz : sizeof t->o;
		memcpy(&t->o, opts, n);
	}
	t->o.sz = sizeof t->o;
	if (t->o.kind != TK_TIMELINE_PERFETTO && t->o.kind != TK_TIMELINE_CHROME) {
		rc = -TK_E_INVAL;
		goto fail;
	}
	t->b = b;
	t->max = t->o.max_events ? t->o.max_events : 10000000;
	t->window_end = t->o.time_end ? t->o.time_end : UINT64_MAX;
	if ((rc = names_init(&t->names, t->o.sym)) < 0)
		goto fail;
	if (err)
		*err = 0;
	return t;
fail:
	free(t);
	if (err)
		*err = rc;
	return NULL;
}

int tk_timeline_track_name(struct tk_timeline *t, uint32_t track, const char *name)
{
	struct tl_track *tr = get_track(t, track);
	if (!tr)
		return -TK_E_NOMEM;
	free(tr->name);
	tr->name = strdup(name);
	return tr->name ? 0 : -TK_E_NOMEM;
}

int tk_timeline_finish(struct tk_timeline *t)
{
	int rc = 0;
	if (t->finished)
		return 0;
	for (size_t i = 0; i < t->ntracks && rc >= 0; i++)
		rc = pop_to(t, &t->tracks[i], 0, t->tracks[i].t_last);
	if (!t->header_done)
		header(t);
	if (t->o.kind == TK_TIMELINE_CHROME)
		tk_buf_puts(t->b, "\n]}\n");
	t->finished = 1;
	return rc < 0 ? rc : t->b->err;
}

uint64_t tk_timeline_slices(const struct tk_timeline *t, uint64_t *dropped)
{
	if (dropped)
		*dropped = t->dropped;
	return t->slices;
}

void tk_timeline_free(struct tk_timeline *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->ntracks; i++) {
		free(t->tracks[i].st);
		free(t->tracks[i].interned);
		free(t->tracks[i].name);
	}
	free(t->tracks);
	names_free(&t->names);
	free(t);
}
