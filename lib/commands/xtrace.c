/* Kunpeng xtrace in the commands: an instruction file opened together with its snapshot
 * file (found by name, as the xtrace source opens them: tk_xtrace_pair_open); info, dump,
 * decode, stats, convert (timelines and slices). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "tracekit/partial.h"
#include "tracekit/internal/source.h"

struct xt {
	const struct tk_cmd *c;
	struct tk_xtrace_pair p;      /* opened as the xtrace source opens it */
};

/* A chunk has been read: give its whole pages back now, on the worker, so that the final
 * munmap of a multi-GB mapping (16 ms for 545 MB, all on one thread) has little left to
 * tear down and the resident set stays small. */
static void release_chunk(const struct xt *x, size_t i)
{
	size_t b, e;

	if (!x->p.release)
		return;
	tk_xtrace_chunk(x->p.t, i, &b, &e);
	tk_release_pages(x->p.insn, b, e);
}

/* The pair's messages as the commands have always printed the library's: a warning says
 * so after the file name ("tracekit: FILE: warning: ..."). */
static void pair_msg(void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
		     const char *msg)
{
	const struct tk_cmd *c = ctx;

	tk_msg(c->msg, c->ctx, level == TK_LOG_WARN ? TK_LOG_INFO : level, file, offset, "%s%s",
	       level == TK_LOG_WARN ? "warning: " : "", msg);
}

static void xt_close(struct xt *x)
{
	if (x->p.t)
		tk_cmd_log_file(x->c, NULL);
	tk_xtrace_pair_close(&x->p);
}

static int xt_open(const struct tk_cmd *c, const char *file, struct tk_input *in,
		   const struct tk_format_info *fi, struct xt *x)
{
	const uint8_t *p;
	size_t n;
	int rc;

	memset(x, 0, sizeof *x);
	x->c = c;
	if ((rc = tk_cmd_map(c, file, in, &p, &n)))
		return rc;
	if (tk_xtrace_pair_open(&x->p, file, fi->id == TK_FMT_XTRACE_SNAP, in, p, n, pair_msg,
				(void *)c) < 0) {
		tk_cmd_log_file(c, NULL);
		return TK_EXIT_INPUT;
	}
	return 0;
}

/* xt_open for commands that walk instructions: a snapshot file alone is an error. */
static int xt_open_insn(const struct tk_cmd *c, const char *file, struct tk_input *in,
			const struct tk_format_info *fi, struct xt *x)
{
	int rc = xt_open(c, file, in, fi, x);

	if (rc)
		return rc;
	if (!x->p.insn) {
		CMD_ERROR(c, file, UINT64_MAX, "no instruction file beside this snapshot file");
		xt_close(x);
		return TK_EXIT_INPUT;
	}
	return 0;
}

/* Gap summaries: snapshot-file problems, then instruction-file GAPS; the status. */
static int xt_report(struct xt *x, const char *file, const struct tk_gap_stats *gaps)
{
	int a = tk_cmd_gaps(x->c, x->p.snap_path ? x->p.snap_path : file, tk_xtrace_open_gaps(x->p.t),
			    "bad snapshot");
	int b = tk_cmd_gaps(x->c, x->p.insn_path ? x->p.insn_path : file, gaps, "damaged region");
	return tk_cmd_max(a, b);
}

/* ---- statistics over all chunks with -j N (info, stats) -------------------------------- */
struct stats_job {
	const struct xt *x;
	const struct tk_xtrace *t;
	struct tk_xtrace_stats *total, *part;
	struct tk_gap_stats *gaps, *part_gaps;
	unsigned flags;
	struct tk_progress *prog;
	uint64_t done;
	uint64_t insns;       /* instructions in the chunks merged so far */
	int counted;          /* insns is absolute (chunk 0 began at a known count) */
	const char *snap_path;
	size_t first;         /* the run's first chunk (its I-th is chunk FIRST + I) */
};

static int stats_work(void *ctx, size_t i)
{
	struct stats_job *j = ctx;
	tk_xtrace_stats_init(&j->part[i], j->flags);
	memset(&j->part_gaps[i], 0, sizeof j->part_gaps[i]);
	int rc = tk_xtrace_stats_chunk(j->t, j->first + i, &j->part[i], &j->part_gaps[i]);
	release_chunk(j->x, j->first + i);
	return rc;
}

static int stats_merge(void *ctx, size_t i)
{
	struct stats_job *j = ctx;
	size_t b, e, si = tk_xtrace_chunk_snapshot(j->t, j->first + i);
	const struct tk_xtrace_snapfile *sf = tk_xtrace_snapfile(j->t);
	/* A snapshot's count of instructions before it must match the stream. */
	if (si != SIZE_MAX) {
		struct tk_xtrace_snapshot s;
		tk_xtrace_snapfile_get(sf, si, &s);
		if (j->first + i == 0 || !j->counted) {
			j->insns = s.total_insns;
			j->counted = 1;
		} else if (s.total_insns != j->insns) {
			CMD_WARN(j->x->c, j->snap_path, s.offset + 24, "snapshot %zu says %llu "
				 "instructions before it, the instruction stream has %llu", si,
				 (unsigned long long)s.total_insns, (unsigned long long)j->insns);
			j->insns = s.total_insns;
		}
	} else if (j->first + i == 0) {
		j->counted = 1;
	}
	const struct tk_xtrace_stats *ps = &j->part[i];
	j->insns += ps->insns[0] + ps->insns[1] + ps->insns[2] + ps->insns[3];
	if (j->part_gaps[i].count)
		j->counted = 0; /* instructions were lost: the next snapshot cannot be checked */
	tk_xtrace_stats_merge(j->total, &j->part[i]);
	tk_gap_stats_merge(j->gaps, &j->part_gaps[i]);
	tk_xtrace_stats_free(&j->part[i]);
	tk_xtrace_chunk(j->t, j->first + i, &b, &e);
	j->done += e - b;
	tk_progress_set(j->prog, j->done);
	return 0;
}

