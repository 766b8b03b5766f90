/* Reader of tracekit's branch-trace container (docs/formats/tkbt.md): indexes the records,
 * checks each one, and hands out per-thread Intel PT streams. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"
#include "tracekit/internal/util.h"
#include "formats/btrace/internal.h"

struct piece {
	uint64_t off;         /* payload offset in the file */
	uint32_t len;
	int gap_before;       /* a piece of this thread was lost just before this one */
};

struct thread {
	struct tk_btrace_thread pub;
	int ended_whole;      /* its end record came before any --max-size LIMIT record */
	uint32_t next_seq;
	struct piece *pieces;
	size_t npieces, cap;
};

struct tk_btrace {
	const uint8_t *data;
	size_t len;
	struct tk_btrace_info info;
	struct tk_btrace_module *mods;
	char **paths;
	size_t nmods;
	struct thread *threads;
	size_t nthreads;
	struct tk_gap_stats gaps;
	struct tk_btrace_opts opts;
	uint64_t start_ns, end_tsc, end_ns;   /* to measure the TSC's rate */
	uint64_t cal_tsc, cal_ns;             /* the clock when the recorder started (0: none) */
	uint64_t limit_off;                    /* offset of the --max-size LIMIT record */
};

static void gap(struct tk_btrace *bt, uint64_t off, uint64_t skipped, const char *why)
{
	tk_gap_stats_add(&bt->gaps, off, skipped);
	tk_log(TK_LOG_WARN, "offset 0x%llx: %s (%llu bytes skipped)", (unsigned long long)off, why,
	       (unsigned long long)skipped);
}

/* A plausible record header at OFF (its payload not checked). */
static int header_ok(const struct tk_btrace *bt, uint64_t off)
{
	const uint8_t *p = bt->data + off;
	if (off + TK_BTRACE_REC_HEADER > bt->len || tk_le32(p) != TK_BTRACE_REC_MAGIC)
		return 0;
	unsigned type = tk_le16(p + 4);
	uint64_t n = tk_le32(p + 12);
	if (type < TK_BTRACE_REC_MODULE || type > TK_BTRACE_REC_LIMIT)
		return 0;
	return n <= bt->len - off - TK_BTRACE_REC_HEADER;
}

static int sum_ok(const struct tk_btrace *bt, uint64_t off)
{
	const uint8_t *p = bt->data + off;
	return tk_btrace_record_sum(bt->info.version, p + TK_BTRACE_REC_HEADER,
				    (size_t)tk_le32(p + 12)) == tk_le32(p + 16);
}

/* A plausible record header at OFF whose payload checks out. */
static int record_ok(const struct tk_btrace *bt, uint64_t off)
{
	return header_ok(bt, off) && sum_ok(bt, off);
}

/* The payload checksums are most of opening a large trace (every byte read, and the
 * mapping's pages faulted in): with workers, the chain of plausible headers from the
 * first record on is checked on them first, and the index takes their verdicts where it
 * meets those records (elsewhere, after damage, it checks as it goes). */
struct verdicts {
	const struct tk_btrace *bt;
	uint64_t *off;            /* the chain's records, in file order */
	uint8_t *ok;
	size_t n, next;           /* the index's cursor */
};

#define VERDICT_BATCH 64      /* records per pool job */

static int verdict_work(void *ctx, size_t job)
{
	struct verdicts *v = ctx;
	for (size_t i = job * VERDICT_BATCH; i < v->n && i < (job + 1) * VERDICT_BATCH; i++)
		v->ok[i] = (uint8_t)sum_ok(v->bt, v->off[i]);
	return 0;
}

/* The mapping's pages put in the page tables on the workers before the chain of
 * headers is walked on the calling thread: its page faults were most of what stayed
 * serial in opening a large trace. Each page is read once too: in a virtual machine the
 * host may map a page only when it is first touched, and the walk then paid that for
 * every header (libc.tkbt, 2,662 records of 64 KiB: `dump -q -j 2` serial 29 -> 13 ms,
 * most of the header walk's samples on its first load). */
