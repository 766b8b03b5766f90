/* The parts every format's command operations share. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tracekit/partial.h"

int tk_cmd_parse_u64(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	x = strtoull(s, &end, 0);
	if (errno || *end)
		return -1;
	*v = x;
	return 0;
}

int tk_cmd_parse_range(const char *s, uint64_t *a, uint64_t *b)
{
	const char *colon = strchr(s, ':');
	char left[64];

	if (!colon || (size_t)(colon - s) >= sizeof left)
		return -1;
	memcpy(left, s, (size_t)(colon - s));
	left[colon - s] = 0;
	*a = 0;
	*b = UINT64_MAX;
	if (left[0] && tk_cmd_parse_u64(left, a) < 0)
		return -1;
	if (colon[1] && tk_cmd_parse_u64(colon + 1, b) < 0)
		return -1;
	return 0;
}

void tk_cmd_line_msg(const struct tk_cmd *c, const char *file, uint64_t line, int is_error,
		     const char *msg)
{
	char where[4200];

	snprintf(where, sizeof where, "%s:%llu", file, (unsigned long long)line);
	CMD_NOTE(c, where, "%s: %s", is_error ? "error" : "warning", msg);
}

int tk_cmd_gaps(const struct tk_cmd *c, const char *file, const struct tk_gap_stats *g,
		const char *what)
{
	return tk_gap_report(g, what, file, c->msg, c->ctx) ? TK_EXIT_SKIPPED : TK_EXIT_CLEAN;
}

struct tk_losses tk_cmd_summary_begin(const struct tk_cmd *c, const struct tk_losses *own)
{
	if (c->part && c->part->nload)
		return c->part->lost;
	if (c->part) {
		c->part->lost = *own;
		c->part->summary = 1;
	}
	return *own;
}

void tk_cmd_summary_end(const struct tk_cmd *c)
{
	if (c->part)
		c->part->summary = 0;
}

int tk_cmd_exec_stats_out(const struct tk_cmd *c, const char *file, const char *what,
			  const char *name, const char *unit, size_t n,
			  const struct tk_ipt_exec_stats *s)
{
	struct tk_buf b;
	int status = c->out_open(c, NULL, &b);

	if (status)
		return status;
	tk_out_exec_stats(&b, tk_stats_format_by_name(c->o->to), file, what, name, unit, n, s);
	return c->out_close(&b);
}

int tk_cmd_part_load(const struct tk_cmd *c, tk_cmd_part_loader load, void *ctx)
{
	for (size_t i = 0; i < c->part->nload; i++) {
		const struct tk_cmd_part_bytes *b = &c->part->load[i];
		struct tk_partial_error e;

		if (load(ctx, b->data, b->len, &e) < 0) {
			CMD_ERROR(c, b->path, b->at + e.offset, "%s", e.msg);
			return TK_EXIT_INPUT;
		}
	}
	return 0;
}

static int exec_loader(void *x, const uint8_t *data, size_t len, struct tk_partial_error *e)
{
	return tk_partial_exec_load(x, data, len, e);
}

int tk_cmd_exec_load(const struct tk_cmd *c, struct tk_ipt_exec *x)
{
	return tk_cmd_part_load(c, exec_loader, x);
}

int tk_cmd_part_saved(const struct tk_cmd *c, const char *file, int rc)
{
	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "%s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	return 0;
}

int tk_cmd_exec_save(const struct tk_cmd *c, const char *file, const struct tk_ipt_exec *x)
{
	return tk_cmd_part_saved(c, file, tk_partial_exec_save(x, &c->part->data, &c->part->len));
}

int tk_cmd_convert_plain(const struct tk_cmd *c, const char *what)
{
	const struct tk_cmd_opts *o = c->o;
	const char *given = o->time_window ? "--time A:B" : o->n_focus ? "-F" : o->n_exclude ? "-N"
			    : o->depth ? "-D" : o->min_ns ? "--min-time" : o->min_insns ? "--min-insns"
			    : o->max_events ? "--max-events" : NULL;

	if (!given)
		return 0;
	CMD_ERROR(c, NULL, UINT64_MAX, "convert: %s is for a timeline%s, not %s", given,
		  !strcmp(given, "--max-events") ? " (--to perfetto, chrome)"
						   : " or a profile (--to perfetto, chrome, folded, pprof)",
		  what);
	return TK_EXIT_USAGE;
}

int tk_cmd_stats_format(const struct tk_cmd *c)
{
	int to = tk_stats_format_by_name(c->o->to);

	if (!to)
		CMD_ERROR(c, NULL, UINT64_MAX, "stats: --to %s: expected text, json or csv", c->o->to);
	return to;
}

/* The library's log messages, through the command's printer (one command runs at a time). */
static struct {
	const struct tk_cmd *c;
	const char *file;
} log_to;

