/* Consumers of the PT flow: ptxed-like text and in-order event delivery. Each chunk is
 * formatted on its worker into its own buffer; the calling thread writes them in order. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/ipt/internal.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/internal/util.h"

/* ---- text ------------------------------------------------------------------------------ */

/* Each on cache lines of its own (two, against the adjacent-line prefetch): the workers
 * of neighbouring chunks update their buffer's length for every line of text. */
struct text_chunk {
	_Alignas(128) struct tk_buf buf;
	struct tk_buf *kept;          /* -j N: where BUF came from (text_run.texts) */
	struct tk_buf scratch;
	struct tk_flow *flow;
	struct text_run *run;
	size_t index;
	size_t counted;               /* of buf.len, in run->held */
	size_t check_at;              /* buf.len at which to count again */
};

#define WRITE_BYTES ((size_t)512 << 10)
/* With -j N each chunk's text waits in memory for its turn to be written, and text is
 * 60-330 bytes per byte of trace: a 2 MiB chunk held ~350 MB of it (1.7 GB resident at
 * -j 2). Text chunks of 32 KiB make 2-10 MB, so that the next chunks' text fits in the
 * budget below while one is written, and stays nearer the caches (256 KiB chunks: -j 2
 * 1.2x -j 1 into /dev/null; 32 KiB: 1.7x, the same CPU time for decoding); the output is
 * the same for any split. */
#define TEXT_CHUNK ((size_t)32 << 10)
/* A chunk's text waits in memory for the chunks before it. Up to TEXT_BUDGET of it in all
 * chunks, a worker goes on with its chunk (the next chunks' text is ready when their turn
 * comes: with a fixed cap per chunk, the worker of the chunk after the one being written
 * stopped after its cap and -j 2 ran at the speed of one worker, ~1.3x); past it, a worker
 * waits for its chunk's turn. A hostile chunk (one TNT run repeated: thousands of
 * instructions per byte) makes GBs of text, and this keeps what waits to TEXT_BUDGET plus
 * TEXT_STEP per worker. Each chunk adds its growth to the total every TEXT_STEP; the chunk
 * whose turn it is hands its text on in pieces of TEXT_PIECE. 16 MiB, not 8: a 32 KiB
 * chunk of gzip's deflate loops makes ~11 MB of text, and at 8 MiB the next chunk's worker
 * waited in most chunks (-j 2 1.6x -j 1 into /dev/null, 1.75x at 16). */
#define TEXT_BUDGET ((size_t)16 << 20)
#define TEXT_STEP ((size_t)1 << 20)
#define TEXT_PIECE ((size_t)4 << 20)
/* -j N into a descriptor: a chunk's text of at least this much is written from its own
 * buffer, less is gathered in the output's */
#define DIRECT_TEXT ((size_t)64 << 10)

/* -j N: whose turn it is to hand its output on, chunks in order. A chunk that holds too
 * much waits for the chunks before it to be merged, then hands on what it has (the
 * producer blocks instead of memory growing). LOCK also guards its user's shared state. */
struct chunk_turn {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t merged;                /* chunks merged so far */
	int failed;                   /* decoding stopped: no turn is coming */
};

static void turn_init(struct chunk_turn *t)
{
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
}

static void turn_destroy(struct chunk_turn *t)
{
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
}

/* 0 once the chunks before chunk I are merged, -TK_E_CANCELLED if that never comes. */
static int turn_wait(struct chunk_turn *t, size_t i)
{
	int failed;

	pthread_mutex_lock(&t->lock);
	while (t->merged < i && !t->failed)
		pthread_cond_wait(&t->cond, &t->lock);
	failed = t->failed;
	pthread_mutex_unlock(&t->lock);
	return failed ? -TK_E_CANCELLED : 0;
}

