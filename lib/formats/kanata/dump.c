/* tracekit dump of a Kanata log: every command as a line of text. The dump reads no
 * instruction state (the reader's non-semantic mode), so a line's text depends only on the
 * cycle, the sum of C deltas and the line number before it: at -j N the chunks' starts come
 * from a scan of their C lines (kn_prefix_scan), each chunk is parsed and printed from its
 * start at once, and the texts are written in order. Each seam is checked: the chunk
 * before must have ended in the state the next one began in; if not (a C the scan read
 * differently from the reader), the rest is read again in order, its lines already written
 * not written twice. Into a file, a writer thread writes the text while the next is made
 * (tk_writer: past 64 MiB with direct I/O). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/kanata/internal.h"
#include "tracekit/internal/util.h"

#define DUMP_CHUNK ((size_t)1 << 20)   /* text of a chunk: ~2.6 MiB, a few chunks held */
#define SUBMIT_AT ((size_t)8 << 20)    /* in order: text handed to the writer */

struct dchunk {
	size_t start, len;
	struct kn_prefix pf;
	int64_t cycle, delta;       /* at its start */
	uint64_t line;
	struct tk_buf *text;        /* from dump.texts, until merged */
	struct kn_diags diags;
	struct kn_state end;        /* the reader's state after it */
	int64_t end_delta;
	uint64_t end_line;
	struct tk_kanata_counts n;
	int err;
	int scanned;                /* PF is its scan's (dump.lock) */
};

struct dump {
	const struct tk_kanata_dump_opts *o;
	struct tk_input *in;
	const char *data;
	struct dchunk *ch;
	size_t nch;
	struct tk_buf *out;
	struct tk_kanata_counts n;
	uint64_t written;           /* lines up to this one are out */
	int redo;                   /* a seam did not match: the rest in order (LOCK) */
	struct tk_writer *w;        /* NULL: the text goes into OUT */
	struct tk_bufs *texts;      /* the chunks' text, each filled on one thread */
	pthread_mutex_t lock;
	pthread_cond_t planned;     /* KNOWN grew, or REDO was set */
	size_t known;               /* the chunks whose start is known (LOCK) */
};

/* ---- one reader, in order ------------------------------------------------------------------ */
struct in_order {
	const struct tk_kanata_dump_opts *o;
	struct tk_buf *out;         /* OUT, or with a writer a buffer in memory handed to it */
	uint64_t after;             /* lines up to this one were written already */
	struct tk_writer *w;
};

static int text_cmd(void *ctx, const struct tk_kanata_cmd *c)
{
	struct in_order *k = ctx;

	if (k->o->quiet || c->line <= k->after)
		return 0;
	tk_kanata_cmd_text(k->out, c, k->o->no_offset);
	if (k->w && k->out->len >= SUBMIT_AT)
		tk_writer_submit(k->w, k->out);
	return k->out->err;
}

static void text_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct in_order *k = ctx;

	if (d->line > k->after && k->o->diag)
		k->o->diag(k->o->ctx, d);
}

/* IN read in order (NULL: DATA, LEN), the lines up to AFTER not written again. */
static int dump_in_order(struct tk_input *in, const char *data, size_t len,
			 const struct tk_kanata_dump_opts *o, struct tk_buf *out, uint64_t after,
			 struct tk_writer *w, struct tk_kanata_counts *n)
{
	struct tk_buf cur;
	struct in_order k = { o, w ? &cur : out, after, w };
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .cmd = text_cmd, .diag = text_diag,
					    .ctx = &k };
	int rc;

	if (w && tk_buf_init(&cur, -1, SUBMIT_AT + ((size_t)1 << 20)) < 0)
		return -TK_E_NOMEM;
	struct tk_kanata_reader *r = tk_kanata_reader_new(&ro, &rc);
	if (r) {
		rc = in ? tk_kanata_reader_run(r, in) : tk_kanata_reader_feed(r, data, len, 1);
		*n = *tk_kanata_reader_counts(r);
		tk_kanata_reader_free(r);
	}
	if (w) {
		tk_writer_submit(w, &cur);
		if (cur.err && !out->err) {
			out->err = cur.err;
			out->errnum = cur.errnum;
		}
		tk_buf_free(&cur);
	}
	return rc;
}

/* ---- chunks at once -------------------------------------------------------------------------- */
static int chunk_cmd(void *ctx, const struct tk_kanata_cmd *c)
{
	struct dchunk *k = ctx;

	tk_kanata_cmd_text(k->text, c, 0);
	tk_buf_write_ahead(k->text);
	return k->text->err;
}

static int chunk_cmd_no_offset(void *ctx, const struct tk_kanata_cmd *c)
{
	struct dchunk *k = ctx;

	tk_kanata_cmd_text(k->text, c, 1);
	tk_buf_write_ahead(k->text);
	return k->text->err;
}