/* Statistics of chunks [FIRST, FIRST + NC), merged in order, with -j threads. */
static int xt_stats(struct xt *x, struct tk_xtrace_stats *s, struct tk_gap_stats *gaps,
		    unsigned flags, size_t first, size_t nc)
{
	struct tk_progress prog;
	struct stats_job j = { .x = x, .t = x->p.t, .total = s, .gaps = gaps, .flags = flags,
			       .prog = &prog, .snap_path = x->p.snap_path, .first = first };
	j.part = calloc(nc, sizeof *j.part);
	j.part_gaps = calloc(nc, sizeof *j.part_gaps);
	if (!j.part || !j.part_gaps) {
		free(j.part);
		free(j.part_gaps);
		return -TK_E_NOMEM;
	}
	tk_cmd_progress_init(x->c, &prog, "reading", x->p.n);
	/* Chunks end at snapshots, so their sizes vary (kernel code between two 1M-user-
	 * instruction snapshots, a cut stream): a deeper look-ahead lets the other workers go
	 * on past a long chunk. A finished part holds under 1 MB (the footprint sets). */
	unsigned nt = tk_cmd_jobs(x->c);
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nt, .window = 16 * (size_t)nt };
	int rc = tk_pool_run(&po, nc, stats_work, stats_merge, &j);
	tk_progress_finish(&prog);
	free(j.part);
	free(j.part_gaps);
	return rc;
}

/* Who was traced, instruction counts per EL, snapshots, vector length, time span. */
static int info(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *out)
{
	struct xt x;
	struct tk_xtrace_stats s;
	struct tk_gap_stats gaps = { 0 };
	int rc = xt_open(c, file, in, fi, &x);
	if (rc)
		return rc;
	const struct tk_xtrace_snapfile *sf = tk_xtrace_snapfile(x.p.t);
	const struct tk_xtrace_header *h = sf ? tk_xtrace_snapfile_header(sf) : NULL;
	int core = h ? h->stream_type == 1 : x.p.name.hint == 13;
	if (x.p.name.hint) {
		tk_buf_printf(out, "  %s: %llu (hint #%u", core ? "core" : "thread",
			      (unsigned long long)x.p.name.id, x.p.name.hint);
		if (x.p.name.hint == 13)
			tk_buf_puts(out, ", secondary core");
		tk_buf_printf(out, "), collection started at %llu\n",
			      (unsigned long long)x.p.name.timestamp);
	} else {
		tk_buf_puts(out, "  thread/core: unknown (name is not xtrace.TIME.ID.hintN.*.bin)\n");
	}
	if (x.p.insn_path != file && x.p.insn_path)
		tk_buf_printf(out, "  instruction file: %s (%zu bytes)\n", TK_TEXT(x.p.insn_path), x.p.n);
	if (x.p.snap_path && x.p.snap_path != file)
		tk_buf_printf(out, "  snapshot file: %s (%zu bytes)\n", TK_TEXT(x.p.snap_path), x.p.sn);
	if (x.p.insn) {
		tk_xtrace_stats_init(&s, TK_XT_STATS_COUNTS);
		rc = xt_stats(&x, &s, &gaps, TK_XT_STATS_COUNTS, 0, tk_xtrace_nchunks(x.p.t));
		uint64_t items = 0;
		for (int k = 0; k < TK_XT__COUNT; k++)
			items += s.items[k];
		tk_buf_printf(out, "  instructions: %llu (EL0 %llu, EL1 %llu",
			      (unsigned long long)(s.insns[0] + s.insns[1] + s.insns[2] + s.insns[3]),
			      (unsigned long long)s.insns[0], (unsigned long long)s.insns[1]);
		if (s.insns[2] || s.insns[3])
			tk_buf_printf(out, ", EL2 %llu, EL3 %llu", (unsigned long long)s.insns[2],
				      (unsigned long long)s.insns[3]);
		tk_buf_printf(out, "), %llu items, %llu memory accesses\n", (unsigned long long)items,
			      (unsigned long long)(s.loads + s.stores));
		if (s.time_first != TK_TIME_NONE)
			tk_buf_printf(out, "  time span: %llu .. %llu (%llu ticks, %llu TIME items)\n",
				      (unsigned long long)s.time_first, (unsigned long long)s.time_last,
				      (unsigned long long)(s.time_last - s.time_first),
				      (unsigned long long)s.items[TK_XT_TIME]);
		else
			tk_buf_puts(out, "  time span: no TIME items (memory order not recorded)\n");
		tk_xtrace_stats_free(&s);
	} else {
		tk_buf_puts(out, "  instruction file: not found beside it\n");
	}
	if (sf) {
		const struct tk_xtrace_snap_layout *l = tk_xtrace_snapfile_layout(sf);
		size_t ns = tk_xtrace_snapfile_count(sf);
		tk_buf_printf(out, "  snapshots: %zu, %u bytes each, vector length %u bits\n", ns,
			      l->size, ns ? l->vl_bits : 0);
		/* the header says which count; the interval is what the snapshots show */
		uint64_t every = tk_xtrace_snapfile_interval(sf);
		char iv[32] = "1M";
		if (every && every != 1000000)
			snprintf(iv, sizeof iv, "%llu", (unsigned long long)every);
		if (h)
			tk_buf_printf(out, "  snapshot header: version %llu, global snapshot %u, "
				      "every %s %s instructions, %s stream, memory order %s\n",
				      (unsigned long long)h->version, h->global_snapshot, iv,
				      h->split_type ? "total" : "user",
				      h->stream_type ? "core" : "thread",
				      h->mem_order ? "recorded" : "not recorded");
		else
			tk_buf_puts(out, "  snapshot header: none (old trace)\n");
		if (ns) {
			struct tk_xtrace_snapshot a, b;
			tk_xtrace_snapfile_get(sf, 0, &a);
			tk_xtrace_snapfile_get(sf, ns - 1, &b);
			tk_buf_printf(out, "  snapshot range: user instructions %llu .. %llu, "
				      "total %llu .. %llu\n", (unsigned long long)a.user_insns,
				      (unsigned long long)b.user_insns, (unsigned long long)a.total_insns,
				      (unsigned long long)b.total_insns);
		}
	} else {
		tk_buf_puts(out, "  snapshots: no snapshot file beside it\n");
	}
	int g = xt_report(&x, file, &gaps);
	xt_close(&x);
	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	return g;
}