/* Chunk I is merged (FAILED: with an error, no later turn comes). */
static void turn_done(struct chunk_turn *t, size_t i, int failed)
{
	pthread_mutex_lock(&t->lock);
	t->merged = i + 1;
	t->failed |= failed;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

/* Decoding stopped (a chunk failed on its worker): wake every waiter. */
static void turn_fail(void *ctx, size_t i, int err)
{
	struct chunk_turn *t = ctx;

	(void)i, (void)err;
	pthread_mutex_lock(&t->lock);
	t->failed = 1;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

struct text_run {
	struct chunk_turn turn;       /* first: the consumer's fail callback gets it */
	unsigned flags;
	struct tk_tsc_conv conv;      /* times as seconds on this clock (mult 0: ticks) */
	unsigned nthreads;
	struct tk_buf *out;
	struct text_chunk *chunks;    /* one per chunk */
	/* Chunk buffers written out, kept for the next chunks: a fresh buffer per chunk
	 * would grow by realloc and fault in tens of MB of new pages each time. */
	struct tk_bufs *texts;
	struct tk_writer *w;         /* -j 1 into a file: write() overlaps formatting */
	struct tk_buf cur;           /* -j 1 with a writer: the buffer being formatted */
	struct tk_writer *wn;        /* -j N into a file: each chunk's text handed over in
					order (and past 64 MiB written directly, see tk_writer) */
	_Atomic size_t held;         /* -j N: text the chunks hold (see TEXT_BUDGET) */
};

static const char *const mode_names[] = { "64-bit", "32-bit", "16-bit" };

static void put_time(struct tk_buf *b, const struct tk_event *e, const struct tk_tsc_conv *conv)
{
	if (e->time == TK_TIME_NONE)
		tk_buf_puts(b, "[no time] ");
	else if (conv->mult) {
		uint64_t ns = tk_tsc_conv_ns(conv, e->time);
		char frac[9];

		for (int k = 8; k >= 0; k--, ns /= 10)
			frac[k] = (char)('0' + ns % 10);
		tk_buf_putc(b, '[');
		tk_buf_u64(b, ns);
		tk_buf_putc(b, '.');
		tk_buf_put(b, frac, 9);
		tk_buf_puts(b, "] ");
	} else {
		tk_buf_putc(b, '[');
		tk_buf_hex(b, e->time, 16);
		tk_buf_puts(b, "] ");
	}
}

/* An Event Trace event, as ptxed 2.1 prints it (without the closing bracket). */
static void format_et(struct tk_buf *b, const struct tk_event *e)
{
	static const char *const names[] = {
		[TK_IPT_ET_INTR] = "interrupt ", [TK_IPT_ET_IRET] = "iret",
		[TK_IPT_ET_SMI] = "smi", [TK_IPT_ET_RSM] = "rsm", [TK_IPT_ET_SIPI] = "sipi: ",
		[TK_IPT_ET_INIT] = "init", [TK_IPT_ET_VMENTRY] = "vmentry",
		[TK_IPT_ET_VMEXIT] = "vmexit", [TK_IPT_ET_SHUTDOWN] = "shutdown",
		[TK_IPT_ET_UINTR] = "uintr ", [TK_IPT_ET_UIRET] = "uiret",
		[TK_IPT_ET_SWINTR] = "swintr ", [TK_IPT_ET_SYSCALL] = "syscall",
	};
	unsigned t = e->arg & 0xff, vector = e->arg >> 8 & 0xff;
	const char *name = t < sizeof names / sizeof names[0] ? names[t] : NULL;

	tk_buf_putc(b, '[');
	tk_buf_puts(b, name ? name : "event");
	if (t == TK_IPT_ET_SIPI)
		tk_buf_hex(b, vector, 0);
	else if (t == TK_IPT_ET_INTR || t == TK_IPT_ET_UINTR || t == TK_IPT_ET_SWINTR)
		tk_buf_u64(b, vector);
	if (e->arg & TK_IPT_ET_HAS_CR2) {
		tk_buf_puts(b, ", cr2: ");
		tk_buf_hex(b, e->addr2, 16);
	}
	if (e->arg & TK_IPT_ET_HAS_VECTOR) {
		tk_buf_puts(b, ", intr: ");
		tk_buf_u64(b, vector);
	}
	if (e->arg & TK_IPT_ET_HAS_VMXR) {
		tk_buf_puts(b, ", vmxr: ");
		tk_buf_hex(b, e->count, 16);
	}
	if (e->arg & TK_IPT_ET_HAS_VMXQ) {
		tk_buf_puts(b, ", vmxq: ");
		tk_buf_hex(b, e->addr2, 16);
	}
}

/* ", NAME: IP" (ptxed's --event:ip), IP 0 meaning none. */
static void put_event_ip(struct tk_buf *b, const char *name, uint64_t ip)
{
	if (!ip)
		return;
	tk_buf_puts(b, name);
	tk_buf_hex(b, ip, 16);
}

/* An event's line. SHOW_IP: with the IP it happened at, where it has one (ptxed's
 * --event:ip: ", ip: ..." before the closing bracket; a disable's ", at: ..."). */
static void format_event(struct tk_buf *b, const struct tk_event *e, int show_ip)
{
	uint64_t ip = e->addr;   /* the IP told with --event:ip (0: none) */

	switch (e->kind) {
	case TK_EV_ENABLE:
		if (!show_ip) {   /* (in one piece: around every syscall of a user-only trace) */
			tk_buf_puts(b, e->flags & TK_IPT_ENABLE_RESUMED ? "[resumed]\n" : "[enabled]\n");
			return;
		}
		tk_buf_puts(b, e->flags & TK_IPT_ENABLE_RESUMED ? "[resumed" : "[enabled");
		break;
	case TK_EV_DISABLE:
		if (!show_ip && !(e->flags & (TK_IPT_DISABLE_END | TK_IPT_DISABLE_ASYNC))) {
			tk_buf_puts(b, "[disabled]\n");   /* (as [enabled]) */
			return;
		}
		if (e->flags & TK_IPT_DISABLE_END) {
			tk_buf_puts(b, "[end of trace");
			ip = 0;
			break;
		}
		if (e->flags & TK_IPT_DISABLE_ASYNC) {
			tk_buf_puts(b, "[async disabled");
			if (show_ip)
				put_event_ip(b, ", at: ", e->addr);
		} else {
			tk_buf_puts(b, "[disabled");
		}
		ip = e->addr2;   /* where the TIP.PGD says tracing stopped */
		break;
	case TK_EV_INTERRUPT:
		tk_buf_puts(b, "[interrupt: ");
		tk_buf_hex(b, e->addr, 16);
		tk_buf_puts(b, " -> ");
		tk_buf_hex(b, e->addr2, 16);
		ip = 0;   /* both IPs told already */
		break;
	case TK_EV_MODE:
		switch (e->flags) {
		case TK_MODE_PAGING:
			tk_buf_puts(b, "[paging, cr3: ");
			tk_buf_hex(b, e->arg, 16);
			if (e->addr2)
				tk_buf_puts(b, ", nr");   /* VMX non-root */
			break;
		case TK_MODE_VMCS:
			tk_buf_puts(b, "[vmcs, base: ");
			tk_buf_hex(b, e->arg, 16);
			break;
		case TK_MODE_TSX_BEGIN:
			tk_buf_puts(b, "[begin transaction");
			break;
		case TK_MODE_TSX_COMMIT:
			tk_buf_puts(b, "[committed");
			break;
		case TK_MODE_TSX_ABORT:
			tk_buf_puts(b, "[aborted");
			break;
		case TK_MODE_IFLAG:
			tk_buf_puts(b, e->arg ? "[interrupts enabled" : "[interrupts disabled");
			break;
		case TK_MODE_EXEC_16: case TK_MODE_EXEC_32: case TK_MODE_EXEC_64:
			tk_buf_puts(b, "[exec mode: ");
			tk_buf_puts(b, mode_names[TK_MODE_EXEC_64 - e->flags]);
			break;
		default:
			tk_buf_puts(b, "[mode");
		}
		break;
	case TK_EV_PTWRITE:
		tk_buf_puts(b, "[ptwrite: ");
		tk_buf_hex(b, e->arg, 0);
		if (e->flags & TK_IPT_PTW_BOUND)
			ip = 0;   /* the walk's, not the trace's: libipt's is suppressed */
		break;
	case TK_EV_POWER:
		switch (e->flags) {
		case TK_IPT_POWER_EXSTOP: tk_buf_puts(b, "[exstop"); break;
		case TK_IPT_POWER_MWAIT:
			tk_buf_puts(b, "[mwait: ");
			tk_buf_hex(b, e->arg, 0);
			tk_buf_puts(b, ", ");
			tk_buf_hex(b, e->count, 0);
			break;
		case TK_IPT_POWER_PWRE:
			tk_buf_puts(b, "[pwre: c");
			tk_buf_u64(b, (e->arg + 1) & 0xf);
			tk_buf_puts(b, ".");
			tk_buf_u64(b, (e->count + 1) & 0xf);
			if (e->addr2)
				tk_buf_puts(b, ", hw");
			break;
		case TK_IPT_POWER_PWRX:
			/* the wake reasons first, as ptxed prints them */
			tk_buf_puts(b, "[pwrx: ");
			if (e->addr2 & TK_IPT_WAKE_INT)
				tk_buf_puts(b, "int: ");
			if (e->addr2 & TK_IPT_WAKE_ST)
				tk_buf_puts(b, "st: ");
			if (e->addr2 & TK_IPT_WAKE_HW)
				tk_buf_puts(b, "hw: ");
			tk_buf_puts(b, "c");
			tk_buf_u64(b, (e->arg + 1) & 0xf);
			tk_buf_puts(b, " (deepest c");
			tk_buf_u64(b, (e->count + 1) & 0xf);
			tk_buf_puts(b, ")");
			break;
		case TK_IPT_POWER_CBR:
			tk_buf_puts(b, "[cbr: ");
			tk_buf_hex(b, e->arg, 0);
			break;
		case TK_IPT_POWER_STOP: tk_buf_puts(b, "[stopped"); break;
		case TK_IPT_POWER_MNT:
			tk_buf_puts(b, "[mnt: ");
			tk_buf_hex(b, e->arg, 0);
			break;
		case TK_IPT_POWER_TRIG:   /* as ptxed 2.2 */
			tk_buf_puts(b, "[trig ");
			tk_buf_hex(b, e->arg, 2);
			if (e->addr2)
				tk_buf_puts(b, ", mult");
			break;
		case TK_IPT_POWER_EVENT:
			format_et(b, e);
			break;
		default: tk_buf_puts(b, "[power");
		}
		break;
	case TK_EV_GAP:
		if (e->flags == TK_GAP_OVERFLOW) {
			tk_buf_puts(b, "[overflow at offset 0x");
		} else if (e->flags == TK_GAP_WRAP) {
			tk_buf_puts(b, "[trace not kept (ring buffer wrapped) before offset 0x");
		} else if (e->flags == TK_GAP_NO_IMAGE) {
			tk_buf_puts(b, "[error: no code in the image at ");
			tk_buf_hex(b, e->addr, 16);
			tk_buf_puts(b, " at offset 0x");
		} else {
			tk_buf_puts(b, "[error: ");
			tk_buf_puts(b, tk_gap_reason_name(e->flags));
			tk_buf_puts(b, ", ");
			tk_buf_u64(b, e->count);
			tk_buf_puts(b, " bytes skipped at offset 0x");
		}
		tk_buf_hex(b, e->arg, 0);
		ip = 0;
		break;
	default:
		return;
	}
	if (show_ip)
		put_event_ip(b, ", ip: ", ip);
	tk_buf_puts(b, "]\n");
}

/* -j N: text of the chunk whose turn it is, to the output (its buffer is emptied). */
static int put_text(struct text_chunk *tc)
{
	struct text_run *r = tc->run;
	struct tk_buf *b = &tc->buf;

	atomic_fetch_sub(&r->held, tc->counted);
	tc->counted = 0;
	tc->check_at = TEXT_STEP;
	if (b->err || !b->len)
		return b->err;
	if (r->wn)
		return tk_writer_submit(r->wn, b);
	if (r->out->fd >= 0 && (b->len >= DIRECT_TEXT || b->len >= r->out->cap - r->out->len)) {
		/* a file: write the chunk's text as it is rather than copy it (a chunk of
		 * libLLVM's O2 run makes ~0.9 MB: copied into the 1 MiB output buffer, that
		 * was a second pass over most of the text) */
		struct tk_buf direct = *b;

		direct.fd = r->out->fd;
		if ((tk_buf_flush(r->out) < 0 || tk_buf_flush(&direct) < 0) && !r->out->err) {
			r->out->err = direct.err;
			r->out->errnum = direct.errnum;
		}
	} else {
		tk_buf_put(r->out, b->data, b->len);
	}
	b->len = 0;
	return r->out->err;
}

/* -j N: the chunk's text grew by TEXT_STEP. It waits for its turn and hands the text on
 * if the chunks hold more than TEXT_BUDGET, and without waiting once its turn has come
 * and it has TEXT_PIECE. */
static int count_text(struct text_chunk *tc)
{
	struct text_run *r = tc->run;
	size_t len = tc->buf.len;
	size_t held = atomic_fetch_add(&r->held, len - tc->counted) + (len - tc->counted);
	int now;

	tc->counted = len;
	tc->check_at = len + TEXT_STEP;
	if (held <= TEXT_BUDGET) {
		if (len < TEXT_PIECE)
			return 0;
		pthread_mutex_lock(&r->turn.lock);
		now = r->turn.merged >= tc->index;
		pthread_mutex_unlock(&r->turn.lock);
		if (!now)
			return 0;
	}
	int rc = turn_wait(&r->turn, tc->index);

	return rc < 0 ? rc : put_text(tc);
}

static int text_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct text_chunk *tc = ctx;
	unsigned flags = tc->run->flags;
	struct tk_buf *b = &tc->buf;

	if (flags & TK_IPT_TEXT_STAT)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct tk_event *e = &ev[i];

		if (b->len >= tc->check_at && tc->run->nthreads > 1 && !tc->run->w) {
			int rc = count_text(tc);

			if (rc < 0)
				return rc;
		}
		if (e->kind == TK_EV_BLOCK) {
			int disasm = !(flags & TK_IPT_TEXT_NO_DISASM);
			int rc;

			if (!(flags & TK_IPT_TEXT_TIME)) {
				if ((rc = tk_flow_print_block(tc->flow, b, e, disasm)) < 0)
					return rc;
				continue;
			}
			/* --time: each line gets the time of its block */
			tc->scratch.len = 0;
			if ((rc = tk_flow_print_block(tc->flow, &tc->scratch, e, disasm)) < 0)
				return rc;
			for (size_t k = 0; k < tc->scratch.len;) {
				const char *line = tc->scratch.data + k;
				const char *nl = memchr(line, '\n', tc->scratch.len - k);
				size_t m = nl ? (size_t)(nl - line) + 1 : tc->scratch.len - k;

				put_time(b, e, &tc->run->conv);
				tk_buf_put(b, line, m);
				k += m;
			}
		} else if (e->kind == TK_EV_TIME) {
			/* ptxed's tick event: the time changed within the flow */
			if (flags & TK_IPT_TEXT_TIME) {
				put_time(b, e, &tc->run->conv);
				tk_buf_puts(b, "[tick]\n");
			}
		} else if (e->kind != TK_EV_CALL && e->kind != TK_EV_RETURN &&
			   e->kind != TK_EV_CYCLES) {   /* (profiles' IPC: not in ptxed's listing) */
			if (e->kind == TK_EV_MODE && e->flags == TK_MODE_IFLAG &&
			    !(flags & TK_IPT_TEXT_IFLAGS))
				continue;   /* IF only when asked (ptxed's --event:iflags) */
			if (flags & TK_IPT_TEXT_TIME)
				put_time(b, e, &tc->run->conv);
			format_event(b, e, flags & TK_IPT_TEXT_EVENT_IP);
		}
	}
	if (b->err)
		return b->err;
	if (tc->run->w && b->len >= WRITE_BYTES)
		return tk_writer_submit(tc->run->w, b);
	return 0;
}

