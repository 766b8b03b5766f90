/* Kanata pipeline logs (and gem5 O3PipeView, converted to Kanata) in the commands: check,
 * stats, dump, info, convert. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "tracekit/partial.h"

/* The reader's diagnostics: errors only (warnings, e.g. L after R, common in real logs,
 * are for tracekit check), the first LIMIT of them (0: all). */
struct diag {
	const struct tk_cmd *c;
	const char *file;
	struct tk_buf *out;          /* check: onto the output, all of them */
	uint64_t shown, limit;
};

static void diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct diag *k = ctx;

	if (k->out) {
		tk_buf_text(k->out, k->file, strlen(k->file));
		tk_buf_printf(k->out, ":%llu: %s: %s\n", (unsigned long long)d->line,
			      d->level == TK_LOG_ERROR ? "error" : "warning", d->msg);
		return;
	}
	if (d->level != TK_LOG_ERROR)
		return;
	if (!k->limit || k->shown++ < k->limit)
		tk_cmd_line_msg(k->c, k->file, d->line, 1, d->msg);
}

/* A new output OUT, then the reader with RO over IN: the reader (*RC: what its run
 * returned), or NULL with *RC an exit status after saying why. */
static struct tk_kanata_reader *reader_run(const struct tk_cmd *c, const char *file,
					   struct tk_input *in,
					   const struct tk_kanata_reader_opts *ro,
					   struct tk_buf *out, int *rc)
{
	struct tk_kanata_reader *r;
	int err;

	if ((*rc = c->out_open(c, NULL, out)))
		return NULL;
	if (!(r = tk_kanata_reader_new(ro, &err))) {
		c->out_close(out);
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(err));
		*rc = TK_EXIT_INPUT;
		return NULL;
	}
	*rc = tk_kanata_reader_run(r, in);
	return r;
}

static int check_summary(const struct tk_cmd *c, const char *file, struct tk_buf *out, int rc,
			 const struct tk_kanata_counts *n);

/* check at -j N: the parallel statistics' parse, which makes the same diagnostics in the
 * same order (every one kept with its text) and the same counts; a compressed log's
 * chunks read off its stream in turn (one under a chunk's size compressed, in order). */
static int check_parallel(const struct tk_cmd *c, const char *file, struct tk_input *in)
{
	struct tk_buf out;
	struct diag dc = { c, file, &out, 0, 0 };
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .jobs = tk_cmd_jobs(c), .diag = diag,
					   .ctx = &dc, .chunk_bytes = c->o->kanata_chunk,
					   .keep_diags = 1, .counts_only = 1 };
	struct tk_kanata_stats st;
	struct tk_progress prog;
	int rc;

	if ((rc = c->out_open(c, NULL, &out)))
		return rc;
	tk_cmd_progress_init(c, &prog, file, tk_input_file_size(in));
	so.progress = &prog;
	rc = tk_kanata_stats_compute(in, &so, &st);
	tk_progress_finish(&prog);
	if (rc < 0) {   /* (no offset: the chunks' readers stop apart) */
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		rc = tk_cmd_max(c->out_close(&out), TK_EXIT_INPUT);
	} else {
		rc = check_summary(c, file, &out, rc, &st.counts);
	}
	tk_kanata_stats_free(&st);
	return rc;
}

static int check(const struct tk_cmd *c, const char *file, struct tk_input *in,
		 const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct tk_buf out;
	struct diag dc = { c, file, &out, 0, 0 };
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .diag = diag,
					    .ctx = &dc };
	struct tk_kanata_reader *r;
	int rc;

	(void)fi, (void)unused;
	if (tk_cmd_jobs(c) > 1)
		return check_parallel(c, file, in);
	if (!(r = reader_run(c, file, in, &ro, &out, &rc)))
		return rc;
	rc = check_summary(c, file, &out, rc, tk_kanata_reader_counts(r));
	tk_kanata_reader_free(r);
	return rc;
}

/* The line after the diagnostics, and check's exit status (OUT closed). */
static int check_summary(const struct tk_cmd *c, const char *file, struct tk_buf *out, int rc,
			 const struct tk_kanata_counts *n)
{
	if (rc < 0) {
		CMD_ERROR(c, file, n->bytes, "%s", tk_strerror(rc));
	} else {
		tk_buf_printf(out, "%s: %llu errors, %llu warnings in %llu lines; %llu instructions "
			      "(%llu retired, %llu flushed, %llu in flight at end)\n", TK_TEXT(file),
			      (unsigned long long)n->errors, (unsigned long long)n->warnings,
			      (unsigned long long)n->lines, (unsigned long long)n->insns,
			      (unsigned long long)n->retired, (unsigned long long)n->flushed,
			      (unsigned long long)n->in_flight);
	}
	int status = rc < 0 ? TK_EXIT_INPUT : (n->errors || n->warnings) ? TK_EXIT_SKIPPED : TK_EXIT_CLEAN;
	return tk_cmd_max(c->out_close(out), status);
}