/* A shard's run of the chunks (c->part), by size; the statistics of all when none. */
static int stats_range(const struct tk_cmd *c, const struct tk_xtrace *t, size_t *first,
		       size_t *count)
{
	size_t n = tk_xtrace_nchunks(t), b, e;
	uint64_t *sizes = c->part ? calloc(n + 1, sizeof *sizes) : NULL;
	uint32_t f = 0, k = (uint32_t)n;

	for (size_t i = 0; sizes && i < n; i++) {
		tk_xtrace_chunk(t, i, &b, &e);
		sizes[i] = e - b;
	}
	if (sizes) {
		tk_partial_shard_range(sizes, n, c->part->shard, c->part->nshards, &f, &k);
		c->part->nchunks = (uint32_t)n;
		c->part->first = f;
		c->part->count = k;
	}
	free(sizes);
	*first = f;
	*count = k;
	return c->part && !sizes ? -TK_E_NOMEM : 0;
}

/* A shard's statistics loaded, then merged in shard order: the trace's order. */
static int stats_loader(void *total, const uint8_t *data, size_t len, struct tk_partial_error *e)
{
	struct tk_xtrace_stats part;
	int rc;

	tk_xtrace_stats_init(&part, TK_XT_STATS_FOOTPRINT);
	if ((rc = tk_partial_xtrace_stats_load(&part, data, len, e)) == 0)
		tk_xtrace_stats_merge(total, &part);
	tk_xtrace_stats_free(&part);
	return rc;
}

/* stats, or (COUNTS_ONLY) decode --stat's count, of a shard's chunks (c->part), the
 * shards' partials merged, or the whole trace. */
static int stats_run(const struct tk_cmd *c, const char *file, struct tk_input *in,
		     const struct tk_format_info *fi, int counts_only)
{
	struct xt x;
	struct tk_xtrace_stats s;
	struct tk_gap_stats gaps = { 0 };
	struct tk_buf b;
	int to = tk_stats_format_by_name(c->o->to), rc, st = 0;
	int merging = c->part && c->part->nload, sharding = c->part && !merging;
	size_t first, count;

	if (!to && !sharding && !counts_only) {
		CMD_ERROR(c, NULL, UINT64_MAX, "stats: --to %s: expected text, json or csv", c->o->to);
		return TK_EXIT_USAGE;
	}
	if ((rc = xt_open_insn(c, file, in, fi, &x)))
		return rc;
	if (!sharding && (rc = c->out_open(c, NULL, &b))) {
		xt_close(&x);
		return rc;
	}
	tk_xtrace_stats_init(&s, TK_XT_STATS_FOOTPRINT);
	if (merging) {
		rc = 0;
		st = tk_cmd_part_load(c, stats_loader, &s);
	} else {
		if ((rc = stats_range(c, x.p.t, &first, &count)) == 0)
			rc = xt_stats(&x, &s, &gaps, counts_only ? TK_XT_STATS_COUNTS :
				      TK_XT_STATS_FOOTPRINT, first, count);
	}
	if (sharding && rc >= 0)
		st = tk_cmd_part_saved(c, file, tk_partial_xtrace_stats_save(&s, &c->part->data,
									       &c->part->len));
	if (!sharding && !st && counts_only)
		tk_buf_printf(&b, "instructions: %llu\n", (unsigned long long)(s.insns[0] + s.insns[1] +
										 s.insns[2] + s.insns[3]));
	else if (!sharding && !st)
		tk_out_xtrace_stats(&b, to, x.p.insn_path, x.p.n, tk_xtrace_nchunks(x.p.t), &s);
	tk_xtrace_stats_free(&s);
	if (!sharding) {
		int out = c->out_close(&b);   /* (after a failed load, nothing was written) */
		st = st ? st : out;
	}
	struct tk_losses lost = tk_cmd_summary_begin(c, &(struct tk_losses){ .gaps = gaps });
	int g = xt_report(&x, file, &lost.gaps);
	tk_cmd_summary_end(c);
	xt_close(&x);
	if (rc < 0 && st != TK_EXIT_OUTPUT) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	return tk_cmd_max(st, g);
}