static int text_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct text_run *r = ctx;
	struct text_chunk *tc = &r->chunks[i];

	tc->flow = flow;
	tc->run = r;
	tc->index = i;
	tc->counted = 0;
	tc->check_at = TEXT_STEP;
	/* --stat counts: the walker need not describe each block */
	tk_flow_set_flow_events(flow, !(r->flags & TK_IPT_TEXT_STAT));
	if (r->w) {
		tc->buf = r->cur;             /* one thread, handed to the writer in pieces */
	} else if (r->nthreads <= 1) {
		tc->buf = *r->out;            /* one thread: straight into the output */
	} else {
		if (!(tc->kept = tk_bufs_take(r->texts)) || tk_buf_reserve(tc->kept, 1 << 20) < 0)
			return -TK_E_NOMEM;
		tc->buf = *tc->kept;
	}
	if (!tc->scratch.data && tk_buf_init(&tc->scratch, -1, 4096) < 0)
		return -TK_E_NOMEM;
	sink->events = text_events;
	sink->ctx = tc;
	return 0;
}

static int text_merge(void *ctx, size_t i)
{
	struct text_run *r = ctx;
	struct text_chunk *tc = &r->chunks[i];
	int rc;

	if (r->w) {
		r->cur = tc->buf;
		return r->cur.err;
	}
	if (r->nthreads <= 1) {
		*r->out = tc->buf;
		return r->out->err;
	}
	rc = put_text(tc);
	if (!rc)
		rc = r->out->err;
	tk_buf_free(&tc->scratch);
	/* (the writer may have handed back another buffer than it took) */
	*tc->kept = tc->buf;
	tk_bufs_give(r->texts, tc->kept);
	tc->kept = NULL;
	tc->buf = (struct tk_buf){ 0 };
	/* the next chunk's turn (its worker may be waiting to write) */
	turn_done(&r->turn, i, rc != 0);
	return rc;
}