#define MAP_JOB_BYTES ((size_t)8 << 20)
struct map_run {
	const uint8_t *data;
	size_t len;
	uintptr_t page;
};

static int map_work(void *ctx, size_t j)
{
	const struct map_run *r = ctx;
	uintptr_t page = r->page, a = (uintptr_t)r->data + j * MAP_JOB_BYTES;
	uintptr_t e = (uintptr_t)r->data + (j * MAP_JOB_BYTES + MAP_JOB_BYTES < r->len ?
					    j * MAP_JOB_BYTES + MAP_JOB_BYTES : r->len);
#ifdef MADV_POPULATE_READ
	(void)madvise((void *)(a & ~(page - 1)), e - (a & ~(page - 1)), MADV_POPULATE_READ);
#endif
	unsigned sink = 0;
	for (uintptr_t q = a; q < e; q += page)
		sink += *(volatile const uint8_t *)q;
	(void)sink;
	return 0;
}

static int verdicts_make(struct verdicts *v, const struct tk_btrace *bt, uint64_t off)
{
	size_t cap = 0;

	memset(v, 0, sizeof *v);
	v->bt = bt;
	if (bt->opts.nthreads <= 1)   /* (0 from a caller's older, smaller struct too) */
		return 0;
	long page = sysconf(_SC_PAGESIZE);
	struct map_run mr = { bt->data, bt->len, page > 0 ? (uintptr_t)page : 4096 };
	struct tk_pool_opts mo = { .sz = sizeof mo, .nthreads = bt->opts.nthreads, .caller_works = 1 };
	(void)tk_pool_run(&mo, (bt->len + MAP_JOB_BYTES - 1) / MAP_JOB_BYTES, map_work, NULL, &mr);
	for (; off < bt->len && header_ok(bt, off);
	     off += TK_BTRACE_REC_HEADER + ((uint64_t)tk_le32(bt->data + off + 12) + 7) / 8 * 8) {
		if (v->n == cap) {
			cap = cap ? 2 * cap : 1024;
			uint64_t *o = realloc(v->off, cap * sizeof *o);
			if (!o)
				return -TK_E_NOMEM;
			v->off = o;
		}
		v->off[v->n++] = off;
	}
	if (!v->n || !(v->ok = malloc(v->n)))
		return v->n ? -TK_E_NOMEM : 0;
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = bt->opts.nthreads };
	return tk_pool_run(&po, (v->n + VERDICT_BATCH - 1) / VERDICT_BATCH, verdict_work, NULL, v);
}

/* record_ok, from the verdicts where they have OFF (the index visits offsets in order). */
static int record_ok_at(struct verdicts *v, uint64_t off)
{
	while (v->next < v->n && v->off[v->next] < off)
		v->next++;
	if (v->next < v->n && v->off[v->next] == off)
		return v->ok[v->next];
	return record_ok(v->bt, off);
}

static struct thread *thread_of(struct tk_btrace *bt, uint32_t tid)
{
	for (size_t i = 0; i < bt->nthreads; i++)
		if (bt->threads[i].pub.tid == tid)
			return &bt->threads[i];
	struct thread *t = realloc(bt->threads, (bt->nthreads + 1) * sizeof *t);
	if (!t)
		return NULL;
	bt->threads = t;
	t = &t[bt->nthreads++];
	memset(t, 0, sizeof *t);
	t->pub.tid = tid;
	return t;
}

