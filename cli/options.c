/* Option parsing and the helpers every command shares. */
#include <errno.h>
#include <fcntl.h>
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

enum {
	OPT_FORMAT = 256, OPT_TO, OPT_NO_OFFSET, OPT_LASTIP, OPT_ELF, OPT_RAW, OPT_NO_DISASM,
	OPT_STAT, OPT_TIME, OPT_MTC_FREQ, OPT_NOM_FREQ, OPT_CPUID_EAX, OPT_CPUID_EBX, OPT_CPU,
	OPT_SORT, OPT_TOP, OPT_THREADS, OPT_STACKS, OPT_LINES, OPT_SOURCE, OPT_INSTR_MAP,
	OPT_TIME_WINDOW, OPT_MAX_EVENTS, OPT_WINDOW, OPT_SLOWEST, OPT_CYCLES, OPT_SLICE,
	OPT_BTRACE, OPT_XRAY, OPT_QEMU, OPT_XRAY_MODE, OPT_MODULE, OPT_PROGRESS, OPT_NO_PROGRESS,
	OPT_TID, OPT_NO_RETCOMP, OPT_TSC_HZ, OPT_MODULE_PATH, OPT_SHARD, OPT_MPI,
};

static const struct option long_opts[] = {
	{ "jobs", required_argument, NULL, 'j' },
	{ "output", required_argument, NULL, 'o' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "to", required_argument, NULL, OPT_TO },
	{ "progress", no_argument, NULL, OPT_PROGRESS },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "no-offset", no_argument, NULL, OPT_NO_OFFSET },
	{ "lastip", no_argument, NULL, OPT_LASTIP },
	{ "elf", required_argument, NULL, OPT_ELF },
	{ "raw", required_argument, NULL, OPT_RAW },
	{ "no-disasm", no_argument, NULL, OPT_NO_DISASM },
	{ "stat", no_argument, NULL, OPT_STAT },
	{ "time", optional_argument, NULL, OPT_TIME },
	{ "mtc-freq", required_argument, NULL, OPT_MTC_FREQ },
	{ "nom-freq", required_argument, NULL, OPT_NOM_FREQ },
	{ "cpuid-0x15.eax", required_argument, NULL, OPT_CPUID_EAX },
	{ "cpuid-0x15.ebx", required_argument, NULL, OPT_CPUID_EBX },
	{ "tsc-hz", required_argument, NULL, OPT_TSC_HZ },
	{ "cpu", required_argument, NULL, OPT_CPU },
	{ "sort", required_argument, NULL, OPT_SORT },
	{ "top", required_argument, NULL, OPT_TOP },
	{ "threads", no_argument, NULL, OPT_THREADS },
	{ "stacks", no_argument, NULL, OPT_STACKS },
	{ "lines", no_argument, NULL, OPT_LINES },
	{ "source", no_argument, NULL, OPT_SOURCE },
	{ "instr-map", required_argument, NULL, OPT_INSTR_MAP },
	{ "max-events", required_argument, NULL, OPT_MAX_EVENTS },
	{ "window", required_argument, NULL, OPT_WINDOW },
	{ "slowest", required_argument, NULL, OPT_SLOWEST },
	{ "cycles", required_argument, NULL, OPT_CYCLES },
	{ "slice", required_argument, NULL, OPT_SLICE },
	{ "btrace", no_argument, NULL, OPT_BTRACE },
	{ "xray", no_argument, NULL, OPT_XRAY },
	{ "qemu", no_argument, NULL, OPT_QEMU },
	{ "xray-mode", required_argument, NULL, OPT_XRAY_MODE },
	{ "module", required_argument, NULL, OPT_MODULE },
	{ "module-path", required_argument, NULL, OPT_MODULE_PATH },
	{ "tid", required_argument, NULL, OPT_TID },
	{ "no-retcomp", no_argument, NULL, OPT_NO_RETCOMP },
	{ "shard", required_argument, NULL, OPT_SHARD },
	{ "mpi", no_argument, NULL, OPT_MPI },
	{ NULL, 0, NULL, 0 },
};

int cli_parse_u64(const char *s, uint64_t *v)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 0);
	if (errno || *end)
		return -1;
	*v = x;
	return 0;
}

int cli_parse_range(const char *s, uint64_t *a, uint64_t *b)
{
	const char *colon = strchr(s, ':');
	char left[64];
	if (!colon || (size_t)(colon - s) >= sizeof left)
		return -1;
	memcpy(left, s, (size_t)(colon - s));
	left[colon - s] = 0;
	*a = 0;
	*b = UINT64_MAX;
	if (left[0] && cli_parse_u64(left, a) < 0)
		return -1;
	if (colon[1] && cli_parse_u64(colon + 1, b) < 0)
		return -1;
	return 0;
}

