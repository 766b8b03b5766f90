/* tracekit profile: calls per function, executions per line, call tree. Each format's handler is one case below; the work is in the library. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: tracekit profile [OPTIONS] FILE...\n"
	"\n"
	"Profile a trace: per function, per call path and per source line.\n"
	"\n"
	"  --sort KEY      sort by KEY\n"
	"  --top N         only the first N rows\n"
	"  --threads       per thread instead of merged\n"
	"  --to FMT        text, json, csv, folded, pprof, source, calltree, lines, blocks\n"
	"  --lines         per source line (--to lines)\n"
	"  --tid N         (btrace) only this thread\n"
	"  -j N            threads (default: all cores)\n"
	"  -o FILE         write to FILE\n";

/* Events of one thread of a branch trace, re-tracked to its thread id, into the profile. */
struct bt_track {
	struct tk_prof *prof;
	uint32_t tid;
	struct tk_event ev[256];
};

static int bt_track_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct bt_track *t = ctx;
	while (n) {
		size_t k = n < 256 ? n : 256;
		memcpy(t->ev, ev, k * sizeof *ev);
		for (size_t i = 0; i < k; i++)
			t->ev[i].track = t->tid;
		int rc = tk_prof_events(t->prof, t->ev, k);
		if (rc < 0)
			return rc;
		ev += k;
		n -= k;
	}
	return 0;
}

/* Branch trace: every thread's PT stream through the flow decoder into one profile,
 * symbolised with the recorded modules. */
static int profile_btrace(struct cli_opts *o, const char *file, struct tk_input *in)
{
	const uint8_t *data;
	size_t len;
	int rc, err = 0, status = EXIT_CLEAN;
	enum tk_out_kind kind = o->to ? tk_out_kind_by_name(o->to) : TK_OUT_TEXT;

	if (o->lines && !o->to)
		kind = TK_OUT_LINES;
	if (o->source && !o->to)
		kind = TK_OUT_SOURCE;
	if (!kind) {
		cli_error(NULL, UINT64_MAX, "profile: unknown --to '%s'", o->to);
		return EXIT_USAGE;
	}
	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	struct tk_btrace *bt = tk_btrace_open(data, len, NULL, &err);
	if (!bt) {
		cli_error(file, UINT64_MAX, "unreadable branch trace: %s", tk_strerror(err));
		return EXIT_INPUT;
	}
	struct tk_image *img = tk_image_new(&err);
	struct tk_prof_opts po = { .sz = sizeof po };
	struct tk_prof *prof = tk_prof_new(&po, &err);
	struct tk_sym_opts so = { .sz = sizeof so };
	struct tk_sym *sym = tk_sym_new(&so, &err);
	struct bt_track *tr = malloc(sizeof *tr);
	struct tk_gap_stats gaps = *tk_btrace_gaps(bt);
	if (!img || !prof || !sym || !tr || tk_btrace_add_modules(bt, img) < 0) {
		cli_error(file, UINT64_MAX, "cannot set up the decoder (modules missing?)");
		status = EXIT_INPUT;
		goto out;
	}
	for (size_t i = 0; i < tk_btrace_module_count(bt); i++)
		tk_sym_add_elf(sym, tk_btrace_module(bt, i)->path, tk_btrace_module(bt, i)->bias);
	tr->prof = prof;
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		struct tk_ipt_flow_opts fo = { .sz = sizeof fo, .image = img, .nthreads = o->jobs };
		struct tk_ipt_flow_stats st;
		uint8_t *pt;
		size_t n;
		tr->tid = tk_btrace_thread(bt, i)->tid;
		if (tk_btrace_thread_stream(bt, i, &pt, &n) < 0) {
			status = EXIT_INPUT;
			goto out;
		}
		rc = tk_ipt_flow_events(pt, n, &fo, (struct tk_sink){ bt_track_events, tr }, &st);
		free(pt);
		if (rc < 0) {
			cli_error(file, UINT64_MAX, "thread %u: %s", tr->tid, tk_strerror(rc));
			status = EXIT_INPUT;
			goto out;
		}
		tk_gap_stats_merge(&gaps, &st.gaps);
	}
	tk_prof_finish(prof);
	struct tk_buf out;
	if ((rc = cli_out_open(o, &out)))
		goto out;
	struct tk_out_opts oo = { .sz = sizeof oo, .sym = sym, .sort = o->sort, .top = o->top,
				  .threads = o->threads };
	if ((rc = tk_out_profile(&out, prof, kind, &oo)) < 0)
		cli_error(file, UINT64_MAX, "profile output: %s", tk_strerror(rc));
	status = cli_out_close(&out);
	if (rc < 0 && !status)
		status = EXIT_INPUT;
	if (!tk_btrace_info(bt)->complete && status < EXIT_SKIPPED)
		status = EXIT_SKIPPED;
	rc = cli_report_gaps(file, &gaps, "gap");
	if (rc > status)
		status = rc;
out:
	free(tr);
	tk_sym_free(sym);
	tk_prof_free(prof);
	tk_image_free(img);
	tk_btrace_free(bt);
	return status;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	(void)o, (void)in;
	switch (fi->id) {
	case TK_FMT_TKBT:
		return profile_btrace(o, file, in);
	default:
		return cli_unsupported("profile", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "profile")))
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

const struct cli_command cli_cmd_profile = {
	.name = "profile",
	.summary = "calls per function, executions per line, call tree",
	.usage = usage,
	.run = run,
};
