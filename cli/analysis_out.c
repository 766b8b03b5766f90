/* Output of profiles and timelines for every command and format: a format's handler builds
 * a tk_prof (or feeds a tk_timeline) with the library, then calls these. They read only the
 * generic options: --to, --sort, --top, --threads, --lines, --source, --stacks, --elf,
 * --time A:B, --max-events, -o. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static void log_to_stderr(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx;
	cli_error(NULL, UINT64_MAX, "%s%s", level == TK_LOG_WARN ? "warning: " : "", msg);
}

struct tk_source_opts cli_source_opts(const struct cli_opts *o, const struct tk_format_info *fi)
{
	/* TK_IPT_CHUNK: the PSB split's chunk size in bytes, for tests of the seams */
	const char *chunk = getenv("TK_IPT_CHUNK");

	return (struct tk_source_opts){
		.sz = sizeof(struct tk_source_opts), .format = fi->id, .nthreads = o->jobs,
		.elf = o->elf, .nelf = (size_t)o->n_elf, .raw = o->raw, .nraw = (size_t)o->n_raw,
		.instr_map = o->instr_map, .module_path = o->module_path,
		.nmodule_path = (size_t)o->n_module_path, .only_tid = o->has_tid, .tid = (uint32_t)o->tid,
		.has_tsc_hz = o->has_tsc_hz, .tsc_hz = o->tsc_hz,
		.mtc_freq = (uint32_t)o->mtc_freq, .nom_freq = (uint32_t)o->nom_freq,
		.cpuid_15_eax = (uint32_t)o->cpuid_15_eax, .cpuid_15_ebx = (uint32_t)o->cpuid_15_ebx,
		.chunk_bytes = chunk ? (size_t)strtoull(chunk, NULL, 0) : 0, .quiet = o->quiet,
		.msg = cli_msg, .no_demangle = o->no_demangle, .short_names = o->short_names,
	};
}

struct tk_sym_opts cli_sym_opts(const struct cli_opts *o)
{
	return (struct tk_sym_opts){ .sz = sizeof(struct tk_sym_opts),
				     .no_demangle = o->no_demangle, .short_names = o->short_names };
}

struct tk_sym *cli_sym_open(const struct cli_opts *o, int *status)
{
	int err;
	*status = 0;
	struct tk_sym_opts so = cli_sym_opts(o);
	struct tk_sym *s = tk_sym_new(&so, &err);
	if (!s) {
		cli_error(NULL, UINT64_MAX, "out of memory");
		*status = EXIT_INPUT;
		return NULL;
	}
	tk_set_log(log_to_stderr, NULL);
	for (int i = 0; i < o->n_elf; i++) {
		char path[4096];
		uint64_t base = 0;
		int have_base = 0;
		snprintf(path, sizeof path, "%s", o->elf[i]);
		char *colon = strrchr(path, ':');
		if (colon && cli_parse_u64(colon + 1, &base) == 0) {
			*colon = 0;
			have_base = 1;
		}
		int rc = have_base ? tk_sym_add_elf_at(s, path, base) : tk_sym_add_elf(s, path, 0);
		if (rc < 0) {
			cli_error(path, UINT64_MAX, "cannot load symbols: %s", tk_strerror(rc));
			*status = EXIT_INPUT;
			tk_sym_free(s);
			return NULL;
		}
	}
	return s;
}

enum tk_out_kind cli_profile_kind(const struct cli_opts *o)
{
	if (o->to)
		return tk_out_kind_by_name(o->to);
	if (o->source)
		return TK_OUT_SOURCE;
	if (o->lines)
		return TK_OUT_LINES;
	if (o->stacks)
		return TK_OUT_FOLDED;
	return TK_OUT_TEXT;
}

int cli_profile_write(const struct cli_opts *o, const struct tk_prof *p, struct tk_sym *sym,
		      const char *track_label)
{
	enum tk_out_kind kind = cli_profile_kind(o);
	struct tk_buf out;
	int rc;
	if (!kind) {
		cli_error(NULL, UINT64_MAX, "--to: unknown output '%s' (text, json, csv, folded, pprof, "
			  "callgrind, source, calltree, lines, blocks)", o->to);
		return EXIT_USAGE;
	}
	if ((rc = cli_out_open(o, &out)))
		return rc;
	struct tk_out_opts oo = { .sz = sizeof oo, .sym = sym, .sort = o->sort, .top = o->top,
				  .threads = o->threads, .track_label = track_label };
	tk_set_log(log_to_stderr, NULL);
	rc = tk_out_profile(&out, p, kind, &oo);
	int crc = cli_out_close(&out);
	if (rc < 0 && crc != EXIT_OUTPUT) {   /* a failed write: cli_out_close said so */
		cli_error(NULL, UINT64_MAX, "cannot write the profile: %s", tk_strerror(rc));
		return rc == -TK_E_INVAL ? EXIT_USAGE : EXIT_INPUT;
	}
	return crc;
}