/* A shard's run of the chunks (c->part) parsed, as its partial result; its diagnostics
 * are in it, for the merge to report in line order with the seams' own. */
static int stats_shard(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       const struct tk_kanata_stats_opts *so)
{
	uint64_t *sizes;
	size_t n;
	uint32_t first = 0, count = 0;
	int rc = tk_kanata_stats_chunks(in, so, &sizes, &n);

	if (rc >= 0) {
		tk_partial_shard_range(sizes, n, c->part->shard, c->part->nshards, &first, &count);
		c->part->nchunks = (uint32_t)n;
		c->part->first = first;
		c->part->count = count;
		rc = tk_kanata_stats_shard(in, so, first, count, &c->part->data, &c->part->len);
	}
	free(sizes);
	return tk_cmd_part_saved(c, file, rc);
}

static int merge_loader(void *m, const uint8_t *data, size_t len, struct tk_partial_error *e)
{
	e->code = -TK_E_BAD_FORMAT;
	return tk_kanata_stats_merge_add(m, data, len, &e->offset, e->msg, sizeof e->msg);
}

/* The shards' partials (c->part->load) merged in order into ST. */
static int stats_merge(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       struct tk_kanata_stats_opts *so, struct tk_kanata_stats *st)
{
	int rc, status;
	struct tk_kanata_stats_merge *m = tk_kanata_stats_merge_new(so, in, &rc);

	memset(st, 0, sizeof *st);
	if (!m) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	if (!(status = tk_cmd_part_load(c, merge_loader, m)) &&
	    (rc = tk_kanata_stats_merge_end(m, st)) < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		status = TK_EXIT_INPUT;
	}
	so->window = tk_kanata_stats_merge_window(m);
	tk_kanata_stats_merge_free(m);
	return status;
}

struct gem5_pipe;
static void gem5_pipe_end(struct gem5_pipe *g, struct tk_kanata_counts *counts);

/* Kanata statistics of IN, a Kanata log, or the pipe of G's conversion of a gem5 log (no
 * shards; the progress is the original's; lines counted in the original). */
static int stats_of(const struct tk_cmd *c, const char *file, struct tk_input *in,
		    struct gem5_pipe *g)
{
	const struct tk_cmd_opts *o = c->o;
	struct diag dc = { c, file, NULL, 0, 20 };
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .window = o->window,
					   .slowest = o->slowest, .jobs = tk_cmd_jobs(c),
					   .diag = diag, .ctx = &dc, .chunk_bytes = o->kanata_chunk };
	struct tk_kanata_stats st;
	struct tk_buf out;
	struct tk_progress prog;
	const char *to = o->to ? o->to : "text";
	int rc;

	tk_cmd_progress_init(c, &prog, file, tk_input_file_size(in));
	so.progress = g ? NULL : &prog;
	if (c->part && !c->part->nload) {
		rc = stats_shard(c, file, in, &so);
		tk_progress_finish(&prog);
		return rc;
	}
	if (!tk_stats_format_by_name(to)) {
		CMD_ERROR(c, NULL, UINT64_MAX, "stats: --to %s: expected text, json or csv", to);
		return TK_EXIT_USAGE;
	}
	if (c->part) {
		rc = stats_merge(c, file, in, &so, &st);
		tk_progress_finish(&prog);
		if (rc) {
			tk_kanata_stats_free(&st);
			return rc;
		}
	} else {
		rc = tk_kanata_stats_compute(in, &so, &st);
		tk_progress_finish(&prog);
		if (rc < 0) {
			CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
			tk_kanata_stats_free(&st);
			return TK_EXIT_INPUT;
		}
	}
	if (dc.shown > 20)
		CMD_NOTE(c, file, "%llu more diagnostics not shown (tracekit check lists all)",
			 (unsigned long long)(dc.shown - 20));
	if (st.counts.warnings && !o->quiet)
		CMD_NOTE(c, file, "%llu warnings (tracekit check lists them)",
			 (unsigned long long)st.counts.warnings);
	if ((rc = c->out_open(c, NULL, &out))) {
		tk_kanata_stats_free(&st);
		return rc;
	}
	if (g) {
		gem5_pipe_end(g, &st.counts);
		st.converted_from = tk_format_name(TK_FMT_GEM5_O3);
	}
	tk_out_kanata_stats(&out, tk_stats_format_by_name(to), file, &st, so.window);
	rc = c->out_close(&out);
	int status = st.counts.errors ? TK_EXIT_SKIPPED : TK_EXIT_CLEAN;
	tk_kanata_stats_free(&st);
	return tk_cmd_max(rc, status);
}

