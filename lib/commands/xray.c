/* LLVM XRay logs in the commands: info, dump, convert (llvm-xray's YAML, timelines). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/* The mapped input is a read-only mapping of a regular file (its pages can be given back;
 * a pipe or FIFO is read into memory, where giving pages back would lose the data). */
static int release_ok(const char *file, struct tk_input *in)
{
	struct stat st;
	return strcmp(file, "-") != 0 && stat(file, &st) == 0 && S_ISREG(st.st_mode) &&
	       tk_input_compression(in) == TK_COMP_NONE;
}

/* Map the log, load --instr-map, index the buffers (NULL and *STATUS set after saying
 * why). Library messages name FILE until finish(). */
static struct tk_xray *xray_open(const struct tk_cmd *c, const char *file, struct tk_input *in,
				 struct tk_xray_map **map, int *status)
{
	const uint8_t *data;
	size_t len;
	int err;

	*map = NULL;
	if ((*status = tk_cmd_map(c, file, in, &data, &len)))
		return NULL;
	if (c->o->instr_map && !(*map = tk_xray_map_load(c->o->instr_map, &err))) {
		CMD_ERROR(c, c->o->instr_map, UINT64_MAX, "cannot load the instrumentation map: %s",
			  tk_strerror(err));
		*status = TK_EXIT_INPUT;
		return NULL;
	}
	/* (TK_XRAY_CHUNK: held chunks' bytes, as the dump's chunks below, for tests) */
	const char *chunk = getenv("TK_XRAY_CHUNK");
	struct tk_xray_opts xo = { .sz = sizeof xo, .nthreads = tk_cmd_jobs(c),
				   .max_func_id = tk_xray_map_max_id(*map),
				   .release_input = release_ok(file, in), .in = in,
				   .hold_bytes = chunk ? strtoull(chunk, NULL, 0) : 0 };
	tk_cmd_log_file(c, file);
	struct tk_xray *x = tk_xray_open(data, len, &xo, &err);
	if (!x) {
		tk_cmd_log_file(c, NULL);
		CMD_ERROR(c, file, err == -TK_E_TRUNCATED || err == -TK_E_BAD_FORMAT ? 0 : UINT64_MAX,
			  "not a readable XRay log: %s", tk_strerror(err));
		tk_xray_map_free(*map);
		*map = NULL;
		*status = TK_EXIT_INPUT;
	}
	return x;
}

/* After a walk: gaps and orphan exits said, X and MAP freed; the exit status. */
static int xray_finish(const struct tk_cmd *c, const char *file, struct tk_xray *x,
		       struct tk_xray_map *map)
{
	const struct tk_xray_stats *st = tk_xray_stats(x);
	int rc;

	tk_cmd_log_file(c, NULL);
	if (st->orphan_exits)
		CMD_WARN(c, file, UINT64_MAX, "%llu exits without their enters (the log starts "
			 "mid-call: older records were wrapped away)",
			 (unsigned long long)st->orphan_exits);
	rc = tk_cmd_gaps(c, file, &st->gaps, "damaged or lost region");
	tk_xray_free(x);
	tk_xray_map_free(map);
	return rc;
}

static int info(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *out)
{
	struct tk_xray_map *map;
	int status = 0, rc;
	struct tk_xray *x = xray_open(c, file, in, &map, &status);

	(void)fi;
	if (!x)
		return status;
	const struct tk_xray_header *h = tk_xray_header(x);
	if ((rc = tk_xray_walk(x, NULL, NULL)) < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		status = TK_EXIT_INPUT;
	}
	const struct tk_xray_stats *st = tk_xray_stats(x);
	double secs = h->cycle_frequency ? (double)(st->last_tsc - st->first_tsc) /
					   (double)h->cycle_frequency : 0;
	tk_buf_printf(out, "  mode:            %s, version %u%s\n",
		      h->type ? "FDR (flight data recorder)" : "basic", h->version,
		      h->big_endian ? ", big-endian" : "");
	tk_buf_printf(out, "  frequency:       %llu Hz (constant TSC: %s, non-stop TSC: %s)\n",
		      (unsigned long long)h->cycle_frequency, h->constant_tsc ? "yes" : "no",
		      h->nonstop_tsc ? "yes" : "no");
	if (h->type && h->version == 1)
		tk_buf_printf(out, "  buffer size:     %llu bytes\n",
			      (unsigned long long)h->v1_buffer_size);
	tk_buf_printf(out, "  %s %llu\n", h->type ? "buffers:        " : "record runs:    ",
		      (unsigned long long)st->buffers);
	tk_buf_printf(out, "  records:         %llu (%llu function, %llu custom events, %llu typed events, %llu call arguments)\n",
		      (unsigned long long)st->records, (unsigned long long)st->function_records,
		      (unsigned long long)st->custom_events, (unsigned long long)st->typed_events,
		      (unsigned long long)st->call_args);
	tk_buf_printf(out, "  threads:         %zu\n  cpus:            %llu\n",
		      tk_xray_thread_count(x), (unsigned long long)st->cpus);
	tk_buf_printf(out, "  time span:       tsc %llu .. %llu (%.6f s)\n",
		      (unsigned long long)st->first_tsc, (unsigned long long)st->last_tsc, secs);
	if (st->orphan_exits)
		tk_buf_printf(out, "  orphan exits:    %llu\n", (unsigned long long)st->orphan_exits);
	for (size_t i = 0; i < tk_xray_thread_count(x); i++) {
		const struct tk_xray_thread_info *t = tk_xray_thread(x, i);
		tk_buf_printf(out, "  thread %u (process %u): %llu %s, %llu records",
			      t->tid, t->pid, (unsigned long long)t->buffers,
			      h->type ? "buffers" : "runs", (unsigned long long)t->records);
		if (t->orphan_exits)
			tk_buf_printf(out, ", %llu orphan exits", (unsigned long long)t->orphan_exits);
		tk_buf_putc(out, '\n');
	}
	return tk_cmd_max(xray_finish(c, file, x, map), status);
}

