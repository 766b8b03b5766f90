/* tracekit stats: statistics of a trace. Each format's handler is one case below; the work is in the library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: tracekit stats [OPTIONS] FILE...\n"
	"\n"
	"Statistics of a trace.\n"
	"\n"
	"  --to FMT        text, json, csv\n"
	"  -j N            threads (default: all cores)\n"
	"\n"
	"Intel PT (raw stream with --elf/--raw, or perf.data):\n"
	"  instructions, the mix by instruction category and ISA extension, branches\n"
	"  (conditional taken / not taken, jumps, calls, returns, indirect, far), memory\n"
	"  operands, footprint (distinct blocks, instructions, 64-byte code lines), trace\n"
	"  events; exact, from the whole flow\n"
	"\n"
	"Branch traces (.tkbt, record --btrace): the same, over the recorded modules\n"
	"  --tid N         only this thread (default: all, summed)\n"
	"  --module-path DIR  a moved or rebuilt module's file, found by build-id\n"
	"\n"
	"Kanata pipeline logs:\n"
	"  --window N      IPC over time in windows of N cycles (with --to csv: only that table)\n"
	"  --slowest N     the N slowest retired instructions with their labels\n"
	"  Cycles honour C= (cycles = last cycle - first cycle); Konata's own IPC (last retire\n"
	"  id / last cycle, C= ignored) is shown beside it. Exit status 1 if lines were skipped.\n";

/* --to for statistics: TK_STATS_*, or 0 after a usage message */
static enum tk_stats_format stats_format(const char *to)
{
	enum tk_stats_format f = tk_stats_format_by_name(to);

	if (!f)
		cli_error(NULL, UINT64_MAX, "stats: --to %s: expected text, json or csv", to);
	return f;
}

/* ---- Kanata ------------------------------------------------------------------------- */
struct kanata_diag_ctx {
	const char *file;
	uint64_t shown;
};

static void kanata_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct kanata_diag_ctx *k = ctx;
	if (d->level != TK_LOG_ERROR)
		return;  /* warnings (e.g. L after R, common in real logs) are for tracekit check */
	if (k->shown++ < 20)
		fprintf(stderr, "tracekit: %s:%llu: %s: %s\n", k->file, (unsigned long long)d->line,
			d->level == TK_LOG_ERROR ? "error" : "warning", d->msg);
}

static int stats_kanata(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct kanata_diag_ctx dc = { file, 0 };
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .window = o->window,
					   .slowest = o->slowest,
					   .jobs = o->jobs ? o->jobs : tk_cpu_count(),
					   .diag = kanata_diag, .ctx = &dc };
	struct tk_kanata_stats st;
	struct tk_buf out;
	const char *to = o->to ? o->to : "text";
	int rc;

	if (strcmp(to, "text") && strcmp(to, "json") && strcmp(to, "csv")) {
		cli_error(NULL, UINT64_MAX, "stats: --to %s: expected text, json or csv", to);
		return EXIT_USAGE;
	}
	rc = tk_kanata_stats_compute(in, &so, &st);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		tk_kanata_stats_free(&st);
		return EXIT_INPUT;
	}
	if (dc.shown > 20)
		fprintf(stderr, "tracekit: %s: %llu more diagnostics not shown (tracekit check lists all)\n",
			file, (unsigned long long)(dc.shown - 20));
	if (st.counts.warnings && !o->quiet)
		fprintf(stderr, "tracekit: %s: %llu warnings (tracekit check lists them)\n", file,
			(unsigned long long)st.counts.warnings);
	if ((rc = cli_out_open(o, &out))) {
		tk_kanata_stats_free(&st);
		return rc;
	}
	tk_out_kanata_stats(&out, tk_stats_format_by_name(to), file, &st, o->window);
	rc = cli_out_close(&out);
	int status = st.counts.errors ? EXIT_SKIPPED : EXIT_CLEAN;
	tk_kanata_stats_free(&st);
	return rc > status ? rc : status;
}

/* ---- xtrace ------------------------------------------------------------------------ */
static int xtrace_stats(struct cli_opts *o, const char *file, struct tk_input *in,
			const struct tk_format_info *fi)
{
	struct cli_xtrace x;
	struct tk_xtrace_stats s;
	struct tk_gap_stats gaps = { 0 };
	struct tk_buf b;
	int to = stats_format(o->to);
	if (!to)
		return EXIT_USAGE;
	int rc = cli_xtrace_open_insn(o, file, in, fi, &x);
	if (rc)
		return rc;
	if ((rc = cli_out_open(o, &b))) {
		cli_xtrace_close(&x);
		return rc;
	}
	tk_xtrace_stats_init(&s, TK_XT_STATS_FOOTPRINT);
	rc = cli_xtrace_stats(o, &x, &s, &gaps, TK_XT_STATS_FOOTPRINT);
	tk_out_xtrace_stats(&b, to, x.insn_path, x.n, tk_xtrace_nchunks(x.t), &s);
	tk_xtrace_stats_free(&s);
	int st = cli_out_close(&b);
	int g = cli_xtrace_report(&x, file, &gaps);
	cli_xtrace_close(&x);
	if (rc < 0 && st != EXIT_OUTPUT) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	return st > g ? st : g;
}

