/* The source interface's common part: open with detection, symbols, and a pool runner for
 * formats whose chunks are independent byte ranges. The formats' own parts are in
 * lib/formats/<f>/source.c. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracekit/internal/source.h"
#include "tracekit/symbolize.h"

/* Library log messages during the source's life name its file. */
static void source_log(void *ctx, enum tk_log_level level, const char *msg)
{
	struct tk_source *s = ctx;

	tk_msg(s->o.msg, s->o.ctx, level, s->log_file, UINT64_MAX, "%s", msg);
}

static int detect(struct tk_source *s)
{
	const uint8_t *p;
	size_t n;
	struct tk_format_info fi;
	int rc = tk_input_peek(s->in, &p, &n);

	if (rc < 0) {
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return rc;
	}
	if (s->o.format) {
		s->info.format = s->o.format;
		return 0;
	}
	if (n == 0) {
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "empty file");
		return -TK_E_UNKNOWN_FORMAT;
	}
	if (tk_detect_format(p, n, &fi) < 0) {
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "unknown format");
		return -TK_E_UNKNOWN_FORMAT;
	}
	s->info.format = fi.id;
	return 0;
}

static struct tk_source *source_new(const char *path, const struct tk_source_opts *opts)
{
	struct tk_source *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	if (opts)
		memcpy(&s->o, opts, opts->sz < sizeof s->o ? opts->sz : sizeof s->o);
	s->o.sz = sizeof s->o;
	if (!s->o.nthreads)
		s->o.nthreads = tk_cpu_count();
	if (!(s->path = strdup(path))) {
		free(s);
		return NULL;
	}
	s->info.path = s->log_file = s->path;
	tk_get_log(&s->prev_log, &s->prev_log_ctx);
	tk_set_log(source_log, s);
	return s;
}

/* The format's part, once the input is open. */
static int source_start(struct tk_source *s)
{
	int rc;

	if ((rc = detect(s)) < 0)
		return rc;
	if (!(s->ops = tk_source_ops_of(s->info.format))) {
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "%s input has no source (yet)",
			     tk_format_description(s->info.format));
		return -TK_E_UNSUPPORTED;
	}
	if (tk_thread_filter_on(s->o.filter) && s->info.format != TK_FMT_IPT &&
	    s->info.format != TK_FMT_PERF) {
		int cpus = s->o.filter->ncpus != 0;
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "%s: %s input has no %s",
			     cpus ? "--cpu LIST" : "--pid, --tid, --comm",
			     tk_format_description(s->info.format),
			     cpus ? "CPUs' traces" : "processes' threads");
		return -TK_E_UNSUPPORTED;
	}
	if ((rc = tk_input_map(s->in, &s->data, &s->len)) < 0) {
		TK_SRC_ERROR(s, s->path, UINT64_MAX, "cannot read: %s", tk_strerror(rc));
		return rc;
	}
	s->info.size = s->len;
	s->info.nstreams = 1;
	return s->ops->open(s);
}

int tk_source_open(struct tk_source **out, const char *path, const struct tk_source_opts *opts)
{
	struct tk_source *s = source_new(path, opts);
	/* perf record --kcore and --threads write a directory: its header and first records
	 * are DIR/data (the perf.data session reads DIR/data.N and DIR/kcore_dir from DIR) */
	char data[4096];
	struct stat st;
	int rc;

	*out = NULL;
	if (!s)
		return -TK_E_NOMEM;
	snprintf(data, sizeof data, "%s/data", path);
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) || access(data, R_OK) != 0)
		snprintf(data, sizeof data, "%s", path);
	if ((rc = tk_input_open(&s->in, data, NULL)) < 0)
		TK_SRC_ERROR(s, path, UINT64_MAX, "cannot open: %s", tk_strerror(rc));
	else
		rc = source_start(s);
	if (rc < 0)
		tk_source_free(s);
	else
		*out = s;
	return rc;
}