static int dump(const struct tk_cmd *c, const char *file, struct tk_input *in,
		const struct tk_format_info *fi, struct tk_buf *unused)
{
	const uint8_t *data;
	size_t len;
	struct tk_buf out;
	struct tk_gap_stats gaps = { 0 };
	int rc;

	(void)fi, (void)unused;
	if ((rc = tk_cmd_map(c, file, in, &data, &len)))
		return rc;
	/* -q: check only; the records go nowhere */
	if ((rc = c->out_open(c, c->o->quiet ? "/dev/null" : NULL, &out)))
		return rc;
	tk_cmd_log_file(c, file);
	struct tk_progress prog;
	tk_cmd_progress_init(c, &prog, file, len);
	/* (TK_XRAY_CHUNK: the chunks' size in bytes, for tests of the seams) */
	const char *chunk = getenv("TK_XRAY_CHUNK");
	struct tk_xray_dump_opts o = { .sz = sizeof o, .no_offset = c->o->no_offset,
				       .release_input = release_ok(file, in), .progress = &prog,
				       .nthreads = tk_cmd_jobs(c), .input = in,
				       .chunk_bytes = chunk ? (size_t)strtoull(chunk, NULL, 0) : 0 };
	long bad = tk_xray_dump_with(data, len, &o, &out, &gaps);
	tk_progress_finish(&prog);
	tk_cmd_log_file(c, NULL);
	rc = c->out_close(&out);
	if (bad < 0) {
		CMD_ERROR(c, file, 0, "not a readable XRay log: %s", tk_strerror((int)bad));
		return TK_EXIT_INPUT;
	}
	return tk_cmd_max(rc, tk_cmd_gaps(c, file, &gaps, "damaged region"));
}

/* Chrome / Perfetto through the shared timeline writer, fed by the parallel decoder;
 * --time A:B (TSC ticks) and --max-events N as for the other formats. *DROPPED: slices
 * left out by them. */
static int timeline(const struct tk_cmd *c, struct tk_xray *x, const struct tk_xray_map *map,
		    enum tk_timeline_kind kind, struct tk_buf *out, uint64_t *dropped, int *status)
{
	struct tk_sym_opts so = tk_cmd_sym_opts(c->o);
	int err, rc;

	so.no_dwarf = 1;
	struct tk_sym *sym = tk_sym_new(&so, &err);
	if (!sym)
		return err;
	if ((rc = tk_xray_map_to_sym(map, sym)) < 0) {
		tk_sym_free(sym);
		return rc;
	}
	/* The chunks' pass on the decoding threads (their decoding is light beside it) and
	 * their bytes at their turn on the calling thread, which decodes chunks in between:
	 * with the writer's formatter and helper, -j 2 took 0.26 s against 0.23 s (CPU +12 %
	 * against -j 1's +0 %) */
	struct tk_timeline_opts to = { .sz = sizeof to, .kind = kind, .sym = sym,
				       .clock = { c->o->has_tsc_hz ? c->o->tsc_hz
							  : tk_xray_header(x)->cycle_frequency },
				       .max_events = c->o->max_events, .process_name = "xray",
				       .time_origin = tk_xray_first_tsc(x),
				       .nthreads = tk_cmd_writer_threads(c), .prepare = tk_cmd_jobs(c) > 1 };
	if (c->o->time_window) {
		/* checked by the caller */
		tk_cmd_parse_range(c->o->time_window, &to.time_begin, &to.time_end);
		if (to.time_end == UINT64_MAX)
			to.time_end = 0;
	}
	struct tk_timeline *t = tk_cmd_timeline_new(c, NULL, out, &to, status);
	if (!t) {
		tk_sym_free(sym);
		return 0;   /* said */
	}
	for (size_t i = 0; i < tk_xray_thread_count(x); i++) {
		char name[64];
		const struct tk_xray_thread_info *ti = tk_xray_thread(x, i);
		snprintf(name, sizeof name, "thread %u (process %u)", ti->tid, ti->pid);
		tk_timeline_track_name(t, (uint32_t)i, name);
	}
	rc = tk_xray_decode(x, tk_timeline_sink(t));
	int frc = tk_timeline_finish(t);
	tk_timeline_slices(t, dropped);
	tk_timeline_free(t);
	tk_sym_free(sym);
	return rc < 0 ? rc : frc;
}