/* A diagnostic kept for the merge, its text copied. */
static void chunk_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct dchunk *k = ctx;

	if (!k->err && kn_diags_add(&k->diags, d) < 0)
		k->err = -TK_E_NOMEM;
}

static void chunk_free(struct dchunk *k)
{
	kn_diags_free(&k->diags);
}

/* Chunk I parsed and printed from its start, from the mapping (its pages given back after,
 * with a file). */
static int parse_job(void *ctx, size_t i)
{
	struct dump *D = ctx;
	struct dchunk *k = &D->ch[i];
	const struct tk_kanata_dump_opts *o = D->o;
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .diag = chunk_diag, .ctx = k };
	int rc;

	if (!o->quiet)
		ro.cmd = o->no_offset ? chunk_cmd_no_offset : chunk_cmd;
	if (!(k->text = tk_bufs_take_room(D->texts, o->quiet ? 64 : 3 * k->len)))
		return -TK_E_NOMEM;
	struct tk_kanata_reader *r = tk_kanata_reader_new(&ro, &rc);
	if (!r)
		return rc;
	kn_reader_chunk_begin(r, i == 0, k->cycle, k->line, k->start);
	kn_reader_chunk_delta_sum(r, k->delta);
	rc = tk_kanata_reader_feed(r, D->data + k->start, k->len, 0);
	if (D->in)
		tk_release_pages(D->data, k->start, k->start + k->len);
	if (rc >= 0 && i + 1 == D->nch)
		rc = tk_kanata_reader_feed(r, NULL, 0, 1);
	kn_reader_state(r, &k->end);
	k->end_delta = kn_reader_delta_sum(r);
	k->end_line = kn_reader_lines(r);
	k->n = *tk_kanata_reader_counts(r);
	tk_kanata_reader_free(r);
	return rc < 0 ? rc : k->err;
}

/* Chunk I onto the output, if the chunk before ended where it began. */
static int merge_job(void *ctx, size_t i)
{
	struct dump *D = ctx;
	struct dchunk *k = &D->ch[i];

	if (i > 0) {
		const struct dchunk *p = &D->ch[i - 1];
		if (p->end.cycle != k->cycle || p->end_delta != k->delta || p->end_line != k->line ||
		    !p->end.seen_header || !p->end.seen_cycle || !p->end.seen_any) {
			pthread_mutex_lock(&D->lock);   /* (jobs waiting for their start read it) */
			D->redo = 1;
			pthread_cond_broadcast(&D->planned);
			pthread_mutex_unlock(&D->lock);
			return -TK_E_CANCELLED;
		}
	}
	if (D->w) {
		tk_writer_submit(D->w, k->text);   /* (k->text: the writer's last buffer) */
		if (k->text->err && !D->out->err) {
			D->out->err = k->text->err;
			D->out->errnum = k->text->errnum;
		}
	} else {
		tk_buf_put_large(D->out, k->text->data, k->text->len);
	}
	/* the buffer for a later chunk: not given back and faulted in again */
	tk_bufs_give(D->texts, k->text);
	k->text = NULL;
	for (size_t j = 0; j < k->diags.n && D->o->diag; j++) {
		struct tk_kanata_diag d = kn_diags_at(&k->diags, j);
		D->o->diag(D->o->ctx, &d);
	}
	D->written = k->end_line;
	D->n.lines += k->n.lines - k->line;
	D->n.bytes += k->n.bytes - k->start;
	D->n.commands += k->n.commands;
	D->n.errors += k->n.errors;
	D->n.warnings += k->n.warnings;
	if (D->o->progress)
		tk_progress_set(D->o->progress, k->start + k->len);
	chunk_free(k);
	return D->out->err;
}

/* Under D->lock: the starts that the chunks scanned so far tell (chunk K's follows from
 * the scans of those before it); REDO where the file does not suit the split (no cycle
 * line in the first chunk: its cycle state would be the next chunks' to guess). */
static void plan_more(struct dump *D)
{
	while (D->known < D->nch && D->ch[D->known - 1].scanned && !D->redo) {
		const struct dchunk *p = &D->ch[D->known - 1];
		struct dchunk *k = &D->ch[D->known];
		if ((D->known == 1 && !p->pf.first_op) || p->delta > INT64_MAX - p->pf.add) {
			D->redo = 1;
			break;
		}
		k->cycle = kn_prefix_after(&p->pf, p->cycle);
		k->delta = p->delta + p->pf.add;
		k->line = p->line + p->pf.lines;
		D->known++;
	}
}

/* Chunk I scanned for the chunks after it, then, its start known, parsed and printed: its
 * bytes read twice in a row, the second time from the cache (a scan of the whole file
 * first read it twice from memory). A job waits only for the scans of the jobs before it,
 * which come first in them. */
