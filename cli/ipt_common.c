/* Intel PT input in the CLI: the library's session (lib/formats/perf/session.c) opened with
 * the command line's options, its messages on stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

void cli_msg(void *ctx, enum tk_log_level level, const char *file, uint64_t offset,
	     const char *msg)
{
	(void)ctx;
	if (level == TK_LOG_WARN)
		cli_warn(file, offset, "%s", msg);
	else
		cli_error(file, offset, "%s", msg);
}

int cli_ipt_open(struct cli_opts *o, const char *file, struct tk_input *in,
		 const struct tk_format_info *fi, int code, struct cli_ipt *x)
{
	/* TK_IPT_CHUNK: the PSB split's chunk size in bytes, for tests of the seams */
	const char *chunk = getenv("TK_IPT_CHUNK");
	struct tk_perf_session_opts so = {
		.sz = sizeof so, .code = code != 0, .threads = code == 2, .quiet = o->quiet, .elf = o->elf,
		.nelf = (size_t)o->n_elf, .raw = o->raw, .nraw = (size_t)o->n_raw,
		.mtc_freq = (uint32_t)o->mtc_freq, .nom_freq = (uint32_t)o->nom_freq,
		.cpuid_15_eax = (uint32_t)o->cpuid_15_eax, .cpuid_15_ebx = (uint32_t)o->cpuid_15_ebx,
		.has_tsc_hz = o->has_tsc_hz, .tsc_hz = o->tsc_hz, .nthreads = o->jobs,
		.chunk_bytes = chunk ? (size_t)strtoull(chunk, NULL, 0) : 0, .msg = cli_msg,
	};
	const uint8_t *data;
	size_t len;
	int rc;

	if ((rc = tk_input_map(in, &data, &len)) < 0) {
		cli_error(file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	if (tk_perf_session_open(x, file, data, len, fi->id == TK_FMT_PERF, &so) < 0)
		return EXIT_INPUT;
	/* a kernel placed where the session ran it (or left out): the symbols follow the
	 * image (the options' lifetime: the process's) */
	static char placed[CLI_MAX_LIST][4200];
	o->n_elf = (int)x->nelf;
	for (size_t i = 0; i < x->nelf; i++) {
		snprintf(placed[i], sizeof placed[i], "%s", x->elf[i]);
		o->elf[i] = placed[i];
	}
	return 0;
}

void cli_ipt_stream_header(struct tk_buf *out, const struct cli_ipt *x, size_t i)
{
	tk_perf_session_stream_header(out, x, i);
}

void cli_ipt_close(struct cli_ipt *x)
{
	tk_perf_session_close(x);
}

int cli_ipt_report(const struct cli_opts *o, const char *file, const struct cli_ipt *x,
		   const struct tk_ipt_flow_stats *st)
{
	(void)o;
	return tk_perf_session_report(x, file, &st->gaps, st->insns) ? EXIT_SKIPPED : EXIT_CLEAN;
}

int cli_ipt_add_symbols(const struct cli_ipt *x, struct tk_sym *sym)
{
	return tk_perf_session_symbols(x, sym);
}

struct tk_ipt_flow_opts cli_ipt_stream_opts(const struct cli_ipt *x, const struct cli_ipt_stream *s)
{
	struct tk_ipt_flow_opts fo;

	tk_perf_session_flow_opts(x, (size_t)(s - x->s), &fo);
	return fo;
}
