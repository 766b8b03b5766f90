/* tracekit diff A B: two runs compared per function (or per stack, --to folded). A
 * front-end: each input is profiled as `profile` does (a trace: cli_profile_file; a saved
 * profile, a partial of `profile --shard 1/1`: cli_merge_partials), the profile handed to
 * the library's comparison (tk_out_diff) instead of a writer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tracekit/partial.h"

static const char usage[] =
	"usage: tracekit diff [OPTIONS] A B\n"
	"\n"
	"Compare two runs: per function the calls, time and instructions of A and B, B - A\n"
	"and its percent of A, largest change first. A and B are traces (profiled with the\n"
	"same options) or saved profiles (profile --shard 1/1 -o FILE).\n"
	"\n"
	"  --to FMT        text, csv, json, folded (stack countA countB, for difffolded\n"
	"                  flame graphs)\n"
	"  --sort KEY      function, or METRIC_a, _b, _diff, _pct (METRIC: calls, incl_time,\n"
	"                  excl_time, incl_insns, excl_insns)\n"
	"  --top N         only the first N rows (folded: the N paths that changed most)\n"
	"  --time A:B      only what ran in trace ticks [A, B) (traces)\n"
	"  --elf FILE[:BASE]  symbols and code of FILE loaded at BASE\n"
	"  -j N            threads (default: all cores)\n"
	"  --no-demangle   names as the binary has them\n"
	"  --short-names   names without template arguments and parameters\n"
	"  -o FILE         write to FILE\n";

static struct tk_out_diff *cur;
static int cur_side, taken[2];
static const char *cur_file;

static int take(const struct tk_prof *p, const struct tk_out_opts *oo)
{
	if (taken[cur_side]++) {
		cli_error(cur_file, UINT64_MAX, "a saved profile of several inputs: diff compares "
			  "one run with one");
		return EXIT_USAGE;
	}
	int rc = tk_out_diff_add_opts(cur, cur_side, p, oo);
	if (rc < 0) {
		cli_error(NULL, UINT64_MAX, "diff: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	return EXIT_CLEAN;
}

/* FILE's profile as side SIDE of the comparison; an exit status. */
static int profile_side(const struct tk_cmd_opts *o, char *file, int side)
{
	struct tk_cmd_opts po = *o;
	uint8_t magic[8], *data;
	size_t len = 0;
	int rc;

	/* profiled as `profile FILE` with no output options of its own */
	po.to = NULL;
	po.sort = NULL;
	po.top = 0;
	po.output = NULL;
	po.args = &file;
	po.nargs = 1;
	cur_side = side;
	cur_file = file;
	FILE *f = strcmp(file, "-") ? fopen(file, "rb") : NULL;
	if (f) {
		len = fread(magic, 1, sizeof magic, f);
		fclose(f);
	}
	if (!tk_partial_is(magic, len))
		return cli_run_files(&po, "diff", cli_profile_file);
	if (o->time_window) {
		cli_error(file, UINT64_MAX, "--time: a saved profile holds the whole run");
		return EXIT_USAGE;
	}
	if ((rc = cli_read_whole(file, &data, &len)))
		return rc;
	/* a damaged one is said by the merge, with its offset */
	struct tk_partial p = { 0 };
	struct tk_partial_error e;
	if (tk_partial_read(&p, data, len, &e) == 0) {
		int profile = p.command == TK_PARTIAL_PROFILE;
		tk_partial_clear(&p);
		if (!profile) {
			cli_error(file, UINT64_MAX, "not a saved profile (a partial of another "
				  "command): diff takes those of profile --shard 1/1");
			free(data);
			return EXIT_USAGE;
		}
	}
	return cli_merge_partials(&po, (const char *const *)&file, &data, &len, 1, 1);
}

static int run(struct tk_cmd_opts *o)
{
	enum tk_out_kind kind = o->to ? tk_out_kind_by_name(o->to) : TK_OUT_TEXT;
	const char *keys;
	int err = 0, status = EXIT_CLEAN;

	if (o->nargs != 2) {
		cli_error(NULL, UINT64_MAX, "diff: give two inputs, A and B (%d given)", o->nargs);
		return EXIT_USAGE;
	}
	if (tk_out_diff_sort_check(o->sort, &keys) < 0) {
		cli_error(NULL, UINT64_MAX, "--sort: unknown key '%s' (%s)", o->sort, keys);
		return EXIT_USAGE;
	}
	if (!(cur = tk_out_diff_new(kind, &err))) {
		if (err == -TK_E_INVAL)
			cli_error(NULL, UINT64_MAX, "--to: diff writes text, csv, json or folded, "
				  "not '%s'", o->to);
		else
			cli_error(NULL, UINT64_MAX, "diff: %s", tk_strerror(err));
		return err == -TK_E_INVAL ? EXIT_USAGE : EXIT_INPUT;
	}
	cli_profile_take = take;
	cli_format_opts_defer();   /* a format's option need only fit one of the two */
	for (int i = 0; i < 2 && status <= EXIT_SKIPPED; i++) {
		int rc = profile_side(o, o->args[i], i);
		status = rc > status ? rc : status;
	}
	cli_profile_take = NULL;
	if (status <= EXIT_SKIPPED) {
		int rc = cli_format_opts_untaken("diff");
		status = rc > status ? rc : status;
	}
	if (status <= EXIT_SKIPPED) {
		struct tk_out_diff_opts d = { .sz = sizeof d, .sort = o->sort, .top = o->top,
					      .name_a = o->args[0], .name_b = o->args[1] };
		struct tk_buf out;
		int rc = cli_out_open(o, &out);
		if (!rc) {
			if ((err = tk_out_diff_write(&out, cur, &d)) < 0 && err != -TK_E_INVAL && !out.err)
				cli_error(NULL, UINT64_MAX, "diff: %s", tk_strerror(err));
			rc = cli_out_close(&out);
			if (err < 0 && !rc)
				rc = err == -TK_E_INVAL ? EXIT_USAGE : EXIT_INPUT;
		}
		status = rc > status ? rc : status;
	}
	tk_out_diff_free(cur);
	cur = NULL;
	taken[0] = taken[1] = 0;
	return cli_outputs_end(status);
}

const struct cli_command cli_cmd_diff = {
	.name = "diff",
	.summary = "compare two runs per function (calls, time, instructions)",
	.usage = usage,
	.kind = TK_CMD_PROFILE,
	.run = run,
	.to = "text csv json folded",
	/* (not --threads, --shard, --mpi, --stacks, --lines, --source: it compares whole
	 * profiles, as their text tables) */
	.takes = "to elf time-window sort top no-demangle short-names pid comm function "
		 "exclude depth min-time min-insns",
};