static int stats(const struct tk_cmd *c, const char *file, struct tk_input *in,
		 const struct tk_format_info *fi, struct tk_buf *unused)
{
	(void)fi, (void)unused;
	return stats_of(c, file, in, NULL);
}

/* Every command with its line, offset and cycle (at -j N: chunks at once, the same text). */
static int dump(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct tk_buf out;
	struct diag dc = { c, file, NULL, 0, 0 };
	struct tk_kanata_dump_opts o = { .sz = sizeof o, .jobs = tk_cmd_jobs(c),
					 .chunk_bytes = c->o->kanata_chunk,
					 .no_offset = c->o->no_offset, .quiet = c->o->quiet,
					 .diag = diag, .ctx = &dc };
	struct tk_kanata_counts n;
	struct tk_progress prog;
	int rc;

	(void)fi, (void)unused;
	if ((rc = c->out_open(c, NULL, &out)))
		return rc;
	/* (read in order, the input shows its own progress) */
	int parallel = o.jobs > 1 && tk_input_compression(in) == TK_COMP_NONE;
	if (parallel) {
		tk_cmd_progress_init(c, &prog, file, tk_input_file_size(in));
		o.progress = &prog;
	}
	rc = tk_kanata_dump(in, &o, &out, &n);
	if (parallel)
		tk_progress_finish(&prog);
	int status = rc < 0 ? TK_EXIT_INPUT : n.errors ? TK_EXIT_SKIPPED : TK_EXIT_CLEAN;
	if (rc < 0)
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
	return tk_cmd_max(c->out_close(&out), status);
}

/* What the reader finds, in one line (tracekit stats has the rest). */
static int info(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *out)
{
	/* the counts are the statistics' (parsed in parallel at -j N, the same for any N) */
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .jobs = tk_cmd_jobs(c),
					   .chunk_bytes = c->o->kanata_chunk };
	struct tk_kanata_stats st;
	size_t lanes = 0;
	int rc = tk_kanata_stats_compute(in, &so, &st);

	(void)fi;
	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		tk_kanata_stats_free(&st);
		return TK_EXIT_INPUT;
	}
	for (size_t i = 0; i < st.nstages; i++) {
		size_t j = 0;
		while (j < i && strcmp(st.stages[j].lane, st.stages[i].lane))
			j++;
		lanes += j == i;
	}
	const struct tk_kanata_counts *n = &st.counts;
	tk_buf_printf(out, "  %llu instructions (%llu retired, %llu flushed, %llu in flight at end), "
		      "cycles %lld to %lld, %zu stages in %zu lane(s), %zu thread(s), %llu lines\n",
		      (unsigned long long)n->insns, (unsigned long long)n->retired,
		      (unsigned long long)n->flushed, (unsigned long long)n->in_flight,
		      (long long)n->first_cycle, (long long)n->last_cycle, st.nstages, lanes,
		      st.nthreads, (unsigned long long)n->lines);
	if (n->errors)
		tk_buf_printf(out, "  %llu lines skipped (tracekit check %s lists them)\n",
			      (unsigned long long)n->errors, TK_TEXT(file));
	rc = n->errors ? TK_EXIT_SKIPPED : TK_EXIT_CLEAN;
	tk_kanata_stats_free(&st);
	return rc;
}

static const char *stage_name(void *ctx, unsigned stage, const char **lane)
{
	return tk_kanata_decoder_stage(*(struct tk_kanata_decoder **)ctx, stage, lane);
}

/* A Kanata decoder feeding SINK, of the log IN (or of CONVERTED, the pipe of a gem5
 * log's conversion, when not NULL). -j N: a file is parsed in chunks on N threads (PROG
 * follows them; a compressed one's chunks read off its stream in turn), SINK called on the
 * calling thread as they are merged; a pipe (or CONVERTED) is read in order, its reader
 * and SINK on two threads through a relay (*RELAY; NULL at -j 1) from -j RELAY_FROM on. */
static struct tk_kanata_decoder *decoder_new(const struct tk_cmd *c, const char *file,
					     struct tk_sink sink, struct tk_input *in,
					     struct tk_input *converted, struct tk_progress *prog,
					     unsigned relay_from, struct tk_relay **relay, int *err)
{
	struct tk_kanata_decoder *d;
	int chunks = tk_cmd_jobs(c) > 1 && !converted &&
		     (tk_input_compression(in) == TK_COMP_NONE || !tk_input_is_pipe(in));

	*relay = NULL;
	if (tk_cmd_jobs(c) >= relay_from && tk_cmd_jobs(c) > 1 && !chunks &&
	    !(*relay = tk_relay_new(sink, err)))
		return NULL;
	if (!(d = tk_kanata_decoder_new(*relay ? tk_relay_sink(*relay) : sink, err))) {
		tk_relay_free(*relay);
		*relay = NULL;
		return NULL;
	}
	if (chunks) {
		tk_cmd_progress_init(c, prog, file, tk_input_file_size(in));
		tk_kanata_decoder_set_jobs(d, tk_cmd_jobs(c), c->o->kanata_chunk, prog);
	}
	return d;
}

