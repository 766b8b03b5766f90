/* Branch traces (.tkbt, tracekit record --btrace) in the commands: info, dump, decode,
 * stats, convert. Each thread's stream is Intel PT packets, decoded against the recorded
 * modules (plus --elf/--raw). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tracekit/partial.h"

struct bt {
	struct tk_btrace *bt;
	struct tk_image *img;
	struct tk_sym *sym;
	int missing;                /* recorded modules whose code could not be loaded */
};

/* The container, its library messages naming FILE; NULL after saying why. */
static struct tk_btrace *bt_read(const struct tk_cmd *c, const char *file, struct tk_input *in,
				 const struct tk_btrace_opts *opts)
{
	const uint8_t *data;
	size_t len;
	int err = 0;

	if (tk_cmd_map(c, file, in, &data, &len))
		return NULL;
	/* without OPTS, -j's workers still check the records' sums and join the streams */
	struct tk_btrace_opts jobs = { .sz = sizeof jobs, .nthreads = tk_cmd_jobs(c) };
	tk_cmd_log_file(c, file);
	struct tk_btrace *bt = tk_btrace_open(data, len, opts ? opts : &jobs, &err);
	tk_cmd_log_file(c, NULL);
	if (!bt)
		CMD_ERROR(c, file, UINT64_MAX, "unreadable branch trace: %s", tk_strerror(err));
	return bt;
}

/* The recorded modules of BT into IMG (and SYM, if not NULL), each from its recorded path
 * if that file has the recorded build-id, else from an --elf file or --module-path DIR
 * that has it; a module with no such file is named and left out (the trace in it decodes
 * as gaps). Returns how many were left out. */
static int bt_modules(const struct tk_cmd *c, const char *file, const struct tk_btrace *bt,
		      struct tk_image *img, struct tk_sym *sym)
{
	const struct tk_cmd_opts *o = c->o;
	struct tk_btrace_modules_opts mo = {
		.sz = sizeof mo, .elf = o->elf, .nelf = (size_t)o->n_elf,
		.module_path = o->module_path, .nmodule_path = (size_t)o->n_module_path,
		.quiet = o->quiet, .msg = c->msg, .ctx = c->ctx, .file = file,
	};

	return tk_btrace_load_modules(bt, &mo, img, sym);
}

static void bt_close(struct bt *cb)
{
	tk_sym_free(cb->sym);
	tk_image_free(cb->img);
	tk_btrace_free(cb->bt);
	memset(cb, 0, sizeof *cb);
}

/* The container, the recorded modules in an image (and symbols, with SYMBOLS). */
static int bt_open(const struct tk_cmd *c, const char *file, struct tk_input *in, int symbols,
		   struct bt *cb)
{
	int status;

	struct tk_btrace_opts bo = { .sz = sizeof bo, .nthreads = tk_cmd_jobs(c) };

	memset(cb, 0, sizeof *cb);
	if (!(cb->bt = bt_read(c, file, in, &bo)))
		return TK_EXIT_INPUT;
	/* the recorded modules, plus whatever --elf/--raw add */
	if (!(cb->img = tk_cmd_image_load(c)) ||
	    (symbols && !(cb->sym = tk_cmd_sym_open(c, 0, &status)))) {
		bt_close(cb);
		return TK_EXIT_INPUT;
	}
	cb->missing = bt_modules(c, file, cb->bt, cb->img, cb->sym);
	return 0;
}

/* After decoding threads of BT (their gaps: DECODED): the container's damage and theirs
 * reported together; the exit status, 1 also when the recording did not end. */
static int bt_status(const struct tk_cmd *c, const char *file, const struct tk_btrace *bt,
		     const struct tk_gap_stats *decoded)
{
	struct tk_gap_stats gaps = *tk_btrace_gaps(bt);

	tk_gap_stats_merge(&gaps, decoded);
	int rc = tk_cmd_gaps(c, file, &gaps, "gap");
	/* a recording that did not end (killed, or cut short) is missing its tail; a ring
	 * snapshot its start (the reader said so), one stopped at --max-size its end */
	int cut = !tk_btrace_info(bt)->complete || tk_btrace_info(bt)->size_limit;
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++)
		cut |= tk_btrace_thread(bt, i)->not_kept != 0;
	if (cut && rc < TK_EXIT_SKIPPED)
		rc = TK_EXIT_SKIPPED;
	return rc;
}

