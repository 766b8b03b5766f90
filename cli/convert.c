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
	"  -o FILE         write to FILE\n";

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
	(void)o, (void)in;
	switch (fi->id) {
	case TK_FMT_TKBT:
		return convert_btrace(o, file, in);
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