/* The log IN decoded; with a relay, once the consumer has every event (its error first). */
static int decode_all(struct tk_kanata_decoder *d, struct tk_relay *relay, struct tk_input *in,
		      struct tk_progress *prog)
{
	int rc = tk_kanata_decode(d, in);

	if (relay) {
		int rrc = tk_relay_finish(relay);
		rc = rc < 0 ? rc : rrc;
		tk_relay_free(relay);
	}
	tk_progress_finish(prog);
	return rc;
}

/* Chrome / Perfetto: neutral pipeline events into the shared timeline writer, 1 cycle = 1 us.
 * --cycles A:B counts from the log's first cycle (its C=), as the timeline's time does.
 * IN, or for gem5 the pipe of its conversion to Kanata (CONVERTED). */
static int timeline(const struct tk_cmd *c, const char *file, struct tk_input *in,
		    struct tk_input *converted, enum tk_timeline_kind kind, struct tk_buf *out,
		    uint64_t from, uint64_t to, int *status)
{
	struct tk_kanata_decoder *d = NULL;
	/* the pass runs where the events arrive: on the merging thread (the chunks), or on
	 * the relay's (read in order); at -j 2 it formats its own blocks, a formatter thread
	 * beside it made three busy threads on two cores (relay: 0.80-0.87 s against
	 * 0.74-0.79 s; chunks: 0.69 s against 0.65 s) */
	unsigned jobs = tk_cmd_jobs(c);
	struct tk_timeline_opts to_ = { .sz = sizeof to_, .kind = kind, .clock = { 1000000 },
					.time_begin = from, .time_end = to == UINT64_MAX ? 0 : to,
					.max_events = c->o->max_events, .process_name = "kanata",
					.stage_name = stage_name, .stage_ctx = &d,
					.nthreads = tk_cmd_writer_threads(c) };
	int err, rc;
	struct tk_timeline *t = tk_timeline_new(out, &to_, &err);
	struct tk_relay *relay;
	struct tk_progress prog = { 0 };
	if (!t)
		return err;
	/* a compressed pipe's relay already keeps two cores busy (its reader and the pass): a
	 * third thread decompressing ahead slowed -j 2 down (0.98 -> 1.10 s; a compressed
	 * file's chunks decompress on their jobs, without it) */
	tk_input_read_ahead(in, jobs > 2);
	if (!(d = decoder_new(c, file, tk_timeline_sink(t), in, converted, &prog, 2, &relay, &err))) {
		tk_timeline_free(t);
		return err;
	}
	rc = decode_all(d, relay, converted ? converted : in, &prog);
	int frc = tk_timeline_finish(t);
	const struct tk_gap_stats *g = tk_kanata_decoder_gaps(d);
	if (rc >= 0)
		*status = tk_cmd_gaps(c, file, g, "skipped line");
	uint64_t dropped;
	tk_timeline_slices(t, &dropped);
	if (dropped && !c->o->quiet)
		CMD_NOTE(c, file, "%llu instructions left out (--max-events)",
			 (unsigned long long)dropped);
	tk_kanata_decoder_free(d);
	tk_timeline_free(t);
	return rc < 0 ? rc : frc;
}

/* What convert's --to names for a pipeline log: a timeline kind, 0 for kanata, -1 (said)
 * for none (WHAT: the input, "Kanata" or "gem5"). */
static int convert_to(const struct tk_cmd *c, const char *what)
{
	const char *to = c->o->to ? c->o->to : "kanata";
	enum tk_timeline_kind tl = !strcmp(to, "json") ? TK_TIMELINE_CHROME : tk_timeline_kind_by_name(to);

	if (c->o->time_window) {
		CMD_ERROR(c, NULL, UINT64_MAX, "convert: --time A:B: a %s log's window is --cycles A:B",
			  what);
		return -1;
	}
	if (!tl && strcmp(to, "kanata")) {
		CMD_ERROR(c, NULL, UINT64_MAX,
			  "convert: %s input: --to %s: expected kanata, chrome or perfetto", what, to);
		return -1;
	}
	return (int)tl;
}

/* convert of IN, or for gem5 of the pipe of its conversion to Kanata (CONVERTED): the log
 * rewritten, cut to --cycles, or a timeline. */