static int stats(const struct tk_cmd *c, const char *file, struct tk_input *in,
		 const struct tk_format_info *fi, struct tk_buf *unused)
{
	(void)unused;
	return stats_run(c, file, in, fi, 0);
}

/* A damaged item at CUR's offset in a chunk that ends at END: counted, skipped to the
 * next sync point, which is returned. */
static size_t skip_damage(const struct xt *x, const struct tk_xtrace_cursor *cur, size_t end,
			  struct tk_gap_stats *gaps)
{
	size_t to = end;

	if (tk_xtrace_nchunks(x->p.t) == 1)
		to = tk_xtrace_resync(x->p.insn, end, cur->off);
	tk_gap_stats_add(gaps, cur->off, to - cur->off);
	return to;
}

static const char *damage_text(int r)
{
	return r == -TK_E_BAD_OPCODE ? "unknown token" : "item runs past the end of the data";
}

static int dump_chunks(const struct tk_cmd *c, const char *file, const struct xt *x,
		       struct tk_buf *out, struct tk_gap_stats *gaps);

/* Every token (instruction file) or every snapshot (snapshot file). */
static int dump(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *unused)
{
	const struct tk_cmd_opts *o = c->o;
	struct xt x;
	struct tk_buf b;
	struct tk_gap_stats gaps = { 0 };
	int rc = xt_open(c, file, in, fi, &x);

	(void)unused;
	if (rc)
		return rc;
	if ((rc = c->out_open(c, NULL, &b))) {
		xt_close(&x);
		return rc;
	}
	if (fi->id == TK_FMT_XTRACE_SNAP)
		tk_xtrace_snapfile_text(&b, tk_xtrace_snapfile(x.p.t), o->no_offset, o->quiet);
	if (fi->id != TK_FMT_XTRACE_SNAP)
		rc = dump_chunks(c, file, &x, &b, &gaps);
	int st = c->out_close(&b);
	int g = xt_report(&x, file, &gaps);
	xt_close(&x);
	if (rc < 0 && st != TK_EXIT_OUTPUT) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	return tk_cmd_max(st, g);
}

/* ---- decode: chunks decoded in parallel into memory, written in order ---------------- */
struct xt_part {
	struct tk_buf out, err;     /* text, and error messages to print at merge time */
	struct tk_gap_stats gaps;
	uint64_t insns;
};

struct xt_decode {
	const struct tk_cmd_opts *o;
	struct xt *x;
	struct xt_part *parts;
	struct tk_buf *out;
	struct tk_gap_stats gaps;
	uint64_t insns;
	struct tk_progress prog;
	uint64_t done;            /* bytes the jobs have walked (under LOCK) */
	/* Disassemblers are not thread-safe: each job borrows one from this stack. */
	pthread_mutex_t lock;
	struct tk_a64_disasm *free_dis[1100];
	size_t n_free;
	/* -j 1: chunks run in order on this thread, their text straight into OUT and their
	 * messages at once; else parts' text buffers, emptied ones kept here (a chunk's
	 * text is tens of MB: fresh pages for each cost more than the copy) */
	int direct;
	struct tk_buf spare[16];
	size_t n_spare;
};

/* Chunk CI's part begun; *TEXT: where its text goes. */
static int part_begin(struct xt_decode *d, size_t ci, struct tk_buf **text)
{
	struct xt_part *pt = &d->parts[ci];
	int rc;

	memset(pt, 0, sizeof *pt);
	if (d->direct) {
		*text = d->out;
		return 0;
	}
	pthread_mutex_lock(&d->lock);
	if (d->n_spare)
		pt->out = d->spare[--d->n_spare];
	pthread_mutex_unlock(&d->lock);
	if ((!pt->out.data && (rc = tk_buf_init(&pt->out, -1, 1 << 16)) < 0) ||
	    (rc = tk_buf_init(&pt->err, -1, 256)) < 0)
		return rc;
	*text = &pt->out;
	return 0;
}

/* A damaged item at AT in chunk CI, skipped to TO: said at once (-j 1) or kept for the
 * merge, in order. */
static void part_damage(struct xt_decode *d, size_t ci, int r, size_t at, size_t to)
{
	struct xt_part *pt = &d->parts[ci];
	char msg[160];

	snprintf(msg, sizeof msg, "%s (token 0x%02x); skipped %zu bytes to the next sync point "
		 "at 0x%zx", damage_text(r), d->x->p.insn[at], to - at, to);
	if (d->direct) {
		CMD_ERROR(d->x->c, d->x->p.insn_path, at, "%s", msg);
		return;
	}
	tk_buf_puts(&pt->err, msg);
	tk_buf_putc(&pt->err, 0);
	tk_buf_printf(&pt->err, "%zx", at);
	tk_buf_putc(&pt->err, 0);
}

static struct tk_a64_disasm *dis_get(struct xt_decode *d, int *err)
{
	struct tk_a64_disasm *dis = NULL;
	pthread_mutex_lock(&d->lock);
	if (d->n_free)
		dis = d->free_dis[--d->n_free];
	pthread_mutex_unlock(&d->lock);
	return dis ? dis : tk_a64_disasm_new(err);
}