int tk_source_open_input(struct tk_source **out, const char *path, struct tk_input *in,
			 const struct tk_source_opts *opts)
{
	struct tk_source *s = source_new(path, opts);
	int rc;

	*out = NULL;
	if (!s)
		return -TK_E_NOMEM;
	s->in = in;
	s->borrowed = 1;
	if ((rc = source_start(s)) < 0)
		tk_source_free(s);
	else
		*out = s;
	return rc;
}

void tk_source_free(struct tk_source *s)
{
	if (!s)
		return;
	if (s->ops && s->state)
		s->ops->close(s);
	tk_sym_free(s->sym);
	for (size_t i = 0; i < s->npsym; i++)
		if (s->psym[i] != (struct tk_sym *)1)
			tk_sym_free(s->psym[i]);
	free(s->psym);
	if (s->in && !s->borrowed)
		tk_input_free(s->in);
	tk_set_log(s->prev_log, s->prev_log_ctx);
	free(s->path);
	free(s);
}

const struct tk_source_info *tk_source_info(const struct tk_source *s)
{
	return &s->info;
}

uint32_t tk_source_track_id(const struct tk_source *s, uint32_t track)
{
	return s->ops->track_id ? s->ops->track_id(s, track) : track;
}

unsigned tk_source_threads(const struct tk_source *s)
{
	return s->o.nthreads;
}

/* New symbols holding the --elf files (their problems said unless QUIET). */
static struct tk_sym *sym_new(struct tk_source *s, int quiet, int *err)
{
	struct tk_sym_opts so = { .sz = sizeof so, .no_dwarf = s->ops->no_dwarf,
				  .no_demangle = s->o.no_demangle, .short_names = s->o.short_names };
	struct tk_sym *sym = tk_sym_new(&so, err);
	int rc = 0;

	for (size_t i = 0; sym && i < s->o.nelf && rc >= 0; i++) {
		char path[4096];
		uint64_t base = 0;
		char *colon, *end;

		snprintf(path, sizeof path, "%s", s->o.elf[i]);
		colon = strrchr(path, ':');
		if (colon && colon[1] && (base = strtoull(colon + 1, &end, 0), !*end)) {
			*colon = 0;
			rc = s->ops->elf_bias ? tk_sym_add_elf(sym, path, base)
					      : tk_sym_add_elf_at(sym, path, base);
		} else {
			rc = tk_sym_add_elf(sym, path, 0);
		}
		if (rc < 0 && !quiet)
			TK_SRC_ERROR(s, path, UINT64_MAX, "cannot load symbols: %s", tk_strerror(rc));
	}
	if (rc < 0) {
		tk_sym_free(sym);
		*err = rc;
		return NULL;
	}
	return sym;
}

struct tk_sym *tk_source_symbols(struct tk_source *s, int *err)
{
	int rc = 0;

	if (s->sym)
		return s->sym;
	if (!(s->sym = sym_new(s, 0, err)))
		return NULL;
	if (s->ops->symbols)
		rc = s->ops->symbols(s, s->sym);
	if (rc < 0) {
		tk_sym_free(s->sym);
		s->sym = NULL;
		*err = rc;
	}
	return s->sym;
}

int tk_source_track_process(struct tk_source *s, uint32_t track, uint32_t *pid,
			    char *comm, size_t n, struct tk_sym **sym)
{
	size_t pr;
	int rc;

	if (!s->ops->track_process)
		return -TK_E_NOT_FOUND;
	if ((rc = s->ops->track_process(s, track, pid, comm, n, &pr)) < 0)
		return rc;
	if (pr >= s->npsym) {   /* made once each; a slot of (void *)1: could not be */
		struct tk_sym **p = realloc(s->psym, (pr + 1) * sizeof *p);
		if (!p)
			return -TK_E_NOMEM;
		memset(p + s->npsym, 0, (pr + 1 - s->npsym) * sizeof *p);
		s->psym = p;
		s->npsym = pr + 1;
	}
	if (!s->psym[pr]) {
		/* (a file that cannot be read was said for the source's own names) */
		struct tk_sym *sym1 = sym_new(s, 1, &rc);
		if (sym1 && s->ops->proc_symbols(s, pr, sym1) < 0) {
			tk_sym_free(sym1);
			sym1 = NULL;
		}
		s->psym[pr] = sym1 ? sym1 : (struct tk_sym *)1;
	}
	*sym = s->psym[pr] == (struct tk_sym *)1 ? NULL : s->psym[pr];
	return 0;
}