static int convert_log(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       struct tk_input *converted)
{
	const struct tk_cmd_opts *o = c->o;
	struct diag dc = { c, file, NULL, 0, 20 };
	struct tk_kanata_conv_opts co = { .sz = sizeof co, .cycle_from = INT64_MIN,
					  .cycle_to = INT64_MAX, .diag = diag, .ctx = &dc,
					  .from_first = 1 };
	struct tk_buf out;
	int rc;

	if (o->cycles) {
		uint64_t a = 0, b = UINT64_MAX;
		if (tk_cmd_parse_range(o->cycles, &a, &b) < 0 || a >= b) {
			CMD_ERROR(c, NULL, UINT64_MAX, "--cycles %s: expected A:B with A < B", o->cycles);
			return TK_EXIT_USAGE;
		}
		co.cycle_from = (int64_t)a;
		co.cycle_to = b > INT64_MAX ? INT64_MAX : (int64_t)b;
	}
	int tl = convert_to(c, converted ? "gem5" : "Kanata");
	if (tl < 0)
		return TK_EXIT_USAGE;
	if (!tl && (rc = tk_cmd_convert_plain(c, "--to kanata")))
		return rc;
	if ((rc = c->out_open(c, NULL, &out)))
		return rc;
	int tl_status = 0;
	if (tl)
		rc = timeline(c, file, in, converted, (enum tk_timeline_kind)tl, &out,
			      o->cycles ? (uint64_t)co.cycle_from : 0,
			      o->cycles ? (uint64_t)co.cycle_to : UINT64_MAX, &tl_status);
	else if (o->cycles)
		rc = tk_kanata_cut(converted ? converted : in, &out, &co);
	else
		rc = tk_kanata_rewrite(converted ? converted : in, &out, &co);
	int status = c->out_close(&out);
	if (rc < 0 && status != TK_EXIT_OUTPUT) {   /* a failed write: out_close said so */
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	if (dc.shown > 20)
		CMD_NOTE(c, file, "%llu more errors (tracekit check lists all)",
			 (unsigned long long)(dc.shown - 20));
	if ((dc.shown || tl_status) && status < TK_EXIT_SKIPPED)
		status = TK_EXIT_SKIPPED;
	return status;
}

/* tracekit report: the page's pipeline parts from the decoder (Kanata has no source), fed
 * the input or, for gem5, the pipe of its conversion to Kanata (CONVERTED). */
static int report_page(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi, struct tk_input *converted)
{
	const struct tk_cmd_opts *o = c->o;
	struct tk_kanata_decoder *d = NULL;
	struct tk_report_opts ro = { .sz = sizeof ro, .title = file,
				     .format = tk_format_description(fi->id),
				     .size = tk_input_file_size(in), .top = o->top,
				     .stage_name = stage_name, .stage_ctx = &d };
	struct tk_report *r;
	struct tk_relay *relay = NULL;
	struct tk_progress prog = { 0 };
	struct tk_buf out;
	int err, rc, status;

	if (o->cycles && (tk_cmd_parse_range(o->cycles, &ro.window_begin, &ro.window_end) < 0 ||
			  ro.window_begin >= ro.window_end)) {
		CMD_ERROR(c, NULL, UINT64_MAX, "--cycles %s: expected A:B with A < B", o->cycles);
		return TK_EXIT_USAGE;
	}
	/* a compressed log at -j 2: the second core decompresses it ahead rather than
	 * run the report's consumer on a relay (0.67 -> 0.64 s, CPU 1.05 -> 0.97 s) */
	if (!(r = tk_report_new(&ro, &err)) ||
	    !(d = decoder_new(c, file, tk_report_sink(r), in, converted, &prog, converted ? 2 : 3,
			      &relay, &err))) {
		tk_report_free(r);
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(err));
		return TK_EXIT_INPUT;
	}
	rc = decode_all(d, relay, converted ? converted : in, &prog);
	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		status = TK_EXIT_INPUT;
	} else if (!(status = tk_cmd_gaps(c, file, tk_kanata_decoder_gaps(d), "skipped line"),
		     rc = c->out_open(c, NULL, &out))) {
		if ((rc = tk_report_write(r, &out)) < 0 && !out.err)
			CMD_ERROR(c, file, UINT64_MAX, "cannot write the report: %s", tk_strerror(rc));
		int crc = c->out_close(&out);
		status = tk_cmd_max(crc ? crc : rc < 0 ? TK_EXIT_INPUT : 0, status);
	} else {
		status = tk_cmd_max(rc, status);
	}
	tk_kanata_decoder_free(d);
	tk_report_free(r);
	return status;
}

static int report(const struct tk_cmd *c, const char *file, struct tk_input *in,
		  const struct tk_format_info *fi, struct tk_buf *unused)
{
	(void)unused;
	return report_page(c, file, in, fi, NULL);
}