/* Modules, threads and how complete the recording is. */
static int info(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *out)
{
	int status = TK_EXIT_CLEAN;
	struct tk_btrace *bt = bt_read(c, file, in, NULL);

	(void)fi;
	if (!bt)
		return TK_EXIT_INPUT;
	tk_btrace_info_text(out, bt);
	/* a recording that followed its processes: the others' files, named after this one */
	char **rel;
	size_t nrel;
	if (strcmp(file, "-") && tk_btrace_related(file, &rel, &nrel) == 0) {
		for (size_t i = 0; i < nrel; i++)
			tk_buf_printf(out, "  followed: %s\n", TK_TEXT(rel[i]));
		tk_btrace_related_free(rel, nrel);
	}
	if (!tk_btrace_info(bt)->complete && !tk_btrace_info(bt)->refused)
		status = TK_EXIT_SKIPPED;
	int g = tk_cmd_gaps(c, file, tk_btrace_gaps(bt), "damaged record");
	tk_btrace_free(bt);
	return tk_cmd_max(g, status);
}

/* Progress over the threads' streams, decoded or dumped one after another (--tid's, or
 * TAKE's when not NULL). */
static void bt_progress(const struct tk_cmd *c, const char *file, const struct tk_btrace *bt,
			const uint8_t *take, struct tk_progress *p)
{
	uint64_t total = 0;

	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		if (take ? take[i] : !c->o->has_tid || t->tid == c->o->tid)
			total += t->stream_bytes;
	}
	tk_cmd_progress_init(c, p, file, total);
}

/* The header and every record with its file offset (formatted by the library), then each
 * thread's Intel PT stream in ptdump's layout (offsets in the joined stream). */
struct dump {
	struct tk_buf *b;
	int no_offset;
};

static int dump_record(void *ctx, const struct tk_btrace_record *r)
{
	const struct dump *d = ctx;
	tk_btrace_record_text(d->b, r, d->no_offset);
	return 0;
}

static int dump(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *unused)
{
	const struct tk_cmd_opts *o = c->o;
	const uint8_t *data;
	size_t len;
	struct tk_buf out;
	struct tk_gap_stats gaps = { 0 };
	int rc;

	(void)fi, (void)unused;
	if ((rc = tk_cmd_map(c, file, in, &data, &len)))
		return rc;
	if ((rc = c->out_open(c, NULL, &out)))
		return rc;
	struct dump d = { &out, o->no_offset };
	if (!o->quiet)
		tk_btrace_header_text(&out, data, len, o->no_offset);
	/* -q: the records are checked, not printed */
	/* (the workers check the records' sums ahead and join the streams; the records are
	 * still printed in order) */
	struct tk_btrace_opts bo = { .sz = sizeof bo, .ctx = &d, .nthreads = tk_cmd_jobs(c),
				     .on_record = o->quiet ? NULL : dump_record };
	struct tk_btrace *bt = bt_read(c, file, in, &bo);
	if (!bt) {
		c->out_close(&out);
		return TK_EXIT_INPUT;
	}
	struct tk_progress prog;   /* over the threads' streams, one after another */
	bt_progress(c, file, bt, NULL, &prog);
	for (size_t i = 0; i < tk_btrace_thread_count(bt) && rc >= 0; i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		uint8_t *pt;
		size_t n;

		if (o->has_tid && t->tid != o->tid)
			continue;
		if ((rc = tk_btrace_thread_stream(bt, i, &pt, &n)) < 0)
			break;
		if (!o->quiet)
			tk_buf_printf(&out, "[thread %u: %zu bytes of trace]\n", t->tid, n);
		rc = tk_cmd_ipt_dump_stream(c, file, pt, n, &prog, &out, &gaps);
		free(pt);
	}
	tk_progress_finish(&prog);
	int st = c->out_close(&out);
	if (rc < 0 && !st) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		st = TK_EXIT_INPUT;
	}
	int g = bt_status(c, file, bt, &gaps);
	tk_btrace_free(bt);
	return tk_cmd_max(st, g);
}