static int add_module(struct tk_btrace *bt, const uint8_t *p, uint32_t n, uint64_t off)
{
	if (n < 28 || 28u + p[26] + tk_le16(p + 24) > n || p[26] > 64) {
		gap(bt, off, n, "malformed module record");
		return 0;
	}
	struct tk_btrace_module *m = realloc(bt->mods, (bt->nmods + 1) * sizeof *m);
	if (!m)
		return -TK_E_NOMEM;
	bt->mods = m;
	char **paths = realloc(bt->paths, (bt->nmods + 1) * sizeof *paths);
	if (!paths)
		return -TK_E_NOMEM;
	bt->paths = paths;
	m = &m[bt->nmods];
	memset(m, 0, sizeof *m);
	m->bias = tk_le64(p);
	m->start = tk_le64(p + 8);
	m->end = tk_le64(p + 16);
	m->build_id_len = p[26];
	memcpy(m->build_id, p + 28, m->build_id_len);
	size_t plen = tk_le16(p + 24);
	char *s = malloc(plen + 1);
	if (!s)
		return -TK_E_NOMEM;
	memcpy(s, p + 28 + m->build_id_len, plen);
	s[plen] = 0;
	paths[bt->nmods] = s;
	m->path = s;
	bt->nmods++;
	return 0;
}

static int add_piece(const struct tk_btrace *bt, struct thread *t, uint64_t off, uint32_t len,
		     uint32_t seq)
{
	if (t->npieces == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct piece *p = realloc(t->pieces, cap * sizeof *p);
		if (!p)
			return -TK_E_NOMEM;
		t->pieces = p;
		t->cap = cap;
	}
	struct piece *p = &t->pieces[t->npieces++];
	p->off = off;
	p->len = len;
	p->gap_before = seq != t->next_seq;
	if (p->gap_before && !t->pub.pieces && bt->info.ring)
		t->pub.not_kept = seq;   /* a ring snapshot starts there: dropped, not lost */
	else if (p->gap_before)
		t->pub.lost_pieces += seq > t->next_seq ? seq - t->next_seq : 1;
	if (!t->pub.pieces)
		t->pub.first_offset = off - TK_BTRACE_REC_HEADER;
	t->pub.pieces++;
	t->pub.stream_bytes += len;
	t->next_seq = seq + 1;
	return 0;
}