static int convert(const struct tk_cmd *c, const char *file, struct tk_input *in,
		   const struct tk_format_info *fi, struct tk_buf *unused)
{
	(void)fi, (void)unused;
	return convert_log(c, file, in, NULL);
}

const tk_cmd_fn tk_cmd_kanata[TK_CMD__COUNT] = {
	[TK_CMD_REPORT] = report,
	[TK_CMD_INFO] = info, [TK_CMD_DUMP] = dump, [TK_CMD_CHECK] = check,
	[TK_CMD_STATS] = stats, [TK_CMD_CONVERT] = convert,
};

/* ---- gem5 O3PipeView -> Kanata -------------------------------------------------------- */
struct gem5_diag {
	const struct tk_cmd *c;
	const char *file;
};

static void gem5_diag(void *ctx, uint64_t line, int is_error, const char *msg)
{
	const struct gem5_diag *g = ctx;

	tk_cmd_line_msg(g->c, g->file, line, is_error, msg);
}

/* What the conversion met (notes), into STATUS: 1 where records were skipped, reordered
 * or could not be told apart, or the CPU asked for had none. */
static int gem5_status(const struct tk_cmd *c, const char *file, const struct tk_gem5_result *res,
		       int status)
{
	const struct tk_cmd_opts *o = c->o;

	if (!o->quiet)
		CMD_NOTE(c, file, "%llu instructions (%llu retired, %llu squashed), "
			 "%llu ticks per cycle, %llu CPU%s", (unsigned long long)res->insns,
			 (unsigned long long)res->retired, (unsigned long long)res->squashed,
			 (unsigned long long)res->ticks_per_cycle, (unsigned long long)res->cpus,
			 res->cpus == 1 ? "" : "s");
	if (o->has_tid && !res->cpus) {
		CMD_ERROR(c, file, UINT64_MAX, "no records of CPU %llu (--tid)", (unsigned long long)o->tid);
		if (status < TK_EXIT_SKIPPED)
			status = TK_EXIT_SKIPPED;
	}
	if (res->duplicates && !o->quiet)
		CMD_NOTE(c, file, "%llu seqNums seen twice: several CPUs without a cpu name "
			 "prefix cannot be separated", (unsigned long long)res->duplicates);
	if ((res->skipped_lines || res->out_of_order || res->duplicates) && status < TK_EXIT_SKIPPED)
		status = TK_EXIT_SKIPPED;
	return status;
}

/* The conversion's options: messages through GD's command, --tid a CPU. */
static struct tk_gem5_opts gem5_opts(struct gem5_diag *gd)
{
	const struct tk_cmd_opts *o = gd->c->o;

	return (struct tk_gem5_opts){ .sz = sizeof(struct tk_gem5_opts), .diag = gem5_diag,
				      .ctx = gd, .select_cpu = o->has_tid, .cpu = (int64_t)o->tid };
}

/* A gem5 log converted to Kanata on a thread of its own, into a pipe that the caller reads
 * as its input: in bounded memory (the conversion's window, the reader's buffer), beside
 * the reading. */
struct gem5_pipe {
	struct gem5_diag gd;
	struct tk_input *in;
	int fd;                  /* the pipe's write end, closed by the thread */
	int rfd;                 /* its read end */
	pthread_t th;
	int running;
	int rc;
	struct tk_gem5_result res;
};

static void *gem5_pipe_writer(void *arg)
{
	struct gem5_pipe *g = arg;
	struct tk_gem5_opts go = gem5_opts(&g->gd);
	struct tk_buf out;

	if ((g->rc = tk_buf_init(&out, g->fd, 1 << 16)) >= 0) {
		g->rc = tk_gem5_to_kanata(g->in, &out, &go, &g->res);
		if (tk_buf_flush(&out) < 0 && g->rc >= 0)
			g->rc = out.err;
		tk_buf_free(&out);
	}
	close(g->fd);
	return NULL;
}

/* The conversion ended (what the reader left drained, so that the writer neither blocks
 * nor gets SIGPIPE); COUNTS (if not NULL): the lines and skipped lines of the gem5 log. */
static void gem5_pipe_end(struct gem5_pipe *g, struct tk_kanata_counts *counts)
{
	char sink[1 << 14];

	if (g->running) {
		while (read(g->rfd, sink, sizeof sink) > 0)
			;
		pthread_join(g->th, NULL);
		g->running = 0;
	}
	if (counts) {
		counts->lines = g->res.lines;
		counts->errors += g->res.skipped_lines;
	}
}

/* G's conversion of its input started into a pipe: *KIN reads it. 0, or an exit status
 * (said). */