/* A thread's listing begins and ends so (decode; decode --stat: its counts). */
static void thread_head(struct tk_buf *out, const struct tk_btrace_thread *t)
{
	tk_buf_printf(out, "[thread %u]\n", t->tid);
	if (t->not_kept)
		tk_buf_printf(out, "[gap: ring snapshot, the %llu pieces before it were not kept]\n",
			      (unsigned long long)t->not_kept);
}

static void thread_tail(struct tk_buf *out, const struct tk_btrace_thread *t, int stat,
			uint64_t insns, uint64_t errors)
{
	if (t->size_cut)
		tk_buf_puts(out, "[gap: recording stopped at --max-size]\n");
	if (stat)
		tk_buf_printf(out, "insn: %llu\nerrors: %llu\n", (unsigned long long)insns,
			      (unsigned long long)errors);
}

static int stats_threads(const struct tk_cmd *c, const struct tk_btrace *bt, uint8_t *take);

/* The shards' counts (triples: thread index, instructions, errors) into V (per thread:
 * instructions, errors, 1 when given). */
struct counts_in {
	uint64_t *v;
	size_t nthreads;
};

static int counts_loader(void *ctx, const uint8_t *data, size_t len, struct tk_partial_error *e)
{
	struct counts_in *ci = ctx;
	uint64_t *v;
	size_t n;
	int rc = tk_partial_counts_load(&v, &n, data, len, e);

	for (size_t k = 0; rc == 0 && k < n; k += 3) {
		if (n % 3 || v[k] >= ci->nthreads || ci->v[3 * v[k] + 2]) {
			e->code = rc = -TK_E_BAD_FORMAT;
			e->offset = 0;
			snprintf(e->msg, sizeof e->msg, "not this trace's threads' counts");
			break;
		}
		memcpy(&ci->v[3 * v[k]], &(uint64_t[3]){ v[k + 1], v[k + 2], 1 }, 3 * sizeof *v);
	}
	free(v);
	return rc;
}

/* decode --stat as a partial result (c->part): a shard's threads' counts, or the shards'
 * merged and printed as decode --stat prints them. */
static int decode_counts(const struct tk_cmd *c, const char *file, struct bt *cb)
{
	size_t nt = tk_btrace_thread_count(cb->bt), n = 0;
	uint8_t *take = calloc(nt + 1, 1);
	struct counts_in ci = { calloc(3 * nt + 1, sizeof *ci.v), nt };
	struct tk_gap_stats gaps = { 0 };
	struct tk_buf out;
	int rc = !take || !ci.v ? -TK_E_NOMEM : stats_threads(c, cb->bt, take), status = 0;

	for (size_t i = 0; rc >= 0 && !c->part->nload && i < nt; i++) {
		struct tk_ipt_flow_opts fo = tk_cmd_flow_opts(c, cb->img);
		struct tk_ipt_flow_stats st;
		struct tk_buf none;
		uint8_t *pt;
		size_t len;

		if (!take[i] || (rc = tk_buf_init(&none, -1, 4096)) < 0)
			continue;
		if ((rc = tk_btrace_thread_stream(cb->bt, i, &pt, &len)) < 0) {
			tk_buf_free(&none);
			continue;
		}
		rc = tk_ipt_flow_text(pt, len, &fo, TK_IPT_TEXT_STAT, &none, &st);
		free(pt);
		tk_buf_free(&none);
		tk_gap_stats_merge(&gaps, &st.gaps);
		ci.v[n++] = i, ci.v[n++] = st.insns, ci.v[n++] = st.errors;
	}
	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		status = TK_EXIT_INPUT;
	} else if (!c->part->nload) {
		status = tk_cmd_part_saved(c, file, tk_partial_counts_save(ci.v, n, &c->part->data,
									    &c->part->len));
		status = tk_cmd_max(status, bt_status(c, file, cb->bt, &gaps));
	} else if (!(status = tk_cmd_part_load(c, counts_loader, &ci)) &&
		   !(status = c->out_open(c, NULL, &out))) {
		for (size_t i = 0; i < nt; i++) {
			const struct tk_btrace_thread *t = tk_btrace_thread(cb->bt, i);
			if (!take[i])
				continue;
			if (!ci.v[3 * i + 2])
				status = TK_EXIT_INPUT;   /* (a shard that could not decode it failed) */
			thread_head(&out, t);
			thread_tail(&out, t, 1, ci.v[3 * i], ci.v[3 * i + 1]);
		}
		status = tk_cmd_max(c->out_close(&out), status);
	}
	free(take);
	free(ci.v);
	return status;
}