static int index_records(struct tk_btrace *bt, uint64_t off, struct verdicts *v)
{
	while (off < bt->len) {
		if (!record_ok_at(v, off)) {
			/* resync: the next 8-aligned record header that checks out */
			uint64_t start = off;
			if (bt->len - off < TK_BTRACE_REC_HEADER) {
				gap(bt, off, bt->len - off, "trace ends inside a record");
				return 0;
			}
			for (off += 8; off < bt->len && !record_ok(bt, off); off += 8)
				;
			if (off > bt->len)
				off = bt->len;
			gap(bt, start, off - start, off < bt->len ? "damaged record; resynchronised at the next record" :
			    "damaged or truncated record at the end of the trace");
			continue;
		}
		const uint8_t *h = bt->data + off;
		unsigned type = tk_le16(h + 4);
		uint32_t tid = tk_le32(h + 8), n = tk_le32(h + 12), seq = tk_le32(h + 20);
		const uint8_t *p = h + TK_BTRACE_REC_HEADER;
		uint64_t poff = off + TK_BTRACE_REC_HEADER;
		struct thread *t;
		int rc = 0;

		if (bt->opts.on_record) {
			struct tk_btrace_record r = { off, type, tid, seq, p, n };
			if ((rc = bt->opts.on_record(bt->opts.ctx, &r)) < 0)
				return rc;
		}
		bt->info.complete = 0;
		switch (type) {
		case TK_BTRACE_REC_MODULE:
			rc = add_module(bt, p, n, off);
			break;
		case TK_BTRACE_REC_STREAM:
			if (!(t = thread_of(bt, tid)))
				return -TK_E_NOMEM;
			rc = add_piece(bt, t, poff, n, seq);
			break;
		case TK_BTRACE_REC_THREAD_END:
			if (!(t = thread_of(bt, tid)))
				return -TK_E_NOMEM;
			/* pieces after --max-size's LIMIT were not written: not lost */
			if (seq != t->next_seq && !bt->info.size_limit)
				t->pub.lost_pieces += seq > t->next_seq ? seq - t->next_seq : 1;
			t->next_seq = seq + 1;
			t->pub.ended = 1;
			t->ended_whole = !bt->info.size_limit;
			if (n >= 24) {
				t->pub.traps = tk_le64(p);
				t->pub.reentries = tk_le64(p + 8);
				t->pub.unresolved = tk_le64(p + 16);
			}
			if (n >= 32) {
				t->pub.traps_long = tk_le64(p + 24);
			}
			if (n >= 40) {
				t->pub.tramp_hits = tk_le64(p + 32);
			}
			if (n >= 48)
				t->pub.end_reason = (unsigned)tk_le64(p + 40);
			if (n >= 56) {
				t->pub.traps_first = tk_le64(p + 48);
				t->pub.has_traps_first = 1;
			}
			break;
		case TK_BTRACE_REC_PROCESS_END:
			bt->info.complete = 1;
			if (n >= 16) {
				bt->info.traps = tk_le64(p);
				bt->info.patched = tk_le64(p + 8);
			}
			if (n >= 48) {
				bt->end_tsc = tk_le64(p + 32);
				bt->end_ns = tk_le64(p + 40);
			}
			if (n >= 64) {
				if (tk_le64(p + 24) == TK_BTRACE_END_SIGNAL)
					bt->info.signal = (int)tk_le64(p + 48);
				else if (tk_le64(p + 24) == TK_BTRACE_END_SNAPSHOT)
					bt->info.snapshot_signal = (int)tk_le64(p + 48);
				else if (tk_le64(p + 24) == TK_BTRACE_END_TRIGGER) {
					bt->info.trigger_call = tk_le64(p + 48);
					size_t k = 0;   /* the name: NUL-terminated, at most 63 bytes */
					while (64 + k < n && k < sizeof bt->info.trigger_fn - 1 && p[64 + k])
						k++;
					memcpy(bt->info.trigger_fn, p + 64, k);
					bt->info.trigger_fn[k] = 0;
				}
				bt->info.fd_reopened = tk_le64(p + 56);
			}
			break;
		case TK_BTRACE_REC_EXEC:
			bt->info.complete = 1;
			bt->info.exec = 1;
			if (n >= 16) {
				bt->end_tsc = tk_le64(p);
				bt->end_ns = tk_le64(p + 8);
			}
			break;
		case TK_BTRACE_REC_LIMIT:
			bt->info.size_limit = n >= 8 && tk_le64(p) ? tk_le64(p) : 1;
			bt->limit_off = off;
			break;
		case TK_BTRACE_REC_REFUSED: {
			size_t m = n < sizeof bt->info.refused_msg - 1 ? n : sizeof bt->info.refused_msg - 1;
			bt->info.refused = 1;
			memcpy(bt->info.refused_msg, p, m);
			bt->info.refused_msg[m] = 0;
			break;
		}
		}
		if (rc < 0)
			return rc;
		off += TK_BTRACE_REC_HEADER + ((uint64_t)n + 7) / 8 * 8;
	}
	return 0;
}

