/* tracekit info FILE...: what each file is, by content; then what its format's reader
 * knows about it (the format's operation in lib/commands/). */
#include "cli.h"

static const char usage[] =
	"usage: tracekit info [--format NAME] [--pid N[,N...]] [--tid N] [--comm NAME] FILE...\n"
	"\n"
	"Recognise each FILE by its content (not its name) and print its format, version and\n"
	"size, then what the format's reader knows about it. '-' reads standard input;\n"
	".gz and .zst files are decompressed on the fly.\n"
	"\n"
	"  --format NAME   skip detection (the names are listed below)\n"
	"  -j N            threads for readers that split their input (Intel PT: at PSBs,\n"
	"                  Kanata: its statistics' parts);\n"
	"                  the output does not depend on N\n"
	"  --pid N[,N...], --tid N, --comm NAME\n"
	"                  perf.data: only those processes and threads (and their mappings)\n"
	"\n"
	"Exit status: 0 all files recognised; 1 a reader skipped damaged data; 3 a file could\n"
	"not be read or its format is unknown (the others are still reported).\n";

/* Set when a pipe was read to its end for its size: readers cannot look at it again. */
static int input_drained;

static int run(struct tk_cmd_opts *o)
{
	struct tk_buf out;
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "info")))
		return rc;
	if ((rc = cli_out_open(o, &out)))
		return rc;
	for (int i = 0; i < o->nargs; i++) {
		const char *file = o->args[i];
		struct tk_input *in;
		struct tk_format_info fi;

		if ((rc = cli_open(o, file, &in, &fi))) {
			status = rc > status ? rc : status;
			continue;
		}
		if ((rc = cli_filter_refused(o, file, &fi)) || (rc = cli_format_opts_refused(file, &fi))) {
			status = rc > status ? rc : status;
			tk_input_free(in);
			continue;
		}
		tk_buf_text(&out, file, strlen(file));
		tk_buf_puts(&out, ": ");
		tk_buf_puts(&out, tk_format_name(fi.id));
		tk_buf_puts(&out, " (");
		tk_buf_puts(&out, tk_format_description(fi.id));
		tk_buf_puts(&out, ")");
		if (fi.version) {
			tk_buf_puts(&out, ", version ");
			tk_buf_u64(&out, fi.version);
		}
		input_drained = 0;
		if (tk_input_file_size(in) == 0 && tk_cmd_streamed(fi.id)) {
			/* a pipe of text: read it to the end to know its size (its lines
			 * are not kept: a log can be larger than memory) */
			input_drained = 1;
			static char sink[1 << 16];
			long r;
			while ((r = tk_input_read(in, sink, sizeof sink)) > 0)
				;
			if (r < 0)
				status = EXIT_SKIPPED;
		} else if (tk_input_file_size(in) == 0) {
			/* a pipe of a binary format: its summary reads it whole, so it is
			 * read into memory now (which gives its size too), as decode does */
			const uint8_t *data;
			size_t len;
			if ((rc = tk_input_map(in, &data, &len)) < 0) {
				tk_buf_putc(&out, '\n');
				cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
				status = EXIT_INPUT;
				tk_input_free(in);
				continue;
			}
		}
		tk_buf_puts(&out, ", ");
		tk_buf_u64(&out, tk_input_file_size(in));
		tk_buf_puts(&out, " bytes");
		switch (tk_input_compression(in)) {
		case TK_COMP_GZIP: tk_buf_puts(&out, " (gzip)"); break;
		case TK_COMP_ZSTD: tk_buf_puts(&out, " (zstd)"); break;
		default: break;
		}
		if (fi.detail[0] && !o->format) {
			tk_buf_puts(&out, ", ");
			tk_buf_puts(&out, fi.detail);
		}
		tk_buf_putc(&out, '\n');
		tk_cmd_fn op = input_drained ? NULL : tk_cmd_op(fi.id, TK_CMD_INFO);
		rc = cli_input_status(in, op ? op(cli_cmd(o, "info"), file, in, &fi, &out) : EXIT_CLEAN);
		if (rc > status)
			status = rc;
		tk_input_free(in);
	}
	rc = cli_out_close(&out);
	return rc > status ? rc : status;
}

const struct cli_command cli_cmd_info = {
	.name = "info",
	.summary = "recognise trace files and summarise them",
	.usage = usage,
	.kind = TK_CMD_INFO,
	.run = run,
	.takes = "pid comm",
};