static void dis_put(struct xt_decode *d, struct tk_a64_disasm *dis)
{
	if (!dis)
		return;
	pthread_mutex_lock(&d->lock);
	if (d->n_free < sizeof d->free_dis / sizeof d->free_dis[0])
		d->free_dis[d->n_free++] = dis, dis = NULL;
	pthread_mutex_unlock(&d->lock);
	tk_a64_disasm_free(dis);
}

static void insn_text(struct tk_buf *b, const struct tk_xtrace_item *it, struct tk_a64_disasm *dis)
{
	char text[256];

	if (it->pc == TK_XTRACE_PC_UNKNOWN)
		tk_buf_puts(b, "????????????????");
	else
		tk_buf_hex(b, it->pc, 16);
	if (dis) {
		tk_buf_puts(b, "  ");
		tk_buf_hex(b, it->opcode, 8);
		tk_buf_puts(b, "  ");
		size_t l = tk_a64_disasm(dis, it->pc == TK_XTRACE_PC_UNKNOWN ? 0 : it->pc,
					 it->opcode, text, sizeof text);
		tk_buf_put(b, text, l);
		if (it->el) {
			tk_buf_puts(b, "  ; el");
			tk_buf_u64(b, it->el);
		}
	}
	tk_buf_putc(b, '\n');
}

/* Progress: a job walked from *FROM to TO (the jobs run in parallel). */
static void walked(struct xt_decode *d, size_t to, size_t *from)
{
	pthread_mutex_lock(&d->lock);
	d->done += to - *from;
	tk_progress_set(&d->prog, d->done);
	pthread_mutex_unlock(&d->lock);
	*from = to;
}

static int decode_work(void *ctx, size_t ci)
{
	struct xt_decode *d = ctx;
	struct xt_part *pt = &d->parts[ci];
	const uint8_t *p = d->x->p.insn;
	size_t begin, end;
	struct tk_xtrace_cursor c;
	struct tk_xtrace_item it;
	int no_dis = d->o->no_disasm, stat = d->o->stat, rc;

	struct tk_buf *b;
	if ((rc = part_begin(d, ci, &b)) < 0)
		return rc;
	struct tk_a64_disasm *dis = NULL;
	if (!no_dis && !stat && !(dis = dis_get(d, &rc)))
		return rc;
	tk_xtrace_chunk(d->x->p.t, ci, &begin, &end);
	tk_xtrace_cursor_init(&c, p, begin, end);
	for (;;) {
		int r = tk_xtrace_next(&c, &it);
		if (r == 0)
			break;
		if (r < 0) {
			size_t at = c.off, to = skip_damage(d->x, &c, end, &pt->gaps);
			part_damage(d, ci, r, at, to);
			if (!stat)
				tk_buf_printf(b, "[gap at offset 0x%zx: %zu bytes skipped]\n", at, to - at);
			tk_xtrace_cursor_init(&c, p, to, end);
			continue;
		}
		if (it.kind <= TK_XT_PCINST) {
			if (!(++pt->insns & 65535))  /* a chunk can be the whole file */
				walked(d, c.off, &begin);
			if (!stat)
				insn_text(b, &it, dis);
		} else if (!no_dis && !stat) {
			tk_buf_puts(b, "    ");
			tk_xtrace_item_text(b, &it);
			tk_buf_putc(b, '\n');
		}
	}
	dis_put(d, dis);
	walked(d, end, &begin);
	return b->err;
}

static int decode_merge(void *ctx, size_t ci)
{
	struct xt_decode *d = ctx;
	struct xt_part *pt = &d->parts[ci];

	/* the chunk's messages, in order: pairs of text and offset, each ended by a 0 */
	for (size_t at = 0; at < pt->err.len;) {
		const char *msg = (const char *)pt->err.data + at;
		const char *off = msg + strlen(msg) + 1;
		CMD_ERROR(d->x->c, d->x->p.insn_path, strtoull(off, NULL, 16), "%s", msg);
		at = (size_t)(off - (const char *)pt->err.data) + strlen(off) + 1;
	}
	if (!d->direct)
		tk_buf_put_large(d->out, pt->out.data, pt->out.len);
	tk_gap_stats_merge(&d->gaps, &pt->gaps);
	d->insns += pt->insns;
	pthread_mutex_lock(&d->lock);
	if (pt->out.data && !pt->out.err && d->n_spare < sizeof d->spare / sizeof d->spare[0]) {
		pt->out.len = 0;
		d->spare[d->n_spare++] = pt->out;
		pt->out = (struct tk_buf){ 0 };
	}
	pthread_mutex_unlock(&d->lock);
	tk_buf_free(&pt->out);
	tk_buf_free(&pt->err);
	return d->out->err;
}

/* The parts' and the spares' buffers freed. */
static void parts_free(struct xt_decode *d, size_t n)
{
	for (size_t i = 0; d->parts && i < n; i++) {
		tk_buf_free(&d->parts[i].out);
		tk_buf_free(&d->parts[i].err);
	}
	free(d->parts);
	while (d->n_spare)
		tk_buf_free(&d->spare[--d->n_spare]);
}