/* Whether the text goes to OUT through a background writer: where write() takes time
 * that formatting can overlap, the copy into a file's page cache or the wait for a pipe's
 * reader. A character device (/dev/null, a terminal) is written in place: there the
 * hand-overs (a wake-up and a thread switch every WRITE_BYTES) cost more than the writes. */
static int writer_pays(const struct tk_buf *out, unsigned flags)
{
	struct stat st;

	return out->fd >= 0 && !(flags & TK_IPT_TEXT_STAT) && fstat(out->fd, &st) == 0 &&
	       !S_ISCHR(st.st_mode);
}

int tk_ipt_flow_text(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *opts,
		     unsigned flags, struct tk_buf *out, struct tk_ipt_flow_stats *stats)
{
	struct text_run r = { .flags = flags, .out = out };
	struct tk_ipt_flow_consumer c = { sizeof c, text_begin, NULL, text_merge, &r, .fail = turn_fail };
	struct tk_ipt_flow_opts o;
	int64_t n;
	int rc;

	if (!opts || !out)
		return -TK_E_INVAL;
	memset(&o, 0, sizeof o);
	memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);   /* an older caller's */
	o.sz = sizeof o;
	r.conv = o.time_conv;
	r.nthreads = opts->nthreads ? opts->nthreads : tk_cpu_count();
	if (!o.chunk_bytes)
		o.chunk_bytes = r.nthreads > 1 && !(flags & TK_IPT_TEXT_STAT) ? TEXT_CHUNK
									 : TK_IPT_FLOW_CHUNK;
	opts = &o;
	n = tk_ipt_flow_chunks(buf, len, opts, NULL, 0);
	r.chunks = aligned_alloc(_Alignof(struct text_chunk),
				 (n > 0 ? (size_t)n : 1) * sizeof(*r.chunks));
	if (!r.chunks)
		return -TK_E_NOMEM;
	memset(r.chunks, 0, (n > 0 ? (size_t)n : 1) * sizeof(*r.chunks));
	if (r.nthreads > 1 && !(r.texts = tk_bufs_new(2 * (size_t)r.nthreads + 2))) {
		free(r.chunks);
		return -TK_E_NOMEM;
	}
	turn_init(&r.turn);
	if (r.nthreads <= 1 && writer_pays(out, flags) && tk_buf_flush(out) >= 0 &&
	    (r.w = tk_writer_start(out->fd, NULL))) {
		/* formatted in the caller's buffer, which gets one of the writer's back at
		 * the end: a session of many streams allocates no new buffer per stream
		 * (freed ones were given back to the system and faulted in again) */
		r.cur = *out;
		r.cur.fd = -1;
		out->data = NULL;
		out->cap = 0;
	}
	if (r.nthreads > 1 && writer_pays(out, flags) && tk_buf_flush(out) >= 0)
		r.wn = tk_writer_start(out->fd, NULL);
	rc = tk_ipt_flow_decode(buf, len, opts, &c, stats);
	if (r.wn) {
		/* every chunk written before the caller writes more */
		int stop = tk_writer_stop(r.wn);

		if (stop < 0 && !out->err) {
			out->err = stop;
			out->errnum = errno;
		}
		if (rc >= 0 && stop < 0)
			rc = stop;
	}
	if (r.w) {
		/* the rest, then wait for every write (the caller writes after us) */
		int wrc = tk_writer_submit(r.w, &r.cur), stop = tk_writer_stop(r.w);
		int errnum = wrc < 0 ? r.cur.errnum : errno;

		if (stop < 0)
			wrc = stop;
		out->data = r.cur.data;
		out->cap = r.cur.data ? r.cur.cap : 0;
		if (wrc < 0 && !out->err) {
			out->err = wrc;
			out->errnum = errnum;
		}
		if (rc >= 0 && wrc < 0)
			rc = wrc;
	}
	for (int64_t i = 0; i < n; i++) {
		if (r.chunks[i].kept)   /* (not merged: the buffer as it grew) */
			*r.chunks[i].kept = r.chunks[i].buf;
		tk_buf_free(&r.chunks[i].scratch);
	}
	tk_bufs_free(r.texts);
	turn_destroy(&r.turn);
	free(r.chunks);
	return rc;
}

