/* tracekit check: check a trace against its format's rules. Each format's handler is one case below; the work is in the library. */
#include "cli.h"

static const char usage[] =
	"usage: tracekit check FILE...\n"
	"\n"
	"Report every violation of the format's rules with its line number or offset.\n"
	"Exit status 1 if any.\n"
	"\n"
	"Kanata logs: prints FILE:LINE: error|warning: message for every violation (unknown\n"
	"command, bad number, id used before I, id reused, negative cycle delta, C= going back,\n"
	"R twice, command after R, E without S, W on a retired consumer or with an unknown\n"
	"producer, header version other than 4), then a summary line.\n";

struct check_ctx {
	struct tk_buf *out;
	const char *file;
};

static void kanata_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct check_ctx *c = ctx;
	tk_buf_printf(c->out, "%s:%llu: %s: %s\n", c->file, (unsigned long long)d->line,
		      d->level == TK_LOG_ERROR ? "error" : "warning", d->msg);
}

static int check_kanata(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_buf out;
	struct check_ctx cc = { &out, file };
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .diag = kanata_diag,
					    .ctx = &cc };
	struct tk_kanata_reader *r;
	int rc, err;

	if ((rc = cli_out_open(o, &out)))
		return rc;
	if (!(r = tk_kanata_reader_new(&ro, &err))) {
		cli_out_close(&out);
		cli_error(file, UINT64_MAX, "%s", tk_strerror(err));
		return EXIT_INPUT;
	}
	rc = tk_kanata_reader_run(r, in);
	const struct tk_kanata_counts *n = tk_kanata_reader_counts(r);
	if (rc < 0) {
		cli_error(file, n->bytes, "%s", tk_strerror(rc));
	} else {
		tk_buf_printf(&out, "%s: %llu errors, %llu warnings in %llu lines; %llu instructions "
			      "(%llu retired, %llu flushed, %llu in flight at end)\n", file,
			      (unsigned long long)n->errors, (unsigned long long)n->warnings,
			      (unsigned long long)n->lines, (unsigned long long)n->insns,
			      (unsigned long long)n->retired, (unsigned long long)n->flushed,
			      (unsigned long long)n->in_flight);
	}
	int status = rc < 0 ? EXIT_INPUT : (n->errors || n->warnings) ? EXIT_SKIPPED : EXIT_CLEAN;
	tk_kanata_reader_free(r);
	rc = cli_out_close(&out);
	return rc > status ? rc : status;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_KANATA:
		return check_kanata(o, file, in);
	default:
		return cli_unsupported("check", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	return cli_run_files(o, "check", run_file);
}

const struct cli_command cli_cmd_check = {
	.name = "check",
	.summary = "check a trace against its format's rules",
	.usage = usage,
	.run = run,
};
