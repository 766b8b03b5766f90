/* The per-function profile of any trace, as `tracekit profile --to csv` prints it, through
 * libtracekit: source -> runner -> writer.
 *
 *   profile_csv TRACE [ELF[:BASE]...]
 *
 * ELF files give the code and names (a raw Intel PT stream needs them; perf.data and
 * branch traces name their own). Exit status: 0, 1 when data was lost, 3 unreadable. */
#include <stdio.h>

#include <tracekit/tracekit.h>

static void msg(void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
		const char *text)
{
	(void)ctx, (void)offset;
	fprintf(stderr, "%s: %s%s\n", file ? file : "profile_csv",
		level == TK_LOG_WARN ? "warning: " : "", text);
}

int main(int argc, char **argv)
{
	struct tk_source_opts so = { .sz = sizeof so, .elf = (const char *const *)argv + 2,
				     .nelf = argc > 2 ? (size_t)argc - 2 : 0, .msg = msg };
	struct tk_source *s;
	struct tk_prof *p = NULL;
	struct tk_sym *sym;
	struct tk_buf out;
	int err = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: profile_csv TRACE [ELF[:BASE]...]\n");
		return 2;
	}
	if (tk_source_open(&s, argv[1], &so) < 0)
		return 3;
	if ((sym = tk_source_symbols(s, &err)) && (p = tk_run_prof_new(s, &err)) &&
	    (err = tk_run_profile(s, p)) >= 0 && (err = tk_prof_finish(p)) >= 0 &&
	    (err = tk_buf_init(&out, 1, 1 << 16)) >= 0) {
		struct tk_out_opts oo = { .sz = sizeof oo, .sym = sym,
					  .track_label = tk_source_info(s)->track_label };

		err = tk_out_profile(&out, p, TK_OUT_CSV, &oo);
		if (tk_buf_flush(&out) < 0 && err >= 0)
			err = out.err;
		tk_buf_free(&out);
	}
	if (err < 0)
		fprintf(stderr, "%s: %s\n", argv[1], tk_strerror(err));
	int lost = tk_source_report(s);
	tk_prof_free(p);
	tk_source_free(s);
	return err < 0 ? 3 : lost;
}