static int chunk_job(void *ctx, size_t i)
{
	struct dump *D = ctx;
	struct dchunk *k = &D->ch[i];

	kn_prefix_scan(D->data + k->start, k->len, i == 0, &k->pf);
	pthread_mutex_lock(&D->lock);
	k->scanned = 1;
	plan_more(D);
	pthread_cond_broadcast(&D->planned);
	while (D->known <= i && !D->redo)
		pthread_cond_wait(&D->planned, &D->lock);
	int redo = D->redo;
	pthread_mutex_unlock(&D->lock);
	return redo ? -TK_E_CANCELLED : parse_job(D, i);
}

/* DATA in chunks of CHUNK at once (IN: its file; NULL: DATA is all). */
static int dump_parallel(struct tk_input *in, const char *data, size_t len, size_t chunk,
			 const struct tk_kanata_dump_opts *o, struct tk_buf *out, struct tk_writer *w,
			 struct tk_kanata_counts *n)
{
	struct dump D = { .o = o, .in = in, .data = data, .out = out, .w = w,
			  .lock = PTHREAD_MUTEX_INITIALIZER, .planned = PTHREAD_COND_INITIALIZER,
			  .known = 1 };
	int rc;

	if (!(D.ch = calloc(len / chunk + 2, sizeof *D.ch)) ||
	    !(D.texts = tk_bufs_new(2 * (size_t)(o->jobs ? o->jobs : 1) + 2))) {
		free(D.ch);
		return -TK_E_NOMEM;
	}
	for (size_t pos = 0; pos < len; D.nch++) {
		size_t end = kn_line_seam_in(in, data, len, pos, chunk);
		D.ch[D.nch].start = pos;
		D.ch[D.nch].len = end - pos;
		pos = end;
	}
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = o->jobs };
	rc = tk_pool_run(&po, D.nch, chunk_job, merge_job, &D);
	for (size_t i = 0; i < D.nch; i++)
		chunk_free(&D.ch[i]);
	free(D.ch);
	tk_bufs_free(D.texts);
	if (D.redo)   /* from the file's start: the reader's state there is its own to find */
		return dump_in_order(NULL, data, len, o, out, D.written, w, n);
	*n = D.n;
	return rc;
}

static struct tk_kanata_dump_opts dump_opts(const struct tk_kanata_dump_opts *opts)
{
	struct tk_kanata_dump_opts o = { 0 };

	memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
	if (!o.chunk_bytes)
		o.chunk_bytes = DUMP_CHUNK;
	return o;
}

int tk_kanata_dump(struct tk_input *in, const struct tk_kanata_dump_opts *opts, struct tk_buf *out,
		   struct tk_kanata_counts *n)
{
	struct tk_kanata_dump_opts o = dump_opts(opts);
	const uint8_t *data;
	size_t len;
	int rc;

	memset(n, 0, sizeof *n);
	struct stat st;
	struct tk_writer *w = NULL;
	if (!o.quiet && out->fd >= 0 && fstat(out->fd, &st) == 0 && !S_ISCHR(st.st_mode) &&
	    tk_input_file_size(in) >= SUBMIT_AT / 2 && tk_buf_flush(out) >= 0)
		w = tk_writer_start(out->fd, NULL);   /* (none: OUT writes as it fills) */
	if (o.jobs <= 1 || tk_input_compression(in) != TK_COMP_NONE ||
	    tk_input_file_size(in) < 2 * o.chunk_bytes)
		rc = dump_in_order(in, NULL, 0, &o, out, 0, w, n);
	else if ((rc = tk_input_map(in, &data, &len)) >= 0)
		rc = dump_parallel(in, (const char *)data, len, o.chunk_bytes, &o, out, w, n);
	if (w) {
		int stop = tk_writer_stop(w);
		if (stop < 0 && !out->err) {
			out->err = stop;
			out->errnum = errno;
		}
	}
	return rc;
}

/* Tests and fuzzing: P dumped in order (jobs <= 1) or in chunks, whatever its size. */
int kn_dump_buf(const char *p, size_t len, const struct tk_kanata_dump_opts *opts, struct tk_buf *out,
		struct tk_kanata_counts *n);
int kn_dump_buf(const char *p, size_t len, const struct tk_kanata_dump_opts *opts, struct tk_buf *out,
		struct tk_kanata_counts *n)
{
	struct tk_kanata_dump_opts o = dump_opts(opts);

	memset(n, 0, sizeof *n);
	if (o.jobs <= 1 || !len)
		return dump_in_order(NULL, p, len, &o, out, 0, NULL, n);
	return dump_parallel(NULL, p, len, o.chunk_bytes, &o, out, NULL, n);
}