/* ---- events to one sink ------------------------------------------------------------------ */


/* -j N: a chunk's events wait in memory for the chunks before it, up to EV_BUDGET events
 * (6 MB) in all chunks, counted every EV_STEP; past it, a worker waits for its chunk's
 * turn and hands its events on itself (the calling thread is then waiting for this chunk:
 * one thread at a time calls the sink). So a chunk must hold well under the budget for
 * the next one to decode while it is handed on: chunks of 64 KiB (a libc trace's hold
 * about 16 000 events once thinned by tk_sink.thin, a random walk's many more; with 512
 * KiB chunks a walk's timeline at -j 2 was slower than at -j 1). With 512 Ki events in
 * all, a branch trace's profile at -j 2 peaked 45 MB above -j 1's (oracle/btrace_memory).
 * The memory of merged chunks is used again: fresh memory for every chunk cost 70 000
 * page faults, a third of the CPU time. The calling thread decodes chunks too between
 * its merges (caller_decodes), and never waits: a chunk of its own is held whole.
 * TK_IPT_EV_BUDGET (events) makes the budget smaller, for tests of the waits. */
#define EV_BUDGET ((size_t)128 << 10)
#define EV_CHUNK ((size_t)64 << 10)
#define EV_STEP ((size_t)64 << 10)
#define EV_SPARES 4
/* Chunks are held lean while those decoded again stay under one in EV_REDO_EVERY merged
 * (plus one): a random walk's timeline refuses its first chunks and then prepares none,
 * and each of those decoded again on the calling thread cost the walk 1.7 % of its time */