static void log_fwd(void *ctx, enum tk_log_level level, const char *msg)
{
	(void)ctx;
	tk_msg(log_to.c->msg, log_to.c->ctx, level == TK_LOG_WARN ? TK_LOG_WARN : TK_LOG_ERROR,
	       log_to.file, UINT64_MAX, "%s", msg);
}

void tk_cmd_log_file(const struct tk_cmd *c, const char *file)
{
	log_to.c = c;
	log_to.file = file;
	tk_set_log(log_fwd, NULL);
}

void tk_cmd_progress_init(const struct tk_cmd *c, struct tk_progress *p, const char *label,
			  uint64_t total)
{
	tk_progress_init(p, label, total, c->progress, NULL);
}

int tk_cmd_map(const struct tk_cmd *c, const char *file, struct tk_input *in,
	       const uint8_t **data, size_t *len)
{
	int rc = tk_input_map(in, data, len);

	if (rc < 0) {
		CMD_ERROR(c, file, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	return 0;
}

unsigned tk_cmd_jobs(const struct tk_cmd *c)
{
	return c->o->jobs ? c->o->jobs : tk_cpu_count();
}

unsigned tk_cmd_writer_threads(const struct tk_cmd *c)
{
	unsigned jobs = tk_cmd_jobs(c);
	return jobs > 1 ? jobs - 1 : 1;
}

struct tk_image *tk_cmd_image_load(const struct tk_cmd *c)
{
	const struct tk_cmd_opts *o = c->o;
	int err;
	struct tk_image *img = tk_image_new(&err);

	for (int i = 0; img && i < o->n_elf; i++)
		if (tk_image_add_elf_arg(img, o->elf[i]) < 0) {
			CMD_ERROR(c, o->elf[i], UINT64_MAX, "cannot load ELF file into the image");
			goto fail;
		}
	for (int i = 0; img && i < o->n_raw; i++)
		if (tk_image_add_raw_arg(img, o->raw[i]) < 0) {
			CMD_ERROR(c, o->raw[i], UINT64_MAX,
				  "cannot load raw file (want FILE[:FROM[-TO]]:ADDR)");
			goto fail;
		}
	return img;
fail:
	tk_image_free(img);
	return NULL;
}

struct tk_ipt_flow_opts tk_cmd_flow_opts(const struct tk_cmd *c, const struct tk_image *img)
{
	const struct tk_cmd_opts *o = c->o;
	/* TK_IPT_CHUNK: the PSB split's chunk size in bytes, for tests of the seams */
	const char *chunk = getenv("TK_IPT_CHUNK");
	uint32_t errata = 0;

	if (o->cpu_model && tk_ipt_cpu_parse(o->cpu_model, &errata) < 0)
		errata = 0;   /* (checked with the options) */
	return (struct tk_ipt_flow_opts){
		.sz = sizeof(struct tk_ipt_flow_opts), .image = img, .nthreads = o->jobs,
		.chunk_bytes = chunk ? (size_t)strtoull(chunk, NULL, 0) : 0,
		.mtc_freq = (uint32_t)o->mtc_freq, .nom_freq = (uint32_t)o->nom_freq,
		.cpuid_15_eax = (uint32_t)o->cpuid_15_eax, .cpuid_15_ebx = (uint32_t)o->cpuid_15_ebx,
		.errata = errata, .addr_filter = &o->addr_filter,
	};
}

struct tk_sym_opts tk_cmd_sym_opts(const struct tk_cmd_opts *o)
{
	return (struct tk_sym_opts){ .sz = sizeof(struct tk_sym_opts),
				     .no_demangle = o->no_demangle, .short_names = o->short_names };
}

struct tk_sym *tk_cmd_sym_open(const struct tk_cmd *c, int bias, int *status)
{
	const struct tk_cmd_opts *o = c->o;
	int err;
	struct tk_sym_opts so = tk_cmd_sym_opts(o);
	struct tk_sym *s = tk_sym_new(&so, &err);

	*status = 0;
	if (!s) {
		CMD_ERROR(c, NULL, UINT64_MAX, "out of memory");
		*status = TK_EXIT_INPUT;
		return NULL;
	}
	if (!bias)
		tk_cmd_log_file(c, NULL);
	for (int i = 0; i < o->n_elf; i++) {
		char path[4096], *colon;
		uint64_t base = 0;
		int rc;

		snprintf(path, sizeof path, "%s", o->elf[i]);
		colon = strrchr(path, ':');
		if (colon && tk_cmd_parse_u64(colon + 1, &base) == 0) {
			*colon = 0;
			rc = bias ? tk_sym_add_elf(s, path, base) : tk_sym_add_elf_at(s, path, base);
		} else {
			rc = tk_sym_add_elf(s, path, 0);
		}
		if (rc < 0) {
			CMD_ERROR(c, path, UINT64_MAX, "cannot load%s: %s", bias ? "" : " symbols",
				  tk_strerror(rc));
			*status = TK_EXIT_INPUT;
			tk_sym_free(s);
			return NULL;
		}
	}
	return s;
}

void tk_cmd_call_filter(const struct tk_cmd_opts *o, struct tk_run_filter *f)
{
	f->focus = o->focus;
	f->nfocus = (size_t)o->n_focus;
	f->exclude = o->exclude;
	f->nexclude = (size_t)o->n_exclude;
	f->max_depth = (uint32_t)o->depth;
	f->min_ns = o->min_ns;
	f->min_insns = o->min_insns;
}

struct tk_timeline *tk_cmd_timeline_new(const struct tk_cmd *c, const char *file, struct tk_buf *out,
					struct tk_timeline_opts *to, int *status)
{
	struct tk_run_filter f = { .sz = sizeof f };
	int err = 0;

	tk_cmd_call_filter(c->o, &f);
	to->filter = &f;
	if (!to->nthreads)
		to->nthreads = tk_cmd_jobs(c);
	struct tk_timeline *tl = tk_timeline_new(out, to, &err);
	to->filter = NULL;
	*status = 0;
	if (tl)
		return tl;
	*status = TK_EXIT_USAGE;
	if (err == -TK_E_UNSUPPORTED && f.min_ns)
		CMD_ERROR(c, file, UINT64_MAX, "--min-time: this trace has no clock (use --min-insns)");
	else if (err == -TK_E_INVAL && (f.nfocus || f.nexclude))
		CMD_ERROR(c, NULL, UINT64_MAX, "-F/-N: a pattern is not an extended regular expression");
	else {
		CMD_ERROR(c, file, UINT64_MAX, "cannot start the timeline: %s", tk_strerror(err));
		*status = TK_EXIT_INPUT;
	}
	return NULL;
}

int tk_cmd_timeline_open(const struct tk_cmd *c, struct tk_sym *sym, struct tk_trace_clock clock,
			 struct tk_cmd_timeline *ct)
{
	const struct tk_cmd_opts *o = c->o;
	/* Intel PT's and the branch trace's decoding is most of the work and the calling
	 * thread decodes chunks between its turns at the pass (the libc recording's
	 * timeline at -j 2: 0.49 s against 0.58 s with the writer's two threads); the
	 * chunks' pass runs ahead on the decoding threads (prepare: a recorded program's
	 * calls and returns are nearly all its events, so the pass was the calling thread's
	 * work; -j 2 0.365 -> 0.322 s, the branch trace's 0.554 -> 0.467 s) */
	struct tk_timeline_opts to = { .sz = sizeof to, .sym = sym, .clock = clock,
				       .max_events = o->max_events, .nthreads = tk_cmd_writer_threads(c),
				       .prepare = tk_cmd_jobs(c) > 1 };
	int rc, err;

	memset(ct, 0, sizeof *ct);
	ct->c = c;
	/* no --to: the callers that get here default to a timeline (Intel PT), Perfetto's */
	to.kind = o->to ? tk_timeline_kind_by_name(o->to) : TK_TIMELINE_PERFETTO;
	if (!to.kind) {
		CMD_ERROR(c, NULL, UINT64_MAX, "--to: not a timeline: '%s' (perfetto, chrome)",
			  o->to ? o->to : "");
		return TK_EXIT_USAGE;
	}
	if (o->time_window && tk_cmd_parse_range(o->time_window, &to.time_begin, &to.time_end) < 0) {
		CMD_ERROR(c, NULL, UINT64_MAX, "--time: expected A:B, got '%s'", o->time_window);
		return TK_EXIT_USAGE;
	}
	if (to.time_end == UINT64_MAX)
		to.time_end = 0;
	if ((rc = c->out_open(c, NULL, &ct->out)))
		return rc;
	if (!(ct->tl = tk_cmd_timeline_new(c, NULL, &ct->out, &to, &err)))
		c->out_close(&ct->out);
	return err;
}

int tk_cmd_timeline_close(struct tk_cmd_timeline *ct)
{
	const struct tk_cmd *c = ct->c;
	uint64_t dropped = 0;
	int rc = tk_timeline_finish(ct->tl);
	int crc;

	tk_timeline_slices(ct->tl, &dropped);
	tk_timeline_free(ct->tl);
	crc = c->out_close(&ct->out);
	if (rc < 0 && crc != TK_EXIT_OUTPUT) {
		CMD_ERROR(c, NULL, UINT64_MAX, "cannot write the timeline: %s", tk_strerror(rc));
		return TK_EXIT_INPUT;
	}
	if (dropped)
		CMD_WARN(c, NULL, UINT64_MAX, "%llu calls left out of the timeline (--max-events / --time)",
			 (unsigned long long)dropped);
	return crc;
}
