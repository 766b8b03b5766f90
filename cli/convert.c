/* tracekit convert: convert a trace to another format. Each format's handler is one case below; the work is in the library. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tracekit/xray.h"

static const char usage[] =
	"usage: tracekit convert --to FMT [OPTIONS] FILE...\n"
	"\n"
	"Convert a trace to another format.\n"
	"\n"
	"  --to FMT        output format\n"
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
	"  --to kanata     Kanata log (F Dc Rn Ds Is Cm Rt), sorted by seqNum\n"
	"LLVM XRay logs:\n"
	"  --to xray-yaml  llvm-xray convert -f yaml, record for record (the default)\n"
	"  --to chrome     Chrome trace-event JSON (begin/end per call, instant custom events)\n"
	"  --instr-map F   ELF binary or `llvm-xray extract` YAML: function names\n";

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

/* XRay: map the log, load --instr-map, index the buffers. */
static struct tk_xray *xray_open(const struct cli_opts *o, const char *file, struct tk_input *in,
				 struct tk_xray_map **map, int *status)
{
	const uint8_t *data;
	size_t len;
	int rc, err;

	*map = NULL;
	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		*status = EXIT_INPUT;
		return NULL;
	}
	if (o->instr_map && !(*map = tk_xray_map_load(o->instr_map, &err))) {
		cli_error(o->instr_map, UINT64_MAX, "cannot load the instrumentation map: %s",
			  tk_strerror(err));
		*status = EXIT_INPUT;
		return NULL;
	}
	struct tk_xray_opts xo = { .sz = sizeof xo, .nthreads = o->jobs ? o->jobs : tk_cpu_count(),
				   .max_func_id = tk_xray_map_max_id(*map) };
	struct tk_xray *x = tk_xray_open(data, len, &xo, &err);
	if (!x) {
		cli_error(file, err == -TK_E_TRUNCATED || err == -TK_E_BAD_FORMAT ? 0 : UINT64_MAX,
			  "not a readable XRay log: %s", tk_strerror(err));
		tk_xray_map_free(*map);
		*map = NULL;
		*status = EXIT_INPUT;
	}
	return x;
}

/* Exit status after a walk: gaps and orphan exits are reported on stderr. */
static int xray_finish(const char *file, struct tk_xray *x)
{
	const struct tk_xray_stats *st = tk_xray_stats(x);
	if (st->orphan_exits)
		cli_warn(file, UINT64_MAX,
			 "%llu exits without their enters (the log starts mid-call: older records were wrapped away)",
			 (unsigned long long)st->orphan_exits);
	return cli_report_gaps(file, &st->gaps, "damaged or lost region");
}

/* Chrome trace-event JSON: one complete ("X") event per matched call would need the stack;
 * begin/end pairs ("B"/"E") stream with no state. Times in microseconds. */
struct chrome_ctx {
	struct tk_buf *out;
	const struct tk_xray *x;
	const struct tk_xray_map *map;
	double us_per_tick;
	int first;
};

static void chrome_name(struct tk_buf *b, const struct tk_xray_map *map, int32_t id)
{
	const char *nm = tk_xray_map_name(map, id);
	char tmp[24];
	if (!nm) {
		snprintf(tmp, sizeof tmp, "#%d", id);
		nm = tmp;
	}
	tk_buf_json_str(b, nm, strlen(nm));
}

static int chrome_rec(void *ctx, const struct tk_xray_rec *r)
{
	struct chrome_ctx *c = ctx;
	struct tk_buf *b = c->out;
	const char *ph;
	switch (r->type) {
	case TK_XRAY_R_ENTER: case TK_XRAY_R_ENTER_ARG: ph = "B"; break;
	case TK_XRAY_R_EXIT: case TK_XRAY_R_TAIL_EXIT: ph = r->orphan ? NULL : "E"; break;
	default: ph = "i"; break;
	}
	if (!ph)
		return 0;
	tk_buf_puts(b, c->first ? "\n    {\"name\": " : ",\n    {\"name\": ");
	c->first = 0;
	if (r->type == TK_XRAY_R_CUSTOM)
		tk_buf_puts(b, "\"custom-event\"");
	else if (r->type == TK_XRAY_R_TYPED)
		tk_buf_puts(b, "\"typed-event\"");
	else
		chrome_name(b, c->map, r->func_id);
	tk_buf_printf(b, ", \"ph\": \"%s\", \"pid\": %u, \"tid\": %u, \"ts\": %.3f", ph, r->pid,
		      r->tid, (double)r->tsc * c->us_per_tick);
	if (*ph == 'i')
		tk_buf_puts(b, ", \"s\": \"t\"");
	if (r->nargs) {
		tk_buf_puts(b, ", \"args\": {");
		for (unsigned i = 0; i < r->nargs; i++)
			tk_buf_printf(b, "%s\"arg%u\": %llu", i ? ", " : "", i,
				      (unsigned long long)r->args[i]);
		tk_buf_putc(b, '}');
	} else if (r->data_len) {
		tk_buf_puts(b, ", \"args\": {\"data\": ");
		tk_buf_json_str(b, (const char *)r->data, r->data_len);
		tk_buf_putc(b, '}');
	}
	tk_buf_putc(b, '}');
	if (b->fd >= 0 && b->len > (1u << 20))
		tk_buf_flush(b);
	return b->err;
}

static int xray_convert(struct cli_opts *o, const char *file, struct tk_input *in)
{
	struct tk_xray_map *map;
	struct tk_buf out;
	int status = 0, rc;
	const char *to = o->to ? o->to : "xray-yaml";

	if (strcmp(to, "xray-yaml") && strcmp(to, "yaml") && strcmp(to, "chrome")) {
		cli_error(NULL, UINT64_MAX,
			  "convert: XRay logs convert to xray-yaml or chrome, not '%s'%s", to,
			  !strcmp(to, "perfetto") ? " (perfetto output waits for the shared output layer)" : "");
		return EXIT_USAGE;
	}
	struct tk_xray *x = xray_open(o, file, in, &map, &status);
	if (!x)
		return status;
	if ((rc = cli_out_open(o, &out))) {
		tk_xray_free(x);
		tk_xray_map_free(map);
		return rc;
	}
	if (!strcmp(to, "chrome")) {
		const struct tk_xray_header *h = tk_xray_header(x);
		struct chrome_ctx c = { &out, x, map,
					h->cycle_frequency ? 1e6 / (double)h->cycle_frequency : 1.0, 1 };
		tk_buf_puts(&out, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [");
		rc = tk_xray_walk_sorted(x, chrome_rec, &c);
		tk_buf_puts(&out, "\n]}\n");
	} else {
		rc = tk_xray_yaml(x, map, &out);
	}
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		status = EXIT_INPUT;
	}
	int wrc = cli_out_close(&out);
	if (wrc > status)
		status = wrc;
	rc = xray_finish(file, x);
	tk_xray_free(x);
	tk_xray_map_free(map);
	return rc > status ? rc : status;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XRAY:
		return xray_convert(o, file, in);
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
