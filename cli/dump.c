/* tracekit dump: print every packet or record with its file offset. Each format's handler is one case below; the work is in the library. */
#include <string.h>
#include "cli.h"
#include "tracekit/xray.h"

static const char usage[] =
	"usage: tracekit dump [OPTIONS] FILE...\n"
	"\n"
	"Print every packet, record or token of FILE with its offset.\n"
	"\n"
	"  --no-offset   do not print offsets\n"
	"  --lastip      (Intel PT) print reconstructed IPs\n"
	"  -q, --quiet   only check the input; print nothing but errors\n"
	"  -o FILE       write to FILE\n"
	"\n"
	"Intel PT streams print in ptdump's layout from the first PSB on; after a damaged\n"
	"packet the dump marks the offset and resumes at the next PSB.\n"
	"XRay: every FDR metadata/function record or basic-mode record, in llvm-xray\n"
	"fdr-dump's notation, after one header line; damaged spots are marked <Error: ...>.\n"
	"\n"
	"Exit status: 0 clean; 1 input was skipped (decode errors); 3 unreadable input.\n";

struct ipt_err_ctx {
	const char *file;
};

static int ipt_on_error(void *ctx, uint64_t offset, int err, uint64_t skipped)
{
	struct ipt_err_ctx *c = ctx;
	if (err == -TK_E_NOSYNC)
		cli_warn(c->file, offset, "%llu bytes without a PSB skipped", (unsigned long long)skipped);
	else
		cli_error(c->file, offset, "%s, %llu bytes skipped",
			  tk_ipt_error_text(err), (unsigned long long)skipped);
	return 0;
}

/* Intel PT: ptdump's layout, formatted by the library. */
static int dump_ipt(struct cli_opts *o, const char *file, struct tk_input *in)
{
	const uint8_t *data;
	size_t len;
	struct tk_buf out;
	struct tk_gap_stats gaps = { 0 };
	struct ipt_err_ctx ec = { file };
	int rc;

	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if ((rc = cli_out_open(o, &out)))
		return rc;
	struct tk_ipt_dump_opts d = {
		.sz = sizeof d, .no_offset = o->no_offset, .lastip = o->lastip,
		.quiet = o->quiet, .on_error = ipt_on_error, .ctx = &ec,
	};
	rc = tk_ipt_dump(data, len, &d, &out, &gaps);
	int st = cli_out_close(&out);
	if (rc < 0 && !st) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		st = EXIT_INPUT;
	}
	int g = cli_report_gaps(file, &gaps, "decode error");
	return st > g ? st : g;
}

static int xray_dump(struct cli_opts *o, const char *file, struct tk_input *in)
{
	const uint8_t *data;
	size_t len;
	struct tk_buf out;
	struct tk_gap_stats gaps;
	int rc;

	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	/* -q: check only; the records go nowhere */
	struct cli_opts quiet_o = *o;
	if (o->quiet)
		quiet_o.output = "/dev/null";
	if ((rc = cli_out_open(&quiet_o, &out)))
		return rc;
	memset(&gaps, 0, sizeof gaps);
	long bad = tk_xray_dump(data, len, o->no_offset,
				tk_input_compression(in) == TK_COMP_NONE && strcmp(file, "-"),
				&out, &gaps);
	rc = cli_out_close(&out);
	if (bad < 0) {
		cli_error(file, 0, "not a readable XRay log: %s", tk_strerror((int)bad));
		return EXIT_INPUT;
	}
	int g = cli_report_gaps(file, &gaps, "damaged region");
	return rc > g ? rc : g;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XRAY:
		return xray_dump(o, file, in);
	case TK_FMT_IPT:
		return dump_ipt(o, file, in);
	default:
		return cli_unsupported("dump", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "dump")))
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

const struct cli_command cli_cmd_dump = {
	.name = "dump",
	.summary = "print every packet or record with its file offset",
	.usage = usage,
	.run = run,
};