/* dump's text of chunk CI into its part (see decode_work: the same parts and merge) */
static int dump_work(void *ctx, size_t ci)
{
	struct xt_decode *d = ctx;
	struct xt_part *pt = &d->parts[ci];
	const uint8_t *p = d->x->p.insn;
	size_t begin, end;
	struct tk_xtrace_cursor cur;
	struct tk_xtrace_item it;
	uint64_t items = 0;
	int rc;

	struct tk_buf *b;
	if ((rc = part_begin(d, ci, &b)) < 0)
		return rc;
	tk_xtrace_chunk(d->x->p.t, ci, &begin, &end);
	tk_xtrace_cursor_init(&cur, p, begin, end);
	for (;;) {
		int r = tk_xtrace_next(&cur, &it);
		if (r == 0)
			break;
		if (!(++items & 65535))
			walked(d, cur.off, &begin);
		if (r < 0) {
			size_t at = cur.off, to = skip_damage(d->x, &cur, end, &pt->gaps);
			part_damage(d, ci, r, at, to);
			if (!d->o->quiet)
				tk_buf_printf(b, "%016zx  GAP %zu bytes\n", at, to - at);
			tk_xtrace_cursor_init(&cur, p, to, end);
			continue;
		}
		if (d->o->quiet)
			continue;
		if (!d->o->no_offset) {
			tk_buf_hex(b, it.offset, 16);
			tk_buf_puts(b, "  ");
		}
		tk_xtrace_item_text(b, &it);
		tk_buf_putc(b, '\n');
	}
	walked(d, end, &begin);
	release_chunk(d->x, ci);
	return b->err;
}

/* Every chunk's tokens onto OUT in order: with -j N, N chunks at a time into memory. */
static int dump_chunks(const struct tk_cmd *c, const char *file, const struct xt *x,
		       struct tk_buf *out, struct tk_gap_stats *gaps)
{
	size_t nc = tk_xtrace_nchunks(x->p.t);
	struct xt_decode d = { .o = c->o, .x = (struct xt *)x, .out = out,
			       .lock = PTHREAD_MUTEX_INITIALIZER,
			       .direct = tk_cmd_jobs(c) <= 1 || nc <= 1 };
	int rc;

	if (!(d.parts = calloc(nc ? nc : 1, sizeof *d.parts)))
		return -TK_E_NOMEM;
	tk_cmd_progress_init(c, &d.prog, file, x->p.n);
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = tk_cmd_jobs(c) };
	rc = tk_pool_run(&po, nc, dump_work, decode_merge, &d);
	tk_progress_finish(&d.prog);
	parts_free(&d, nc);
	tk_gap_stats_merge(gaps, &d.gaps);
	return rc;
}

static int decode(const struct tk_cmd *c, const char *file, struct tk_input *in,
		  const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct xt x;
	struct tk_buf out;
	int rc;

	(void)unused;
	/* a shard of decode --stat, or their merge: the count of the statistics' partial */
	if (c->part)
		return c->o->stat ? stats_run(c, file, in, fi, 1) : TK_EXIT_USAGE;
	if ((rc = xt_open_insn(c, file, in, fi, &x)))
		return rc;
	if ((rc = c->out_open(c, NULL, &out))) {
		xt_close(&x);
		return rc;
	}
	size_t nc = tk_xtrace_nchunks(x.p.t);
	struct xt_decode d = { .o = c->o, .x = &x, .out = &out, .lock = PTHREAD_MUTEX_INITIALIZER,
			       .direct = tk_cmd_jobs(c) <= 1 || nc <= 1 };
	d.parts = calloc(nc ? nc : 1, sizeof *d.parts);
	tk_cmd_progress_init(c, &d.prog, file, x.p.n);
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = tk_cmd_jobs(c) };
	rc = d.parts ? tk_pool_run(&po, nc, decode_work, decode_merge, &d) : -TK_E_NOMEM;
	tk_progress_finish(&d.prog);
	parts_free(&d, nc);
	while (d.n_free)
		tk_a64_disasm_free(d.free_dis[--d.n_free]);
	if (c->o->stat)
		tk_buf_printf(&out, "instructions: %llu\n", (unsigned long long)d.insns);
	int st = c->out_close(&out);
	int g = xt_report(&x, file, &d.gaps);
	xt_close(&x);
	if (rc < 0 && st != TK_EXIT_OUTPUT) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	return tk_cmd_max(st, g);
}

/* -j N timelines: chunks decoded on the workers, each one's events held (thinned by the
 * timeline: the blocks between calls merged) until its turn, then handed on in order:
 * the same events as one pass, so the same bytes. */
struct tl_run {
	const struct xt *x;
	uint32_t track;
	struct tk_sink sink;              /* the timeline's */
	struct tk_event_hold *parts;      /* per chunk */
	struct tk_gap_stats *gaps, *part_gaps;
};

static int tl_work(void *ctx, size_t ci)
{
	struct tl_run *r = ctx;
	struct tk_event_hold *pt = &r->parts[ci];

	pt->to = &r->sink;
	int rc = tk_xtrace_decode_chunk(r->x->p.t, ci, r->track, 0,
					(struct tk_sink){ tk_event_hold_events, pt, NULL }, &r->part_gaps[ci]);
	release_chunk(r->x, ci);
	return rc;
}

static int tl_merge(void *ctx, size_t ci)
{
	struct tl_run *r = ctx;

	tk_gap_stats_merge(r->gaps, &r->part_gaps[ci]);
	return tk_event_vec_flush(&r->parts[ci].v, r->sink);
}