struct tk_btrace *tk_btrace_open(const uint8_t *data, size_t len, const struct tk_btrace_opts *opts,
				 int *err)
{
	struct tk_btrace *bt;
	int rc;

	if (len < 16 || memcmp(data, TK_BTRACE_MAGIC, 8)) {
		*err = -TK_E_BAD_FORMAT;
		return NULL;
	}
	uint32_t version = tk_le32(data + 8), hsize = tk_le32(data + 12);
	if (version < 1 || version > TK_BTRACE_VERSION) {
		tk_log(TK_LOG_ERROR, "container version %u is not supported (this reader: 1 to %u)",
		       version, TK_BTRACE_VERSION);
		*err = -TK_E_UNSUPPORTED;
		return NULL;
	}
	if (hsize < 40 || hsize > len || hsize % 8) {
		tk_log(TK_LOG_ERROR, "offset 0xc: bad header size %u", hsize);
		*err = -TK_E_BAD_FORMAT;
		return NULL;
	}
	if (!(bt = calloc(1, sizeof *bt))) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	bt->data = data;
	bt->len = len;
	/* the caller's struct may be older (smaller) than ours */
	if (opts)
		memcpy(&bt->opts, opts, opts->sz < sizeof bt->opts ? opts->sz : sizeof bt->opts);
	bt->info.version = version;
	bt->info.pid = tk_le32(data + 16);
	bt->info.ppid = tk_le32(data + 20);
	bt->info.tsc_hz = tk_le64(data + 24);
	bt->info.start_tsc = tk_le64(data + 32);
	bt->start_ns = hsize >= 48 ? tk_le64(data + 40) : 0;
	bt->info.ring = hsize >= 56 ? tk_le64(data + 48) : 0;
	bt->cal_tsc = hsize >= 72 ? tk_le64(data + 56) : 0;
	bt->cal_ns = hsize >= 72 ? tk_le64(data + 64) : 0;
	struct verdicts v;
	if ((rc = verdicts_make(&v, bt, hsize)) >= 0)
		rc = index_records(bt, hsize, &v);
	free(v.off);
	free(v.ok);
	if (rc < 0) {
		tk_btrace_free(bt);
		*err = rc;
		return NULL;
	}
	/* the TSC's rate over the run, when the recorder could not know it: the clock is read
	 * the same way at both ends (a system call, then the TSC), so its cost cancels and
	 * what is left, well under 1 us of jitter, is under 1% of 100 us. From the recorder's
	 * start when the file has it (before its analysis: a longer span), else the header's. */
	uint64_t from_tsc = bt->info.start_tsc, from_ns = bt->start_ns;
	if (bt->cal_ns && bt->cal_tsc && bt->cal_ns <= from_ns && bt->cal_tsc <= from_tsc)
		from_tsc = bt->cal_tsc, from_ns = bt->cal_ns;
	if (!bt->info.tsc_hz && from_ns && bt->end_ns >= from_ns + 100000 && bt->end_tsc > from_tsc) {
		unsigned __int128 t = (unsigned __int128)(bt->end_tsc - from_tsc) * 1000000000u;
		t /= bt->end_ns - from_ns;
		if (t >= 1000000 && t <= 100000000000ull) {   /* 1 MHz .. 100 GHz, else not a TSC */
			bt->info.tsc_hz = (uint64_t)t;
			bt->info.tsc_hz_measured = 1;
		}
	}
	for (size_t i = 0; i < bt->nthreads; i++) {
		const struct tk_btrace_thread *t = &bt->threads[i].pub;
		if (t->lost_pieces)
			tk_log(TK_LOG_WARN, "thread %u: %llu stream pieces lost", t->tid,
			       (unsigned long long)t->lost_pieces);
		if (t->not_kept)
			tk_log(TK_LOG_WARN, "thread %u: a ring snapshot (record --ring %llu): its first "
			       "%llu stream pieces were not kept, the trace starts after a gap", t->tid,
			       (unsigned long long)bt->info.ring, (unsigned long long)t->not_kept);
	}
	for (size_t i = 0; i < bt->nthreads; i++)
		bt->threads[i].pub.size_cut = bt->info.size_limit && !bt->threads[i].ended_whole;
	if (bt->info.size_limit)
		tk_log(TK_LOG_WARN, "recording stopped at record --max-size %llu: the trace ends early",
		       (unsigned long long)bt->info.size_limit);
	if (!bt->info.complete && !bt->info.refused)
		tk_log(TK_LOG_WARN, "the trace has no end record: the program was killed, called "
		       "exit_group directly, or the file is truncated");
	return bt;
}

void tk_btrace_free(struct tk_btrace *bt)
{
	if (!bt)
		return;
	for (size_t i = 0; i < bt->nmods; i++)
		free(bt->paths[i]);
	free(bt->paths);
	free(bt->mods);
	for (size_t i = 0; i < bt->nthreads; i++)
		free(bt->threads[i].pieces);
	free(bt->threads);
	free(bt);
}

