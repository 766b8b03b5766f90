/* Timelines: one slice per call, per track. Perfetto protobuf (TracePacket stream with track
 * descriptors, interned event names and incremental timestamps, one packet sequence per
 * track) or Chrome trace-event JSON. A time window and a cap on slices keep huge traces
 * viewable. The protobuf encoding is written by hand: a handful of fields is all we need. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "output/internal.h"
#include "tracekit/internal/retset.h"
#include "tracekit/internal/util.h"

enum { PF_CLOCK_ID = 64, PF_BOOTTIME = 6, PROCESS_UUID = 1 };
/* a process's own track (tk_timeline_track_process): this plus its pid */
#define PROCESS_UUID_OF 0x300000000ull
/* pipeline tracks' packet sequences from here: clear of the call tracks' */
#define PL_SEQ_BASE (1u << 20)

struct tl_frame {
	uint64_t key, ret;
	uint32_t kind;
	uint32_t name;            /* once emitted */
	uint8_t emitted;
};

struct tl_track {
	uint32_t id;
	uint64_t uuid;            /* pipeline tracks: their uuid; thread tracks: 0x10000 + id */
	uint32_t seq;             /* Perfetto packet sequence id */
	struct tl_frame *st;
	size_t depth, cap;
	struct tk_retset rets;    /* the frames' return addresses: returns and resumes that
				     do not match the top frame (retset.h) */
	uint64_t t_last;          /* ticks */
	int started;              /* descriptor and sequence state written */
	int in_window;
	char *name;
	uint32_t pid;             /* its process (tk_timeline_track_process); 0: the trace's */
	char *pname;
	uint64_t off_at;          /* where tracing stopped (TK_EV_DISABLE), 0: unknown */
};

struct pl;

/* The writer's serial pass (stacks, window, cap, interning of names) reduces each slice
 * begin or end to a record; formatting the records into bytes is a function of them in
 * order (the clock, and per Perfetto sequence its last timestamp and the names it has
 * sent: state only the formatter keeps), and with nthreads > 1 a thread of its own does
 * it, blocks of records in order, while the pass goes on (it was half of a call trace's
 * conversion time; the pass is what stays serial, so what needs no stack is left to the
 * formatter). Everything else the pass writes (descriptors, headers) goes to the block's
 * raw bytes, before the record after it. */
struct tl_rec {
	union {
		const char *s;    /* the name (Chrome: begin and end; Perfetto: begin) */
		struct tl_prep *run;   /* TL_REC_RUN: a chunk's records and ends, as one run */
	};
	uint64_t ticks;           /* the time, in the trace's ticks */
	uint64_t track;           /* Perfetto: the track's uuid; Chrome: pid */
	uint32_t seq;             /* Perfetto: the packet sequence; Chrome: tid; TL_REC_RUN:
				     where in the block's fbuf its bytes go (the formatter's) */
	uint32_t name;            /* Perfetto: the name's iid (begin) */
	uint32_t raw_end;         /* the block's raw bytes up to here come before it */
	uint8_t begin;            /* 1 begin, 0 end, or TL_REC_RUN */
};
#define TL_REC_RUN 2

/* A chunk's pass done ahead on a worker (tl_prepare, below): the slices of the chunk's
 * own frames as records, what reaches below them as operations for the chunk's turn,
 * names and tracks by the chunk's own numbers (looked up at its turn). */
struct tlp_rec {
	uint64_t ticks;
	uint32_t name;            /* the chunk's name number */
	uint16_t track;           /* the chunk's track number */
	uint8_t begin;
};

struct tlp_frame {
	uint64_t key, ret;
	uint32_t kind, name;
};

struct tlp_track {
	uint32_t id;
	uint64_t t_last;          /* its last time in the chunk (TK_TIME_NONE: none yet) */
	struct tlp_frame *st;     /* the frames the chunk opened and has not closed */
	size_t depth, cap;
	struct tk_retset rets;    /* their return addresses (retset.h) */
	size_t first_rec;         /* its first record (SIZE_MAX: none) */
	uint64_t off_at;          /* where tracing stopped, once the chunk knows (off_known) */
	int off_known;
	uint64_t max_ticks;       /* its records' latest time (with the turn's ends) */
	int has_rec;
	uint64_t track;           /* at the turn: the records' track and seq (tl_rec) */
	uint32_t seq;
	size_t ix;                /* at the turn: its index in the writer's tracks */
	uint64_t start_ns;        /* the formatter's: its sequence's last time before the run */
};

/* TLP_NOT_RET, TLP_NOT_JUMPED: what the chunk's pass took for granted of the frames below
 * its own (no frame there returns to addr; tracing did not stop elsewhere before resuming
 * at addr), checked before the chunk's turn uses it */
enum { TLP_EXIT, TLP_RETURN, TLP_GAP, TLP_RESUME, TLP_NOT_RET, TLP_NOT_JUMPED };
struct tlp_op {
	size_t at;                /* after the records [0, at) */
	uint64_t addr, time;
	uint64_t entry, off;      /* TLP_RESUME: the function entry below addr; where tracing
				     stopped, when the chunk knows (off_known) */
	uint32_t what, kind;      /* TLP_*; TLP_EXIT's key kind */
	uint16_t track;
	uint8_t off_known;
};

#define TLP_TRACKS 64

struct tl_prep {
	size_t cut;               /* the events from here on go through the serial pass
				     (SIZE_MAX: none yet) */
	size_t nev;               /* the chunk's events so far */
	size_t last;              /* the track of the last event (prep_track) */
	uint64_t begins;
	struct tlp_rec *rec;
	size_t nrec, crec;
	struct tlp_op *ops;
	size_t nops, cops;
	struct tlp_track tr[TLP_TRACKS];
	size_t ntr;
	struct keymap map;        /* (key, kind) -> the chunk's name number */
	uint64_t *key;            /* each name number's key and kind, in order of first use */
	uint32_t *kind;
	size_t nnames, cnames;
	uint64_t *tmask;          /* per name number: the tracks that begin it (bit per track) */
	uint32_t *gid;            /* at the turn: each name number's id and string, */
	const char **gstr;
	uint32_t *canon;          /* and the first name number with that id */
	/* at the turn: the ends of frames below the chunk's (an operation's), in order */
	struct tlp_end { size_t at; uint64_t ticks; const char *s; uint16_t track; } *ends;
	size_t nends, cends;
	/* the formatter's: per (track, canonical name number), whether the name is sent with
	 * its first begin in the chunk; the run's bytes, made by whichever thread takes it */
	uint8_t *intern;
	size_t cid, cintern;      /* room in gid, gstr, canon; in intern */
	struct tk_buf bytes;
	int state;                /* RUN_QUEUED, RUN_TAKEN, RUN_DONE */
	struct tl_prep *next;     /* in the queue of runs to format */
};
enum { RUN_QUEUED, RUN_TAKEN, RUN_DONE };
static void prep_free(struct tl_prep *p);
static void prep_done(struct tk_timeline *t, struct tl_prep *p);

/* A Perfetto sequence as the formatter wrote it: its last timestamp and which names were
 * sent on it (of those sent on more than one sequence): a byte per name id below
 * SEQ_DENSE (functions, stages: the names met first), a set above (a simulator's labels:
 * a byte array per row as long as a million labels was 100 MB on a log of 150). */
#define SEQ_DENSE ((uint32_t)1 << 16)
struct tl_seq {
	uint64_t last_ns;
	uint8_t *interned;
	size_t ninterned;
	struct tk_u64set far;
};

/* The formatter's state (the formatter thread's, or the pass's own without one). */
struct tl_fmt {
	enum tk_timeline_kind kind;
	uint64_t tps;             /* the clock's ticks per second */
	uint64_t ns_per_tick;     /* when whole (10^9 a multiple of tps): ns = ticks times it */
	uint64_t time_origin;
	struct tl_seq *seqs;      /* call tracks' sequences at even, pipelines' at odd slots */
	size_t nseqs;
	/* per name id, where it was sent: 0 nowhere yet, SENT_MANY on several sequences (see
	 * their maps), else the one sequence. Most names of a pipeline (an instruction's
	 * label) go to one sequence: a map per sequence as long as all names was most of the
	 * formatter's time, in cache misses */
	uint32_t *sent_on;
	size_t nsent;
};
#define SENT_MANY UINT32_MAX

/* Records per block (about 640 KB) and blocks in flight: what waits for the formatter is
 * bounded by TL_BLOCKS blocks; a block is handed on early once its raw bytes reach RAW_MAX.
 * The pass and the formatter take turns at being the slower, in bursts: with four blocks
 * the pass waited for the formatter a fifth of its time on an XRay log; sixteen (10 MB)
 * ride the bursts out. The split changes no byte of the output. */
#define TL_BLOCK_RECS 16384
#define TL_BLOCKS 16
#define TL_HELPERS 63    /* threads that format chunks' runs: nthreads - 1, at most this */
#define TL_RAW_MAX ((size_t)1 << 20)
#define TL_AHEAD 64      /* events between a label's hash and its use (tl_events) */

struct tl_block {
	struct tl_rec *rec;
	size_t n;
	size_t load;              /* the records of the chunk runs among them */
	size_t nruns;
	struct tk_buf raw;
	struct tk_buf fbuf;       /* with runs: its other bytes, formatted in order */
	int full;                 /* BLK_FREE, BLK_FULL (handed on), BLK_PASSED (its runs
				     queued, its other bytes in fbuf) */
};
enum { BLK_FREE, BLK_FULL, BLK_PASSED };

