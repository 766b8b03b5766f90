/* The statistics of a Kanata pipeline log (plain, .gz or .zst), printed exactly as
 * `tracekit stats --to FMT LOG` prints them: instructions, IPC, stages, latencies.
 *
 *   kanata_stats LOG [text|json|csv] */
#include <stdio.h>
#include <unistd.h>

#include <tracekit/tracekit.h>

/* The log's errors, as the command shows them: on standard error, with the line. */
static void on_diag(void *ctx, const struct tk_kanata_diag *d)
{
	if (d->level == TK_LOG_ERROR)
		fprintf(stderr, "%s:%llu: error: %s\n", (const char *)ctx,
			(unsigned long long)d->line, d->msg);
}

int main(int argc, char **argv)
{
	enum tk_stats_format to = tk_stats_format_by_name(argc > 2 ? argv[2] : "text");
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .jobs = cores > 0 ? (unsigned)cores : 1,
					   .diag = on_diag, .ctx = argv[1] };
	struct tk_kanata_stats st;
	struct tk_input *in;
	struct tk_buf out;

	if (argc < 2 || !to) {
		fprintf(stderr, "usage: kanata_stats LOG [text|json|csv]\n");
		return 2;
	}
	if (tk_input_open(&in, argv[1], NULL) < 0)
		return 3;
	int rc = tk_kanata_stats_compute(in, &so, &st);
	if (rc >= 0 && tk_buf_init(&out, STDOUT_FILENO, 1 << 16) == 0) {
		tk_out_kanata_stats(&out, to, argv[1], &st, 0);
		rc = tk_buf_flush(&out) < 0 ? -1 : 0;
		tk_buf_free(&out);
	}
	int skipped = rc >= 0 && st.counts.errors;
	tk_kanata_stats_free(&st);
	tk_input_free(in);
	return rc < 0 ? 3 : skipped;
}
