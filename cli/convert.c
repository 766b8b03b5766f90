/* tracekit convert: convert a trace to another format. Each format's handler is one case below; the work is in the library. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: tracekit convert --to FMT [OPTIONS] FILE...\n"
	"\n"
	"Convert a trace to another format.\n"
	"\n"
	"  --to FMT        output format\n"
	"                  branch trace (btrace): ipt, one thread's raw Intel PT stream\n"
	"  --tid N         (btrace) the thread to convert; default the first\n"
	"  -o FILE         write to FILE\n"
	"\n"
	"Kanata pipeline logs:\n"
	"  --to kanata     normalised Kanata (the four-column form Konata reads)\n"
	"  --cycles A:B    with --to kanata: only instructions alive in cycles [A, B), renumbered,\n"
	"                  as a valid smaller log; instructions alive at A start there\n"
	"  --to chrome     Chrome trace-event JSON for Perfetto / chrome://tracing (also:\n"
	"                  perfetto, json): a slice per instruction with stage slices, a process\n"
	"                  per thread and a track per row and lane; 1 cycle = 1 us\n"
	"gem5 O3PipeView text:\n"
	"  --to kanata     Kanata log (F Dc Rn Ds Is Cm Rt), sorted by seqNum\n";

static void kanata_diag(void *ctx, const struct tk_kanata_diag *d)
{
	const char *file = ctx;
	if (d->level == TK_LOG_ERROR)
		fprintf(stderr, "tracekit: %s:%llu: error: %s\n", file, (unsigned long long)d->line, d->msg);
}

struct count_ctx {
	const char *file;
	uint64_t errors;
};

static void kanata_diag_count(void *ctx, const struct tk_kanata_diag *d)
{
	struct count_ctx *k = ctx;
	if (d->level != TK_LOG_ERROR)
		return;
	if (k->errors++ < 20)
		kanata_diag((void *)k->file, d);
}

static int convert_kanata(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct count_ctx cc = { file, 0 };
	struct tk_kanata_conv_opts co = { .sz = sizeof co, .cycle_from = INT64_MIN,
					  .cycle_to = INT64_MAX, .diag = kanata_diag_count,
					  .ctx = &cc };
	const char *to = o->to ? o->to : "kanata";
	struct tk_buf out;
	int rc;

	if (o->cycles) {
		uint64_t a = 0, b = UINT64_MAX;
		if (cli_parse_range(o->cycles, &a, &b) < 0 || a >= b) {
			cli_error(NULL, UINT64_MAX, "--cycles %s: expected A:B with A < B", o->cycles);
			return EXIT_USAGE;
		}
		co.cycle_from = (int64_t)a;
		co.cycle_to = b > INT64_MAX ? INT64_MAX : (int64_t)b;
	}
	int chrome = !strcmp(to, "chrome") || !strcmp(to, "perfetto") || !strcmp(to, "json");
	if (!chrome && strcmp(to, "kanata")) {
		cli_error(NULL, UINT64_MAX, "convert: Kanata input: --to %s: expected kanata or chrome", to);
		return EXIT_USAGE;
	}
	if ((rc = cli_out_open(o, &out)))
		return rc;
	if (chrome)
		rc = tk_kanata_to_chrome(in, &out, &co);
	else if (o->cycles)
		rc = tk_kanata_cut(in, &out, &co);
	else
		rc = tk_kanata_rewrite(in, &out, &co);
	int status = cli_out_close(&out);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if (cc.errors > 20)
		fprintf(stderr, "tracekit: %s: %llu more errors (tracekit check lists all)\n", file,
			(unsigned long long)(cc.errors - 20));
	if (cc.errors && status < EXIT_SKIPPED)
		status = EXIT_SKIPPED;
	return status;
}

static void gem5_diag(void *ctx, uint64_t line, int is_error, const char *msg)
{
	fprintf(stderr, "tracekit: %s:%llu: %s: %s\n", (const char *)ctx, (unsigned long long)line,
		is_error ? "error" : "warning", msg);
}

static int convert_gem5(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_gem5_opts go = { .sz = sizeof go, .diag = gem5_diag, .ctx = (void *)file };
	struct tk_gem5_result res;
	const char *to = o->to ? o->to : "kanata";
	struct tk_buf out;
	int rc;

	if (strcmp(to, "kanata")) {
		cli_error(NULL, UINT64_MAX, "convert: gem5 input: --to %s: expected kanata", to);
		return EXIT_USAGE;
	}
	if ((rc = cli_out_open(o, &out)))
		return rc;
	rc = tk_gem5_to_kanata(in, &out, &go, &res);
	int status = cli_out_close(&out);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if (!o->quiet)
		fprintf(stderr, "tracekit: %s: %llu instructions (%llu retired, %llu squashed), "
			"%llu ticks per cycle\n", file, (unsigned long long)res.insns,
			(unsigned long long)res.retired, (unsigned long long)res.squashed,
			(unsigned long long)res.ticks_per_cycle);
	if ((res.skipped_lines || res.out_of_order) && status < EXIT_SKIPPED)
		status = EXIT_SKIPPED;
	return status;
}

/* Branch trace -> one thread's raw Intel PT stream (--tid N, default the first thread). */
static int convert_btrace(struct cli_opts *o, const char *file, struct tk_input *in)
{
	const uint8_t *data;
	size_t len, n;
	uint8_t *pt;
	int err = 0, status = EXIT_CLEAN;

	if (!o->to || strcmp(o->to, "ipt")) {
		cli_error(file, UINT64_MAX, "convert: a branch trace converts --to ipt");
		return EXIT_USAGE;
	}
	if ((err = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		return EXIT_INPUT;
	}
	struct tk_btrace *bt = tk_btrace_open(data, len, NULL, &err);
	if (!bt) {
		cli_error(file, UINT64_MAX, "unreadable branch trace: %s", tk_strerror(err));
		return EXIT_INPUT;
	}
	size_t k = 0, nt = tk_btrace_thread_count(bt);
	if (o->has_tid) {
		while (k < nt && tk_btrace_thread(bt, k)->tid != o->tid)
			k++;
		if (k == nt) {
			cli_error(file, UINT64_MAX, "convert: no thread %llu in this trace",
				  (unsigned long long)o->tid);
			tk_btrace_free(bt);
			return EXIT_USAGE;
		}
	} else if (!nt) {
		cli_error(file, UINT64_MAX, "convert: the trace has no thread stream");
		tk_btrace_free(bt);
		return EXIT_INPUT;
	} else if (nt > 1 && !o->quiet) {
		cli_warn(file, UINT64_MAX, "%zu threads; writing thread %u (choose with --tid)", nt,
			 tk_btrace_thread(bt, 0)->tid);
	}
	if ((err = tk_btrace_thread_stream(bt, k, &pt, &n)) < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		tk_btrace_free(bt);
		return EXIT_INPUT;
	}
	struct tk_buf out;
	if ((status = cli_out_open(o, &out)) == 0) {
		tk_buf_put(&out, pt, n);
		status = cli_out_close(&out);
	}
	free(pt);
	if (!tk_btrace_info(bt)->complete && status == EXIT_CLEAN)
		status = EXIT_SKIPPED;
	int g = cli_report_gaps(file, tk_btrace_gaps(bt), "damaged record");
	tk_btrace_free(bt);
	return g > status ? g : status;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_TKBT:
		return convert_btrace(o, file, in);
	case TK_FMT_KANATA:
		return convert_kanata(o, file, in);
	case TK_FMT_GEM5_O3:
		return convert_gem5(o, file, in);
	default:
		return cli_unsupported("convert", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "convert")))
		return rc;
	for (int i = 0; i < o->nargs; i++) {
		struct tk_input *in;
		struct tk_format_info fi;

		if ((rc = cli_open(o, o->args[i], &in, &fi)) == 0) {
			rc = run_file(o, o->args[i], in, &fi);
			tk_input_free(in);
		}
		if (rc > status)
			status = rc;
	}
	return status;
}

const struct cli_command cli_cmd_convert = {
	.name = "convert",
	.summary = "convert a trace to another format",
	.usage = usage,
	.run = run,
};