#define EV_REDO_EVERY 64

struct ev_chunk {
	struct tk_event_vec v;        /* lean: the events the sink's prepare made use of are
				       * not kept, and the chunk is decoded again if its take
				       * asks for them after all (ev_redo) */
	struct ev_run *run;
	size_t index;
	size_t counted;               /* of v.n, in run->held */
	size_t seen;                  /* the chunk's events so far, before thin */
	size_t handed;                /* of those, what reached the sink on a worker (a hold
				       * over the budget, handed in its turn) */
	int again;                    /* the sink asked for the events from HANDED on again:
				       * those that come are not kept, the chunk is decoded again
				       * at its merge */
	size_t skip;                  /* the decoding again: its events yet to leave out */
	int rc;                       /* the hand at the merge (ev_redo) */
};

struct ev_run {
	struct chunk_turn turn;       /* first: the consumer's fail callback gets it */
	struct tk_sink sink;
	unsigned nthreads;
	struct ev_chunk *chunks;
	/* under turn.lock: events counted in all chunks, and merged chunks' memory */
	size_t held;
	struct tk_event_vec spare[EV_SPARES];
	unsigned nspare;
	pthread_t caller;             /* merges, and decodes chunks between merges */
	size_t budget, step;          /* EV_BUDGET and EV_STEP, or a test's */
	size_t redos;                 /* chunks decoded again (under turn.lock) */
};