/* All chunks into SINK: in order on this thread, or with -j N as above. */
static int tl_decode(const struct xt *x, uint32_t track, struct tk_sink sink, struct tk_gap_stats *gaps)
{
	size_t nc = tk_xtrace_nchunks(x->p.t);
	unsigned nt = tk_cmd_jobs(x->c);
	int rc = 0;

	if (nt <= 1 || nc <= 1) {
		for (size_t ci = 0; rc >= 0 && ci < nc; ci++) {
			rc = tk_xtrace_decode_chunk(x->p.t, ci, track, 0, sink, gaps);
			release_chunk(x, ci);
		}
		return rc;
	}
	struct tl_run r = { x, track, sink, calloc(nc, sizeof *r.parts), gaps,
			    calloc(nc, sizeof *r.part_gaps) };
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nt };
	rc = r.parts && r.part_gaps ? tk_pool_run(&po, nc, tl_work, tl_merge, &r) : -TK_E_NOMEM;
	for (size_t ci = 0; r.parts && ci < nc; ci++)
		tk_event_vec_free(&r.parts[ci].v);
	free(r.parts);
	free(r.part_gaps);
	return rc;
}

/* --to perfetto|chrome: calls as slices on the thread's track (time = instruction
 * number), chunk after chunk into the streaming timeline writer. */
static int timeline(const struct tk_cmd *c, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi, enum tk_timeline_kind kind)
{
	struct xt x;
	struct tk_gap_stats gaps = { 0 };
	struct tk_sym *sym = NULL;
	struct tk_buf out;
	int rc, said = 0;

	if ((rc = xt_open_insn(c, file, in, fi, &x)))
		return rc;
	if ((c->o->n_elf && !(sym = tk_cmd_sym_open(c, 1, &rc))) || (rc = c->out_open(c, NULL, &out))) {
		tk_sym_free(sym);
		xt_close(&x);
		return rc;
	}
	struct tk_timeline_opts to = { .sz = sizeof to, .kind = kind, .sym = sym,
				       .max_events = c->o->max_events, .process_name = x.p.insn_path };
	struct tk_timeline *tl = tk_cmd_timeline_new(c, file, &out, &to, &said);
	rc = 0;
	uint32_t track = (uint32_t)x.p.name.id;
	if (tl) {
		char name[64];
		snprintf(name, sizeof name, "%s %u", x.p.name.hint == 13 ? "core" : "thread", track);
		tk_timeline_track_name(tl, track, name);
	}
	if (tl)
		rc = tl_decode(&x, track, tk_timeline_sink(tl), &gaps);
	if (tl && rc >= 0)
		rc = tk_timeline_finish(tl);
	if (tl) {
		uint64_t dropped = 0;
		tk_timeline_slices(tl, &dropped);
		if (dropped)
			CMD_WARN(c, file, UINT64_MAX, "%llu slices left out (--max-events)",
				 (unsigned long long)dropped);
	}
	tk_timeline_free(tl);
	int st = tk_cmd_max(c->out_close(&out), said);
	if (rc < 0 && st != TK_EXIT_OUTPUT) {
		CMD_ERROR(c, file, UINT64_MAX, "timeline: %s", tk_strerror(rc));
		st = TK_EXIT_INPUT;
	}
	int g = xt_report(&x, file, &gaps);
	tk_sym_free(sym);
	xt_close(&x);
	return tk_cmd_max(st, g);
}