static int decode(const struct tk_cmd *c, const char *file, struct tk_input *in,
		  const struct tk_format_info *fi, struct tk_buf *unused)
{
	const struct tk_cmd_opts *o = c->o;
	struct tk_gap_stats gaps = { 0 };
	struct tk_buf out;
	struct bt cb;
	int rc, status;

	(void)fi, (void)unused;
	if (c->part && !o->stat)
		return TK_EXIT_USAGE;
	if ((status = bt_open(c, file, in, 0, &cb)))
		return status;
	if (cb.missing)
		status = TK_EXIT_SKIPPED;   /* code missing: its trace decodes as gaps */
	if (c->part) {
		status = tk_cmd_max(decode_counts(c, file, &cb), status);
		bt_close(&cb);
		return status;
	}
	if ((rc = c->out_open(c, NULL, &out))) {
		bt_close(&cb);
		return rc;
	}
	struct tk_progress prog;
	bt_progress(c, file, cb.bt, NULL, &prog);
	for (size_t i = 0; i < tk_btrace_thread_count(cb.bt) && status < TK_EXIT_INPUT; i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(cb.bt, i);
		struct tk_ipt_flow_opts fo = tk_cmd_flow_opts(c, cb.img);
		struct tk_ipt_flow_stats st;
		uint8_t *pt;
		size_t n;

		if (o->has_tid && t->tid != o->tid)
			continue;
		if (tk_btrace_thread_stream(cb.bt, i, &pt, &n) < 0) {
			status = TK_EXIT_INPUT;
			break;
		}
		thread_head(&out, t);
		fo.progress = &prog;
		rc = tk_ipt_flow_text(pt, n, &fo, tk_cmd_text_flags(c), &out, &st);
		free(pt);
		thread_tail(&out, t, o->stat, st.insns, st.errors);
		if (rc < 0 && rc == out.err) {
			break;   /* the output failed: out_close says so */
		} else if (rc < 0) {
			CMD_ERROR(c, file, UINT64_MAX, "thread %u: decode failed: %s", t->tid,
				  tk_strerror(rc));
			status = TK_EXIT_INPUT;
		}
		tk_gap_stats_merge(&gaps, &st.gaps);
	}
	tk_progress_finish(&prog);
	status = tk_cmd_max(c->out_close(&out), status);
	rc = bt_status(c, file, cb.bt, &gaps);
	bt_close(&cb);
	return tk_cmd_max(rc, status);
}

/* The threads STATS takes (--tid); a shard (c->part) the run of them its share of their
 * trace bytes falls on. */
static int stats_threads(const struct tk_cmd *c, const struct tk_btrace *bt, uint8_t *take)
{
	size_t n = tk_btrace_thread_count(bt), k = 0;
	uint64_t *sizes = calloc(n + 1, sizeof *sizes);
	uint32_t first = 0, count = UINT32_MAX;

	if (!sizes)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		if (!c->o->has_tid || t->tid == c->o->tid)
			sizes[k++] = t->stream_bytes;
	}
	if (c->part && !c->part->nload) {
		tk_partial_shard_range(sizes, k, c->part->shard, c->part->nshards, &first, &count);
		c->part->nchunks = (uint32_t)k;
		c->part->first = first;
		c->part->count = count;
	}
	k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		take[i] = (!c->o->has_tid || t->tid == c->o->tid) && k >= first && k - first < count;
		k += !c->o->has_tid || t->tid == c->o->tid;
	}
	free(sizes);
	return (int)k;
}

