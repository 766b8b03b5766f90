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

struct tk_sym *cli_sym_open(const struct cli_opts *o, int *status)
{
	int err;
	*status = 0;
	struct tk_sym *s = tk_sym_new(NULL, &err);
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

struct tk_prof *cli_prof_new(const struct cli_opts *o, struct tk_sym *sym, struct tk_prof_opts *po,
			     int *err)
{
	struct tk_prof_opts def = { .sz = sizeof def };
	uint64_t *entries = NULL;
	size_t n = 0;
	if (!po)
		po = &def;
	/* -j also for the duration statistics (the same result for any count) */
	if (!po->nthreads)
		po->nthreads = o->jobs ? o->jobs : tk_cpu_count();
	if (sym && tk_sym_entries(sym, &entries, &n) == 0) {
		po->entries = entries;
		po->nentries = n;
	}
	struct tk_prof *p = tk_prof_new(po, err);
	po->entries = NULL;
	po->nentries = 0;
	free(entries);
	return p;
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
			  "source, calltree, lines, blocks)", o->to);
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

/* Is PATH the file module M was loaded from? By build-id where the recorder noted one;
 * without, any readable file of that name (NAME_ONLY: the same file name) will do. */
static int module_file_is(const struct tk_btrace_module *m, const char *path, int name_only)
{
	uint8_t id[64];
	if (!m->build_id_len) {
		const char *a = strrchr(path, '/'), *b = strrchr(m->path, '/');
		return access(path, R_OK) == 0 &&
		       (!name_only || !strcmp(a ? a + 1 : path, b ? b + 1 : m->path));
	}
	int n = tk_image_elf_build_id(path, id, sizeof id);
	return n == (int)m->build_id_len && !memcmp(id, m->build_id, m->build_id_len);
}

/* The file that stands in for module M: its recorded path if that is still the file that
 * ran, else an --elf FILE or a --module-path DIR/NAME with its build-id (*PLACED: an
 * --elf FILE:BASE the user placed himself, already in the image); NULL if none. */
static const char *module_file(const struct cli_opts *o, const struct tk_btrace_module *m,
			       char *buf, size_t cap, int *placed)
{
	const char *name = strrchr(m->path, '/');
	name = name ? name + 1 : m->path;
	*placed = 0;
	if (module_file_is(m, m->path, 0))
		return m->path;
	for (int i = 0; i < o->n_elf; i++) {
		const char *colon = strrchr(o->elf[i], ':');
		uint64_t base;
		int has_base = colon && cli_parse_u64(colon + 1, &base) == 0;
		snprintf(buf, cap, "%.*s", has_base ? (int)(colon - o->elf[i]) : (int)strlen(o->elf[i]), o->elf[i]);
		if (module_file_is(m, buf, 1)) {
			*placed = has_base;
			return buf;
		}
	}
	for (int i = 0; i < o->n_module_path; i++) {
		snprintf(buf, cap, "%s/%s", o->module_path[i], name);
		if (module_file_is(m, buf, 1))
			return buf;
	}
	return NULL;
}

/* Why the recorded file of a module cannot stand for it (RC: its load's error, if any). */
static const char *module_trouble(const char *path, int rc)
{
	struct stat st;
	if (rc < 0)
		return "cannot be loaded";
	if (stat(path, &st) < 0)
		return "is gone";
	if (!S_ISREG(st.st_mode))   /* a FIFO or device is never read: it could block */
		return "is not a regular file";
	return "is not the file that ran (its build-id differs)";
}

int cli_btrace_modules(const struct cli_opts *o, const char *file, const struct tk_btrace *bt,
		       struct tk_image *img, struct tk_sym *sym)
{
	int missing = 0;
	for (size_t i = 0; i < tk_btrace_module_count(bt); i++) {
		const struct tk_btrace_module *m = tk_btrace_module(bt, i);
		char buf[4096];
		int placed, rc = 0;
		const char *use = module_file(o, m, buf, sizeof buf, &placed);
		/* the bias is where the ELF's address 0 went (PIE and shared objects); 0 for a
		 * fixed-address executable, which loads at its own addresses */
		if (use && !placed && (rc = tk_image_add_elf(img, use, m->bias, m->bias != 0)) < 0)
			use = NULL;
		if (!use) {
			missing++;
			if (!o->quiet)
				cli_warn(file, UINT64_MAX, "module %s %s: its code is missing, and the trace "
					 "inside it decodes as gaps (give the file that ran with --elf FILE "
					 "or --module-path DIR)", m->path,
					 module_trouble(m->path, rc));
			continue;
		}
		if (use != m->path && !o->quiet)
			cli_warn(file, UINT64_MAX, "module %s: read from %s (the same build-id)", m->path, use);
		if (sym && !placed)
			tk_sym_add_elf(sym, use, m->bias);
	}
	return missing;
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

int cli_btrace_profile(const struct cli_opts *o, const char *file, struct cli_btrace *cb)
{
	int err, status;
	/* times in microseconds when the TSC's rate is known (measured by the recording) */
	struct tk_prof_opts po = { .sz = sizeof po, .clock = cli_btrace_clock(o, cb) };
	struct tk_prof *p = cli_prof_new(o, cb->sym, &po, &err);
	status = p ? cli_btrace_events(o, file, cb, tk_prof_sink(p)) : EXIT_INPUT;
	if (status < EXIT_USAGE) {
		tk_prof_finish(p);
		int wrc = cli_profile_write(o, p, cb->sym, NULL);
		if (wrc > status)
			status = wrc;
	}
	tk_prof_free(p);
	return status;
}