/* "A:B" with digits (or 0x hex) on either side and nothing else. */
static int looks_like_range(const char *s)
{
	const char *colon = strchr(s, ':');
	if (!colon || strchr(colon + 1, ':'))
		return 0;
	for (const char *p = s; *p; p++)
		if (p != colon && !isxdigit((unsigned char)*p) && *p != 'x')
			return 0;
	return 1;
}

static int num_arg(const char *opt, const char *arg, uint64_t *v)
{
	if (cli_parse_u64(arg, v) < 0) {
		cli_error(NULL, UINT64_MAX, "%s: not a number: '%s'", opt, arg);
		return EXIT_USAGE;
	}
	return 0;
}

static int list_arg(const char *opt, const char **list, int *n, const char *arg)
{
	if (*n >= CLI_MAX_LIST) {
		cli_error(NULL, UINT64_MAX, "too many %s options (at most %d)", opt, CLI_MAX_LIST);
		return EXIT_USAGE;
	}
	list[(*n)++] = arg;
	return 0;
}

/* Returns 0, EXIT_USAGE, or -1 when help was printed. */
int cli_parse(const struct cli_command *cmd, int argc, char **argv, struct cli_opts *o)
{
	int c, rc = 0;
	uint64_t v;

	memset(o, 0, sizeof *o);
	o->progress = 1;
	optind = 1;
	opterr = 0;
	/* Options may follow file names, except for record, which stops at the first
	 * non-option ('+') so that `record -- CMD ARGS` keeps CMD's own options. */
	const char *shortopts = strcmp(cmd->name, "record") == 0 ? "+j:o:qh" : "j:o:qh";
	while ((c = getopt_long(argc, argv, shortopts, long_opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			if ((rc = num_arg("-j", optarg, &v)))
				return rc;
			if (v > 1024) {
				cli_error(NULL, UINT64_MAX, "-j: at most 1024 threads");
				return EXIT_USAGE;
			}
			o->jobs = (unsigned)v;
			break;
		case 'o': o->output = optarg; break;
		case 'q': o->quiet = 1; break;
		case 'h': fputs(cmd->usage, stdout); return -1;
		case OPT_FORMAT:
			if (tk_format_by_name(optarg) == TK_FMT_UNKNOWN) {
				cli_error(NULL, UINT64_MAX, "--format: unknown format '%s'", optarg);
				return EXIT_USAGE;
			}
			o->format = optarg;
			break;
		case OPT_TO: o->to = optarg; break;
		case OPT_PROGRESS: o->progress = 2; break;
		case OPT_NO_PROGRESS: o->progress = 0; break;
		case OPT_NO_OFFSET: o->no_offset = 1; break;
		case OPT_LASTIP: o->lastip = 1; break;
		case OPT_ELF: if ((rc = list_arg("--elf", o->elf, &o->n_elf, optarg))) return rc; break;
		case OPT_MODULE_PATH:
			if ((rc = list_arg("--module-path", o->module_path, &o->n_module_path, optarg)))
				return rc;
			break;
		case OPT_RAW: if ((rc = list_arg("--raw", o->raw, &o->n_raw, optarg))) return rc; break;
		case OPT_NO_DISASM: o->no_disasm = 1; break;
		case OPT_STAT: o->stat = 1; break;
		case OPT_TIME:
			/* --time alone: print times (decode); --time A:B or --time=A:B: a window
			 * (profile, convert). A following word that looks like a range is taken. */
			if (!optarg && optind < argc && looks_like_range(argv[optind]))
				optarg = argv[optind++];
			if (optarg)
				o->time_window = optarg;
			else
				o->time = 1;
			break;
		case OPT_MTC_FREQ: if ((rc = num_arg("--mtc-freq", optarg, &o->mtc_freq))) return rc; break;
		case OPT_TSC_HZ: if ((rc = num_arg("--tsc-hz", optarg, &o->tsc_hz))) return rc; o->has_tsc_hz = 1; break;
		case OPT_NOM_FREQ: if ((rc = num_arg("--nom-freq", optarg, &o->nom_freq))) return rc; break;
		case OPT_CPUID_EAX: if ((rc = num_arg("--cpuid-0x15.eax", optarg, &o->cpuid_15_eax))) return rc; break;
		case OPT_CPUID_EBX: if ((rc = num_arg("--cpuid-0x15.ebx", optarg, &o->cpuid_15_ebx))) return rc; break;
		case OPT_CPU: o->cpu = optarg; break;
		case OPT_SORT: o->sort = optarg; break;
		case OPT_TOP: if ((rc = num_arg("--top", optarg, &o->top))) return rc; break;
		case OPT_THREADS: o->threads = 1; break;
		case OPT_STACKS: o->stacks = 1; break;
		case OPT_NO_RETCOMP: o->no_retcomp = 1; break;
		case OPT_LINES: o->lines = 1; break;
		case OPT_SOURCE: o->source = 1; break;
		case OPT_INSTR_MAP: o->instr_map = optarg; break;
		case OPT_TIME_WINDOW: o->time_window = optarg; break;
		case OPT_MAX_EVENTS: if ((rc = num_arg("--max-events", optarg, &o->max_events))) return rc; break;
		case OPT_WINDOW: if ((rc = num_arg("--window", optarg, &o->window))) return rc; break;
		case OPT_SLOWEST: if ((rc = num_arg("--slowest", optarg, &o->slowest))) return rc; break;
		case OPT_CYCLES: o->cycles = optarg; break;
		case OPT_SLICE: o->slice = optarg; break;
		case OPT_SHARD: o->shard = optarg; break;
		case OPT_MPI: o->mpi = 1; break;
		case OPT_BTRACE: o->rec_btrace = 1; break;
		case OPT_XRAY: o->rec_xray = 1; break;
		case OPT_QEMU: o->rec_qemu = 1; break;
		case OPT_XRAY_MODE: o->xray_mode = optarg; break;
		case OPT_MODULE: if ((rc = list_arg("--module", o->module, &o->n_module, optarg))) return rc; break;
		case OPT_TID: if ((rc = num_arg("--tid", optarg, &o->tid))) return rc; o->has_tid = 1; break;
		case '?':
		default:
			if (optopt && optopt < 256)
				cli_error(NULL, UINT64_MAX, "%s: unknown option '-%c' (see: tracekit help %s)",
					  cmd->name, optopt, cmd->name);
			else
				cli_error(NULL, UINT64_MAX, "%s: unknown option or missing value '%s' (see: tracekit help %s)",
					  cmd->name, argv[optind - 1], cmd->name);
			return EXIT_USAGE;
		}
	}
	o->args = argv + optind;
	o->nargs = argc - optind;
	return 0;
}

static void vmessage(const char *kind, const char *file, uint64_t offset, const char *fmt, va_list ap)
{
	char msg[2048];
	int n = snprintf(msg, sizeof msg, "tracekit: %s", kind);
	if (file)
		n += snprintf(msg + n, sizeof msg - (size_t)n, "%s: ", file);
	if (offset != UINT64_MAX)
		n += snprintf(msg + n, sizeof msg - (size_t)n, "offset 0x%llx: ", (unsigned long long)offset);
	if (n < (int)sizeof msg)
		n += vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
	if (n >= (int)sizeof msg - 1)
		n = (int)sizeof msg - 2;
	msg[n++] = '\n';
	fwrite(msg, 1, (size_t)n, stderr);
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

int cli_open(const struct cli_opts *o, const char *file, struct tk_input **in,
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

/* The outputs open now (a command may have a timeline and a profile open together): the
 * file each writes and its name for messages. */
static struct {
	struct tk_buf *buf;
	struct tk_outfile *file;    /* NULL: standard output */
	const char *name;
} outputs[4];

/* Whether PATH is one of the files the command reads (said, if so). --elf and --raw
 * name FILE:ADDR. */
static int same_as_input(const struct cli_opts *o, const char *path)
{
	const char *in[3 * CLI_MAX_LIST + 1];
	char stripped[2 * CLI_MAX_LIST][4096];
	size_t n = 0, ns = 0;

	for (int i = 0; i < o->nargs && n < 3 * CLI_MAX_LIST; i++)
		in[n++] = o->args[i];
	for (int k = 0; k < 2; k++) {
		const char *const *l = k ? o->raw : o->elf;
		for (int i = 0; i < (k ? o->n_raw : o->n_elf); i++) {
			const char *c = strrchr(l[i], ':');
			if (c && access(l[i], F_OK) < 0 && (size_t)(c - l[i]) < sizeof stripped[0]) {
				snprintf(stripped[ns], sizeof stripped[0], "%.*s", (int)(c - l[i]), l[i]);
				in[n++] = stripped[ns++];
			} else {
				in[n++] = l[i];
			}
		}
	}
	if (o->instr_map)
		in[n++] = o->instr_map;
	int i = tk_outfile_same(path, in, n);
	if (i >= 0)
		cli_error(path, UINT64_MAX, "-o names an input (%s): refusing to overwrite it", in[i]);
	return i >= 0;
}

struct tk_outfile *cli_outfile_open(const struct cli_opts *o, const char *path, int *status)
{
	struct tk_outfile *f;
	int err;

	if (same_as_input(o, path)) {
		*status = EXIT_USAGE;
		return NULL;
	}
	if (!(f = tk_outfile_open(path, &err))) {
		cli_error(path, UINT64_MAX, "cannot create: %s", strerror(errno));
		*status = EXIT_OUTPUT;
	}
	return f;
}

/* Several inputs with -o FILE: one file holds each input's output in turn (as standard
 * output would), renamed into place once all are done (cli_run_files). */
static struct {
	int on;
	struct tk_outfile *file;
	int failed;               /* a write failed: the file is not kept */
} held;

int cli_out_open(const struct cli_opts *o, struct tk_buf *out)
{
	struct tk_outfile *f = NULL;
	size_t slot = 0;
	int status;

	while (slot < sizeof outputs / sizeof outputs[0] && outputs[slot].buf)
		slot++;
	if (slot == sizeof outputs / sizeof outputs[0]) {
		cli_error(NULL, UINT64_MAX, "internal error: too many outputs open");
		return EXIT_INPUT;
	}
	if (held.on && held.file) {
		f = held.file;
	} else if (o->output && strcmp(o->output, "-") != 0) {
		if (!(f = cli_outfile_open(o, o->output, &status)))
			return status;
		if (held.on)
			held.file = f;
	}
	if (tk_buf_init(out, f ? tk_outfile_fd(f) : STDOUT_FILENO, 1 << 20) < 0) {
		if (f && f != held.file)
			tk_outfile_close(f, 0);
		cli_error(NULL, UINT64_MAX, "out of memory");
		return EXIT_INPUT;
	}
	outputs[slot].buf = out;
	outputs[slot].file = f;
	outputs[slot].name = f ? o->output : "standard output";
	return 0;
}

int cli_out_close(struct tk_buf *out)
{
	int rc = tk_buf_flush(out), errnum = out->errnum;
	size_t slot = 0;

	/* by address, or by descriptor if the caller moved the buffer */
	while (slot < sizeof outputs / sizeof outputs[0] && outputs[slot].buf != out &&
	       !(outputs[slot].file && tk_outfile_fd(outputs[slot].file) == out->fd))
		slot++;
	if (slot == sizeof outputs / sizeof outputs[0]) {
		tk_buf_free(out);
		return rc < 0 ? EXIT_OUTPUT : 0;
	}
	const char *name = outputs[slot].name;
	/* a failed output is removed: the file it was to replace stays as it was */
	if (outputs[slot].file && outputs[slot].file == held.file)
		held.failed |= rc < 0;   /* closed after the last input */
	else if (outputs[slot].file && tk_outfile_close(outputs[slot].file, rc >= 0) < 0 && rc >= 0) {
		rc = -TK_E_IO;
		errnum = errno;
	}
	outputs[slot].buf = NULL;
	tk_buf_free(out);
	if (rc == -TK_E_NOMEM) {
		cli_error(NULL, UINT64_MAX, "out of memory");
		return EXIT_INPUT;
	}
	if (rc < 0) {
		cli_error(name, UINT64_MAX, "write failed: %s",
			  errnum ? strerror(errnum) : tk_strerror(rc));
		return EXIT_OUTPUT;
	}
	return 0;
}

int cli_report_gaps(const char *file, const struct tk_gap_stats *g, const char *what)
{
	if (!g->count)
		return 0;
	char offs[128] = "";
	int n = 0;
	for (uint64_t i = 0; i < g->count && i < TK_GAP_FIRST_OFFSETS; i++)
		n += snprintf(offs + n, sizeof offs - (size_t)n, "%s0x%llx", i ? ", " : "",
			      (unsigned long long)g->first_offsets[i]);
	cli_warn(file, UINT64_MAX, "%llu %s%s, %llu bytes skipped (first at offset %s%s)",
		 (unsigned long long)g->count, what ? what : "gap", g->count == 1 ? "" : "s",
		 (unsigned long long)g->bytes_skipped, offs, g->count > TK_GAP_FIRST_OFFSETS ? ", ..." : "");
	return EXIT_SKIPPED;
}

static void progress_print(void *ctx, const char *line)
{
	(void)ctx;
	if (line)
		fprintf(stderr, "\r%s\033[K", line);
	else
		fputs("\r\033[K", stderr);
}

void cli_progress_init(const struct cli_opts *o, struct tk_progress *p, const char *label,
		       uint64_t total)
{
	int on = o->progress == 2 || (o->progress == 1 && !o->quiet && isatty(STDERR_FILENO));
	tk_progress_init(p, label, total, on ? progress_print : NULL, NULL);
}

/* Library log messages go to stderr with the program's prefix. */
static void log_to_stderr(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "tracekit: %s%s\n", level == TK_LOG_WARN ? "warning: " : "", msg);
}

/* ... and with the input file's name first, for readers whose messages give an offset */
static void log_file_to_stderr(void *ctx, enum tk_log_level level, const char *msg)
{
	fprintf(stderr, "tracekit: %s%s: %s\n", level == TK_LOG_WARN ? "warning: " : "",
		(const char *)ctx, msg);
}

void cli_log_file(const char *file)
{
	if (file)
		tk_set_log(log_file_to_stderr, (void *)file);
	else
		tk_set_log(log_to_stderr, NULL);
}

struct tk_btrace *cli_btrace_read(const char *file, const uint8_t *data, size_t len,
				  const struct tk_btrace_opts *opts, int *err)
{
	cli_log_file(file);
	struct tk_btrace *bt = tk_btrace_open(data, len, opts, err);
	cli_log_file(NULL);
	return bt;
}

__attribute__((constructor)) static void cli_log_setup(void)
{
	tk_set_log(log_to_stderr, NULL);
}

int cli_unsupported(const char *cmd, const char *file, const struct tk_format_info *fi)
{
	cli_error(file, UINT64_MAX, "'%s' does not handle %s input", cmd,
		  tk_format_description(fi->id));
	return EXIT_INPUT;
}

int cli_need_files(const struct cli_opts *o, const char *cmd)
{
	if (o->nargs > 0)
		return 0;
	cli_error(NULL, UINT64_MAX, "%s: no input file (see: tracekit help %s)", cmd, cmd);
	return EXIT_USAGE;
}

/* Outputs that are one document (JSON, gzip'd protobuf, CSV with its header, a trace
 * file): two of them one after the other are not one of them. convert's default output
 * is always one. */
static int one_document(const char *cmd, const char *to)
{
	static const char *const docs[] = { "json", "pprof", "csv", "perfetto", "chrome",
					     "xray-yaml", "yaml", "kanata", "ipt", "account-csv" };

	if (!to)
		return strcmp(cmd, "convert") == 0;
	for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
		if (strcmp(to, docs[i]) == 0)
			return 1;
	return 0;
}

/* A compressed input cut short was read up to the cut (the library said where), or the
 * file shrank while read (said here): data lost. */
int cli_input_status(const struct tk_input *in, int status)
{
	uint64_t off;
	int cut = tk_input_cut(in, &off);
	if (cut == TK_INPUT_SHRANK)
		cli_error(tk_input_name(in), off, "the file was truncated while being read; "
			  "what lay from here on is lost");
	return cut && status < EXIT_SKIPPED ? EXIT_SKIPPED : status;
}

int cli_run_files(struct cli_opts *o, const char *cmd, cli_run_file_fn run_file)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, cmd)))
		return rc;
	if (o->nargs > 1 && one_document(cmd, o->to)) {
		cli_error(NULL, UINT64_MAX, "%s: %d inputs would give %d %s documents in one output, "
			  "which no reader takes as one: give one input per run", cmd, o->nargs,
			  o->nargs, o->to ? o->to : "converted");
		return EXIT_USAGE;
	}
	held.on = o->nargs > 1;
	for (int i = 0; i < o->nargs; i++) {
		struct tk_input *in;
		struct tk_format_info fi;

		if ((rc = cli_open(o, o->args[i], &in, &fi)) == 0) {
			rc = cli_input_status(in, run_file(o, o->args[i], in, &fi));
			tk_input_free(in);
		}
		if (rc > status)
			status = rc;
	}
	if (held.file && tk_outfile_close(held.file, !held.failed) < 0 && !held.failed) {
		cli_error(o->output, UINT64_MAX, "write failed: %s", strerror(errno));
		status = EXIT_OUTPUT;
	}
	memset(&held, 0, sizeof held);
	return status;
}