static int stats(const struct tk_cmd *c, const char *file, struct tk_input *in,
		 const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct tk_ipt_exec_stats s;
	struct tk_gap_stats decoded = { 0 };
	struct tk_ipt_exec *ex;
	struct bt cb;
	uint8_t *take = NULL;
	int rc = 0, err = 0, status, nthreads = 0;
	int merging = c->part && c->part->nload, sharding = c->part && !merging;

	(void)fi, (void)unused;
	if (!sharding && !tk_cmd_stats_format(c))
		return TK_EXIT_USAGE;
	if ((status = bt_open(c, file, in, 1, &cb)))
		return status;
	if (!(take = calloc(tk_btrace_thread_count(cb.bt) + 1, 1)) ||
	    (nthreads = stats_threads(c, cb.bt, take)) < 0 || !(ex = tk_ipt_exec_new(cb.img, &err))) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(!take ? -TK_E_NOMEM : nthreads < 0 ? nthreads : err));
		free(take);
		bt_close(&cb);
		return TK_EXIT_INPUT;
	}
	struct tk_progress prog;
	bt_progress(c, file, cb.bt, take, &prog);
	for (size_t i = 0; i < tk_btrace_thread_count(cb.bt) && rc >= 0 && !merging; i++) {
		struct tk_ipt_flow_opts fo = tk_cmd_flow_opts(c, cb.img);
		struct tk_ipt_flow_stats one = { 0 };
		uint8_t *pt;
		size_t n;

		if (!take[i])
			continue;
		if ((rc = tk_btrace_thread_stream(cb.bt, i, &pt, &n)) < 0)
			break;
		fo.progress = &prog;
		rc = tk_ipt_exec_add(ex, pt, n, &fo, &one);
		tk_gap_stats_merge(&decoded, &one.gaps);
		free(pt);
	}
	tk_progress_finish(&prog);
	free(take);
	if (merging)
		status = tk_cmd_exec_load(c, ex);
	if (rc >= 0 && !status && sharding)
		status = tk_cmd_exec_save(c, file, ex);
	else if (rc >= 0 && !status)
		rc = tk_ipt_exec_finish(ex, &s);
	tk_ipt_exec_free(ex);
	if (rc < 0 || status) {
		if (rc < 0)
			CMD_ERROR(c, file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		bt_close(&cb);
		return rc < 0 ? TK_EXIT_INPUT : status;
	}
	if (!sharding)
		status = tk_cmd_exec_stats_out(c, file, "branch trace", "btrace", "thread",
					       (size_t)nthreads, &s);
	struct tk_losses lost = tk_cmd_summary_begin(c, &(struct tk_losses){
		.gaps = sharding ? decoded : s.flow.gaps });
	int g = bt_status(c, file, cb.bt, &lost.gaps);
	tk_cmd_summary_end(c);
	bt_close(&cb);
	return tk_cmd_max(status, g);
}