static int convert(const struct tk_cmd *c, const char *file, struct tk_input *in,
		   const struct tk_format_info *fi, struct tk_buf *unused)
{
	struct tk_xray_map *map;
	struct tk_buf out;
	int status = 0, rc;
	const char *to = c->o->to ? c->o->to : "xray-yaml";

	(void)fi, (void)unused;
	enum tk_timeline_kind tl = tk_timeline_kind_by_name(to);
	int yaml = !strcmp(to, "xray-yaml") || !strcmp(to, "yaml");
	if (!yaml && !tl && tk_out_kind_by_name(to))
		return TK_EXIT_AS_PROFILE;
	if (!yaml && !tl) {
		CMD_ERROR(c, NULL, UINT64_MAX, "convert: XRay logs convert to xray-yaml, chrome, "
			  "perfetto, folded, pprof or a profile output, not '%s'", to);
		return TK_EXIT_USAGE;
	}
	if (yaml && (status = tk_cmd_convert_plain(c, "--to xray-yaml")))
		return status;
	/* llvm-xray's YAML keeps the log's cycle frequency and raw TSCs */
	if (yaml && c->o->has_tsc_hz) {
		CMD_ERROR(c, NULL, UINT64_MAX, "convert: --tsc-hz is for timelines and profiles, not "
			  "--to xray-yaml (it writes the log's TSCs and cycle frequency)");
		return TK_EXIT_USAGE;
	}
	uint64_t tb, te, dropped = 0;
	if (tl && c->o->time_window && tk_cmd_parse_range(c->o->time_window, &tb, &te) < 0) {
		CMD_ERROR(c, NULL, UINT64_MAX, "--time: expected A:B, got '%s'", c->o->time_window);
		return TK_EXIT_USAGE;
	}
	struct tk_xray *x = xray_open(c, file, in, &map, &status);
	if (!x)
		return status;
	if ((rc = c->out_open(c, NULL, &out))) {
		tk_cmd_log_file(c, NULL);
		tk_xray_free(x);
		tk_xray_map_free(map);
		return rc;
	}
	if (tl)
		rc = timeline(c, x, map, tl, &out, &dropped, &status);
	else
		rc = tk_xray_yaml_with(x, map, &out, &(struct tk_xray_yaml_opts){
			.sz = sizeof(struct tk_xray_yaml_opts),
			/* (TK_XRAY_YAML_BLOCK: records per block, for tests of the blocks' seams) */
			.block_records = getenv("TK_XRAY_YAML_BLOCK")
				? strtoull(getenv("TK_XRAY_YAML_BLOCK"), NULL, 0) : 0 });
	if (rc < 0 && rc != out.err) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		status = TK_EXIT_INPUT;
	}
	status = tk_cmd_max(c->out_close(&out), status);
	if (dropped)
		CMD_WARN(c, file, UINT64_MAX, "%llu calls left out of the timeline (--max-events / --time)",
			 (unsigned long long)dropped);
	return tk_cmd_max(xray_finish(c, file, x, map), status);
}

const tk_cmd_fn tk_cmd_xray[TK_CMD__COUNT] = {
	[TK_CMD_INFO] = info, [TK_CMD_DUMP] = dump, [TK_CMD_CONVERT] = convert,
	[TK_CMD_RECORD] = tk_cmd_record_xray,
};

/* XRay's options. */
const struct tk_cmd_option tk_cmd_xray_options[] = {
	{ "instr-map", "F", "ELF binary or `llvm-xray extract` YAML: function names",
	  TK_CMD_BIT(TK_CMD_INFO) | TK_CMD_BIT(TK_CMD_CONVERT) | TK_CMD_BIT(TK_CMD_PROFILE) | TK_CMD_BIT(TK_CMD_REPORT),
	  TK_OPT_STRING, CMD_FIELD(instr_map), 0 },
	{ "tsc-hz", "N", "TSC ticks per second, instead of the log's cycle frequency (0: ticks)",
	  TK_CMD_BIT(TK_CMD_PROFILE) | TK_CMD_BIT(TK_CMD_REPORT) | TK_CMD_BIT(TK_CMD_CONVERT),
	  TK_OPT_U64, CMD_FIELD(tsc_hz), CMD_FIELD(has_tsc_hz) },
	{ "xray", NULL, "run an XRay-instrumented program and collect its log",
	  TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_FLAG, CMD_FIELD(record), 0,
	  TK_FMT_XRAY },
	{ "xray-mode", "M", "basic (default) or fdr", TK_CMD_BIT(TK_CMD_RECORD), TK_OPT_STRING,
	  CMD_FIELD(xray_mode), 0 },
	{ NULL, NULL, NULL, 0, 0, 0, 0, 0 },
};