/* Hand EC's events to the sink (its turn has come) and keep its memory. If the sink asks
 * for events the lean hold did not keep, the chunk's events from those handed before on
 * are decoded again at its merge (EC->again). */
static int ev_hand(struct ev_chunk *ec)
{
	struct ev_run *r = ec->run;
	int rc = ec->again ? 0 : tk_event_vec_pass(&ec->v, r->sink);

	pthread_mutex_lock(&r->turn.lock);
	r->held -= ec->counted;
	pthread_mutex_unlock(&r->turn.lock);
	ec->counted = 0;
	if (rc == TK_SINK_AGAIN) {
		ec->again = 1;
		rc = 0;
	} else if (!ec->again) {
		ec->handed = ec->seen;
	}
	return rc;
}

static int ev_add(void *ctx, const struct tk_event *ev, size_t n)
{
	struct ev_chunk *ec = ctx;
	struct ev_run *r = ec->run;
	struct tk_event_vec *v = &ec->v;
	int rc = 0, over;

	if (ec->again)   /* (the decoding again at the merge makes them) */
		return 0;
	ec->seen += n;
	if ((rc = tk_event_vec_add_thin(v, &r->sink, ev, n)) < 0)
		return rc;
	if (ec->v.n - ec->counted < r->step)
		return 0;
	pthread_mutex_lock(&r->turn.lock);
	r->held += ec->v.n - ec->counted;
	over = r->held > r->budget;
	pthread_mutex_unlock(&r->turn.lock);
	ec->counted = ec->v.n;
	if (over && !pthread_equal(pthread_self(), r->caller) &&
	    (rc = turn_wait(&r->turn, ec->index)) >= 0)
		rc = ev_hand(ec);
	return rc;
}

static int ev_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct ev_run *r = ctx;
	struct ev_chunk *ec = &r->chunks[i];
	int rc;

	/* blocks counted in the walker, not sent: a timeline reads only calls and returns */
	if (flow && r->sink.counted_blocks && (rc = tk_flow_set_count_mode(flow, 1, NULL, 0)) < 0)
		return rc;
	if (r->nthreads <= 1) {
		*sink = r->sink;
		return 0;
	}
	ec->run = r;
	ec->index = i;
	pthread_mutex_lock(&r->turn.lock);
	if (r->nspare)
		ec->v = r->spare[--r->nspare];
	/* (a chunk can be decoded again: ev_redo) */
	ec->v.lean = r->redos * EV_REDO_EVERY <= r->turn.merged + EV_REDO_EVERY;
	pthread_mutex_unlock(&r->turn.lock);
	ec->v.no_payloads = 1;   /* (the flow's events carry none) */
	ec->seen = ec->handed = 0;
	ec->again = 0;
	sink->events = ev_add;
	sink->ctx = ec;
	sink->counted_blocks = r->sink.counted_blocks;
	return 0;
}

