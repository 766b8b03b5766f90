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
	"Kanata: one line per command: line number, offset, the cycle it happens in, and the\n"
	"command as parsed (tabs, numbers normalised); bad lines are reported on stderr.\n"
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

/* Kanata: every command with its line, offset and cycle. */
struct kanata_dump {
	struct tk_buf *out;
	const char *file;
	int no_offset, quiet;
};

static int kanata_dump_cmd(void *ctx, const struct tk_kanata_cmd *c)
{
	struct kanata_dump *k = ctx;
	struct tk_buf *b = k->out;
	static const char *const names[] = { "", "Kanata", "C=", "C", "I", "L", "S", "E", "R", "W" };

	if (k->quiet)
		return 0;
	tk_buf_u64(b, c->line);
	tk_buf_putc(b, '\t');
	if (!k->no_offset) {
		tk_buf_puts(b, "0x");
		tk_buf_hex(b, c->offset, 8);
		tk_buf_putc(b, '\t');
	}
	tk_buf_i64(b, c->cycle);
	tk_buf_putc(b, '\t');
	tk_buf_puts(b, c->kind <= TK_KANATA_DEP ? names[c->kind] : "?");
	switch (c->kind) {
	case TK_KANATA_HEADER:
	case TK_KANATA_CYCLE_SET:
	case TK_KANATA_CYCLE:
		tk_buf_putc(b, '\t');
		tk_buf_i64(b, c->a);
		break;
	case TK_KANATA_LABEL:
		tk_buf_printf(b, "\t%lld\t%lld\t", (long long)c->id, (long long)c->a);
		tk_buf_put(b, c->text, c->text_len);
		break;
	case TK_KANATA_STAGE_BEGIN:
	case TK_KANATA_STAGE_END:
		tk_buf_printf(b, "\t%lld\t", (long long)c->id);
		tk_buf_put(b, c->lane, c->lane_len);
		tk_buf_putc(b, '\t');
		tk_buf_put(b, c->text, c->text_len);
		break;
	default:
		tk_buf_printf(b, "\t%lld\t%lld\t%lld", (long long)c->id, (long long)c->a, (long long)c->b);
		break;
	}
	tk_buf_putc(b, '\n');
	return b->err;
}

static void kanata_dump_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct kanata_dump *k = ctx;
	if (d->level == TK_LOG_ERROR)
		fprintf(stderr, "tracekit: %s:%llu: error: %s\n", k->file, (unsigned long long)d->line, d->msg);
}

static int dump_kanata(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_buf out;
	struct kanata_dump k = { &out, file, o->no_offset, o->quiet };
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .cmd = kanata_dump_cmd,
					    .diag = kanata_dump_diag, .ctx = &k };
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
	int status = rc < 0 ? EXIT_INPUT : tk_kanata_reader_counts(r)->errors ? EXIT_SKIPPED : EXIT_CLEAN;
	if (rc < 0)
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
	tk_kanata_reader_free(r);
	rc = cli_out_close(&out);
	return rc > status ? rc : status;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XRAY:
		return xray_dump(o, file, in);
	case TK_FMT_IPT:
		return dump_ipt(o, file, in);
	case TK_FMT_KANATA:
		return dump_kanata(o, file, in);
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