/* --to perfetto|chrome: a timeline of every thread's calls. */
static int timeline(const struct tk_cmd *c, const char *file, struct tk_input *in)
{
	const struct tk_cmd_opts *o = c->o;
	struct tk_cmd_timeline ct;
	struct bt cb;
	int status;

	if ((status = bt_open(c, file, in, 1, &cb)))
		return status;
	struct tk_trace_clock clock = { o->has_tsc_hz ? o->tsc_hz : tk_btrace_info(cb.bt)->tsc_hz };
	if ((status = tk_cmd_timeline_open(c, cb.sym, clock, &ct)) == 0) {
		/* TK_IPT_CHUNK: small parts, for tests of the seams between them */
		struct tk_btrace_events_opts eo = { .sz = sizeof eo, .image = cb.img,
						    .nthreads = o->jobs, .only_tid = o->has_tid,
						    .tid = (uint32_t)o->tid,
						    .part_bytes = tk_cmd_flow_opts(c, NULL).chunk_bytes };
		struct tk_gap_stats gaps = { 0 };
		int rc = tk_btrace_events(cb.bt, &eo, tk_timeline_sink(ct.tl), &gaps);

		if (rc < 0) {
			CMD_ERROR(c, file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
			status = TK_EXIT_INPUT;
		} else {
			status = tk_btrace_info(cb.bt)->complete && !cb.missing ? TK_EXIT_CLEAN
										: TK_EXIT_SKIPPED;
			status = tk_cmd_max(tk_cmd_gaps(c, file, &gaps, "gap"), status);
		}
		status = tk_cmd_max(tk_cmd_timeline_close(&ct), status);
	}
	bt_close(&cb);
	return status;
}

/* One thread's raw Intel PT stream (--tid N, default the first thread): with return
 * compression (decoded and written again), or with --no-retcomp as recorded. */
static int to_ipt(const struct tk_cmd *c, const char *file, struct tk_input *in)
{
	const struct tk_cmd_opts *o = c->o;
	struct tk_btrace *bt = bt_read(c, file, in, NULL);
	int err = 0, status = TK_EXIT_CLEAN;
	uint8_t *pt;
	size_t n;

	if (!bt)
		return TK_EXIT_INPUT;
	size_t k = 0, nt = tk_btrace_thread_count(bt);
	if (o->has_tid) {
		while (k < nt && tk_btrace_thread(bt, k)->tid != o->tid)
			k++;
		if (k == nt) {
			CMD_ERROR(c, file, UINT64_MAX, "convert: no thread %llu in this trace",
				  (unsigned long long)o->tid);
			tk_btrace_free(bt);
			return TK_EXIT_USAGE;
		}
	} else if (!nt) {
		CMD_ERROR(c, file, UINT64_MAX, "convert: the trace has no thread stream");
		tk_btrace_free(bt);
		return TK_EXIT_INPUT;
	} else if (nt > 1 && !o->quiet) {
		CMD_WARN(c, file, UINT64_MAX, "%zu threads; writing thread %u (choose with --tid)", nt,
			 tk_btrace_thread(bt, 0)->tid);
	}
	if ((err = tk_btrace_thread_stream(bt, k, &pt, &n)) < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(err));
		tk_btrace_free(bt);
		return TK_EXIT_INPUT;
	}
	struct tk_gap_stats gaps = *tk_btrace_gaps(bt);
	struct tk_buf out;
	if ((status = c->out_open(c, NULL, &out)) == 0) {
		struct tk_image *img = NULL;

		if (o->no_retcomp) {
			tk_buf_put(&out, pt, n);
		} else if (!(img = tk_cmd_image_load(c))) {
			status = TK_EXIT_INPUT;
		} else {
			int missing = bt_modules(c, file, bt, img, NULL);
			status = tk_cmd_reencode(c, file, img, pt, n, &out, &gaps);
			if (missing && status < TK_EXIT_SKIPPED)
				status = TK_EXIT_SKIPPED;   /* code missing: left out as gaps */
		}
		tk_image_free(img);
		status = tk_cmd_max(c->out_close(&out), status);
	}
	free(pt);
	if (!tk_btrace_info(bt)->complete && status == TK_EXIT_CLEAN)
		status = TK_EXIT_SKIPPED;
	int g = tk_cmd_gaps(c, file, &gaps, o->no_retcomp ? "damaged record" : "gap");
	tk_btrace_free(bt);
	return tk_cmd_max(g, status);
}