struct tk_timeline {
	struct tk_timeline_opts o;
	struct tk_buf *b;         /* the current block's raw bytes */
	struct tk_buf *out;       /* the output */
	struct tl_block blk[TL_BLOCKS];
	unsigned cur;             /* the block being filled */
	struct tl_block *cb;      /* &blk[cur] */
	/* the formatter thread (nthreads > 1): formats blk[fmt_next] once full */
	pthread_t fmt_thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;      /* the pass waits on it: a block free, a run written */
	pthread_cond_t cond_fmt;  /* the formatter: a block full, a run formatted */
	pthread_cond_t cond_run;  /* the helpers: a run queued */
	int threaded, fmt_stop, fmt_err;
	int prep_here;            /* opts.prepare without the formatter: runs formatted at
				     their turn (run_put); t->lock made for the runs' spares */
	/* who waits (under the lock): wake-ups go only to a waiting thread, after the lock
	 * is let go (a thread woken under it may only sleep again on the lock) */
	int fmt_waits, pass_waits;
	unsigned helpers_wait;
	int err;                  /* the output's first error, as known to the pass */
	unsigned fmt_next;        /* the next block to pass */
	unsigned wr_next;         /* the next block to write */
	/* chunk runs formatted on helper threads (and by the formatter while it waits) */
	pthread_t helpers[TL_HELPERS];
	unsigned nhelpers;
	double fmt_helped;        /* the formatter's CPU seconds in runs' bytes (TK_PHASES) */
	uint64_t label_hash[TL_AHEAD];   /* tl_events: labels' name hashes, by event index */
	struct tl_prep *runq, *runq_tail;
	struct tl_prep *spare;    /* runs done with, their memory kept for the next chunks */
	unsigned nspare;
	unsigned runs_out, runs_max; /* runs handed on, not written yet; the most there may be */
	/* chunks that took their turn as prepared, and that could not (what their pass took
	 * for granted was wrong, mostly); when most could not, no more are prepared */
	uint64_t prep_tried, prep_failed;
	int prep_off;             /* (read by the producer's threads: atomic) */
	struct tl_fmt fmt;        /* the formatter's own */
	struct names names;
	struct tl_track *tracks;
	size_t ntracks, ctracks;
	size_t last;
	uint64_t slices, dropped, max;
	uint64_t window_end;
	uint64_t *entries;        /* the symbols' function entries, sorted (resumes: as the
				     profile reads them, tk_prof.h) */
	size_t nentries;
	int header_done, finished, nomem;
	int first_json;
	uint32_t *pids;           /* processes described (tk_timeline_track_process) */
	size_t npids;
	struct pl *pl;            /* pipeline state, made at the first pipeline event */
	struct tk_prof *prof;     /* call filters: the events go to it, its calls come here */
	struct tk_sym *own_sym;   /* the filters' names without opts.sym */
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

/* ---- formatting records (on the formatter thread with nthreads > 1) ----------------------- */

/* TICKS * 10^9 / tps, rounded down (modulo 2^64 like the 128-bit quotient's cast); tps 0:
 * a tick is a ns. A whole number of ns per tick is a product (the same modulo 2^64: a
 * Kanata log's cycles); else with TICKS = q tps + r it is q 10^9 + r 10^9 / tps, in 64
 * bits for any clock up to 18 GHz: the 128-bit division is a library call. The clock's
 * fields are set once, before any thread reads them. */
static uint64_t ticks_ns(const struct tl_fmt *f, uint64_t ticks)
{
	uint64_t tps = f->tps;
	if (f->ns_per_tick)
		return ticks * f->ns_per_tick;
	if (tps <= UINT64_MAX / 1000000000u)
		return ticks / tps * 1000000000u + ticks % tps * 1000000000u / tps;
	return (uint64_t)((unsigned __int128)ticks * 1000000000u / tps);
}

/* Chrome JSON's ts: microseconds as JSON numbers, which readers hold as doubles: relative
 * to the origin, so that a large clock (a TSC) keeps its nanoseconds. */
static uint64_t origin_ns(const struct tl_fmt *f, uint64_t ticks)
{
	return ticks_ns(f, ticks > f->time_origin ? ticks - f->time_origin : 0);
}

static __attribute__((noinline)) struct tl_seq *fmt_seq_new(struct tl_fmt *f, size_t i)
{
	size_t nc = f->nseqs ? f->nseqs : 16;
	while (nc <= i)
		nc *= 2;
	struct tl_seq *ns = realloc(f->seqs, nc * sizeof *ns);
	if (!ns)
		return NULL;
	memset(ns + f->nseqs, 0, (nc - f->nseqs) * sizeof *ns);
	f->seqs = ns;
	f->nseqs = nc;
	return &f->seqs[i];
}

/* Sequence SEQ's state, made on first use (NULL: no memory). Another sequence's made
 * later may move it. */
static inline struct tl_seq *fmt_seq(struct tl_fmt *f, uint32_t seq)
{
	size_t i = seq >= PL_SEQ_BASE ? 2 * (size_t)(seq - PL_SEQ_BASE) + 1 : 2 * (size_t)seq;
	return i < f->nseqs ? &f->seqs[i] : fmt_seq_new(f, i);
}

/* Mark NAME sent on SQ's map; -1: no memory. */
static int seq_mark(struct tl_seq *sq, uint32_t name)
{
	if (name >= SEQ_DENSE)
		return tk_u64set_add(&sq->far, name) < 0 ? -1 : 0;
	if (name >= sq->ninterned) {
		size_t nc = sq->ninterned ? sq->ninterned : 256;
		while (nc <= name)
			nc *= 2;   /* (at most SEQ_DENSE) */
		uint8_t *ni = realloc(sq->interned, nc);
		if (!ni)
			return -1;
		memset(ni + sq->ninterned, 0, nc - sq->ninterned);
		sq->interned = ni;
		sq->ninterned = nc;
	}
	sq->interned[name] = 1;
	return 0;
}

static inline int seq_has(const struct tl_seq *sq, uint32_t name)
{
	return name < sq->ninterned ? sq->interned[name] : name >= SEQ_DENSE && tk_u64set_has(&sq->far, name);
}

/* Whether name NAME goes out with this slice on sequence SEQ (its first there); -1: no
 * memory. *SQ: SEQ's state (updated when it moves). */
static __attribute__((noinline)) int fmt_intern_slow(struct tl_fmt *f, struct tl_seq **sqp, uint32_t seq,
						     uint32_t name)
{
	if (name >= f->nsent) {
		size_t nc = f->nsent ? f->nsent : 1024;
		while (nc <= name)
			nc *= 2;
		uint32_t *ns = tk_realloc_huge(f->sent_on, f->nsent * sizeof *ns, nc * sizeof *ns);
		if (!ns)
			return -1;
		memset(ns + f->nsent, 0, (nc - f->nsent) * sizeof *ns);
		f->sent_on = ns;
		f->nsent = nc;
	}
	uint32_t on = f->sent_on[name];
	if (on == seq)
		return 0;
	if (!on) {
		f->sent_on[name] = seq;
		return 1;
	}
	struct tl_seq *sq = *sqp;
	if (on == SENT_MANY) {
		if (seq_has(sq, name))
			return 0;
	} else {   /* a second sequence: both go to the maps */
		struct tl_seq *first = fmt_seq(f, on);
		if (!first || seq_mark(first, name) < 0)
			return -1;
		sq = *sqp = fmt_seq(f, seq);   /* (the array may have moved) */
		f->sent_on[name] = SENT_MANY;
	}
	return seq_mark(sq, name) < 0 ? -1 : 1;
}

/* The usual cases inline: a name sent on this sequence before (alone, or among others). */
static inline int fmt_intern(struct tl_fmt *f, struct tl_seq **sqp, uint32_t seq, uint32_t name)
{
	if (name < f->nsent) {
		uint32_t on = f->sent_on[name];
		if (on == seq ||
		    (on == SENT_MANY && seq_has(*sqp, name)))
			return 0;
	}
	return fmt_intern_slow(f, sqp, seq, name);
}

static void fmt_free(struct tl_fmt *f)
{
	for (size_t i = 0; i < f->nseqs; i++) {
		free(f->seqs[i].interned);
		tk_u64set_free(&f->seqs[i].far);
	}
	free(f->seqs);
	free(f->sent_on);
	f->seqs = NULL;
	f->sent_on = NULL;
	f->nseqs = f->nsent = 0;
}

/* A Chrome slice begin or end. */
static void fmt_chrome(const struct tl_fmt *f, struct tk_buf *b, int begin, uint64_t pid, uint32_t tid,
		       uint64_t ticks, const char *s)
{
	tk_buf_puts(b, begin ? ",\n{\"ph\":\"B\",\"pid\":" : ",\n{\"ph\":\"E\",\"pid\":");
	tk_buf_u64(b, pid);
	tk_buf_puts(b, ",\"tid\":");
	tk_buf_u64(b, tid);
	tk_buf_puts(b, ",\"ts\":");
	tk_buf_fixed(b, (int64_t)origin_ns(f, ticks), 3); /* us */
	tk_buf_puts(b, ",\"name\":");
	tk_buf_json_str(b, s, strlen(s));
	tk_buf_putc(b, '}');
}

/* A Perfetto slice begin (NAME, and with INTERN its string S) or end on sequence SEQ,
 * track TRACK, DELTA ns after the sequence's last packet. Written in place: the packet's
 * body after a two-byte header (tag, one-byte length), moved one byte on in the rare
 * packet longer than 127 bytes (a name interned). The small copies of building it apart
 * cost the formatter a third of its time. */
static inline __attribute__((always_inline)) void pf_packet(struct tk_buf *b, uint32_t seq, uint64_t track, int begin, uint32_t name,
			     uint64_t delta, int intern, const char *s)
{
	if (tk_buf_reserve(b, 3 + 64 + 600) < 0)
		return;
	uint8_t *pk = (uint8_t *)b->data + b->len + 2, *te;
	size_t k = put_uint(pk, 8, delta);                    /* timestamp (incremental) */
	k += put_uint(pk + k, 10, seq);
	pk[k++] = 11 << 3 | 2;                                /* track_event: under 128 bytes */
	te = pk + k + 1;
	size_t n = put_uint(te, 9, begin ? 1 : 2);            /* type: SLICE_BEGIN / SLICE_END */
	n += put_uint(te + n, 11, track);                     /* track_uuid */
	if (begin)
		n += put_uint(te + n, 10, name);                  /* name_iid */
	pk[k] = (uint8_t)n;
	k += 1 + n;
	if (intern) {
		size_t sl = strlen(s) > 512 ? 512 : strlen(s);
		uint8_t en[540], id[560];
		size_t ne = put_uint(en, 1, name);                /* iid */
		ne += put_bytes(en + ne, 2, s, sl);               /* name */
		size_t ni = put_bytes(id, 2, en, ne);             /* event_names */
		k += put_bytes(pk + k, 12, id, ni);               /* interned_data */
	}
	k += put_uint(pk + k, 13, 2);                         /* SEQ_NEEDS_INCREMENTAL_STATE */
	uint8_t *hdr = pk - 2;
	hdr[0] = 1 << 3 | 2;                                  /* TracePacket, field 1 of Trace */
	if (k >= 128)
		memmove(pk + 1, pk, k);                           /* a two-byte length */
	b->len += 1 + put_varint(hdr + 1, k) + k;
}

static void fmt_rec(struct tl_fmt *f, struct tk_buf *b, const struct tl_rec *r)
{
	if (f->kind == TK_TIMELINE_CHROME) {
		fmt_chrome(f, b, r->begin, r->track, r->seq, r->ticks, r->s);
		return;
	}
	struct tl_seq *sq = fmt_seq(f, r->seq);
	int intern = sq && r->begin ? fmt_intern(f, &sq, r->seq, r->name) : 0;
	if (!sq || intern < 0) {
		if (!b->err)
			b->err = -TK_E_NOMEM;
		return;
	}
	uint64_t ns = ticks_ns(f, r->ticks);
	uint64_t delta = ns >= sq->last_ns ? ns - sq->last_ns : 0;
	sq->last_ns += delta;
	pf_packet(b, r->seq, r->track, r->begin, r->name, delta, intern, r->s);
}

/* A chunk's run in order (on any thread: it reads only P and the clock): its records,
 * the ends its turn made among them, into B (P's bytes, or the output itself when the
 * run is formatted at its turn). Each track's sequence goes on from
 * the time the formatter's pass found (start_ns); a name goes out with its first begin on
 * a track when the pass found it not sent there yet. */
static void run_bytes(const struct tl_fmt *f, struct tl_prep *p, struct tk_buf *b)
{
	uint64_t last[TLP_TRACKS];
	size_t e = 0, nn = p->nnames;
	int chrome = f->kind == TK_TIMELINE_CHROME;

	for (size_t k = 0; k < p->ntr; k++)
		last[k] = p->tr[k].start_ns;
	for (size_t i = 0;; i++) {
		for (; e < p->nends && p->ends[e].at == i; e++) {
			const struct tlp_end *x = &p->ends[e];
			const struct tlp_track *lt = &p->tr[x->track];
			if (chrome) {
				fmt_chrome(f, b, 0, lt->track, lt->seq, x->ticks, x->s);
				continue;
			}
			uint64_t ns = ticks_ns(f, x->ticks);
			uint64_t delta = ns >= last[x->track] ? ns - last[x->track] : 0;
			last[x->track] += delta;
			pf_packet(b, lt->seq, lt->track, 0, 0, delta, 0, NULL);
		}
		if (i == p->nrec)
			break;
		const struct tlp_rec *c = &p->rec[i];
		const struct tlp_track *lt = &p->tr[c->track];
		if (chrome) {
			fmt_chrome(f, b, c->begin, lt->track, lt->seq, c->ticks, p->gstr[c->name]);
			continue;
		}
		uint64_t ns = ticks_ns(f, c->ticks);
		uint64_t delta = ns >= last[c->track] ? ns - last[c->track] : 0;
		int intern = 0;
		last[c->track] += delta;
		if (c->begin) {
			uint8_t *fl = &p->intern[c->track * nn + p->canon[c->name]];
			intern = *fl;
			*fl = 0;
		}
		pf_packet(b, lt->seq, lt->track, c->begin, p->gid[c->name], delta, intern, p->gstr[c->name]);
	}
}

/* The formatter's pass over a chunk's run, in order with the other records: each track's
 * sequence time before it (and after it: the latest of its records), and which of its
 * names are sent with it. 0 or -TK_E_NOMEM. */
static int run_pass(struct tl_fmt *f, struct tl_prep *p)
{
	if (f->kind == TK_TIMELINE_CHROME)
		return 0;
	for (size_t k = 0; k < p->ntr; k++) {
		struct tlp_track *lt = &p->tr[k];
		if (!lt->has_rec)
			continue;
		struct tl_seq *sq = fmt_seq(f, lt->seq);
		if (!sq)
			return -TK_E_NOMEM;
		uint64_t ns = ticks_ns(f, lt->max_ticks);
		lt->start_ns = sq->last_ns;
		if (ns > sq->last_ns)
			sq->last_ns = ns;
	}
	for (size_t l = 0; l < p->nnames; l++)
		for (uint64_t m = p->tmask[l]; m; m &= m - 1) {
			unsigned k = (unsigned)__builtin_ctzll(m);
			struct tl_seq *sq = fmt_seq(f, p->tr[k].seq);
			int in = sq ? fmt_intern(f, &sq, p->tr[k].seq, p->gid[l]) : -1;
			if (in < 0)
				return -TK_E_NOMEM;
			if (in)
				p->intern[k * p->nnames + p->canon[l]] = 1;
		}
	return 0;
}

/* BK's records and raw bytes onto OUT, in order; BK is empty after (no runs in it). */
static void fmt_block(struct tl_fmt *f, struct tk_buf *out, struct tl_block *bk)
{
	size_t pos = 0;

	for (size_t i = 0; i < bk->n; i++) {
		const struct tl_rec *r = &bk->rec[i];
		if (r->raw_end > pos) {
			tk_buf_put(out, bk->raw.data + pos, r->raw_end - pos);
			pos = r->raw_end;
		}
		fmt_rec(f, out, r);
	}
	if (bk->raw.len > pos)
		tk_buf_put(out, bk->raw.data + pos, bk->raw.len - pos);
	if (bk->raw.err && !out->err)
		out->err = bk->raw.err;
	bk->n = bk->load = 0;
	bk->raw.len = 0;
}

/* A block with runs, on the formatter thread: its runs passed (run_pass) and queued for
 * the helpers, its other records and raw bytes formatted into its fbuf (a run's seq:
 * where in fbuf it comes). */
static void fmt_block_pass(struct tk_timeline *t, struct tl_block *bk)
{
	struct tk_buf *fb = &bk->fbuf;
	size_t pos = 0;

	for (size_t i = 0; i < bk->n; i++) {
		struct tl_rec *r = &bk->rec[i];
		if (r->raw_end > pos) {
			tk_buf_put(fb, bk->raw.data + pos, r->raw_end - pos);
			pos = r->raw_end;
		}
		if (r->begin != TL_REC_RUN) {
			fmt_rec(&t->fmt, fb, r);
			continue;
		}
		if (run_pass(&t->fmt, r->run) < 0 && !fb->err)
			fb->err = -TK_E_NOMEM;
		r->seq = (uint32_t)fb->len;
		pthread_mutex_lock(&t->lock);
		r->run->state = RUN_QUEUED;
		r->run->next = NULL;
		if (t->runq_tail)
			t->runq_tail->next = r->run;
		else
			t->runq = r->run;
		t->runq_tail = r->run;
		int wake = t->helpers_wait > 0;
		pthread_mutex_unlock(&t->lock);
		if (wake)
			pthread_cond_signal(&t->cond_run);
	}
	if (bk->raw.len > pos)
		tk_buf_put(fb, bk->raw.data + pos, bk->raw.len - pos);
	if (bk->raw.err && !fb->err)
		fb->err = bk->raw.err;
}

/* The next queued run, taken (under the lock); NULL: none. */
static struct tl_prep *run_take(struct tk_timeline *t)
{
	struct tl_prep *p = t->runq;
	if (!p)
		return NULL;
	t->runq = p->next;
	if (!t->runq)
		t->runq_tail = NULL;
	p->state = RUN_TAKEN;
	return p;
}

/* P formatted (the lock not held), then marked done. */
static void run_format(struct tk_timeline *t, struct tl_prep *p)
{
	run_bytes(&t->fmt, p, &p->bytes);
	pthread_mutex_lock(&t->lock);
	p->state = RUN_DONE;
	int wake = t->fmt_waits;
	pthread_mutex_unlock(&t->lock);
	if (wake)
		pthread_cond_signal(&t->cond_fmt);
}

static void *helper_main(void *arg)
{
	struct tk_timeline *t = arg;

	pthread_mutex_lock(&t->lock);
	for (;;) {
		struct tl_prep *p = run_take(t);
		if (!p) {
			if (t->fmt_stop == 2)
				break;
			t->helpers_wait++;
			pthread_cond_wait(&t->cond_run, &t->lock);
			t->helpers_wait--;
			continue;
		}
		pthread_mutex_unlock(&t->lock);
		run_format(t, p);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* A passed block onto the output, in order: fbuf's bytes and its runs' (each waited for,
 * or formatted here while the helpers are busy); its runs freed. */
static void fmt_block_write(struct tk_timeline *t, struct tl_block *bk)
{
	size_t pos = 0;

	for (size_t i = 0; i < bk->n; i++) {
		struct tl_rec *r = &bk->rec[i];
		if (r->begin != TL_REC_RUN)
			continue;
		if (r->seq > pos) {
			tk_buf_put(t->out, bk->fbuf.data + pos, r->seq - pos);
			pos = r->seq;
		}
		pthread_mutex_lock(&t->lock);
		while (r->run->state != RUN_DONE) {
			struct tl_prep *p = run_take(t);
			if (!p) {
				t->fmt_waits = 1;
				pthread_cond_wait(&t->cond_fmt, &t->lock);
				t->fmt_waits = 0;
				continue;
			}
			pthread_mutex_unlock(&t->lock);
			double t0 = tk_pool_timed() ? tk_thread_cpu() : 0;
			run_format(t, p);
			if (tk_pool_timed())
				t->fmt_helped += tk_thread_cpu() - t0;
			pthread_mutex_lock(&t->lock);
		}
		pthread_mutex_unlock(&t->lock);
		struct tk_buf *rb = &r->run->bytes;
		tk_buf_put_large(t->out, rb->data, rb->len);
		if (rb->err && !t->out->err)
			t->out->err = rb->err;
		prep_done(t, r->run);
		pthread_mutex_lock(&t->lock);
		t->runs_out--;
		int wake = t->pass_waits;
		pthread_mutex_unlock(&t->lock);
		if (wake)
			pthread_cond_signal(&t->cond);
	}
	if (bk->fbuf.len > pos)
		tk_buf_put(t->out, bk->fbuf.data + pos, bk->fbuf.len - pos);
	if (bk->fbuf.err && !t->out->err)
		t->out->err = bk->fbuf.err;
	bk->n = bk->load = bk->nruns = 0;
	bk->raw.len = bk->fbuf.len = 0;
}

/* The formatter thread: blocks in order, passed ahead of writing while runs are formatted
 * elsewhere; a block without runs, with nothing waiting before it, written at once. */
static void *fmt_main(void *arg)
{
	struct tk_timeline *t = arg;

	pthread_mutex_lock(&t->lock);
	for (;;) {
		struct tl_block *a = &t->blk[t->fmt_next], *w = &t->blk[t->wr_next];
		if (a->full == BLK_FULL) {
			int direct = !a->nruns && t->wr_next == t->fmt_next;
			pthread_mutex_unlock(&t->lock);
			if (direct)
				fmt_block(&t->fmt, t->out, a);
			else
				fmt_block_pass(t, a);
			pthread_mutex_lock(&t->lock);
			t->fmt_next = (t->fmt_next + 1) % TL_BLOCKS;
			if (direct) {
				a->full = BLK_FREE;
				t->wr_next = t->fmt_next;
			} else {
				a->full = BLK_PASSED;
			}
		} else if (w->full == BLK_PASSED) {
			pthread_mutex_unlock(&t->lock);
			fmt_block_write(t, w);
			pthread_mutex_lock(&t->lock);
			w->full = BLK_FREE;
			t->wr_next = (t->wr_next + 1) % TL_BLOCKS;
		} else if (t->fmt_stop) {
			break;          /* stopped, and every block handed on is written */
		} else {
			t->fmt_waits = 1;
			pthread_cond_wait(&t->cond_fmt, &t->lock);
			t->fmt_waits = 0;
			continue;
		}
		if (t->out->err && !t->fmt_err)
			t->fmt_err = t->out->err;
		if (t->pass_waits) {   /* a block may be free */
			pthread_mutex_unlock(&t->lock);
			pthread_cond_signal(&t->cond);
			pthread_mutex_lock(&t->lock);
		}
	}
	pthread_mutex_unlock(&t->lock);
	/* its own work goes in order; the runs it formatted for the helpers do not */
	if (tk_pool_timed())
		tk_pool_add_ordered(tk_thread_cpu() - t->fmt_helped);
	return NULL;
}

/* The current block is done: format it here, or hand it to the formatter and wait for the
 * next block to be free. The output's first error. */
static int submit(struct tk_timeline *t)
{
	struct tl_block *bk = &t->blk[t->cur];
	int err;

	if (!t->threaded) {
		fmt_block(&t->fmt, t->out, bk);
		return t->out->err;
	}
	pthread_mutex_lock(&t->lock);
	bk->full = BLK_FULL;
	t->runs_out += (unsigned)bk->nruns;
	if (t->fmt_waits) {
		pthread_mutex_unlock(&t->lock);
		pthread_cond_signal(&t->cond_fmt);
		pthread_mutex_lock(&t->lock);
	}
	t->cur = (t->cur + 1) % TL_BLOCKS;
	/* (runs hold a chunk's records and bytes each: a few in flight, not a block's worth) */
	while (t->blk[t->cur].full || t->runs_out >= t->runs_max) {
		t->pass_waits = 1;
		pthread_cond_wait(&t->cond, &t->lock);
		t->pass_waits = 0;
	}
	err = t->fmt_err;
	pthread_mutex_unlock(&t->lock);
	t->cb = &t->blk[t->cur];
	t->b = &t->cb->raw;
	return err;
}

/* Wait until everything handed on is written, and end the formatter. */
static void fmt_end(struct tk_timeline *t)
{
	if (!t->threaded)
		return;
	pthread_mutex_lock(&t->lock);
	t->fmt_stop = 1;
	pthread_cond_signal(&t->cond_fmt);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->fmt_thread, NULL);
	pthread_mutex_lock(&t->lock);   /* every run written: the helpers end */
	t->fmt_stop = 2;
	pthread_cond_broadcast(&t->cond_run);
	pthread_mutex_unlock(&t->lock);
	for (unsigned i = 0; i < t->nhelpers; i++)
		pthread_join(t->helpers[i], NULL);
	t->nhelpers = 0;
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
	pthread_cond_destroy(&t->cond_fmt);
	pthread_cond_destroy(&t->cond_run);
	t->threaded = 0;
}

/* After raw bytes: hand the block on when it is full. */
static int rec_done(struct tk_timeline *t)
{
	if (!t->threaded) {
		if (t->b->len) {
			tk_buf_put(t->out, t->b->data, t->b->len);
			t->b->len = 0;
		}
		return t->b->err ? t->b->err : t->out->err;
	}
	if (t->cb->n + t->cb->load >= TL_BLOCK_RECS || t->b->len >= TL_RAW_MAX) {
		int err = submit(t);
		if (err && !t->err)
			t->err = err;
	}
	return t->b->err ? t->b->err : t->err;
}

/* Where the next record is built: in the block with the formatter (filled in place: a
 * record built on the stack and copied in stalled on its own stores, the pass's largest
 * cost), else in TMP. */
static inline __attribute__((always_inline)) struct tl_rec *rec_slot(struct tk_timeline *t,
								       struct tl_rec *tmp)
{
	return t->threaded ? &t->cb->rec[t->cb->n] : tmp;
}

/* The record R from rec_slot, after the raw bytes written since the last one. Without
 * the formatter (-j 1) it is formatted at once, while it is in the cache: blocks of
 * records, or records formatted one by one from a block, cost -j 1 a tenth more CPU time
 * on an XRay log. With it, only a full block is looked at further: raw bytes are written
 * on rare paths that see to their own bound (first_slice, pipelines), and an error of
 * theirs surfaces at the batch's end (tl_events) if not before. */
static inline __attribute__((always_inline)) int rec_put(struct tk_timeline *t, struct tl_rec *r)
{
	if (!t->threaded) {
		int rc = t->b->len || t->b->err ? rec_done(t) : 0;
		fmt_rec(&t->fmt, t->out, r);
		return rc ? rc : t->out->err;
	}
	r->raw_end = (uint32_t)t->b->len;   /* below TL_RAW_MAX and an event's bytes */
	if (++t->cb->n < TL_BLOCK_RECS)
		return 0;
	return rec_done(t);
}

static uint64_t chrome_ns(const struct tk_timeline *t, uint64_t ticks)
{
	return origin_ns(&t->fmt, ticks);
}

/* The origin in ticks, for readers that want absolute times back (a string: a JSON number
 * would lose the digits the origin is there to keep). */
static void chrome_origin(struct tk_buf *b, const struct tk_timeline *t)
{
	if (t->o.time_origin)
		tk_buf_printf(b, "\"time_origin_ticks\":\"%llu\"",
			      (unsigned long long)t->o.time_origin);
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
	tr->uuid = 0x10000ull + id;
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
		if (t->pl) {
			/* pipelines: a process per thread, the first of which comes next */
			tk_buf_puts(b, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"source\":");
			tk_buf_json_str(b, pname, strlen(pname));
			if (t->o.time_origin)
				tk_buf_putc(b, ',');
			chrome_origin(b, t);
			tk_buf_puts(b, "},\"traceEvents\":[");
			t->first_json = 1;
			return;
		}
		tk_buf_puts(b, "{\"displayTimeUnit\":\"ns\",");
		if (t->o.time_origin) {
			tk_buf_puts(b, "\"otherData\":{");
			chrome_origin(b, t);
			tk_buf_puts(b, "},");
		}
		tk_buf_puts(b, "\"traceEvents\":[\n");
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

/* The first packet of sequence SEQ: clears incremental state, defines the incremental
 * clock (ns since the trace's zero) and makes it the sequence's default. */
static void start_sequence(struct tk_buf *b, uint64_t seq)
{
	uint8_t clk1[32], clk2[32], cs[80], defs[32], pk[160];
	size_t n1 = put_uint(clk1, 1, PF_CLOCK_ID);
	n1 += put_uint(clk1 + n1, 2, 0);
	n1 += put_uint(clk1 + n1, 3, 1);                      /* is_incremental */
	size_t n2 = put_uint(clk2, 1, PF_BOOTTIME);
	n2 += put_uint(clk2 + n2, 2, 0);
	size_t ncs = put_bytes(cs, 1, clk1, n1);
	ncs += put_bytes(cs + ncs, 1, clk2, n2);
	size_t nd = put_uint(defs, 58, PF_CLOCK_ID);          /* timestamp_clock_id */
	size_t k = put_uint(pk, 10, seq);
	k += put_uint(pk + k, 13, 1);                         /* INCREMENTAL_STATE_CLEARED */
	k += put_bytes(pk + k, 6, cs, ncs);                   /* clock_snapshot */
	k += put_bytes(pk + k, 59, defs, nd);                 /* trace_packet_defaults */
	emit_packet(b, pk, k);
}

/* First packet of a track's sequence: clears incremental state, defines the incremental
 * clock (ns since the trace's zero), sets defaults, and describes the thread track. */
static void start_track(struct tk_timeline *t, struct tl_track *tr)
{
	struct tk_buf *b = t->b;
	char buf[64];
	const char *label = track_label(tr, buf, sizeof buf);
	uint64_t pid = tr->pid ? tr->pid : 1, parent = tr->pid ? PROCESS_UUID_OF + tr->pid : PROCESS_UUID;
	int new_proc = 0;
	tr->started = 1;
	if (tr->pid) {   /* a process described once, before its first thread */
		size_t i = 0;
		while (i < t->npids && t->pids[i] != tr->pid)
			i++;
		if (i == t->npids) {
			uint32_t *np = realloc(t->pids, (i + 1) * sizeof *np);
			if (!np)
				return;
			t->pids = np;
			t->pids[t->npids++] = tr->pid;
			new_proc = 1;
		}
	}
	if (t->o.kind == TK_TIMELINE_CHROME) {
		if (new_proc) {
			tk_buf_puts(b, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
			tk_buf_u64(b, pid);
			tk_buf_puts(b, ",\"tid\":0,\"args\":{\"name\":");
			tk_buf_json_str(b, tr->pname, strlen(tr->pname));
			tk_buf_puts(b, "}}");
		}
		tk_buf_puts(b, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
		tk_buf_u64(b, pid);
		tk_buf_puts(b, ",\"tid\":");
		tk_buf_u64(b, tr->id);
		tk_buf_puts(b, ",\"args\":{\"name\":");
		tk_buf_json_str(b, label, strlen(label));
		tk_buf_puts(b, "}}");
		return;
	}
	uint8_t pk[512], thr[300], td[360];
	start_sequence(b, tr->seq);
	if (new_proc) {
		uint8_t proc[300];
		size_t plen = strlen(tr->pname) > 256 ? 256 : strlen(tr->pname);
		size_t n = put_uint(proc, 1, pid);                    /* pid */
		n += put_bytes(proc + n, 6, tr->pname, plen);         /* process_name */
		size_t m = put_uint(td, 1, parent);                   /* uuid */
		m += put_bytes(td + m, 3, proc, n);                   /* process */
		size_t k = put_uint(pk, 10, tr->seq);
		k += put_bytes(pk + k, 60, td, m);                    /* track_descriptor */
		emit_packet(b, pk, k);
	}
	size_t ll = strlen(label) > 256 ? 256 : strlen(label);
	size_t nt = put_uint(thr, 1, pid);                    /* pid */
	nt += put_uint(thr + nt, 2, tr->id);                  /* tid */
	nt += put_bytes(thr + nt, 5, label, ll);              /* thread_name */
	size_t m = put_uint(td, 1, tr->uuid);                 /* uuid */
	m += put_uint(td + m, 5, parent);                     /* parent_uuid */
	m += put_bytes(td + m, 4, thr, nt);                   /* thread */
	size_t k = put_uint(pk, 10, tr->seq);
	k += put_bytes(pk + k, 60, td, m);
	emit_packet(b, pk, k);
}

/* One Perfetto slice begin (NAME) or end on TR at TICKS. */
static inline __attribute__((always_inline)) int pf_slice(struct tk_timeline *t, struct tl_track *tr,
							  int begin, uint32_t name, uint64_t ticks)
{
	struct tl_rec tmp, *r = rec_slot(t, &tmp);
	r->s = begin ? names_str(&t->names, name) : NULL;
	r->ticks = ticks;
	r->track = tr->uuid;
	r->seq = tr->seq;
	r->name = name;
	r->begin = (uint8_t)begin;
	return rec_put(t, r);
}

/* Before TR's first slice: the header if it is the trace's first, and TR's description;
 * a block whose raw bytes are full goes on before the slice's record. */
static __attribute__((noinline, cold)) void first_slice(struct tk_timeline *t, struct tl_track *tr)
{
	if (!t->header_done)
		header(t);
	start_track(t, tr);
	if (t->threaded && t->b->len >= TL_RAW_MAX)
		rec_done(t);
}

/* One slice begin or end of F's call on TR at TICKS. Chrome's end events carry the name
 * too (the begin's, kept in F): viewers that pair an end with its begin by name
 * (speedscope) need it. */
static inline __attribute__((always_inline)) int slice(struct tk_timeline *t, struct tl_track *tr,
						       int begin, struct tl_frame *f, uint64_t ticks)
{
	if (ticks == TK_TIME_NONE)
		ticks = 0;
	if (__builtin_expect(!tr->started, 0))
		first_slice(t, tr);
	if (begin && (f->name = names_frame(&t->names, f->key, f->kind)) == UINT32_MAX)
		return -TK_E_NOMEM;
	if (t->o.kind == TK_TIMELINE_CHROME) {
		struct tl_rec tmp, *r = rec_slot(t, &tmp);
		r->s = names_str(&t->names, f->name);
		r->ticks = ticks;
		r->track = tr->pid ? tr->pid : 1;
		r->seq = tr->id;
		r->name = 0;
		r->begin = (uint8_t)begin;
		return rec_put(t, r);
	}
	return pf_slice(t, tr, begin, begin ? f->name : 0, ticks);
}

/* ---- the stack ---------------------------------------------------------------------------- */

static inline struct tk_retset_stack track_stack(const struct tl_track *tr)
{
	return (struct tk_retset_stack){ tr->st, sizeof *tr->st, offsetof(struct tl_frame, ret) };
}

static int in_window(const struct tk_timeline *t, uint64_t time)
{
	return time >= t->o.time_begin && time < t->window_end;
}

static inline __attribute__((always_inline)) int push(struct tk_timeline *t, struct tl_track *tr,
						      uint64_t key, uint32_t kind, uint64_t ret,
						      uint64_t time)
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
	return slice(t, tr, 1, f, time);
}

static inline __attribute__((always_inline)) int pop_to(struct tk_timeline *t, struct tl_track *tr,
							size_t depth, uint64_t time)
{
	int rc = 0;
	if (time != TK_TIME_NONE && time > t->window_end)
		time = t->window_end;
	while (tr->depth > depth && rc >= 0) {
		struct tl_frame *f = &tr->st[--tr->depth];
		tk_retset_popped(&tr->rets, f->ret, tr->depth);
		if (f->emitted)
			rc = slice(t, tr, 0, f, time);
	}
	return rc;
}

/* An exit of (KEY, KIND) with TR's frames [0, DEPTH) open: the depth its calls end down
 * to (its innermost frame's; all of them if no frame is its). */
static inline size_t exit_depth(const struct tl_track *tr, size_t depth, uint64_t key, uint32_t kind)
{
	size_t d = depth;
	while (d && !(tr->st[d - 1].key == key && tr->st[d - 1].kind == kind))
		d--;
	return d ? d - 1 : 0;
}

/* A return to ADDR with TR's frames [0, DEPTH) open: *TO, the depth its calls end down to
 * (the innermost one that returns there, or only the top one if none does). 0, 1 if
 * nothing ends (no call open), or -TK_E_NOMEM. */
static inline int return_depth(struct tl_track *tr, uint64_t addr, size_t depth, size_t *to)
{
	size_t d = depth;
	if (!d)
		return 1;
	if (tr->st[d - 1].ret != addr) {
		size_t j = d - 1;
		int rc;
		/* no search down a deep stack for an address no frame holds (the set may hold
		 * frames above DEPTH too: a filter only) */
		if (addr && (rc = tk_retset_sync(&tr->rets, track_stack(tr), tr->depth)) < 0)
			return rc;
		if (addr && !tk_retset_has(&tr->rets, addr))
			j = 0;
		while (j > 0 && tr->st[j - 1].ret != addr)
			j--;
		if (j > 0)
			d = j;
	}
	*to = d - 1;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The last function entry at or below ADDR (0: none). */
static uint64_t entry_below(const struct tk_timeline *t, uint64_t addr)
{
	size_t lo = 0, hi = t->nentries;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->entries[mid] <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? t->entries[lo - 1] : 0;
}

/* Whether tracing resumed at ADDR after a jump out of the trace, not where it stopped
 * (OFF: 0 unknown). */
static inline int resume_jumped(uint64_t off, uint64_t addr)
{
	return off && (addr < off || addr - off > TK_MAX_INSN_BYTES);
}

/* Tracing resumed at ADDR (not a function entry; ENTRY the one below it): *TO, the depth
 * the calls end down to; 0, 1 if none end, or -TK_E_NOMEM. (resume, below) */
static int resume_depth(const struct tk_timeline *t, struct tl_track *tr, uint64_t addr, uint64_t entry,
			int jumped, size_t depth, size_t *to)
{
	size_t i = depth;
	if (i && tr->st[i - 1].ret != addr) {
		int rc = tk_retset_sync(&tr->rets, track_stack(tr), tr->depth);
		if (rc < 0)
			return rc;
		if (!tk_retset_has(&tr->rets, addr))
			i = 0;
		while (i > 0 && tr->st[i - 1].ret != addr)
			i--;
	}
	if (i > 0) {
		*to = i - 1;
		return 0;
	}
	if (!jumped || !t->nentries)
		return 1;
	i = depth;
	while (entry && i > 0 && !(tr->st[i - 1].kind == TK_PROF_KEY_ADDR &&
				   tr->st[i - 1].key >= entry && tr->st[i - 1].key <= addr))
		i--;
	*to = entry ? i : 0;
	return 0;
}

/* Tracing resumed at ADDR, as the profile reads it (tk_prof.h): at a function entry, a
 * call from untraced code; at an open call's return address, that call's callee
 * returned; after a jump out of the trace elsewhere, untraced code unwound the calls above
 * the innermost one of the function holding ADDR (longjmp, exceptions), or all of them. */
static int resume(struct tk_timeline *t, struct tl_track *tr, uint64_t addr, uint64_t time)
{
	int jumped = resume_jumped(tr->off_at, addr);
	uint64_t f = entry_below(t, addr);
	size_t d;

	tr->off_at = 0;
	if (!addr)
		return 0;
	if (f == addr)
		return push(t, tr, addr, TK_PROF_KEY_ADDR, 0, time);
	int rc = resume_depth(t, tr, addr, f, jumped, tr->depth, &d);
	return rc ? (rc < 0 ? rc : 0) : pop_to(t, tr, d, time);
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
		rc = slice(t, tr, 1, f, t->o.time_begin);
	}
	return rc;
}

/* ---- pipelines: an instruction slice with its stages nested, on a track per row and lane -- */
#define PL_LANES 8           /* lanes with their own track; higher lanes share the last */
#define PL_LABEL_MAX 200

struct pl_stage {
	uint32_t stage;
	uint16_t lane;
	uint8_t open;
	uint64_t b, e;
};

struct pl_insn {
	uint64_t id, sim_id, begin;
	uint32_t thread, row;
	uint32_t nst, cst;
	struct pl_stage *st;
	uint32_t label_len;
	uint32_t hashed_len;      /* label_len when label_hash was taken (Perfetto's names) */
	uint64_t label_hash;
	char label[PL_LABEL_MAX + 1];
};

/* uint64 -> uint32 open-addressing map (linear probing, backward-shift delete) */
struct u64map {
	uint64_t *k;
	uint32_t *v;              /* value + 1; 0 = empty */
	size_t mask, n;
};

/* A stage's names as the callback gave them, and its name's interned id (UINT32_MAX: not
 * yet): asked once instead of at every slice. */
#define PL_STAGES_KEPT 256
struct pl_stage_name {
	const char *sname, *lname;
	size_t slen;
	uint32_t nm;
	uint8_t known;
};

/* Instructions in flight by id: a slot per id modulo PL_RING (a simulator's ids count up,
 * so those in flight at once rarely share one), the rest in a map. A hashed map for all
 * was a tenth of the merging thread's time on a Kanata log's timeline. */
#define PL_RING 4096
struct pl_slot {
	uint64_t id;
	uint32_t ix;              /* pool index + 1; 0: empty */
};

struct pl {
	struct pl_stage_name stage_names[PL_STAGES_KEPT];
	struct pl_insn *in;       /* pool of live instructions */
	size_t nin, cin;
	uint32_t *free_in;
	size_t nfree;
	struct pl_slot ring[PL_RING];
	size_t nring;             /* slots in use */
	struct u64map ids;        /* instruction id -> pool index, when its slot is taken */
	uint64_t *rows;           /* rows in use, a bit each (the lowest free one: a word's
				     first zero, not a byte at a time) */
	size_t nrows, crows;      /* rows ever used; words allocated */
	struct tl_track **tracks; /* per (thread, row, lane); stable addresses */
	size_t ntracks, ctracks;
	struct u64map track_ix;   /* (thread, row, lane) key -> track index */
	uint32_t *threads;        /* threads seen, in order */
	size_t nthreads, cthreads;
	uint64_t t_max;
	uint32_t next_seq;
};

static size_t u64_hash(uint64_t k, size_t mask)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (size_t)k & mask;
}

static uint32_t *u64map_find(const struct u64map *m, uint64_t k)
{
	if (!m->v)
		return NULL;
	for (size_t i = u64_hash(k, m->mask);; i = (i + 1) & m->mask) {
		if (!m->v[i])
			return NULL;
		if (m->k[i] == k)
			return &m->v[i];
	}
}

static int u64map_put(struct u64map *m, uint64_t k, uint32_t v)
{
	if (!m->v || (m->n + 1) * 2 > m->mask + 1) {
		size_t cap = m->v ? (m->mask + 1) * 2 : 256;
		struct u64map nm = { calloc(cap, sizeof *nm.k), calloc(cap, sizeof *nm.v), cap - 1, 0 };
		if (!nm.k || !nm.v) {
			free(nm.k);
			free(nm.v);
			return -TK_E_NOMEM;
		}
		for (size_t i = 0; m->v && i <= m->mask; i++)
			if (m->v[i])
				u64map_put(&nm, m->k[i], m->v[i] - 1);
		free(m->k);
		free(m->v);
		*m = nm;
	}
	size_t i = u64_hash(k, m->mask);
	while (m->v[i] && m->k[i] != k)
		i = (i + 1) & m->mask;
	if (!m->v[i])
		m->n++;
	m->k[i] = k;
	m->v[i] = v + 1;
	return 0;
}

static void u64map_del(struct u64map *m, uint64_t k)
{
	uint32_t *p = u64map_find(m, k);
	if (!p)
		return;
	size_t i = (size_t)(p - m->v), j = i;
	m->v[i] = 0;
	m->n--;
	for (;;) {
		j = (j + 1) & m->mask;
		if (!m->v[j])
			return;
		size_t h = u64_hash(m->k[j], m->mask);
		/* move j back to i unless its home lies cyclically in (i, j] */
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		m->k[i] = m->k[j];
		m->v[i] = m->v[j];
		m->v[j] = 0;
		i = j;
	}
}

static void u64map_free(struct u64map *m)
{
	free(m->k);
	free(m->v);
}

static struct pl_insn *pl_find(struct pl *p, uint64_t id)
{
	const struct pl_slot *s = &p->ring[id & (PL_RING - 1)];
	if (s->ix && s->id == id)
		return &p->in[s->ix - 1];
	if (!p->ids.n)
		return NULL;
	uint32_t *v = u64map_find(&p->ids, id);
	return v ? &p->in[*v - 1] : NULL;
}

/* ID (not in flight yet) at pool index IX. */
static int pl_id_put(struct pl *p, uint64_t id, uint32_t ix)
{
	struct pl_slot *s = &p->ring[id & (PL_RING - 1)];
	if (s->ix)
		return u64map_put(&p->ids, id, ix);
	s->id = id;
	s->ix = ix + 1;
	p->nring++;
	return 0;
}

static void pl_id_del(struct pl *p, uint64_t id)
{
	struct pl_slot *s = &p->ring[id & (PL_RING - 1)];
	if (s->ix && s->id == id) {
		s->ix = 0;
		p->nring--;
	} else {
		u64map_del(&p->ids, id);
	}
}

/* The lowest free row, taken (as Konata draws them); SIZE_MAX: no memory. */
static size_t pl_row_take(struct pl *p)
{
	size_t w = 0, nw = (p->nrows + 63) / 64;
	while (w < nw && p->rows[w] == UINT64_MAX)
		w++;
	/* rows from nrows on are clear: the first clear bit is at most nrows */
	size_t row = w * 64 + (w < nw ? (size_t)__builtin_ctzll(~p->rows[w]) : 0);
	if (row == p->nrows) {
		if (row / 64 == p->crows) {
			size_t nc = p->crows ? p->crows * 2 : 4;
			uint64_t *nr = realloc(p->rows, nc * sizeof *nr);
			if (!nr)
				return SIZE_MAX;
			memset(nr + p->crows, 0, (nc - p->crows) * sizeof *nr);
			p->rows = nr;
			p->crows = nc;
		}
		p->nrows++;
	}
	p->rows[row / 64] |= (uint64_t)1 << (row % 64);
	return row;
}

/* Stage STAGE's names (see tk_timeline_opts.stage_name); its entry in the kept ones, or
 * NULL past them. */
static struct pl_stage_name *pl_stage_names(struct tk_timeline *t, unsigned stage,
					    const char **sname, const char **lname)
{
	struct pl_stage_name *k = stage < PL_STAGES_KEPT ? &t->pl->stage_names[stage] : NULL;

	if (k && k->known) {
		*sname = k->sname;
		*lname = k->lname;
		return k;
	}
	*sname = *lname = NULL;
	if (t->o.stage_name)
		*sname = t->o.stage_name(t->o.stage_ctx, stage, lname);
	if (k)
		*k = (struct pl_stage_name){ *sname, *lname, *sname ? strlen(*sname) : 0,
					     UINT32_MAX, 1 };
	return k;
}

/* The track of (thread, row, lane), named by LNAME (NULL: the number); started on first use. */
static struct tl_track *pl_track(struct tk_timeline *t, uint32_t thread, uint32_t row, unsigned lane,
				 const char *lname)
{
	struct pl *p = t->pl;
	if (lane >= PL_LANES)
		lane = PL_LANES - 1;
	uint64_t key = (uint64_t)thread << 32 | (uint64_t)row << 3 | lane;
	uint32_t *ix = u64map_find(&p->track_ix, key);
	if (ix)
		return p->tracks[*ix - 1];
	if (p->ntracks == p->ctracks) {
		size_t nc = p->ctracks ? p->ctracks * 2 : 64;
		struct tl_track **nt = realloc(p->tracks, nc * sizeof *nt);
		if (!nt)
			return NULL;
		p->tracks = nt;
		p->ctracks = nc;
	}
	struct tl_track *tr = calloc(1, sizeof *tr);
	if (!tr)
		return NULL;
	if (u64map_put(&p->track_ix, key, (uint32_t)p->ntracks) < 0) {
		free(tr);
		return NULL;
	}
	p->tracks[p->ntracks++] = tr;
	tr->id = row * PL_LANES + lane + 1;        /* Chrome tid within the thread's process */
	tr->uuid = 0x300000000ull + p->ntracks;
	tr->seq = p->next_seq++;

	char label[96];
	if (lname)
		snprintf(label, sizeof label, "row %u lane %s", row, lname);
	else
		snprintf(label, sizeof label, "row %u lane %u", row, lane);
	tr->name = strdup(label);
	if (!tr->name)
		return NULL;
	struct tk_buf *b = t->b;
	if (t->o.kind == TK_TIMELINE_CHROME) {
		tk_buf_puts(b, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
		tk_buf_u64(b, thread);
		tk_buf_puts(b, ",\"tid\":");
		tk_buf_u64(b, tr->id);
		tk_buf_puts(b, ",\"args\":{\"name\":");
		tk_buf_json_str(b, label, strlen(label));
		tk_buf_puts(b, "}}");
		tr->started = 1;
		return tr;
	}
	uint8_t pk[512], td[200];
	start_sequence(b, tr->seq);
	size_t m = put_uint(td, 1, tr->uuid);                 /* uuid */
	m += put_bytes(td + m, 2, label, strlen(label));      /* name */
	m += put_uint(td + m, 5, 0x200000000ull + thread);    /* parent_uuid: the thread's group */
	size_t k = put_uint(pk, 10, tr->seq);
	k += put_bytes(pk + k, 60, td, m);
	emit_packet(b, pk, k);
	tr->started = 1;
	return tr;
}

/* First sight of a thread: its group track (Perfetto) or process (Chrome). */
static int pl_thread(struct tk_timeline *t, uint32_t thread)
{
	struct pl *p = t->pl;
	for (size_t i = 0; i < p->nthreads; i++)
		if (p->threads[i] == thread)
			return 0;
	if (p->nthreads == p->cthreads) {
		size_t nc = p->cthreads ? p->cthreads * 2 : 8;
		uint32_t *nt = realloc(p->threads, nc * sizeof *nt);
		if (!nt)
			return -TK_E_NOMEM;
		p->threads = nt;
		p->cthreads = nc;
	}
	p->threads[p->nthreads++] = thread;
	if (!t->header_done)
		header(t);
	char name[48];
	snprintf(name, sizeof name, "thread %u", thread);
	if (t->o.kind == TK_TIMELINE_CHROME) {
		tk_buf_puts(t->b, t->first_json ? "\n" : ",\n");
		t->first_json = 0;
		tk_buf_puts(t->b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
		tk_buf_u64(t->b, thread);
		tk_buf_puts(t->b, ",\"args\":{\"name\":");
		tk_buf_json_str(t->b, name, strlen(name));
		tk_buf_puts(t->b, "}}");
		return t->b->err;
	}
	uint8_t td[96], pk[128];
	size_t m = put_uint(td, 1, 0x200000000ull + thread);  /* uuid */
	m += put_bytes(td + m, 2, name, strlen(name));        /* name */
	m += put_uint(td + m, 5, PROCESS_UUID);               /* parent_uuid */
	size_t k = put_uint(pk, 10, 1);
	k += put_bytes(pk + k, 60, td, m);
	emit_packet(t->b, pk, k);
	return t->b->err;
}

static int pl_begin(struct tk_timeline *t, const struct tk_event *e, uint64_t time)
{
	struct pl *p = t->pl;
	int rc;
	if (pl_find(p, e->addr))
		return 0;                /* an id begun twice: keep the first */
	if ((rc = pl_thread(t, e->track)) < 0)
		return rc;
	uint32_t ix;
	if (p->nfree) {
		ix = p->free_in[--p->nfree];
	} else {
		if (p->nin == p->cin) {
			size_t nc = p->cin ? p->cin * 2 : 64;
			struct pl_insn *ni = realloc(p->in, nc * sizeof *ni);
			uint32_t *nf = realloc(p->free_in, nc * sizeof *nf);
			if (nf)
				p->free_in = nf;
			if (!ni || !nf) {
				if (ni)
					p->in = ni;
				return -TK_E_NOMEM;
			}
			p->in = ni;
			p->cin = nc;
		}
		ix = (uint32_t)p->nin++;
		p->in[ix].st = NULL;
		p->in[ix].cst = 0;
	}
	struct pl_insn *in = &p->in[ix];
	in->id = e->addr;
	in->sim_id = e->addr2;
	in->begin = time;
	in->thread = e->track;
	in->nst = 0;
	in->label_len = 0;
	in->hashed_len = 0;
	size_t row = pl_row_take(p);
	if (row == SIZE_MAX)
		return -TK_E_NOMEM;
	in->row = (uint32_t)row;
	if (pl_id_put(p, e->addr, ix) < 0)
		return -TK_E_NOMEM;
	return 0;
}

static int pl_stage(struct tk_timeline *t, struct pl_insn *in, const struct tk_event *e, uint64_t time,
		    int begin)
{
	(void)t;
	if (!begin) {
		for (uint32_t i = in->nst; i > 0; i--) {
			struct pl_stage *s = &in->st[i - 1];
			if (s->open && s->stage == (uint32_t)e->arg) {
				s->open = 0;
				s->e = time;
				return 0;
			}
		}
		return 0;
	}
	if (in->nst == in->cst) {
		uint32_t nc = in->cst ? in->cst * 2 : 8;
		struct pl_stage *ns = realloc(in->st, nc * sizeof *ns);
		if (!ns)
			return -TK_E_NOMEM;
		in->st = ns;
		in->cst = nc;
	}
	struct pl_stage *s = &in->st[in->nst++];
	s->stage = (uint32_t)e->arg;
	s->lane = e->flags;
	s->open = 1;
	s->b = s->e = time;
	return 0;
}

static int pl_chrome_x(struct tk_timeline *t, uint32_t thread, const struct tl_track *tr,
		       const char *name, size_t len, uint64_t b, uint64_t e, const struct pl_insn *in)
{
	struct tk_buf *o = t->b;
	tk_buf_puts(o, ",\n{\"ph\":\"X\",\"name\":");
	tk_buf_json_str(o, name, len);
	tk_buf_puts(o, ",\"pid\":");
	tk_buf_u64(o, thread);
	tk_buf_puts(o, ",\"tid\":");
	tk_buf_u64(o, tr->id);
	tk_buf_puts(o, ",\"ts\":");
	tk_buf_fixed(o, (int64_t)chrome_ns(t, b), 3);
	tk_buf_puts(o, ",\"dur\":");
	tk_buf_fixed(o, (int64_t)(chrome_ns(t, e) - chrome_ns(t, b)), 3);
	if (in) {
		tk_buf_puts(o, ",\"args\":{\"id\":");
		tk_buf_u64(o, in->id);
		tk_buf_puts(o, ",\"sim_id\":");
		tk_buf_u64(o, in->sim_id);
		tk_buf_putc(o, '}');
	}
	tk_buf_putc(o, '}');
	return o->err;
}

/* Clip [*b, *e] to the window; 0 if nothing is left. */
static int pl_clip(const struct tk_timeline *t, uint64_t *b, uint64_t *e)
{
	if (*b >= t->window_end || *e < t->o.time_begin)
		return 0;
	if (*b < t->o.time_begin)
		*b = t->o.time_begin;
	if (*e > t->window_end)
		*e = t->window_end;
	return 1;
}

/* Write the instruction and its stages, then free its row. HOW: 0 retired, 1 flushed,
 * 2 still in flight. */
static int pl_end(struct tk_timeline *t, struct pl_insn *in, uint64_t end, int how)
{
	struct pl *p = t->pl;
	int rc = 0;
	uint64_t b = in->begin, e = end < b ? b : end;

	for (uint32_t i = 0; i < in->nst; i++)
		if (in->st[i].open || in->st[i].e > e) {
			in->st[i].open = 0;
			in->st[i].e = e;
		}
	if (pl_clip(t, &b, &e)) {
		if (t->slices >= t->max) {
			t->dropped++;
		} else {
			/* (copied, not printed: a million labels through snprintf showed) */
			static const char flushed[] = " (flushed)", in_flight[] = " (in flight)";
			char name[PL_LABEL_MAX + 48];
			int nl;
			if (in->label_len) {
				nl = (int)strnlen(in->label, in->label_len);   /* as "%.*s" */
				memcpy(name, in->label, (size_t)nl);
			} else {
				nl = snprintf(name, sizeof name, "#%llu", (unsigned long long)in->id);
			}
			if (how == 1) {
				memcpy(name + nl, flushed, sizeof flushed - 1);
				nl += (int)sizeof flushed - 1;
			} else if (how) {
				memcpy(name + nl, in_flight, sizeof in_flight - 1);
				nl += (int)sizeof in_flight - 1;
			}
			const char *sn, *ln = NULL;
			for (uint32_t i = 0; i < in->nst && !ln; i++)
				if (!in->st[i].lane)
					pl_stage_names(t, in->st[i].stage, &sn, &ln);
			struct tl_track *row = pl_track(t, in->thread, in->row, 0, ln);
			if (!row)
				return -TK_E_NOMEM;
			t->slices++;
			if (t->o.kind == TK_TIMELINE_PERFETTO) {
				/* a retired instruction's name is its label, hashed when it came */
				uint32_t nm = !how && in->label_len && in->hashed_len == in->label_len
					? names_intern_hashed(&t->names, name, (size_t)nl, in->label_hash)
					: names_intern(&t->names, name, (size_t)nl);
				if (nm == UINT32_MAX)
					return -TK_E_NOMEM;
				rc = pf_slice(t, row, 1, nm, b);
			}
			/* lane 0 nests in the instruction's slice; other lanes on their own tracks */
			for (uint32_t i = 0; i < in->nst && rc >= 0; i++) {
				struct pl_stage *s = &in->st[i];
				uint64_t sb = s->b, se = s->e;
				if (!pl_clip(t, &sb, &se))
					continue;
				char buf[24];
				struct pl_stage_name *k = pl_stage_names(t, s->stage, &sn, &ln);
				struct tl_track *tr = s->lane ? pl_track(t, in->thread, in->row, s->lane, ln) : row;
				if (!tr)
					return -TK_E_NOMEM;
				size_t sl;
				if (!sn) {
					sl = (size_t)snprintf(buf, sizeof buf, "stage %u", s->stage);
					sn = buf;
				} else {
					sl = k ? k->slen : strlen(sn);
				}
				t->slices++;
				if (t->o.kind == TK_TIMELINE_CHROME) {
					rc = pl_chrome_x(t, in->thread, tr, sn, sl, sb, se, NULL);
					continue;
				}
				uint32_t nm = k && k->nm != UINT32_MAX ? k->nm : names_intern(&t->names, sn, sl);
				if (nm == UINT32_MAX)
					return -TK_E_NOMEM;
				if (k)
					k->nm = nm;   /* the same string each time: "stage N" too */
				if ((rc = pf_slice(t, tr, 1, nm, sb)) >= 0)
					rc = pf_slice(t, tr, 0, 0, se);
			}
			if (rc >= 0 && t->o.kind == TK_TIMELINE_CHROME)
				rc = pl_chrome_x(t, in->thread, row, name, (size_t)nl, b, e, in);
			else if (rc >= 0)
				rc = pf_slice(t, row, 0, 0, e);
		}
	}
	p->rows[in->row / 64] &= ~((uint64_t)1 << (in->row % 64));
	uint32_t ix = (uint32_t)(in - p->in);
	pl_id_del(p, in->id);
	p->free_in[p->nfree++] = ix;
	return rc;
}

/* LABEL_HASH: names_hash of a label event's text (as pl_end names it), or NULL. */
static int pl_event(struct tk_timeline *t, const struct tk_event *e, const uint64_t *label_hash)
{
	struct pl_insn *in;
	if (!t->pl && !(t->pl = calloc(1, sizeof *t->pl)))
		return -TK_E_NOMEM;
	struct pl *p = t->pl;
	if (!p->next_seq)
		p->next_seq = PL_SEQ_BASE;
	uint64_t time = e->time != TK_TIME_NONE ? e->time : p->t_max;
	if (e->time != TK_TIME_NONE && e->time > p->t_max)
		p->t_max = e->time;
	if (e->kind == TK_EV_INSN_BEGIN)
		return pl_begin(t, e, time);
	if (!(in = pl_find(p, e->addr)))
		return 0;
	switch (e->kind) {
	case TK_EV_STAGE_BEGIN:
		return pl_stage(t, in, e, time, 1);
	case TK_EV_STAGE_END:
		return pl_stage(t, in, e, time, 0);
	case TK_EV_RETIRE:
		return pl_end(t, in, time, 0);
	case TK_EV_FLUSH:
		return pl_end(t, in, time, 1);
	case TK_EV_TYPED: {
		size_t n = e->data ? e->count : 0, room = PL_LABEL_MAX - in->label_len;
		if (n > room)
			label_hash = NULL;
		if (n && room)
			memcpy(in->label + in->label_len, e->data, n < room ? n : room);
		in->label_len += (uint32_t)(n < room ? n : room);
		if (label_hash && in->label_len == n) {   /* the whole label, hashed ahead */
			in->label_hash = *label_hash;
			in->hashed_len = in->label_len;
		}
		return 0;
	}
	}
	return 0;
}

/* Instructions still in flight end at the last time seen, in id order of their pool. */
static int pl_finish(struct tk_timeline *t)
{
	struct pl *p = t->pl;
	int rc = 0;
	if (!p)
		return 0;
	while ((p->nring || p->ids.n) && rc >= 0) {
		/* the oldest first: lowest begin time, then id */
		struct pl_insn *best = NULL;
		for (size_t i = 0; i < PL_RING + (p->ids.v ? p->ids.mask + 1 : 0); i++) {
			uint32_t v = i < PL_RING ? p->ring[i].ix : p->ids.v[i - PL_RING];
			if (!v)
				continue;
			struct pl_insn *in = &p->in[v - 1];
			if (!best || in->begin < best->begin || (in->begin == best->begin && in->id < best->id))
				best = in;
		}
		rc = pl_end(t, best, p->t_max, 2);
	}
	return rc;
}

static void pl_free(struct pl *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nin; i++)
		free(p->in[i].st);
	free(p->in);
	free(p->free_in);
	u64map_free(&p->ids);
	free(p->rows);
	for (size_t i = 0; i < p->ntracks; i++) {
		free(p->tracks[i]->name);
		free(p->tracks[i]);
	}
	free(p->tracks);
	u64map_free(&p->track_ix);
	free(p->threads);
	free(p);
}

static int is_label(const struct tk_event *e)
{
	return e->kind == TK_EV_TYPED && e->flags == TK_TYPED_INSN_LABEL;
}

/* The hash Perfetto's name of a label event's instruction has when it retires (its text,
 * as pl_end copies it), its slot in the names asked for now. */
static uint64_t label_ahead(struct tk_timeline *t, const struct tk_event *e)
{
	size_t n = !e->data ? 0 : e->count < PL_LABEL_MAX ? e->count : PL_LABEL_MAX;
	uint64_t h = names_hash(e->data, n ? strnlen(e->data, n) : 0);
	names_prefetch(&t->names, h);
	return h;
}

static int tl_events(struct tk_timeline *t, const struct tk_event *ev, size_t n)
{
	int rc = 0;
	struct tl_track *tr = NULL;
	/* A simulator's labels are nearly all new names, each a cache miss in a table of a
	 * million; a label comes just before its retire, so its slot is fetched TL_AHEAD
	 * events early. */
	int hashing = t->o.kind == TK_TIMELINE_PERFETTO && t->pl;   /* (a pipeline's events) */
	size_t ahead = hashing ? 0 : n;
	for (size_t i = 0; i < n && rc >= 0; i++) {
		const struct tk_event *e = &ev[i];
		for (; ahead < n && ahead < i + TL_AHEAD; ahead++)
			if (is_label(&ev[ahead]))
				t->label_hash[ahead % TL_AHEAD] = label_ahead(t, &ev[ahead]);
		if ((e->kind >= TK_EV_INSN_BEGIN && e->kind <= TK_EV_FLUSH) || (is_label(e) && t->pl)) {
			const uint64_t *lh = hashing && is_label(e) ? &t->label_hash[i % TL_AHEAD] : NULL;
			/* Chrome's pipeline slices are raw bytes: the block goes on when they fill it */
			if ((rc = pl_event(t, e, lh)) >= 0 && t->b->len >= TL_RAW_MAX)
				rc = rec_done(t);
			continue;
		}
		if (!tr || tr->id != e->track) {
			tr = get_track(t, e->track);
			if (!tr)
				return -TK_E_NOMEM;
		}
		uint64_t time = e->time != TK_TIME_NONE ? e->time : tr->t_last, before = tr->t_last;
		if (e->time != TK_TIME_NONE)
			tr->t_last = e->time;
		if (time != TK_TIME_NONE) {
			int inside = in_window(t, time);
			/* (or the track stepped over the whole window: its open calls span it, as
			 * the profile's window counts them) */
			if (!tr->in_window && tr->depth &&
			    (inside || (time >= t->window_end && before != TK_TIME_NONE &&
					before < t->o.time_begin)))
				rc = enter_window(t, tr);
			else if (inside)
				tr->in_window = 1;
			if (time >= t->window_end && tr->in_window) {
				/* leaving the window: close what is open, at its end */
				for (size_t k = tr->depth; k > 0 && rc >= 0; k--) {
					struct tl_frame *f = &tr->st[k - 1];
					if (f->emitted) {
						rc = slice(t, tr, 0, f, t->window_end);
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
		case TK_EV_FUNC_TAIL_EXIT:
			rc = pop_to(t, tr, exit_depth(tr, tr->depth, e->addr, e->flags & TK_FN_ADDR ? TK_PROF_KEY_ADDR :
											  TK_PROF_KEY_ID),
				    time);
			break;
		case TK_EV_RETURN: {
			size_t d;
			if ((rc = return_depth(tr, e->addr2, tr->depth, &d)) == 0)
				rc = pop_to(t, tr, d, time);
			else if (rc > 0)
				rc = 0;
			break;
		}
		case TK_EV_GAP:
			tr->off_at = 0;
			rc = pop_to(t, tr, 0, time);
			break;
		case TK_EV_DISABLE:
			tr->off_at = e->addr;
			break;
		case TK_EV_ENABLE:
			rc = resume(t, tr, e->addr, time);
			break;
		default:
			break;
		}
	}
	if (rc >= 0)
		rc = rec_done(t);
	if (rc == -TK_E_NOMEM)
		t->nomem = 1;
	return rc;
}

/* Call filters: the filtered profile's calls, as the entries and exits of a clean stack. */
static int filtered_begin(void *ctx, uint32_t track, uint64_t key, uint32_t kind, uint64_t time)
{
	struct tk_event e = { .kind = TK_EV_FUNC_ENTER, .track = track, .time = time, .addr = key,
			      .flags = kind == TK_PROF_KEY_ADDR ? TK_FN_ADDR : 0 };

	return tl_events(ctx, &e, 1);
}

static int filtered_end(void *ctx, uint32_t track, uint64_t time)
{
	struct tk_timeline *t = ctx;
	struct tl_track *tr = get_track(t, track);

	if (!tr)
		return -TK_E_NOMEM;
	if (!tr->depth)
		return -TK_E_INTERNAL;
	const struct tl_frame *f = &tr->st[tr->depth - 1];
	struct tk_event e = { .kind = TK_EV_FUNC_EXIT, .track = track, .time = time, .addr = f->key,
			      .flags = f->kind == TK_PROF_KEY_ADDR ? TK_FN_ADDR : 0 };

	return tl_events(t, &e, 1);
}

int tk_timeline_events(struct tk_timeline *t, const struct tk_event *ev, size_t n)
{
	if (t->finished)
		return -TK_E_BAD_STATE;
	return t->prof ? tk_prof_events(t->prof, ev, n) : tl_events(t, ev, n);
}

/* The call filters of T's options: a profile that tells T its calls. */
static int filtered_new(struct tk_timeline *t)
{
	struct tk_run_filter f = { 0 };
	int err = 0;

	if (!t->o.filter || !tk_run_filter_calls(t->o.filter))
		return 0;
	memcpy(&f, t->o.filter, t->o.filter->sz < sizeof f ? t->o.filter->sz : sizeof f);
	f.sz = sizeof f;
	f.calls = (struct tk_prof_calls){ filtered_begin, filtered_end, t };
	struct tk_sym *sym = t->o.sym;
	if (!sym && !(sym = t->own_sym = tk_sym_new(NULL, &err)))
		return err;
	t->prof = tk_run_filter_prof(&f, sym, t->o.clock, &err);
	return t->prof ? 0 : err;
}

static int tl_sink_fn(void *ctx, const struct tk_event *ev, size_t n)
{
	return tk_timeline_events(ctx, ev, n);
}

/* The events that tl_events does more with than read their track and time (a bit per
 * kind; the others are "ignored" below). */
#define TL_USED (1ull << TK_EV_CALL | 1ull << TK_EV_RETURN | 1ull << TK_EV_FUNC_ENTER |             \
		 1ull << TK_EV_FUNC_EXIT | 1ull << TK_EV_FUNC_TAIL_EXIT | 1ull << TK_EV_GAP |         \
		 1ull << TK_EV_DISABLE | 1ull << TK_EV_ENABLE | 1ull << TK_EV_TYPED |                 \
		 1ull << TK_EV_INSN_BEGIN | 1ull << TK_EV_STAGE_BEGIN | 1ull << TK_EV_STAGE_END |     \
		 1ull << TK_EV_RETIRE | 1ull << TK_EV_FLUSH)
_Static_assert(TK_EV__COUNT <= 64, "a bit per event kind");

/* Without a window or call filters an ignored event (an executed block, a time packet:
 * most of an Intel PT stream) only names its track (the first event of a track makes it:
 * kept) and sets the track's last time once it has one (before that, a first time may
 * open slices pushed without one: all kept up to it). After that, of a track's ignored
 * events only the time of the last one before the track's next event counts, and that
 * event (or a later one) overwrites it: so the time is held aside, given to the next event
 * if it has none, dropped if it has one; the ones still held at the part's end go there as
 * time events (they make no record: where they go among other tracks' events does not
 * matter). Tracks past THIN_TRACKS in one part keep all their events. */
#define THIN_TRACKS 8

static inline int tl_used(const struct tk_event *e)
{
	return e->kind < 64 && (TL_USED >> e->kind & 1);
}

/* *E, at TIME, into the hold at OUT, past the cache where it can (streamed, whole lines,
 * not read first): the worker's cache is for its decoder (a chunk's hold, megabytes,
 * evicted the walker's blocks: its walk took a tenth longer at -j 2 than at -j 1), and
 * the hold is read on another thread. (Against a prefetch for writing: the walk's
 * timeline at -j 2 -3 % CPU, 20 interleaved rounds; XRay's -4 %; libc's and branch
 * traces' the same, though a hold that is not lean has its prepare read them back from
 * memory, not from the cache: prepare_more in event_vec.c.) */
static inline void hold_store(struct tk_event *out, const struct tk_event *e, uint64_t time)
{
	tk_event_stream(out, e, time);
}

static size_t tl_thin(void *ctx, const struct tk_event *ev, size_t n, struct tk_event *out)
{
	struct thin_track { uint32_t track; int timed, holding; uint64_t held; } tr[THIN_TRACKS];
	size_t ntr = 0, nout = 0, k = 0;

	(void)ctx;
	for (size_t i = 0; i < n; i++) {
		/* the usual run: events of the track before, which has a time: used ones copied
		 * (a held time given to one without), the others' times held (an Intel PT
		 * walk's blocks between its calls) */
		if (k < ntr && tr[k].timed) {
			struct thin_track *t = &tr[k];
			for (; i < n && ev[i].track == t->track; i++) {
				const struct tk_event *e = &ev[i];
				if (!tl_used(e)) {
					if (e->time != TK_TIME_NONE) {
						t->held = e->time;
						t->holding = 1;
					}
					continue;
				}
				hold_store(&out[nout++], e, t->holding && e->time == TK_TIME_NONE ? t->held : e->time);
				t->holding = 0;
			}
			if (i == n)
				break;
		}
		const struct tk_event *e = &ev[i];
		if (k >= ntr || tr[k].track != e->track) {
			k = 0;
			while (k < ntr && tr[k].track != e->track)
				k++;
			if (k == ntr) {
				if (ntr == THIN_TRACKS) {
					out[nout++] = *e;
					continue;
				}
				tr[ntr++] = (struct thin_track){ e->track, 0, 0, 0 };
			}
		}
		if (!tl_used(e) && tr[k].timed) {
			if (e->time != TK_TIME_NONE) {   /* its time alone (not a payload) */
				tr[k].held = e->time;
				tr[k].holding = 1;
			}
			continue;
		}
		if (e->time != TK_TIME_NONE)
			tr[k].timed = 1;
		out[nout] = *e;
		if (tr[k].holding && e->time == TK_TIME_NONE)
			out[nout].time = tr[k].held;
		tr[k].holding = 0;
		nout++;
	}
	for (k = 0; k < ntr; k++)
		if (tr[k].holding)
			out[nout++] = (struct tk_event){ .kind = TK_EV_TIME, .time = tr[k].held,
							 .track = tr[k].track };
	tk_stream_fence();   /* (the streamed stores, before another thread reads them) */
	return nout;
}

/* ---- a chunk's pass ahead of its turn (tk_sink.prepare) ------------------------------------ */

/* Without a window, call filters or pipelines, most of a held chunk's pass needs nothing
 * from the events before it: a call's slice begins, and a return to a frame the chunk
 * opened ends slices, whatever lies below on the stack. So the worker that holds the
 * chunk runs the pass over it as its events come, with every track's stack begun empty
 * (tl_prepare), and the chunk's turn on the pass's thread (tl_take) only does what needs
 * the stacks: the exits, returns, gaps and resumes that reach below the chunk's own
 * frames (operations, their ends put among the chunk's records), and the checks of what
 * the chunk took for granted where only the frames below could decide (that none of them
 * returns to an address, that tracing did not stop elsewhere). The chunk's pass stops
 * where it would need the state before the chunk (the events from there on go through
 * the serial pass): an event without a time before its track has one in the chunk, a
 * resume that unwinds below the chunk's frames, a return to 0 below TLP_RETURN_SEARCH of
 * them, pipeline events, more than TLP_TRACKS tracks. A chunk whose guesses are wrong,
 * whose slices would cross the cap, that would describe a track, or whose first time
 * would open slices pushed without one goes through the serial pass whole. */

#define TLP_RETURN_SEARCH 256   /* frames searched for a return to 0; deeper: the serial pass */

static void prep_free(struct tl_prep *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < TLP_TRACKS; i++) {
		free(p->tr[i].st);
		tk_retset_free(&p->tr[i].rets);
	}
	free(p->rec);
	free(p->ops);
	free(p->map.slot);
	free(p->key);
	free(p->kind);
	free(p->tmask);
	free(p->gid);
	free(p->gstr);
	free(p->canon);
	free(p->ends);
	free(p->intern);
	tk_buf_free(&p->bytes);
	free(p);
}

/* Runs' memory kept for the next chunks: page faults on fresh memory for every chunk
 * cost more system time than the pass saved. */
#define TLP_SPARES (2 * TL_HELPERS + 4)

/* P done with: kept for another chunk (emptied, its memory kept), or freed. */
static void prep_done(struct tk_timeline *t, struct tl_prep *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&t->lock);
	if (t->nspare < TLP_SPARES) {
		p->next = t->spare;
		t->spare = p;
		t->nspare++;
		p = NULL;
	}
	pthread_mutex_unlock(&t->lock);
	prep_free(p);
}

/* An empty run, or NULL. */
static struct tl_prep *prep_get(struct tk_timeline *t)
{
	struct tl_prep *p = NULL;

	pthread_mutex_lock(&t->lock);
	if (t->spare) {
		p = t->spare;
		t->spare = p->next;
		t->nspare--;
	}
	pthread_mutex_unlock(&t->lock);
	if (!p && !(p = calloc(1, sizeof *p)))
		return NULL;
	p->nev = p->last = p->nrec = p->nops = p->ntr = p->nnames = p->nends = 0;
	p->cut = SIZE_MAX;
	p->begins = 0;
	p->bytes.len = 0;
	p->bytes.err = 0;
	if (p->map.slot)   /* (ids UINT32_MAX: empty) */
		memset(p->map.slot, 0xff, (p->map.mask + 1) * sizeof *p->map.slot);
	p->map.n = 0;
	return p;
}

static struct tlp_track *prep_track(struct tl_prep *p, uint32_t id, size_t *last)
{
	if (*last < p->ntr && p->tr[*last].id == id)
		return &p->tr[*last];
	for (size_t i = 0; i < p->ntr; i++)
		if (p->tr[i].id == id) {
			*last = i;
			return &p->tr[i];
		}
	if (p->ntr == TLP_TRACKS)
		return NULL;
	struct tlp_track *lt = &p->tr[p->ntr];
	struct tlp_frame *st = lt->st;   /* (memory kept from an earlier chunk) */
	size_t cap = lt->cap;
	struct tk_retset rets = lt->rets;
	memset(lt, 0, sizeof *lt);
	lt->st = st;
	lt->cap = cap;
	lt->rets = rets;
	tk_retset_clear(&lt->rets);
	lt->id = id;
	lt->t_last = TK_TIME_NONE;
	lt->first_rec = SIZE_MAX;
	*last = p->ntr++;
	return lt;
}

/* The chunk's number of (KEY, KIND), given in order of first use; UINT32_MAX: no memory. */
static __attribute__((noinline)) uint32_t prep_name_new(struct tl_prep *p, uint64_t key, uint32_t kind)
{
	struct keyname *slot = keymap_slot(&p->map, key, kind);
	if (!slot)
		return UINT32_MAX;
	if (p->nnames == p->cnames) {
		size_t nc = p->cnames ? 2 * p->cnames : 256;
		uint64_t *nk = realloc(p->key, nc * sizeof *nk);
		if (nk)
			p->key = nk;
		uint32_t *nd = realloc(p->kind, nc * sizeof *nd);
		if (nd)
			p->kind = nd;
		uint64_t *nm = realloc(p->tmask, nc * sizeof *nm);
		if (nm)
			p->tmask = nm;
		if (!nk || !nd || !nm)
			return UINT32_MAX;
		p->cnames = nc;
	}
	p->key[p->nnames] = key;
	p->kind[p->nnames] = kind;
	p->tmask[p->nnames] = 0;
	*slot = (struct keyname){ key, kind, (uint32_t)p->nnames };
	p->map.n++;
	return (uint32_t)p->nnames++;
}

static inline uint32_t prep_name(struct tl_prep *p, uint64_t key, uint32_t kind)
{
	uint32_t id = keymap_find(&p->map, key, kind);
	return id != UINT32_MAX ? id : prep_name_new(p, key, kind);
}

static inline void prep_rec(struct tl_prep *p, struct tlp_track *lt, uint32_t name,
			    uint64_t ticks, int begin)
{
	struct tlp_rec r = { ticks, name, (uint16_t)(lt - p->tr), (uint8_t)begin };
#if defined(__SSE2__) && defined(__x86_64__)
	/* streamed past the cache (whole lines, not read first), as the holds are: the run is
	 * read once, in order, by the merging thread on the other core */
	_Static_assert(sizeof r == 16, "one 16-byte store");
	struct tlp_rec *out = &p->rec[p->nrec++];
	if (((uintptr_t)out & 15) == 0) {
		__m128i v;
		memcpy(&v, &r, sizeof v);
		_mm_stream_si128((__m128i *)out, v);
	} else {
		*out = r;
	}
#else
	p->rec[p->nrec++] = r;
#endif
	if (ticks > lt->max_ticks)
		lt->max_ticks = ticks;
	lt->has_rec = 1;
}

static int prep_push(struct tl_prep *p, struct tlp_track *lt, uint64_t key, uint32_t kind,
		     uint64_t ret, uint64_t time)
{
	if (lt->depth == lt->cap) {
		size_t nc = lt->cap ? 2 * lt->cap : 64;
		struct tlp_frame *ns = realloc(lt->st, nc * sizeof *ns);
		if (!ns)
			return -TK_E_NOMEM;
		lt->st = ns;
		lt->cap = nc;
	}
	uint32_t name = prep_name(p, key, kind);
	if (name == UINT32_MAX)
		return -TK_E_NOMEM;
	lt->st[lt->depth++] = (struct tlp_frame){ key, ret, kind, name };
	p->tmask[name] |= 1ull << (lt - p->tr);
	if (lt->first_rec == SIZE_MAX)
		lt->first_rec = p->nrec;
	prep_rec(p, lt, name, time, 1);
	p->begins++;
	return 0;
}

static void prep_pop(struct tl_prep *p, struct tlp_track *lt, size_t depth, uint64_t time)
{
	while (lt->depth > depth) {
		const struct tlp_frame *f = &lt->st[--lt->depth];
		tk_retset_popped(&lt->rets, f->ret, lt->depth);
		prep_rec(p, lt, f->name, time, 0);
	}
}

static int prep_op(struct tl_prep *p, const struct tlp_track *lt, uint32_t what, uint64_t addr,
		   uint32_t kind, uint64_t time)
{
	if (p->nops == p->cops) {
		size_t nc = p->cops ? 2 * p->cops : 64;
		struct tlp_op *no = realloc(p->ops, nc * sizeof *no);
		if (!no)
			return -TK_E_NOMEM;
		p->ops = no;
		p->cops = nc;
	}
	p->ops[p->nops++] = (struct tlp_op){ .at = p->nrec, .addr = addr, .time = time, .what = what,
					     .kind = kind, .track = (uint16_t)(lt - p->tr) };
	return 0;
}

/* Of LT's frames [0, DEPTH), the innermost that returns to ADDR: its index + 1; 0 if
 * none does; SIZE_MAX if that is not known (no memory, or a search for 0 stopped short of
 * the bottom: TLP_RETURN_SEARCH). */
static size_t prep_ret_find(struct tlp_track *lt, size_t depth, uint64_t addr)
{
	size_t lo = depth > TLP_RETURN_SEARCH ? depth - TLP_RETURN_SEARCH : 0, j = depth;

	if (addr) {   /* (deep stacks: a random walk's) */
		struct tk_retset_stack st = { lt->st, sizeof *lt->st, offsetof(struct tlp_frame, ret) };
		if (tk_retset_sync(&lt->rets, st, lt->depth) < 0)
			return SIZE_MAX;
		if (!tk_retset_has(&lt->rets, addr))
			return 0;
		lo = 0;
	}
	while (j > lo && lt->st[j - 1].ret != addr)
		j--;
	return j > lo || lo == 0 ? j : SIZE_MAX;
}

/* Tracing resumed at ADDR on LT (resume), as far as the chunk decides: a function entry
 * opens a frame; a return address of one of the chunk's frames closes frames; else, with
 * frames open, no frame below returns there and tracing did not stop elsewhere (both
 * checked at the chunk's turn), or it did and the frame to unwind to is the chunk's; with
 * none open, the frames below decide (an operation). 1 if it cannot be decided here. */
static int prep_resume(const struct tk_timeline *t, struct tl_prep *p, struct tlp_track *lt,
		       uint64_t addr, uint64_t time)
{
	uint64_t entry = entry_below(t, addr);
	size_t d = lt->depth, to = SIZE_MAX;
	int known = lt->off_known, not_ret = 0, not_jumped = 0;
	uint64_t off = lt->off_at;

	if (addr && entry != addr && d) {
		size_t j = prep_ret_find(lt, d, addr);
		if (j == SIZE_MAX)
			return 1;
		if (j) {
			to = j - 1;
		} else {
			int jumped = known && resume_jumped(off, addr);
			not_ret = 1;
			not_jumped = !known && t->nentries;
			if (jumped && t->nentries) {   /* unwound to the frame of ADDR's function */
				size_t i = d;
				while (entry && i > 0 && !(lt->st[i - 1].kind == TK_PROF_KEY_ADDR &&
							   lt->st[i - 1].key >= entry && lt->st[i - 1].key <= addr))
					i--;
				if (!entry || !i)   /* (all frames end, or one below the chunk's) */
					return 1;
				to = i;
			}
		}
	}
	lt->off_known = 1;
	lt->off_at = 0;
	if (!addr)
		return 0;
	if (entry == addr)
		return prep_push(p, lt, addr, TK_PROF_KEY_ADDR, 0, time);
	if ((not_ret && prep_op(p, lt, TLP_NOT_RET, addr, 0, time) < 0) ||
	    (not_jumped && prep_op(p, lt, TLP_NOT_JUMPED, addr, 0, time) < 0))
		return -TK_E_NOMEM;
	if (to != SIZE_MAX)
		prep_pop(p, lt, to, time);
	if (d)
		return 0;
	if (prep_op(p, lt, TLP_RESUME, addr, 0, time) < 0)
		return -TK_E_NOMEM;
	p->ops[p->nops - 1].entry = entry;
	p->ops[p->nops - 1].off = off;
	p->ops[p->nops - 1].off_known = (uint8_t)known;
	return 0;
}

/* E at TIME on LT as tl_events does it, as far as the chunk's own frames decide: 0, 1 if
 * they do not (nothing done), or -TK_E_NOMEM. */
static int prep_event(const struct tk_timeline *t, struct tl_prep *p, struct tlp_track *lt,
		      const struct tk_event *e, uint64_t time)
{
	switch (e->kind) {
	case TK_EV_DISABLE:
		lt->off_known = 1;
		lt->off_at = e->addr;
		return 0;
	case TK_EV_ENABLE:
		return prep_resume(t, p, lt, e->addr, time);
	case TK_EV_CALL:
		return prep_push(p, lt, e->addr2, TK_PROF_KEY_ADDR, e->arg, time);
	case TK_EV_FUNC_ENTER:
		return prep_push(p, lt, e->addr, e->flags & TK_FN_ADDR ? TK_PROF_KEY_ADDR : TK_PROF_KEY_ID, 0,
				 time);
	case TK_EV_FUNC_EXIT:
	case TK_EV_FUNC_TAIL_EXIT: {
		uint32_t kind = e->flags & TK_FN_ADDR ? TK_PROF_KEY_ADDR : TK_PROF_KEY_ID;
		size_t d = lt->depth;
		while (d && !(lt->st[d - 1].key == e->addr && lt->st[d - 1].kind == kind))
			d--;
		prep_pop(p, lt, d ? d - 1 : 0, time);
		return d ? 0 : prep_op(p, lt, TLP_EXIT, e->addr, kind, time);
	}
	case TK_EV_RETURN: {
		size_t d = lt->depth;
		if (!d)
			return prep_op(p, lt, TLP_RETURN, e->addr2, 0, time);
		if (lt->st[d - 1].ret != e->addr2) {
			/* the innermost below the top that returns there; none: the top alone
			 * ends, if no frame below the chunk's returns there either */
			size_t j = prep_ret_find(lt, d - 1, e->addr2);
			if (j == SIZE_MAX)
				return 1;
			if (j)
				d = j;
			else if (prep_op(p, lt, TLP_NOT_RET, e->addr2, 0, time) < 0)
				return -TK_E_NOMEM;
		}
		prep_pop(p, lt, d - 1, time);
		return 0;
	}
	case TK_EV_GAP:
		lt->off_known = 1;
		lt->off_at = 0;
		prep_pop(p, lt, 0, time);
		return prep_op(p, lt, TLP_GAP, 0, 0, time);
	default:
		return 0;
	}
}

#define TLP_ACTS (1ull << TK_EV_CALL | 1ull << TK_EV_RETURN | 1ull << TK_EV_FUNC_ENTER |              \
		  1ull << TK_EV_FUNC_EXIT | 1ull << TK_EV_FUNC_TAIL_EXIT | 1ull << TK_EV_GAP |          \
		  1ull << TK_EV_ENABLE | 1ull << TK_EV_DISABLE)

/* tk_sink.prepare: on the producer's thread, the next events EV[0..n) of a held chunk
 * (PREPARED: what its earlier ones made, or NULL) passed as far as the chunk can be
 * without the state before it (above), as they are held. NULL: nothing done ahead. */
static void *tl_prepare(void *ctx, void *prepared, const struct tk_event *ev, size_t n)
{
	struct tk_timeline *t = ctx;
	struct tl_prep *p = prepared;
	size_t i;

	if (!p && (__atomic_load_n(&t->prep_off, __ATOMIC_RELAXED) || !(p = prep_get(t))))
		return NULL;
	if (p->cut != SIZE_MAX) {   /* past the cut: the serial pass's */
		p->nev += n;
		return p;
	}
	/* a slice begin and end per frame: at most one record an event, and an end for each
	 * frame open now or begun in these events */
	size_t need = p->nrec + 2 * n;
	for (size_t k = 0; k < p->ntr; k++)
		need += p->tr[k].depth;
	if (need > p->crec) {
		size_t nc = p->crec ? p->crec : 4096;
		while (nc < need)
			nc *= 2;
		struct tlp_rec *nr = tk_realloc_huge(p->rec, p->nrec * sizeof *nr, nc * sizeof *nr);
		if (!nr)
			goto fail;
		p->rec = nr;
		p->crec = nc;
	}
	for (i = 0; i < n; i++) {
		const struct tk_event *e = &ev[i];
		if ((e->kind >= TK_EV_INSN_BEGIN && e->kind <= TK_EV_FLUSH) ||
		    (e->kind == TK_EV_TYPED && e->flags == TK_TYPED_INSN_LABEL))
			break;
		size_t ntr = p->ntr;
		struct tlp_track *lt = prep_track(p, e->track, &p->last);
		if (!lt)
			break;
		uint64_t time = e->time != TK_TIME_NONE ? e->time : lt->t_last;
		int acts = e->kind < 64 && (TLP_ACTS >> e->kind & 1);
		if (acts && time == TK_TIME_NONE) {
			p->ntr = ntr;   /* (a track met first here: not the chunk's) */
			break;
		}
		lt->t_last = time;
		int rc = acts ? prep_event(t, p, lt, e, time) : 0;
		if (rc < 0)
			goto fail;
		if (rc)
			break;
	}
	if (i < n)
		p->cut = p->nev + i;
	p->nev += n;
	if (p->cut) {
		tk_stream_fence();   /* (prep_rec's streamed stores, before another thread reads them) */
		return p;
	}
fail:
	tk_stream_fence();   /* (... or writes P's memory again, as a spare) */
	prep_done(t, p);
	return NULL;
}

static void tl_drop(void *ctx, void *prepared)
{
	prep_done(ctx, prepared);
}

/* Whether a frame of TR's [0, DEPTH) returns to ADDR. */
static int has_ret(struct tl_track *tr, uint64_t addr, size_t depth, int *err)
{
	if (addr && (*err = tk_retset_sync(&tr->rets, track_stack(tr), tr->depth)) < 0)
		return 0;
	if (addr && !tk_retset_has(&tr->rets, addr))
		return 0;
	for (size_t i = depth; i > 0; i--)
		if (tr->st[i - 1].ret == addr)
			return 1;
	return 0;
}

/* The depth operation OP leaves TR at with its frames [0, DEPTH) open: *TO. 0, 1 if
 * what the chunk took for granted is not so, or -TK_E_NOMEM. */
static int op_depth(const struct tk_timeline *t, struct tl_track *tr, const struct tlp_op *op, size_t depth,
		    size_t *to)
{
	int rc = 0;

	*to = depth;
	switch (op->what) {
	case TLP_EXIT:
		*to = exit_depth(tr, depth, op->addr, op->kind);
		return 0;
	case TLP_RETURN:
		rc = return_depth(tr, op->addr, depth, to);
		break;
	case TLP_RESUME:
		rc = resume_depth(t, tr, op->addr, op->entry,
				  resume_jumped(op->off_known ? op->off : tr->off_at, op->addr), depth, to);
		break;
	case TLP_GAP:
		*to = 0;
		return 0;
	case TLP_NOT_RET: {
		int err = 0, has = has_ret(tr, op->addr, depth, &err);
		return err < 0 ? err : has;
	}
	case TLP_NOT_JUMPED:   /* (the track's stop unchanged by the chunk so far) */
		return resume_jumped(tr->off_at, op->addr);
	}
	if (rc > 0) {   /* nothing ends */
		*to = depth;
		rc = 0;
	}
	return rc;
}

/* Whether P's chunk can take its turn as prepared: its slices within the cap, and no
 * track whose first time in it would open slices pushed before without one. */
static int prep_fits(struct tk_timeline *t, struct tl_prep *p)
{
	struct tl_track *trs[TLP_TRACKS];
	size_t depth[TLP_TRACKS];

	/* all its slices kept, or (the cap reached before it) all dropped */
	if (t->slices < t->max && p->begins > t->max - t->slices)
		return 0;
	for (size_t k = 0; k < p->ntr; k++) {
		struct tl_track *tr = NULL;
		if (t->last < t->ntracks && t->tracks[t->last].id == p->tr[k].id)
			tr = &t->tracks[t->last];
		for (size_t i = 0; !tr && i < t->ntracks; i++)
			if (t->tracks[i].id == p->tr[k].id)
				tr = &t->tracks[i];
		if (tr && !tr->in_window && tr->depth && p->tr[k].t_last != TK_TIME_NONE)
			return 0;
		/* (a track's description goes before its first slice: the serial pass's; past
		 * the cap the chunk makes no slices, and a track first met then none ever) */
		if (p->tr[k].first_rec != SIZE_MAX && (!tr || !tr->started) && t->slices < t->max)
			return 0;
		trs[k] = tr;
		depth[k] = tr ? tr->depth : 0;
	}
	/* what the chunk took for granted of the frames below its own, with the frames its
	 * operations leave before each (they only end frames) */
	for (size_t i = 0; i < p->nops; i++) {
		const struct tlp_op *op = &p->ops[i];
		struct tl_track *tr = trs[op->track];
		size_t to;
		if (!tr)
			continue;   /* no frames, not stopped */
		if (op_depth(t, tr, op, depth[op->track], &to))
			return 0;
		depth[op->track] = to;
	}
	return 1;
}

/* P's run into the block, after the raw bytes so far (the formatter frees P after it).
 * The output's first error. */
static int run_put(struct tk_timeline *t, struct tl_prep *p)
{
	if (!t->threaded) {   /* (prep_here) its bytes now, after the raw bytes so far */
		int rc = rec_done(t);
		if (run_pass(&t->fmt, p) < 0 && rc >= 0)
			rc = -TK_E_NOMEM;
		run_bytes(&t->fmt, p, t->out);
		prep_done(t, p);
		return rc < 0 ? rc : t->out->err;
	}
	struct tl_rec *r = &t->cb->rec[t->cb->n++];

	r->run = p;
	r->ticks = r->track = 0;
	r->seq = r->name = 0;
	r->begin = TL_REC_RUN;
	r->raw_end = (uint32_t)t->b->len;
	t->cb->load += p->nrec + p->nends;
	t->cb->nruns++;
	return rec_done(t);
}

/* Frames of TR above DEPTH popped by an operation of P's chunk (track K): their ends go
 * among the chunk's records, before record AT. */
static int prep_pop_below(struct tk_timeline *t, struct tl_prep *p, size_t k, struct tl_track *tr,
			  size_t depth, uint64_t time, size_t at)
{
	while (tr->depth > depth) {
		struct tl_frame *f = &tr->st[--tr->depth];
		tk_retset_popped(&tr->rets, f->ret, tr->depth);
		if (!f->emitted)
			continue;
		if (p->nends == p->cends) {
			size_t nc = p->cends ? 2 * p->cends : 64;
			struct tlp_end *ne = realloc(p->ends, nc * sizeof *ne);
			if (!ne)
				return -TK_E_NOMEM;
			p->ends = ne;
			p->cends = nc;
		}
		p->ends[p->nends++] = (struct tlp_end){ at, time, names_str(&t->names, f->name), (uint16_t)k };
		if (time > p->tr[k].max_ticks)
			p->tr[k].max_ticks = time;
		p->tr[k].has_rec = 1;
	}
	return 0;
}

static int prep_op_do(struct tk_timeline *t, struct tl_prep *p, const struct tlp_op *op)
{
	struct tl_track *tr = &t->tracks[p->tr[op->track].ix];
	size_t depth;
	int rc = op_depth(t, tr, op, tr->depth, &depth);

	if (op->what == TLP_GAP || op->what == TLP_RESUME)
		tr->off_at = 0;
	return rc < 0 ? rc : prep_pop_below(t, p, op->track, tr, depth, op->time, op->at);
}

/* LT's frames still open at the chunk's end onto TR, begun (their slices are records). */
static int prep_frames_put(struct tl_track *tr, const struct tl_prep *p, const struct tlp_track *lt,
			   int dropped)
{
	if (tr->depth + lt->depth > tr->cap) {
		size_t nc = tr->cap ? tr->cap : 64;
		while (nc < tr->depth + lt->depth)
			nc *= 2;
		struct tl_frame *ns = realloc(tr->st, nc * sizeof *ns);
		if (!ns)
			return -TK_E_NOMEM;
		tr->st = ns;
		tr->cap = nc;
	}
	for (size_t i = 0; i < lt->depth; i++) {
		const struct tlp_frame *f = &lt->st[i];
		tr->st[tr->depth++] = (struct tl_frame){ .key = f->key, .ret = f->ret, .kind = f->kind,
							 .name = dropped ? 0 : p->gid[f->name],
							 .emitted = !dropped };
	}
	return 0;
}

/* The chunk's turn, prepared: its tracks and names looked up in order of first use (as
 * the serial pass would have made them), its operations done in order (the ends they make
 * go among its records), its open frames pushed; P goes to the formatter as one run. */
static int prep_commit(struct tk_timeline *t, struct tl_prep *p)
{
	int rc = 0;
	/* past the cap its slices are counted, not made: no records, no names looked up */
	int dropped = t->slices >= t->max;
	if (dropped) {
		p->nrec = p->nnames = 0;
		for (size_t k = 0; k < p->ntr; k++) {
			p->tr[k].has_rec = 0;
			p->tr[k].max_ticks = 0;
		}
		for (size_t i = 0; i < p->nops; i++)   /* (their ends: the run's only records) */
			p->ops[i].at = 0;
	}
	size_t nn = p->nnames;

	for (size_t k = 0; k < p->ntr; k++) {
		struct tl_track *tr = get_track(t, p->tr[k].id);
		if (!tr)
			goto nomem;
		p->tr[k].ix = (size_t)(tr - t->tracks);
	}
	/* the names' ids, and per id its first name number (keys of one function share it) */
	size_t cap = 16;
	while (cap < 2 * nn)
		cap *= 2;
	uint32_t *by_id = nn ? malloc(cap * sizeof *by_id) : NULL;
	if (nn > p->cid) {
		free(p->gid);
		free(p->gstr);
		free(p->canon);
		p->gid = malloc(nn * sizeof *p->gid);
		p->gstr = malloc(nn * sizeof *p->gstr);
		p->canon = malloc(nn * sizeof *p->canon);
		p->cid = p->gid && p->gstr && p->canon ? nn : 0;
	}
	if (p->ntr * nn > p->cintern) {
		free(p->intern);
		p->intern = malloc(p->ntr * nn);
		p->cintern = p->intern ? p->ntr * nn : 0;
	}
	if (nn && (!by_id || p->cid < nn || p->cintern < p->ntr * nn)) {
		free(by_id);
		goto nomem;
	}
	if (p->intern)
		memset(p->intern, 0, p->ntr * nn);
	if (nn)
		memset(by_id, 0xff, cap * sizeof *by_id);
	for (size_t l = 0; l < nn; l++) {
		uint32_t g = names_frame(&t->names, p->key[l], p->kind[l]);
		if (g == UINT32_MAX) {
			free(by_id);
			goto nomem;
		}
		p->gid[l] = g;
		p->gstr[l] = names_str(&t->names, g);
		size_t h = tk_hash64(g) & (cap - 1);
		while (by_id[h] != UINT32_MAX && p->gid[by_id[h]] != g)
			h = (h + 1) & (cap - 1);
		if (by_id[h] == UINT32_MAX)
			by_id[h] = (uint32_t)l;
		p->canon[l] = by_id[h];
	}
	free(by_id);
	for (size_t k = 0; k < p->ntr; k++) {
		const struct tl_track *tr = &t->tracks[p->tr[k].ix];
		int chrome = t->o.kind == TK_TIMELINE_CHROME;
		p->tr[k].track = chrome ? (tr->pid ? tr->pid : 1) : tr->uuid;
		p->tr[k].seq = chrome ? tr->id : tr->seq;
	}
	if (t->threaded && (p->nrec || p->nops) && !p->bytes.data &&
	    tk_buf_init(&p->bytes, -1, (t->o.kind == TK_TIMELINE_CHROME ? 72 : 16) * p->nrec + 4096) < 0)
		goto nomem;
	for (size_t i = 0; i < p->nops && rc >= 0; i++)
		rc = prep_op_do(t, p, &p->ops[i]);
	for (size_t k = 0; k < p->ntr && rc >= 0; k++) {
		struct tl_track *tr = &t->tracks[p->tr[k].ix];
		rc = prep_frames_put(tr, p, &p->tr[k], dropped);
		if (p->tr[k].t_last != TK_TIME_NONE) {
			tr->t_last = p->tr[k].t_last;
			tr->in_window = 1;
		}
		if (p->tr[k].off_known)
			tr->off_at = p->tr[k].off_at;
	}
	if (rc < 0) {
		prep_done(t, p);
		return rc;
	}
	if (dropped)
		t->dropped += p->begins;
	else
		t->slices += p->begins;
	if (!p->nrec && !p->nends) {
		prep_done(t, p);
		return 0;
	}
	return run_put(t, p);
nomem:
	prep_done(t, p);
	return -TK_E_NOMEM;
}

/* tk_sink.need_from: the chunk's events from its cut on are the serial pass's. */
static size_t tl_need_from(void *ctx, const void *prepared)
{
	(void)ctx;
	return prepared ? ((const struct tl_prep *)prepared)->cut : 0;
}

/* tk_sink.take: the chunk's turn with what tl_prepare made of it; EV[0..n) are its events
 * from index FIRST on (0: all; else its cut on). */
static int tl_take(void *ctx, const struct tk_event *ev, size_t n, size_t first, void *prepared)
{
	struct tk_timeline *t = ctx;
	struct tl_prep *p = prepared;
	size_t cut = p->cut < first + n ? p->cut : first + n;
	int rc;

	if (t->finished) {
		prep_done(t, p);
		return -TK_E_BAD_STATE;
	}
	t->prep_tried++;
	if (!prep_fits(t, p)) {
		/* a random walk's returns go to frames below the chunk's all the time: past
		 * sixteen chunks, if most were passed for nothing, the serial pass does all */
		if (++t->prep_failed * 2 > t->prep_tried && t->prep_tried >= 16)
			__atomic_store_n(&t->prep_off, 1, __ATOMIC_RELAXED);
		prep_done(t, p);
		return first ? TK_SINK_AGAIN : tl_events(t, ev, n);
	}
	if (cut < first) {   /* (events take needs were not kept) */
		prep_done(t, p);
		return -TK_E_INTERNAL;
	}
	rc = prep_commit(t, p);
	if (rc >= 0 && cut < first + n)
		return tl_events(t, ev + (cut - first), first + n - cut);
	if (rc == -TK_E_NOMEM)
		t->nomem = 1;
	return rc;
}

struct tk_sink tk_timeline_sink(struct tk_timeline *t)
{
	struct tk_sink s = { .events = tl_sink_fn, .ctx = t };

	if (!t->prof && !t->o.time_begin && t->window_end == UINT64_MAX) {
		s.thin = tl_thin;
		s.counted_blocks = 1;
		if (t->threaded || t->prep_here) {   /* a chunk's records go to the formatter */
			s.prepare = tl_prepare;
			s.take = tl_take;
			s.drop = tl_drop;
			s.need_from = tl_need_from;
		}
	}
	return s;
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
	t->out = b;
	t->fmt.kind = t->o.kind;
	t->fmt.tps = t->o.clock.ticks_per_second;
	if (!t->fmt.tps || 1000000000u % t->fmt.tps == 0)
		t->fmt.ns_per_tick = t->fmt.tps ? 1000000000u / t->fmt.tps : 1;
	t->fmt.time_origin = t->o.time_origin;
	/* the blocks' records in one allocation: 10 MB, on huge pages (2,500 faults else) */
	struct tl_rec *recs = NULL;
	if (t->o.nthreads > 1 && !(recs = tk_malloc_huge(TL_BLOCKS * TL_BLOCK_RECS * sizeof *recs)))
		goto fail;
	for (unsigned i = 0; i < (t->o.nthreads > 1 ? TL_BLOCKS : 1); i++) {
		t->blk[i].rec = recs ? recs + (size_t)i * TL_BLOCK_RECS : NULL;
		if (tk_buf_init(&t->blk[i].raw, -1, 4096) < 0 || tk_buf_init(&t->blk[i].fbuf, -1, 4096) < 0)
			goto fail;
	}
	t->cb = &t->blk[0];
	t->b = &t->cb->raw;
	if (t->o.nthreads > 1) {
		pthread_mutex_init(&t->lock, NULL);
		pthread_cond_init(&t->cond, NULL);
		pthread_cond_init(&t->cond_fmt, NULL);
		pthread_cond_init(&t->cond_run, NULL);
		t->threaded = pthread_create(&t->fmt_thread, NULL, fmt_main, t) == 0;
		if (!t->threaded) {   /* then formatted here */
			pthread_mutex_destroy(&t->lock);
			pthread_cond_destroy(&t->cond);
			pthread_cond_destroy(&t->cond_fmt);
			pthread_cond_destroy(&t->cond_run);
		}
		/* helpers for the chunks' runs (the formatter takes some too): without them
		 * the formatting that the pass left to them would be serial */
		while (t->threaded && t->nhelpers + 1 < t->o.nthreads && t->nhelpers < TL_HELPERS &&
		       pthread_create(&t->helpers[t->nhelpers], NULL, helper_main, t) == 0)
			t->nhelpers++;
		t->runs_max = 2 * (t->nhelpers + 1) + 2;
	}
	if (!t->threaded && t->o.prepare) {
		pthread_mutex_init(&t->lock, NULL);
		t->prep_here = 1;
	}
	t->max = t->o.max_events ? t->o.max_events : 10000000;
	t->window_end = t->o.time_end ? t->o.time_end : UINT64_MAX;
	if ((rc = names_init(&t->names, t->o.sym)) < 0)
		goto fail;
	if (t->o.nthreads > 1)
		names_may_help(&t->names);
	if (t->o.sym && tk_sym_entries(t->o.sym, &t->entries, &t->nentries) == 0 && t->nentries) {
		qsort(t->entries, t->nentries, sizeof *t->entries, cmp_u64);
		size_t w = 1;
		for (size_t i = 1; i < t->nentries; i++)
			if (t->entries[i] != t->entries[w - 1])
				t->entries[w++] = t->entries[i];
		t->nentries = w;
	}
	if ((rc = filtered_new(t)) < 0)
		goto fail;
	if (err)
		*err = 0;
	return t;
fail:
	if (t)
		tk_timeline_free(t);
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

int tk_timeline_track_process(struct tk_timeline *t, uint32_t track, uint32_t pid,
			      const char *pname)
{
	struct tl_track *tr = get_track(t, track);
	if (!tr)
		return -TK_E_NOMEM;
	free(tr->pname);
	tr->pid = pid;
	tr->pname = strdup(pname);
	return tr->pname ? 0 : -TK_E_NOMEM;
}

int tk_timeline_finish(struct tk_timeline *t)
{
	int rc = 0;
	if (t->finished)
		return 0;
	if (t->prof)   /* the calls open at the end end at their track's last time */
		rc = tk_prof_finish(t->prof);
	for (size_t i = 0; i < t->ntracks && rc >= 0; i++)
		rc = pop_to(t, &t->tracks[i], 0, t->tracks[i].t_last);
	if (rc >= 0)
		rc = pl_finish(t);
	if (!t->header_done)
		header(t);
	if (t->o.kind == TK_TIMELINE_CHROME)
		tk_buf_puts(t->b, "\n]}\n");
	t->finished = 1;
	submit(t);
	fmt_end(t);
	return rc < 0 ? rc : t->out->err;
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
	fmt_end(t);
	fmt_free(&t->fmt);
	for (unsigned i = 0; i < TL_BLOCKS; i++) {
		for (size_t k = 0; k < t->blk[i].n; k++)   /* runs never formatted (an error) */
			if (t->blk[i].rec[k].begin == TL_REC_RUN)
				prep_free(t->blk[i].rec[k].run);
		tk_buf_free(&t->blk[i].fbuf);
		tk_buf_free(&t->blk[i].raw);
	}
	free(t->blk[0].rec);   /* all blocks' */
	for (size_t i = 0; i < t->ntracks; i++) {
		free(t->tracks[i].st);
		tk_retset_free(&t->tracks[i].rets);
		free(t->tracks[i].name);
		free(t->tracks[i].pname);
	}
	while (t->spare) {
		struct tl_prep *p = t->spare;
		t->spare = p->next;
		prep_free(p);
	}
	if (t->prep_here)
		pthread_mutex_destroy(&t->lock);
	free(t->tracks);
	free(t->pids);
	pl_free(t->pl);
	names_free(&t->names);
	free(t->entries);
	tk_prof_free(t->prof);
	tk_sym_free(t->own_sym);
	free(t);
}