/* --slice K:N: instruction + snapshot file starting at snapshot K, N instructions. */
static int convert(const struct tk_cmd *c, const char *file, struct tk_input *in,
		   const struct tk_format_info *fi, struct tk_buf *unused)
{
	const struct tk_cmd_opts *o = c->o;
	uint64_t k, count;
	char insn_out[4096], snap_out[4096];
	enum tk_timeline_kind tk = o->to ? tk_timeline_kind_by_name(o->to) : 0;

	(void)unused;
	if (!o->slice && tk)
		return timeline(c, file, in, fi, tk);
	if (!o->slice && o->to && tk_out_kind_by_name(o->to))
		return TK_EXIT_AS_PROFILE;
	if (!o->slice || tk_cmd_parse_range(o->slice, &k, &count) < 0 || !o->output) {
		CMD_ERROR(c, NULL, UINT64_MAX, "convert: xtrace input needs --slice K:N and -o FILE, "
			  "or --to perfetto|chrome|folded|pprof (see: tracekit help convert)");
		return TK_EXIT_USAGE;
	}
	int plain = tk_cmd_convert_plain(c, "--slice");
	if (plain)
		return plain;
	size_t ol = strlen(o->output);
	snprintf(insn_out, sizeof insn_out, "%s%s", o->output,
		 ol >= 14 && strcmp(o->output + ol - 14, ".xinsndata.bin") == 0 ? "" : ".xinsndata.bin");
	if (tk_xtrace_companion(insn_out, snap_out, sizeof snap_out) < 0) {
		CMD_ERROR(c, insn_out, UINT64_MAX, "output name too long");
		return TK_EXIT_USAGE;
	}
	struct xt x;
	int rc = xt_open(c, file, in, fi, &x);
	if (rc)
		return rc;
	const struct tk_xtrace_snapfile *sf = tk_xtrace_snapfile(x.p.t);
	struct tk_xtrace_snapshot s;
	if (!x.p.insn || !sf || k >= tk_xtrace_snapfile_count(sf)) {
		CMD_ERROR(c, file, UINT64_MAX, "convert --slice: no snapshot %llu (the trace has %zu)",
			  (unsigned long long)k, sf ? tk_xtrace_snapfile_count(sf) : 0);
		xt_close(&x);
		return TK_EXIT_USAGE;
	}
	tk_xtrace_snapfile_get(sf, (size_t)k, &s);
	if (s.file_no != 0 || s.index >= x.p.n || (x.p.insn[s.index] & 0x3f) != 0x09) {
		CMD_ERROR(c, x.p.snap_path, s.offset + 8, "snapshot %llu does not point at a PCINST in "
			  "the instruction file; cannot start a slice there", (unsigned long long)k);
		xt_close(&x);
		return TK_EXIT_INPUT;
	}
	/* the input's companion is an input too */
	const char *also[2] = { x.p.insn_path, x.p.snap_path };
	struct tk_outfile *ifile = c->outfile_open(c, insn_out, also, 2, &rc);
	struct tk_outfile *sfile = ifile ? c->outfile_open(c, snap_out, also, 2, &rc) : NULL;
	if (!sfile) {
		if (ifile)
			tk_outfile_close(ifile, 0);
		xt_close(&x);
		return rc;
	}
	const struct tk_xtrace_header *h = tk_xtrace_snapfile_header(sf);
	struct tk_xtrace_writer_opts wo = { .sz = sizeof wo,
					    .vl_bits = tk_xtrace_snapfile_layout(sf)->vl_bits };
	if (h)
		wo.header = *h;
	else
		wo.no_header = 1;
	int err = 0;
	struct tk_xtrace_writer *w = tk_xtrace_writer_new(tk_outfile_fd(ifile), tk_outfile_fd(sfile),
							  &wo, &err);
	if (!w) {
		CMD_ERROR(c, insn_out, UINT64_MAX, "%s", tk_strerror(err));
		tk_outfile_close(ifile, 0);
		tk_outfile_close(sfile, 0);
		xt_close(&x);
		return TK_EXIT_INPUT;
	}
	struct tk_xtrace_cursor cur;
	struct tk_xtrace_item it;
	struct tk_gap_stats gaps = { 0 };
	size_t next_snap = (size_t)k, nsnaps = tk_xtrace_snapfile_count(sf), written = 0;
	uint64_t insns = 0;
	tk_xtrace_cursor_init(&cur, x.p.insn, (size_t)s.index, x.p.n);
	for (;;) {
		int r = tk_xtrace_next(&cur, &it);
		if (r == 0)
			break;
		if (r < 0) {
			CMD_ERROR(c, x.p.insn_path, cur.off, "%s (token 0x%02x); the slice ends here",
				  r == -TK_E_BAD_OPCODE ? "unknown token" : "item runs past the end",
				  x.p.insn[cur.off]);
			tk_gap_stats_add(&gaps, cur.off, x.p.n - cur.off);
			break;
		}
		if (it.kind <= TK_XT_PCINST && insns++ == count)
			break;
		/* Every snapshot at this position goes into the slice, re-pointed. */
		while (next_snap < nsnaps) {
			struct tk_xtrace_snapshot t;
			tk_xtrace_snapfile_get(sf, next_snap, &t);
			if (t.file_no != 0 || t.index > it.offset)
				break;
			if (t.index == it.offset && it.kind == TK_XT_PCINST) {
				tk_xtrace_write_snapshot(w, &t);
				written++;
			}
			next_snap++;
		}
		tk_xtrace_write_raw(w, x.p.insn + it.offset, it.len);
	}
	rc = tk_xtrace_writer_close(w);
	int errnum = errno;
	if (rc >= 0 && (tk_outfile_close(ifile, 1) < 0 || tk_outfile_close(sfile, 1) < 0)) {
		rc = -TK_E_IO;
		errnum = errno;
	} else if (rc < 0) {
		tk_outfile_close(ifile, 0);
		tk_outfile_close(sfile, 0);
	}
	if (rc < 0) {
		CMD_ERROR(c, insn_out, UINT64_MAX, "write failed: %s",
			  rc == -TK_E_IO ? strerror(errnum) : tk_strerror(rc));
		xt_close(&x);
		return TK_EXIT_OUTPUT;
	}
	if (!o->quiet)
		CMD_NOTE(c, NULL, "wrote %s and %s: %llu instructions from snapshot %llu, "
			 "%zu snapshots", insn_out, snap_out,
			 (unsigned long long)(insns > count ? count : insns), (unsigned long long)k,
			 written);
	xt_close(&x);
	return tk_cmd_gaps(c, file, &gaps, "damaged region");
}

const tk_cmd_fn tk_cmd_xtrace[TK_CMD__COUNT] = {
	[TK_CMD_INFO] = info, [TK_CMD_DUMP] = dump, [TK_CMD_DECODE] = decode,
	[TK_CMD_STATS] = stats, [TK_CMD_CONVERT] = convert,
	[TK_CMD_RECORD] = tk_cmd_record_qemu,
};

/* xtrace's options. */
const struct tk_cmd_option tk_cmd_xtrace_options[] = {
	{ "slice", "K:N", "files that start at snapshot K and hold N instructions (-o FILE)",
	  TK_CMD_BIT(TK_CMD_CONVERT), TK_OPT_STRING, CMD_FIELD(slice), 0 },
	{ "qemu", NULL, "run an AArch64 program under qemu-aarch64 and write xtrace files",
	  TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_FLAG, CMD_FIELD(record), 0,
	  TK_FMT_XTRACE_INSN },
	{ NULL, NULL, NULL, 0, 0, 0, 0, 0 },
};