static int convert(const struct tk_cmd *c, const char *file, struct tk_input *in,
		   const struct tk_format_info *fi, struct tk_buf *unused)
{
	const char *to = c->o->to;

	(void)fi, (void)unused;
	if (!to) {
		CMD_ERROR(c, file, UINT64_MAX, "convert: a branch trace converts --to ipt, perfetto, "
			  "chrome, folded, pprof or a profile output");
		return TK_EXIT_USAGE;
	}
	int plain;
	if (!strcmp(to, "ipt") && (plain = tk_cmd_convert_plain(c, "--to ipt")))
		return plain;
	if (!strcmp(to, "ipt"))
		return to_ipt(c, file, in);
	if (tk_timeline_kind_by_name(to))
		return timeline(c, file, in);
	if (tk_out_kind_by_name(to))
		return TK_EXIT_AS_PROFILE;
	CMD_ERROR(c, NULL, UINT64_MAX, "convert: a branch trace converts to ipt, perfetto, chrome, "
		  "folded, pprof or a profile output, not '%s'", to);
	return TK_EXIT_USAGE;
}

const tk_cmd_fn tk_cmd_btrace[TK_CMD__COUNT] = {
	[TK_CMD_INFO] = info, [TK_CMD_DUMP] = dump, [TK_CMD_DECODE] = decode,
	[TK_CMD_STATS] = stats, [TK_CMD_CONVERT] = convert,
	[TK_CMD_RECORD] = tk_cmd_record_btrace,
};

/* The branch traces' options. */
#define BT_READ (TK_CMD_BIT(TK_CMD_DUMP) | TK_CMD_BIT(TK_CMD_DECODE) | TK_CMD_BIT(TK_CMD_STATS) | \
		 TK_CMD_BIT(TK_CMD_CONVERT) | TK_CMD_BIT(TK_CMD_PROFILE) | TK_CMD_BIT(TK_CMD_REPORT))
const struct tk_cmd_option tk_cmd_btrace_options[] = {
	{ "tid", "N", "only thread N (convert --to ipt: that thread; default the first)",
	  BT_READ, TK_OPT_U64, CMD_FIELD(tid), CMD_FIELD(has_tid) },
	{ "module-path", "DIR", "a moved module: DIR/NAME with its build-id (as an --elf FILE)", BT_READ & ~TK_CMD_BIT(TK_CMD_DUMP), TK_OPT_LIST,
	  CMD_FIELD(module_path), CMD_FIELD(n_module_path) },
	{ "no-retcomp", NULL, "convert --to ipt: the stream as recorded, every return a TIP",
	  TK_CMD_BIT(TK_CMD_CONVERT), TK_OPT_FLAG, CMD_FIELD(no_retcomp), 0 },
	{ "tsc-hz", "N", "TSC ticks per second for times (0: ticks)",
	  TK_CMD_BIT(TK_CMD_PROFILE) | TK_CMD_BIT(TK_CMD_REPORT) | TK_CMD_BIT(TK_CMD_CONVERT), TK_OPT_U64, CMD_FIELD(tsc_hz),
	  CMD_FIELD(has_tsc_hz) },
	{ "btrace", NULL, "record a software branch trace of an unmodified x86-64 binary",
	  TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_FLAG, CMD_FIELD(record), 0,
	  TK_FMT_TKBT },
	{ "module", "PATH", "trace this loaded module too (repeatable; 'main': the executable)",
	  TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_LIST, CMD_FIELD(module), CMD_FIELD(n_module) },
	{ "no-follow", NULL, "programs it starts (exec, fork+exec, posix_spawn, system) run untraced",
	  TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_FLAG, CMD_FIELD(no_follow), 0 },
	{ "ring", "SIZE", "flight recorder: keep each thread's last SIZE bytes of trace, written at the end",
	  TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_U64, CMD_FIELD(ring), 0 },
	{ "max-size", "SIZE", "stop recording after SIZE bytes of trace (the trace ends with a gap)",
	  TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_U64, CMD_FIELD(max_size), 0 },
	{ "snapshot-signal", "SIG", "the recording ends (its snapshot written) when the program gets SIG",
	  TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_STRING, CMD_FIELD(snapshot_signal), 0 },
	{ "trigger", "FUNCTION[:N]", "the recording ends (its snapshot written) at FUNCTION's Nth call (default 1)",
	  TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_STRING, CMD_FIELD(trigger), 0 },
	{ NULL, NULL, NULL, 0, 0, 0, 0, 0 },
};