const struct tk_btrace_info *tk_btrace_info(const struct tk_btrace *bt) { return &bt->info; }
size_t tk_btrace_module_count(const struct tk_btrace *bt) { return bt->nmods; }
size_t tk_btrace_thread_count(const struct tk_btrace *bt) { return bt->nthreads; }
const struct tk_gap_stats *tk_btrace_gaps(const struct tk_btrace *bt) { return &bt->gaps; }

const struct tk_btrace_module *tk_btrace_module(const struct tk_btrace *bt, size_t i)
{
	return i < bt->nmods ? &bt->mods[i] : NULL;
}

const struct tk_btrace_thread *tk_btrace_thread(const struct tk_btrace *bt, size_t i)
{
	return i < bt->nthreads ? &bt->threads[i].pub : NULL;
}

/* Whether an OVF follows piece K of T in a joined stream: a piece was lost after it (the
 * joining adds it only before the part's last piece). */
static int ovf_after(const struct thread *t, size_t k)
{
	return k + 1 < t->npieces && t->pieces[k + 1].gap_before;
}

int btrace_part_extent(const struct tk_btrace *bt, size_t i, size_t next, size_t max, size_t *end,
		       size_t *len, size_t *part_len)
{
	if (i >= bt->nthreads)
		return -TK_E_INVAL;
	const struct thread *t = &bt->threads[i];
	size_t n = 0, room = 0, e = next;
	/* whole pieces, at least one, each with the OVF that follows it (the next is lost);
	 * then the next piece, to be read on into. (ROOM counts an OVF after every piece:
	 * where parts were always cut.) */
	while (e < t->npieces && (e == next || room + t->pieces[e].len <= max)) {
		room += t->pieces[e].len + 2;
		n += t->pieces[e].len;
		if (ovf_after(t, e))
			n += 2;
		e++;
	}
	*part_len = n;
	if (e < t->npieces)
		n += t->pieces[e].len;
	*end = e;
	*len = n;
	return 0;
}

int btrace_thread_parts(const struct tk_btrace *bt, size_t i, size_t max, btrace_part_fn fn,
			void *ctx)
{
	if (i >= bt->nthreads)
		return -TK_E_INVAL;
	size_t next = 0, npieces = bt->threads[i].npieces;
	uint64_t base = 0;
	int rc;

	do {
		size_t end = next, len, part_len = 0;
		if (next < npieces && (rc = btrace_part_extent(bt, i, next, max, &end, &len, &part_len)) < 0)
			return rc;
		if ((rc = fn(ctx, i, next, base, part_len)) < 0)
			return rc;
		next = end;
		base += part_len;
	} while (next < npieces);
	return 0;
}

int btrace_thread_part(const struct tk_btrace *bt, size_t i, size_t *next, size_t max,
		      uint8_t **out, size_t *len, size_t *part_len)
{
	size_t cap = 0;

	*out = NULL;
	return btrace_thread_part_into(bt, i, next, max, out, &cap, len, part_len);
}

/* Pieces [FROM, TO) of thread T joined at P, each with the OVF that says a piece was lost
 * after it (up to piece END: the part's last, read on into, has none). */
static void join_pieces(const struct tk_btrace *bt, const struct thread *t, size_t from,
			size_t to, size_t end, uint8_t *p)
{
	static const uint8_t ovf[2] = { 0x02, 0xf3 };

	for (size_t k = from; k < to; k++) {
		memcpy(p, bt->data + t->pieces[k].off, t->pieces[k].len);
		p += t->pieces[k].len;
		if (k < end && ovf_after(t, k)) {
			memcpy(p, ovf, sizeof ovf);
			p += sizeof ovf;
		}
	}
}

/* A whole thread's stream joined on the workers: with one thread, joining a 174 MB trace
 * (every byte copied into fresh pages) was a fifth of `decode --stat -j 2`, all of it
 * serial. Each job copies the pieces from first[j] on to out + at[j]. */