int tk_source_plan(struct tk_source *s, struct tk_chunk **chunks, size_t *n)
{
	return s->ops->plan(s, chunks, n);
}

/* Progress for every run: the chunks' bytes as they merge (in input order, on the calling
 * thread), around the caller's consumer. */
struct progress_run {
	const struct tk_chunk_consumer *c;
	struct tk_chunk *plan;
	size_t n;
	uint64_t whole, done;          /* bytes of a chunk that is a whole stream ([0, 0)) */
	struct tk_progress p;
};

static int pr_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	const struct progress_run *r = ctx;
	return r->c->begin(r->c->ctx, i, flow, sink);
}

static int pr_redo(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	const struct progress_run *r = ctx;
	return r->c->redo(r->c->ctx, i, flow, sink);
}

static int pr_done(void *ctx, struct tk_flow *flow)
{
	const struct progress_run *r = ctx;
	return r->c->done(r->c->ctx, flow);
}

static uint64_t chunk_bytes(const struct progress_run *r, size_t i)
{
	const struct tk_chunk *ch = &r->plan[i];
	return ch->begin == 0 && ch->end == 0 ? r->whole : ch->end - ch->begin;
}

static int pr_merge(void *ctx, size_t i)
{
	struct progress_run *r = ctx;
	if (i < r->n) {
		r->done += chunk_bytes(r, i);
		tk_progress_set(&r->p, r->done);
	}
	return r->c->merge ? r->c->merge(r->c->ctx, i) : 0;
}

int tk_source_run(struct tk_source *s, const struct tk_chunk_consumer *caller)
{
	struct tk_chunk_consumer whole = { 0 };   /* an older caller's: its later members 0 */
	const struct tk_chunk_consumer *c = &whole;
	if (!caller || caller->sz < offsetof(struct tk_chunk_consumer, ctx) + sizeof caller->ctx)
		return -TK_E_INVAL;
	memcpy(&whole, caller, caller->sz < sizeof whole ? caller->sz : sizeof whole);
	whole.sz = sizeof whole;
	if (!c->begin)
		return -TK_E_INVAL;
	struct progress_run r = { .c = c, .whole = s->len };
	if (!s->o.progress || tk_source_plan(s, &r.plan, &r.n) < 0)
		return s->ops->run(s, c);
	uint64_t total = 0;
	for (size_t i = 0; i < r.n; i++)
		total += chunk_bytes(&r, i);
	tk_progress_init(&r.p, s->path ? s->path : "decoding", total, s->o.progress, s->o.progress_ctx);
	struct tk_chunk_consumer w = { sizeof w, pr_begin, pr_merge, c->redo ? pr_redo : NULL,
				       c->done ? pr_done : NULL, &r, c->caller_decodes };
	int rc = s->ops->run(s, &w);
	tk_progress_finish(&r.p);
	free(r.plan);
	return rc;
}

int tk_source_report(struct tk_source *s)
{
	return s->ops->report ? s->ops->report(s) : 0;
}

void tk_source_losses(struct tk_source *s, struct tk_losses *l)
{
	*l = (struct tk_losses){ 0 };
	if (s->ops->losses)
		s->ops->losses(s, l);
}

void tk_source_add_losses(struct tk_source *s, const struct tk_losses *l)
{
	tk_losses_add(&s->added, l);
}

int tk_source_supported(enum tk_format_id id)
{
	return tk_source_ops_of(id) != NULL;
}