static int gem5_pipe_start(struct gem5_pipe *g, struct tk_input **kin)
{
	const struct tk_cmd *c = g->gd.c;
	char path[32];
	int fds[2];

	*kin = NULL;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		CMD_ERROR(c, g->gd.file, UINT64_MAX, "%s", strerror(errno));
		return TK_EXIT_INPUT;
	}
	g->fd = fds[1];
	g->rfd = fds[0];
	if (pthread_create(&g->th, NULL, gem5_pipe_writer, g)) {
		close(fds[0]);
		close(fds[1]);
		CMD_ERROR(c, g->gd.file, UINT64_MAX, "%s", tk_strerror(-TK_E_NOMEM));
		return TK_EXIT_INPUT;
	}
	g->running = 1;
	snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
	if (tk_input_open(kin, path, NULL) < 0) {
		CMD_ERROR(c, g->gd.file, UINT64_MAX, "cannot read the conversion: %s", strerror(errno));
		return TK_EXIT_INPUT;
	}
	return 0;
}

/* The reading of G's pipe (KIN) ended with STATUS: the conversion's end and its notes
 * (gem5_status) into the exit status. */
static int gem5_pipe_finish(struct gem5_pipe *g, struct tk_input *kin, int status)
{
	gem5_pipe_end(g, NULL);
	tk_input_free(kin);
	close(g->rfd);
	if (g->rc < 0) {
		CMD_ERROR(g->gd.c, g->gd.file, UINT64_MAX, "%s", tk_strerror(g->rc));
		return TK_EXIT_INPUT;
	}
	return gem5_status(g->gd.c, g->gd.file, &g->res, status);
}

/* convert: the Kanata log, written as converted; cut to --cycles, or a timeline: Kanata's
 * of the log converted as it is read. */