/* The chunk decoded again: its first events (handed on before) left out. */
static int ev_skip(void *ctx, const struct tk_event *ev, size_t n)
{
	struct ev_chunk *ec = ctx;
	size_t k = ec->skip < n ? ec->skip : n;

	ec->skip -= k;
	return k < n ? ec->run->sink.events(ec->run->sink.ctx, ev + k, n - k) : 0;
}

/* tk_ipt_flow_consumer.redo: at chunk I's merge (FLOW NULL), its held events handed to
 * the sink, and 1 if the sink asked for those the lean hold did not keep; then (FLOW: a
 * decoder of the merge's own) the sink of their decoding again. */
static int ev_redo(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct ev_run *r = ctx;
	struct ev_chunk *ec = &r->chunks[i];
	int rc;

	if (r->nthreads <= 1)
		return 0;
	if (!flow) {
		ec->rc = ev_hand(ec);   /* (an error: ev_merge's to return) */
		if (ec->rc < 0 || !ec->again)
			return 0;
		pthread_mutex_lock(&r->turn.lock);
		r->redos++;
		pthread_mutex_unlock(&r->turn.lock);
		return 1;
	}
	if (r->sink.counted_blocks && (rc = tk_flow_set_count_mode(flow, 1, NULL, 0)) < 0)
		return rc;
	ec->skip = ec->handed;
	*sink = (struct tk_sink){ .events = ev_skip, .ctx = ec,
				  .counted_blocks = r->sink.counted_blocks };
	return 0;
}

static int ev_merge(void *ctx, size_t i)
{
	struct ev_run *r = ctx;
	struct ev_chunk *ec = &r->chunks[i];
	int rc;

	if (r->nthreads <= 1)
		return 0;
	rc = ec->rc;   /* (handed by ev_redo) */
	pthread_mutex_lock(&r->turn.lock);
	if (r->nspare < EV_SPARES)
		r->spare[r->nspare++] = ec->v;
	else
		tk_event_vec_free(&ec->v);
	pthread_mutex_unlock(&r->turn.lock);
	memset(&ec->v, 0, sizeof ec->v);
	turn_done(&r->turn, i, rc < 0);
	return rc;
}

int tk_ipt_flow_events(const uint8_t *buf, size_t len, const struct tk_ipt_flow_opts *opts,
		       struct tk_sink sink, struct tk_ipt_flow_stats *stats)
{
	struct ev_run r = { .sink = sink, .caller = pthread_self(), .budget = EV_BUDGET,
			    .step = EV_STEP };
	struct tk_ipt_flow_consumer c = { sizeof c, ev_begin, NULL, ev_merge, &r, .fail = turn_fail,
					  .redo = ev_redo,
					  .caller_decodes = 1 };
	const char *budget = getenv("TK_IPT_EV_BUDGET");
	int64_t n;
	int rc;

	if (!opts || !sink.events)
		return -TK_E_INVAL;
	r.nthreads = opts->nthreads ? opts->nthreads : tk_cpu_count();
	if (budget && atol(budget) > 1) {
		r.budget = (size_t)atol(budget);
		r.step = r.budget / 2 < EV_STEP ? r.budget / 2 : EV_STEP;
	}
	struct tk_ipt_flow_opts o;
	memset(&o, 0, sizeof o);
	memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);   /* an older caller's */
	o.sz = sizeof o;
	if (r.nthreads > 1 && !o.chunk_bytes)
		o.chunk_bytes = EV_CHUNK;
	/* a slot for each chunk there can be (counting them scanned every byte once more) */
	n = tk_ipt_flow_chunks_room(buf, len, &o);
	r.chunks = calloc(n > 0 ? (size_t)n : 1, sizeof(*r.chunks));
	if (!r.chunks)
		return -TK_E_NOMEM;
	turn_init(&r.turn);
	rc = tk_ipt_flow_decode(buf, len, &o, &c, stats);
	turn_destroy(&r.turn);
	for (int64_t i = 0; i < n; i++)
		tk_event_vec_free(&r.chunks[i].v);
	for (unsigned i = 0; i < r.nspare; i++)
		tk_event_vec_free(&r.spare[i]);
	free(r.chunks);
	return rc;
}