/* ---- Intel PT (raw stream or perf.data) --------------------------------------------- */
static int ipt_stats(struct cli_opts *o, const char *file, struct tk_input *in,
		     const struct tk_format_info *fi)
{
	struct tk_ipt_exec_stats s;
	struct tk_ipt_exec *ex;
	struct cli_ipt x;
	struct tk_buf b;
	int rc = 0, err = 0, status, to = stats_format(o->to);

	if (!to)
		return EXIT_USAGE;
	if ((status = cli_ipt_open(o, file, in, fi, 1, &x)))
		return status;
	if (!(ex = tk_ipt_exec_new(x.img, &err))) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		cli_ipt_close(&x);
		return EXIT_INPUT;
	}
	for (size_t i = 0; i < x.n && rc >= 0; i++) {
		struct tk_ipt_flow_opts fo = cli_ipt_stream_opts(&x, &x.s[i]);
		struct tk_ipt_flow_stats one = { 0 };

		rc = tk_ipt_exec_add(ex, x.s[i].data, x.s[i].len, &fo, &one);
		x.s[i].gaps = one.gaps;
	}
	if (rc >= 0)
		rc = tk_ipt_exec_finish(ex, &s);
	tk_ipt_exec_free(ex);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		cli_ipt_close(&x);
		return EXIT_INPUT;
	}
	if ((status = cli_out_open(o, &b))) {
		cli_ipt_close(&x);
		return status;
	}
	tk_out_exec_stats(&b, to, file, "Intel PT", "ipt", "stream", x.n, &s);
	status = cli_out_close(&b);
	int g = cli_ipt_report(o, file, &x, &s.flow);
	cli_ipt_close(&x);
	return status > g ? status : g;
}

/* ---- branch traces (.tkbt): each thread's stream is Intel PT packets ------------------ */
static int btrace_stats(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_ipt_exec_stats s;
	struct tk_ipt_exec *ex;
	struct cli_btrace cb;
	struct tk_buf b;
	size_t nthreads = 0;
	int rc = 0, err = 0, status, to = stats_format(o->to);

	if (!to)
		return EXIT_USAGE;
	if ((status = cli_btrace_open(o, file, in, &cb)))
		return status;
	if (!(ex = tk_ipt_exec_new(cb.img, &err))) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		cli_btrace_close(&cb);
		return EXIT_INPUT;
	}
	for (size_t i = 0; i < tk_btrace_thread_count(cb.bt) && rc >= 0; i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(cb.bt, i);
		struct tk_ipt_flow_opts fo = cli_ipt_flow_opts(o, cb.img);
		uint8_t *pt;
		size_t n;

		if (o->has_tid && t->tid != o->tid)
			continue;
		if ((rc = tk_btrace_thread_stream(cb.bt, i, &pt, &n)) < 0)
			break;
		rc = tk_ipt_exec_add(ex, pt, n, &fo, NULL);
		free(pt);
		nthreads++;
	}
	if (rc >= 0)
		rc = tk_ipt_exec_finish(ex, &s);
	tk_ipt_exec_free(ex);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		cli_btrace_close(&cb);
		return EXIT_INPUT;
	}
	if ((status = cli_out_open(o, &b))) {
		cli_btrace_close(&cb);
		return status;
	}
	tk_out_exec_stats(&b, to, file, "branch trace", "btrace", "thread", nthreads, &s);
	status = cli_out_close(&b);
	int g = cli_btrace_status(file, cb.bt, &s.flow.gaps);
	cli_btrace_close(&cb);
	return status > g ? status : g;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_IPT:
	case TK_FMT_PERF:
		return ipt_stats(o, file, in, fi);
	case TK_FMT_XTRACE_INSN:
	case TK_FMT_XTRACE_SNAP:
		return xtrace_stats(o, file, in, fi);
	case TK_FMT_KANATA:
		return stats_kanata(o, file, in);
	case TK_FMT_TKBT:
		return btrace_stats(o, file, in);
	default:
		return cli_unsupported("stats", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	return cli_run_files(o, "stats", run_file);
}

const struct cli_command cli_cmd_stats = {
	.name = "stats",
	.summary = "statistics of a trace",
	.usage = usage,
	.run = run,
};
