/* Messages on stderr, opening an input with detection, and the command's side of the
 * formats' operations (tracekit/internal/commands.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static void vmessage(const char *kind, const char *file, uint64_t offset, const char *fmt, va_list ap)
{
	char msg[2048], text[2048];
	size_t n = (size_t)snprintf(msg, sizeof msg, "tracekit: %s", kind);
	if (file && n < sizeof msg)
		n += (size_t)snprintf(msg + n, sizeof msg - n, "%s: ", file);
	if (offset != UINT64_MAX && n < sizeof msg)
		n += (size_t)snprintf(msg + n, sizeof msg - n, "offset 0x%llx: ", (unsigned long long)offset);
	if (n < sizeof msg)
		vsnprintf(msg + n, sizeof msg - n, fmt, ap);
	/* file names and text from the trace reach the terminal escaped */
	n = tk_text_escape(text, sizeof text - 1, msg);
	text[n++] = '\n';
	fwrite(text, 1, n, stderr);
}

void cli_error(const char *file, uint64_t offset, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmessage("", file, offset, fmt, ap);
	va_end(ap);
}

void cli_warn(const char *file, uint64_t offset, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmessage("warning: ", file, offset, fmt, ap);
	va_end(ap);
}

static void show_first_bytes(const char *file, const uint8_t *p, size_t n)
{
	char hex[3 * 16 + 1], text[17];
	size_t k = n < 16 ? n : 16;
	for (size_t i = 0; i < k; i++) {
		snprintf(hex + 3 * i, 4, "%02x ", p[i]);
		text[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '.';
	}
	hex[k ? 3 * k - 1 : 0] = 0;
	text[k] = 0;
	cli_error(file, UINT64_MAX, "unknown format (first bytes: %s |%s|)", hex, text);
}

int cli_open(const struct tk_cmd_opts *o, const char *file, struct tk_input **in,
	     struct tk_format_info *fi)
{
	const uint8_t *p;
	size_t n;
	char data[4096];
	struct stat st;

	/* perf record --kcore and --threads write a directory: the header and first records
	 * are DIR/data (the Intel PT readers take DIR/data.N and DIR/kcore_dir from there) */
	snprintf(data, sizeof data, "%s/data", file);
	if (stat(file, &st) != 0 || !S_ISDIR(st.st_mode) || access(data, R_OK) != 0)
		snprintf(data, sizeof data, "%s", file);   /* (another directory: says so) */
	int rc = tk_input_open(in, data, NULL);

	memset(fi, 0, sizeof *fi);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "cannot open: %s", errno ? strerror(errno) : tk_strerror(rc));
		return EXIT_INPUT;
	}
	/* a compressed log read in sequence: its decompression on a core of its own */
	tk_input_read_ahead(*in, (o->jobs ? o->jobs : tk_cpu_count()) > 1);
	rc = tk_input_peek(*in, &p, &n);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		goto fail;
	}
	if (o->format) {
		fi->id = tk_format_by_name(o->format);
		fi->confidence = 100;
		return 0;
	}
	if (n == 0) {
		if (tk_input_compression(*in) != TK_COMP_NONE)
			cli_error(file, 0, "nothing decompresses: the compressed data is cut short or "
				  "corrupt before its first block ends");
		else
			cli_error(file, UINT64_MAX, "empty file");
		goto fail;
	}
	if (tk_detect_format(p, n, fi) < 0) {
		show_first_bytes(file, p, n);
		goto fail;
	}
	return 0;
fail:
	tk_input_free(*in);
	*in = NULL;
	return EXIT_INPUT;
}