#define JOIN_JOB_BYTES ((size_t)8 << 20)
#define JOIN_PARALLEL_FROM (2 * JOIN_JOB_BYTES)

struct join_run {
	const struct tk_btrace *bt;
	const struct thread *t;
	size_t end, stop;         /* the last piece joined is stop - 1 */
	size_t *first, *at;       /* per job, and one more: where the last ends */
	uint8_t *out;
};

static int join_work(void *ctx, size_t j)
{
	struct join_run *r = ctx;

	join_pieces(r->bt, r->t, r->first[j], r->first[j + 1], r->end, r->out + r->at[j]);
	return 0;
}

/* Pieces [NEXT, STOP) into OUT on the workers; 0, or -TK_E_NOMEM. */
static int join_parallel(const struct tk_btrace *bt, const struct thread *t, size_t next,
			 size_t stop, size_t end, size_t bytes, uint8_t *out)
{
	size_t cap = bytes / JOIN_JOB_BYTES + 2, nj = 0, pos = 0, job_pos = 0;
	struct join_run r = { bt, t, end, stop, malloc(cap * sizeof(size_t)),
			      malloc(cap * sizeof(size_t)), out };
	int rc = -TK_E_NOMEM;

	if (r.first && r.at) {
		for (size_t k = next; k < stop; k++) {
			if (k == next || pos - job_pos >= JOIN_JOB_BYTES) {
				r.first[nj] = k;
				r.at[nj++] = job_pos = pos;
			}
			pos += t->pieces[k].len;
			pos += k < end && ovf_after(t, k) ? 2 : 0;
		}
		r.first[nj] = stop;
		r.at[nj] = pos;
		struct tk_pool_opts po = { .sz = sizeof po, .nthreads = bt->opts.nthreads,
					   .caller_works = 1 };
		rc = tk_pool_run(&po, nj, join_work, NULL, &r);
	}
	free(r.first);
	free(r.at);
	return rc;
}

int btrace_thread_part_into(const struct tk_btrace *bt, size_t i, size_t *next, size_t max,
			    uint8_t **out, size_t *cap, size_t *len, size_t *part_len)
{
	size_t end, n;
	int rc = btrace_part_extent(bt, i, *next, max, &end, &n, part_len);

	if (rc < 0)
		return rc;
	const struct thread *t = &bt->threads[i];
	if (!*out && n >= JOIN_PARALLEL_FROM) {
		/* on huge pages where the kernel gives them: a 4 KiB page fault per 4 KiB of
		 * a large stream was most of the joining's time */
		if (!(*out = tk_malloc_huge(n)))
			return -TK_E_NOMEM;
		*cap = n;
	} else if (!*out || *cap < n) {
		uint8_t *grown = tk_realloc_huge(*out, 0, n ? n : 1);   /* (rejoined: not kept) */
		if (!grown)
			return -TK_E_NOMEM;
		*out = grown;
		*cap = n ? n : 1;
	}
	size_t stop = end < t->npieces ? end + 1 : t->npieces;
	if (bt->opts.nthreads > 1 && n >= JOIN_PARALLEL_FROM) {
		if ((rc = join_parallel(bt, t, *next, stop, end, n, *out)) < 0)
			return rc;
	} else {
		join_pieces(bt, t, *next, stop, end, *out);
	}
	*next = end;
	*len = n;
	return 0;
}

void btrace_thread_cuts(const struct tk_btrace *bt, size_t i, int *start, int *end,
			uint64_t *end_off)
{
	const struct thread *t = &bt->threads[i];
	*start = t->npieces && t->pieces[0].gap_before;
	*end = t->pub.size_cut;
	*end_off = bt->limit_off;
}

int tk_btrace_thread_stream(const struct tk_btrace *bt, size_t i, uint8_t **out, size_t *len)
{
	size_t next = 0, part;
	return btrace_thread_part(bt, i, &next, SIZE_MAX, out, len, &part);
}