int cli_timeline_open(const struct cli_opts *o, struct tk_sym *sym, struct tk_trace_clock clock,
		      struct cli_timeline *ct)
{
	struct tk_timeline_opts to = { .sz = sizeof to, .sym = sym, .clock = clock,
				       .max_events = o->max_events };
	int rc, err;
	memset(ct, 0, sizeof *ct);
	/* no --to: the callers that get here default to a timeline (Intel PT), Perfetto's */
	to.kind = o->to ? tk_timeline_kind_by_name(o->to) : TK_TIMELINE_PERFETTO;
	if (!to.kind) {
		cli_error(NULL, UINT64_MAX, "--to: not a timeline: '%s' (perfetto, chrome)", o->to ? o->to : "");
		return EXIT_USAGE;
	}
	if (o->time_window && cli_parse_range(o->time_window, &to.time_begin, &to.time_end) < 0) {
		cli_error(NULL, UINT64_MAX, "--time: expected A:B, got '%s'", o->time_window);
		return EXIT_USAGE;
	}
	if (to.time_end == UINT64_MAX)
		to.time_end = 0;
	if ((rc = cli_out_open(o, &ct->out)))
		return rc;
	ct->tl = tk_timeline_new(&ct->out, &to, &err);
	if (!ct->tl) {
		cli_out_close(&ct->out);
		cli_error(NULL, UINT64_MAX, "cannot start the timeline: %s", tk_strerror(err));
		return EXIT_INPUT;
	}
	return 0;
}

int cli_timeline_close(struct cli_timeline *ct)
{
	uint64_t dropped = 0;
	int rc = tk_timeline_finish(ct->tl);
	tk_timeline_slices(ct->tl, &dropped);
	tk_timeline_free(ct->tl);
	int crc = cli_out_close(&ct->out);
	if (rc < 0 && crc != EXIT_OUTPUT) {
		cli_error(NULL, UINT64_MAX, "cannot write the timeline: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if (dropped)
		cli_warn(NULL, UINT64_MAX, "%llu calls left out of the timeline (--max-events / --time)",
			 (unsigned long long)dropped);
	return crc;
}

/* ---- branch traces (.tkbt), shared by decode, profile and convert ------------------ */

int cli_btrace_modules(const struct cli_opts *o, const char *file, const struct tk_btrace *bt,
		       struct tk_image *img, struct tk_sym *sym)
{
	struct tk_btrace_modules_opts mo = {
		.sz = sizeof mo, .elf = o->elf, .nelf = (size_t)o->n_elf,
		.module_path = o->module_path, .nmodule_path = (size_t)o->n_module_path,
		.quiet = o->quiet, .msg = cli_msg, .file = file,
	};

	return tk_btrace_load_modules(bt, &mo, img, sym);
}

int cli_btrace_open(const struct cli_opts *o, const char *file, struct tk_input *in,
		    struct cli_btrace *cb)
{
	const uint8_t *data;
	size_t len;
	int rc, err = 0, status;

	memset(cb, 0, sizeof *cb);
	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if (!(cb->bt = cli_btrace_read(file, data, len, NULL, &err))) {
		cli_error(file, UINT64_MAX, "unreadable branch trace: %s", tk_strerror(err));
		return EXIT_INPUT;
	}
	/* the recorded modules, plus whatever --elf/--raw add */
	if (!(cb->img = cli_image_load(o)) || !(cb->sym = cli_sym_open(o, &status))) {
		cli_btrace_close(cb);
		return EXIT_INPUT;
	}
	cb->missing = cli_btrace_modules(o, file, cb->bt, cb->img, cb->sym);
	return 0;
}

int cli_btrace_status(const char *file, const struct tk_btrace *bt,
		      const struct tk_gap_stats *decoded)
{
	struct tk_gap_stats gaps = *tk_btrace_gaps(bt);
	tk_gap_stats_merge(&gaps, decoded);
	int rc = cli_report_gaps(file, &gaps, "gap");
	/* a recording that did not end (killed, or cut short) is missing its tail */
	if (!tk_btrace_info(bt)->complete && rc < EXIT_SKIPPED)
		rc = EXIT_SKIPPED;
	return rc;
}

struct tk_trace_clock cli_btrace_clock(const struct cli_opts *o, const struct cli_btrace *cb)
{
	return (struct tk_trace_clock){ o->has_tsc_hz ? o->tsc_hz : tk_btrace_info(cb->bt)->tsc_hz };
}

void cli_btrace_close(struct cli_btrace *cb)
{
	tk_sym_free(cb->sym);
	tk_image_free(cb->img);
	tk_btrace_free(cb->bt);
	memset(cb, 0, sizeof *cb);
}

int cli_btrace_events(const struct cli_opts *o, const char *file, struct cli_btrace *cb,
		      struct tk_sink sink)
{
	struct tk_btrace_events_opts eo = { .sz = sizeof eo, .image = cb->img,
					    .nthreads = o->jobs, .only_tid = o->has_tid,
					    .tid = (uint32_t)o->tid };
	struct tk_gap_stats gaps = { 0 };
	int rc = tk_btrace_events(cb->bt, &eo, sink, &gaps);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	int status = tk_btrace_info(cb->bt)->complete && !cb->missing ? EXIT_CLEAN : EXIT_SKIPPED;
	rc = cli_report_gaps(file, &gaps, "gap");
	return rc > status ? rc : status;
}