/* File PATH's bytes into *DATA (malloc'd). */
int cli_read_whole(const char *path, uint8_t **data, size_t *len)
{
	struct tk_input *in;
	const uint8_t *d;
	int rc;

	if ((rc = tk_input_open(&in, path, NULL)) < 0 || (rc = tk_input_map(in, &d, len)) < 0) {
		cli_error(path, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if ((*data = malloc(*len ? *len : 1)))
		memcpy(*data, d, *len);
	tk_input_free(in);
	if (!*data) {
		cli_error(path, UINT64_MAX, "out of memory");
		return EXIT_INPUT;
	}
	return 0;
}

/* Library log messages go to stderr with the program's prefix. */
static void log_to_stderr(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx;
	char text[1024];
	tk_text_escape(text, sizeof text, msg);
	fprintf(stderr, "tracekit: %s%s\n", level == TK_LOG_WARN ? "warning: " : "", text);
}

__attribute__((constructor)) static void cli_log_setup(void)
{
	tk_set_log(log_to_stderr, NULL);
}

void cli_msg(void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
	     const char *msg)
{
	(void)ctx;
	if (level == TK_LOG_WARN)
		cli_warn(file, offset, "%s", msg);
	else
		cli_error(file, offset, "%s", msg);
}

int cli_unsupported(const char *cmd, const char *file, const struct tk_format_info *fi)
{
	cli_error(file, UINT64_MAX, "'%s' does not handle %s input", cmd,
		  tk_format_description(fi->id));
	return EXIT_INPUT;
}

/* ---- the command's side of the formats' operations (tracekit/internal/commands.h) ---- */
static int op_out_open(const struct tk_cmd *c, const char *path, struct tk_buf *out)
{
	struct tk_cmd_opts o = *c->o;

	if (path)
		o.output = path;
	return cli_out_open(&o, out);
}

/* PATH may name neither an input nor one of ALSO (an input's companion file). */
static struct tk_outfile *op_outfile_open(const struct tk_cmd *c, const char *path,
					  const char *const *also, size_t nalso, int *status)
{
	struct tk_cmd_opts o = *c->o;
	const char *ins[TK_CMD_MAX_LIST + 8];

	o.nargs = 0;
	for (int i = 0; i < c->o->nargs && i < TK_CMD_MAX_LIST; i++)
		ins[o.nargs++] = c->o->args[i];
	for (size_t i = 0; i < nalso && i < 8; i++)
		ins[o.nargs++] = also[i];
	o.args = (char **)ins;
	return cli_outfile_open(&o, path, status);
}

static void progress_print(void *ctx, const char *line)
{
	(void)ctx;
	if (line)
		fprintf(stderr, "\r%s\033[K", line);
	else
		fputs("\r\033[K", stderr);
}

tk_progress_fn cli_progress(const struct tk_cmd_opts *o)
{
	int on = o->progress == 2 || (o->progress == 1 && !o->quiet && isatty(STDERR_FILENO));
	return on ? progress_print : NULL;
}

const struct tk_cmd *cli_cmd(struct tk_cmd_opts *o, const char *name)
{
	static struct tk_cmd c;

	c = (struct tk_cmd){ .o = o, .name = name, .msg = cli_msg, .out_open = op_out_open,
			     .out_close = cli_out_close, .outfile_open = op_outfile_open,
			     .progress = cli_progress(o) };
	return &c;
}

int cli_filter_refused(const struct tk_cmd_opts *o, const char *file,
		       const struct tk_format_info *fi)
{
	if ((o->npids || o->comm || o->ncpus) && !(tk_cmd_format_has(fi->id) & TK_CMD_HAS_PROCESSES)) {
		cli_error(file, UINT64_MAX, "%s: %s input has no %s", o->ncpus ? "--cpu LIST" :
			  "--pid, --comm", tk_format_description(fi->id),
			  o->ncpus ? "CPUs' traces" : "processes' threads");
		return EXIT_USAGE;
	}
	return 0;
}

static enum tk_cmd_kind run_kind;
static const char *run_name;

static int run_op_file(struct tk_cmd_opts *o, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi)
{
	tk_cmd_fn op = tk_cmd_op(fi->id, run_kind);
	int rc;

	if (!op)
		return cli_unsupported(run_name, file, fi);
	if ((rc = cli_filter_refused(o, file, fi)))
		return rc;
	/* progress of the formats read in sequence (those mapped whole show their own) */
	struct tk_progress p;
	tk_progress_init(&p, file, tk_input_file_size(in), cli_progress(o), NULL);
	tk_input_progress(in, &p);
	rc = op(cli_cmd(o, run_name), file, in, fi, NULL);
	tk_input_progress(in, NULL);
	tk_progress_finish(&p);
	if (rc == TK_EXIT_AS_PROFILE && o->max_events) {   /* (a timeline's cap) */
		cli_error(NULL, UINT64_MAX, "convert: --max-events is for a timeline (--to perfetto, "
			  "chrome), not --to %s", o->to);
		return EXIT_USAGE;
	}
	return rc == TK_EXIT_AS_PROFILE ? cli_profile_file(o, file, in, fi) : rc;
}

int cli_run_op(struct tk_cmd_opts *o, const char *cmd, enum tk_cmd_kind kind)
{
	run_kind = kind;
	run_name = cmd;
	return cli_run_files(o, cmd, run_op_file);
}