static int gem5_convert(const struct tk_cmd *c, const char *file, struct tk_input *in,
			const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct gem5_diag gd = { c, file };
	struct tk_gem5_opts go = gem5_opts(&gd);
	struct tk_gem5_result res;
	struct tk_buf out;
	int rc, tl = convert_to(c, "gem5");

	(void)fi, (void)unused;
	if (tl < 0)
		return TK_EXIT_USAGE;
	if (!tl && (rc = tk_cmd_convert_plain(c, "--to kanata")))
		return rc;
	if (tl || c->o->cycles) {
		struct gem5_pipe g = { .gd = { c, file }, .in = in };
		struct tk_input *kin;
		int status;

		if ((status = gem5_pipe_start(&g, &kin)) && !g.running)
			return status;
		if (!status)
			status = convert_log(c, file, in, kin);
		return gem5_pipe_finish(&g, kin, status);
	}
	if ((rc = c->out_open(c, NULL, &out)))
		return rc;
	rc = tk_gem5_to_kanata(in, &out, &go, &res);
	int status = c->out_close(&out);
	if (rc < 0 && status != TK_EXIT_OUTPUT) {   /* a failed write: out_close said so */
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	return gem5_status(c, file, &res, status);
}

/* tracekit stats: Kanata's statistics of the log converted as it is read. */
static int gem5_stats(const struct tk_cmd *c, const char *file, struct tk_input *in,
		      const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct gem5_pipe g = { .gd = { c, file }, .in = in };
	struct tk_input *kin;
	int status;

	(void)fi, (void)unused;   /* (no --shard: tk_cmd_stats_partial) */
	if ((status = gem5_pipe_start(&g, &kin)) && !g.running)
		return status;
	if (!status)
		status = stats_of(c, file, kin, &g);
	return gem5_pipe_finish(&g, kin, status);
}

/* tracekit report: Kanata's page of the log converted as it is read (its cycles are the
 * converted log's). */
static int gem5_report(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct gem5_pipe g = { .gd = { c, file }, .in = in };
	struct tk_input *kin;
	int status;

	(void)unused;
	if ((status = gem5_pipe_start(&g, &kin)) && !g.running)
		return status;
	if (!status)
		status = report_page(c, file, in, fi, kin);
	return gem5_pipe_finish(&g, kin, status);
}

/* check: the log read as the conversion reads it (its Kanata thrown away), every
 * diagnostic on the output as Kanata's check lists them, then a summary. */
struct gem5_check {
	struct diag dc;              /* Kanata's check printer, onto the output */
	uint64_t errors, warnings;
};

static void gem5_check_diag(void *ctx, uint64_t line, int is_error, const char *msg)
{
	struct gem5_check *g = ctx;
	struct tk_kanata_diag d = { .level = is_error ? TK_LOG_ERROR : TK_LOG_WARN,
				    .line = line, .msg = msg };

	diag(&g->dc, &d);
	*(is_error ? &g->errors : &g->warnings) += 1;
}

/* The log read as its conversion reads it, the Kanata discarded: *RES, or -TK_E_*. */
static int gem5_read(struct tk_input *in, const struct tk_gem5_opts *go, struct tk_gem5_result *res)
{
	struct tk_buf discard;
	int rc, null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (null_fd < 0)
		return -TK_E_IO;
	if ((rc = tk_buf_init(&discard, null_fd, 1 << 16)) >= 0) {
		rc = tk_gem5_to_kanata(in, &discard, go, res);
		tk_buf_free(&discard);
	}
	close(null_fd);
	return rc;
}

static int gem5_check(const struct tk_cmd *c, const char *file, struct tk_input *in,
		      const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct tk_buf out;
	struct gem5_check gc = { { c, file, &out, 0, 0 }, 0, 0 };
	struct tk_gem5_opts go = { .sz = sizeof go, .diag = gem5_check_diag, .ctx = &gc };
	struct tk_gem5_result res;
	int rc;

	(void)fi, (void)unused;
	if ((rc = c->out_open(c, NULL, &out)))
		return rc;
	if ((rc = gem5_read(in, &go, &res)) < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return tk_cmd_max(c->out_close(&out), TK_EXIT_INPUT);
	}
	tk_buf_text(&out, file, strlen(file));
	tk_buf_printf(&out, ": %llu errors, %llu warnings in %llu lines; %llu instructions "
		      "(%llu retired, %llu squashed), %llu CPU%s\n", (unsigned long long)gc.errors,
		      (unsigned long long)gc.warnings, (unsigned long long)res.lines,
		      (unsigned long long)res.insns, (unsigned long long)res.retired,
		      (unsigned long long)res.squashed, (unsigned long long)res.cpus,
		      res.cpus == 1 ? "" : "s");
	int status = gc.errors || gc.warnings ? TK_EXIT_SKIPPED : TK_EXIT_CLEAN;
	return tk_cmd_max(c->out_close(&out), status);
}

/* info: what the conversion finds (its diagnostics as convert prints them). */
static int gem5_info(const struct tk_cmd *c, const char *file, struct tk_input *in,
		     const struct tk_format_info *fi, struct tk_buf *out)
{
	struct gem5_diag gd = { c, file };
	struct tk_gem5_opts go = gem5_opts(&gd);
	struct tk_gem5_result res;
	int rc = gem5_read(in, &go, &res);

	(void)fi;
	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	tk_buf_printf(out, "  %llu instructions (%llu retired, %llu squashed), %llu CPU(s), "
		      "%llu ticks per cycle, %llu lines\n", (unsigned long long)res.insns,
		      (unsigned long long)res.retired, (unsigned long long)res.squashed,
		      (unsigned long long)res.cpus, (unsigned long long)res.ticks_per_cycle,
		      (unsigned long long)res.lines);
	if (res.skipped_lines)
		tk_buf_printf(out, "  %llu lines skipped (tracekit check lists them)\n",
			      (unsigned long long)res.skipped_lines);
	return res.skipped_lines || res.out_of_order || res.duplicates ? TK_EXIT_SKIPPED
								: TK_EXIT_CLEAN;
}

const tk_cmd_fn tk_cmd_gem5[TK_CMD__COUNT] = {
	[TK_CMD_INFO] = gem5_info, [TK_CMD_CHECK] = gem5_check, [TK_CMD_STATS] = gem5_stats,
	[TK_CMD_CONVERT] = gem5_convert, [TK_CMD_REPORT] = gem5_report,
};

/* Kanata's options. */
const struct tk_cmd_option tk_cmd_kanata_options[] = {
	{ "window", "N", "IPC over time in windows of N cycles (with --to csv: only that table)",
	  TK_CMD_BIT(TK_CMD_STATS), TK_OPT_U64, CMD_FIELD(window), 0 },
	{ "slowest", "N", "the N slowest retired instructions with their labels",
	  TK_CMD_BIT(TK_CMD_STATS), TK_OPT_U64, CMD_FIELD(slowest), 0 },
	{ "cycles", "A:B", "only instructions alive in cycles [A, B), counted from the log's "
	  "first cycle (convert: renumbered; report: the pipeline diagram's)",
	  TK_CMD_BIT(TK_CMD_CONVERT) | TK_CMD_BIT(TK_CMD_REPORT), TK_OPT_STRING,
	  CMD_FIELD(cycles), 0 },
	{ NULL, NULL, NULL, 0, 0, 0, 0, 0 },
};

/* gem5's. */
const struct tk_cmd_option tk_cmd_gem5_options[] = {
	{ "tid", "N", "only the CPU mapped to thread N", TK_CMD_BIT(TK_CMD_STATS) | TK_CMD_BIT(TK_CMD_CONVERT) | TK_CMD_BIT(TK_CMD_REPORT), TK_OPT_U64,
	  CMD_FIELD(tid), CMD_FIELD(has_tid) },
	{ NULL, NULL, NULL, 0, 0, 0, 0, 0 },
};
