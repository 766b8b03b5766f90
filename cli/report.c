/* tracekit report: one self-contained HTML page per trace. A front-end: options -> source
 * -> the chunk runner (the profile, and the timeline's bins from the same pass) -> the page writer
 * (tk_report_*, lib/output/report.c). Kanata logs have no source yet: their page is the
 * format's report operation (lib/commands/kanata.c). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tracekit/out.h"
#include "tracekit/run.h"
#include "tracekit/source.h"

static const char usage[] =
	"usage: tracekit report [OPTIONS] FILE\n"
	"\n"
	"One self-contained HTML page of a trace (inline CSS, JS and data; opens offline in any\n"
	"browser): summary, flame graph, function table, source heat, timeline, XRay latency\n"
	"percentiles, and for Kanata logs IPC over time, stage latencies, the slowest\n"
	"instructions and a pipeline diagram. The page holds summaries sized for the screen:\n"
	"it stays under 8 MiB whatever the trace's size.\n"
	"\n"
	"  -o FILE         write the page to FILE (default: standard output)\n"
	"  --top N         function table rows (default 500; the rest are summed in one row)\n"
	"  --elf FILE[:BASE]  symbols and line tables of FILE loaded at BASE\n"
	"  -j N            threads (default: all cores)\n"
	"  -F/-N NAME, -D N, -t/--min-time DUR, --min-insns N\n"
	"                  call filters, as profile's: the page is the filtered profile's\n"
	"  --time A:B      only trace ticks [A, B), as profile's: the page is the window's\n"
	"\n"
	"Every format with a profile (`tracekit profile`), and Kanata logs. The numbers are\n"
	"those of `profile --to csv`, `--source`, `--to account` and `stats`. Kanata: --cycles\n"
	"A:B (default: the first 2000 cycles) chooses the pipeline diagram's instructions.\n";

/* Messages: printed as every command prints them, and the first ones kept for the page's
 * list of what was lost. */
#define NOTES 50
struct notes {
	char *v[NOTES];
	size_t n;
};

static void report_msg(void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
		       const char *msg)
{
	struct notes *nt = ctx;
	char line[512];

	cli_msg(NULL, level, file, offset, msg);
	if (nt->n == NOTES)
		return;
	if (offset != UINT64_MAX)
		snprintf(line, sizeof line, "offset 0x%llx: %s", (unsigned long long)offset, msg);
	else
		snprintf(line, sizeof line, "%s", msg);
	nt->v[nt->n++] = strdup(line);
}


/* The page to -o (or standard output), the notes in its summary. */
static int write_page(struct tk_cmd_opts *o, const char *file, struct tk_report *r,
		      struct notes *nt)
{
	struct tk_buf out;
	int rc;
	for (size_t i = 0; i < nt->n; i++)
		if (nt->v[i])
			tk_report_note(r, nt->v[i]);
	if ((rc = cli_out_open(o, &out)))
		return rc;
	if ((rc = tk_report_write(r, &out)) < 0 && !out.err)
		cli_error(file, UINT64_MAX, "cannot write the report: %s", tk_strerror(rc));
	int crc = cli_out_close(&out);
	return crc ? crc : rc < 0 ? EXIT_INPUT : 0;
}

static struct tk_report_opts page_opts(struct tk_cmd_opts *o, const char *file, struct tk_input *in,
				       const struct tk_format_info *fi)
{
	return (struct tk_report_opts){ .sz = sizeof(struct tk_report_opts), .title = file,
					.format = tk_format_description(fi->id),
					.size = tk_input_file_size(in), .top = o->top };
}

static int report_file(struct tk_cmd_opts *o, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi)
{
	struct notes nt = { .n = 0 };
	struct tk_source_opts so = cli_source_opts(o, fi);
	struct tk_report_opts ro = page_opts(o, file, in, fi);
	struct tk_source *s = NULL;
	struct tk_report *r = NULL;
	struct tk_prof *p = NULL;
	struct tk_sym *sym;
	struct tk_run_filter filter;
	int rc, err = 0, status = EXIT_INPUT;

	/* a format without a source has its own page (Kanata: the decoder feeds it) */
	tk_cmd_fn op = tk_cmd_op(fi->id, TK_CMD_REPORT);
	if (op && o->time_window) {
		cli_error(file, UINT64_MAX, "--time: a %s page has no profile to window (--cycles "
			  "A:B chooses the pipeline diagram's cycles)", tk_format_description(fi->id));
		status = EXIT_USAGE;
		goto out;
	}
	if (op) {
		status = op(cli_cmd(o, "report"), file, in, fi, NULL);
		goto out;
	}
	if (!tk_source_supported(fi->id)) {
		status = cli_unsupported("report", file, fi);
		goto out;
	}
	if ((status = cli_run_filter(o, &filter)))
		goto out;
	status = EXIT_INPUT;
	so.msg = report_msg;
	so.ctx = &nt;
	if (tk_source_open_input(&s, file, in, &so) < 0)
		goto out;
	if (!(sym = tk_source_symbols(s, &err)))
		goto out;
	struct cli_xray_names nc = { s, sym, "" };
	ro.sym = sym;
	ro.track_label = tk_source_info(s)->track_label;
	ro.func_name = cli_xray_func_name;
	ro.thread_id = cli_xray_thread_id;
	ro.ctx = &nc;
	if (filter.time) {
		ro.time_begin = filter.time_begin;
		ro.time_end = filter.time_end;
	}
	if (!(r = tk_report_new(&ro, &rc))) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		goto out;
	}
	/* uftrace's call filters: the profile's, and the timeline bins the calls it counts */
	int filtered = tk_run_filter_calls(&filter);
	if (filtered)
		filter.calls = tk_report_calls(r);
	if (!(p = tk_run_prof_new_filtered(s, &filter, &err))) {
		status = cli_filter_error(file, fi, &filter, err);
		goto out;
	}
	struct tk_run_tee tee = tk_report_tee(r);
	rc = filtered ? tk_run_profile(s, p) : tk_run_profile_tee(s, p, &tee);
	if (rc >= 0 && (rc = tk_prof_finish(p)) >= 0)
		rc = tk_report_profile(r, p);
	status = tk_source_report(s) ? EXIT_SKIPPED : EXIT_CLEAN;
	if (rc >= 0 && cli_time_refused(file, fi, &filter, p)) {
		status = EXIT_USAGE;
		goto out;
	}
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "decode failed: %s", tk_strerror(rc));
		status = EXIT_INPUT;
		goto out;
	}
	rc = write_page(o, file, r, &nt);
	status = rc > status ? rc : status;
out:
	tk_report_free(r);
	tk_prof_free(p);
	tk_source_free(s);
	for (size_t i = 0; i < nt.n; i++)
		free(nt.v[i]);
	return status;
}

static int run(struct tk_cmd_opts *o)
{
	/* one page is one document: two pages in one output would not open as either */
	if (o->nargs > 1) {
		cli_error(NULL, UINT64_MAX, "report: %d inputs: give one input per run (one page each)",
			  o->nargs);
		return EXIT_USAGE;
	}
	return cli_run_files(o, "report", report_file);
}

const struct cli_command cli_cmd_report = {
	.name = "report",
	.summary = "one self-contained HTML page of a trace",
	.usage = usage,
	.kind = TK_CMD_REPORT,
	.run = run,
	.takes = "elf time-window top no-demangle short-names pid comm function exclude "
		 "depth min-time min-insns",
};
