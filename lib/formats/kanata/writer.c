/* Kanata writer for simulators and conversions. Every line is first checked by a reader in
 * tracking mode, so the writer refuses exactly what the reader would reject, and what it
 * writes reads back to the same commands. Cycle advances are written lazily as one "C". */
#include <stdlib.h>
#include <string.h>

#include "formats/kanata/internal.h"

struct tk_kanata_writer {
	struct tk_buf *out;
	struct tk_buf line;
	struct tk_kanata_reader *check;
	int64_t now, written_now;
	int rejected;
};

static void on_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct tk_kanata_writer *w = ctx;
	if (d->level == TK_LOG_ERROR)
		w->rejected = 1;
}

/* Validate the line in w->line and append it to the output. */
static int emit(struct tk_kanata_writer *w)
{
	int rc;

	if (w->line.err)
		return w->line.err;
	w->rejected = 0;
	rc = tk_kanata_reader_feed(w->check, w->line.data, w->line.len, 0);
	if (rc < 0)
		return rc;
	if (w->rejected) {
		w->line.len = 0;
		return -TK_E_BAD_STATE;
	}
	tk_buf_put(w->out, w->line.data, w->line.len);
	w->line.len = 0;
	return w->out->err;
}

static int sync_cycle(struct tk_kanata_writer *w)
{
	if (w->now == w->written_now)
		return 0;
	tk_buf_puts(&w->line, "C\t");
	tk_buf_i64(&w->line, w->now - w->written_now);
	tk_buf_putc(&w->line, '\n');
	w->written_now = w->now;
	return emit(w);
}

struct tk_kanata_writer *tk_kanata_writer_new(struct tk_buf *out, int64_t start_cycle, int *err)
{
	struct tk_kanata_writer *w = calloc(1, sizeof *w);
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .diag = on_diag };

	if (!w) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	if (start_cycle > KN_NUM_MAX || start_cycle < -KN_NUM_MAX) {
		free(w);
		*err = -TK_E_INVAL;
		return NULL;
	}
	ro.ctx = w;
	w->out = out;
	if (tk_buf_init(&w->line, -1, 256) < 0 || !(w->check = tk_kanata_reader_new(&ro, err))) {
		tk_buf_free(&w->line);
		free(w);
		*err = -TK_E_NOMEM;
		return NULL;
	}
	w->now = w->written_now = start_cycle;
	tk_buf_puts(&w->line, "Kanata\t0004\nC=\t");
	tk_buf_i64(&w->line, start_cycle);
	tk_buf_putc(&w->line, '\n');
	*err = emit(w);
	if (*err < 0) {
		tk_kanata_writer_free(w);
		return NULL;
	}
	return w;
}

void tk_kanata_writer_free(struct tk_kanata_writer *w)
{
	if (!w)
		return;
	tk_kanata_reader_free(w->check);
	tk_buf_free(&w->line);
	free(w);
}

int64_t tk_kanata_w_now(const struct tk_kanata_writer *w)
{
	return w->now;
}

int tk_kanata_w_cycle(struct tk_kanata_writer *w, int64_t delta)
{
	if (delta < 0)
		return -TK_E_BAD_STATE;
	if (w->now > KN_NUM_MAX - delta)
		return -TK_E_INVAL;
	w->now += delta;
	return 0;
}

int tk_kanata_w_cycle_to(struct tk_kanata_writer *w, int64_t cycle)
{
	if (cycle < w->now)
		return -TK_E_BAD_STATE;
	if (cycle > KN_NUM_MAX)
		return -TK_E_INVAL;
	w->now = cycle;
	return 0;
}

static int cmd3(struct tk_kanata_writer *w, const char *name, int64_t a, int64_t b, int64_t c)
{
	int rc = sync_cycle(w);
	if (rc < 0)
		return rc;
	tk_buf_puts(&w->line, name);
	tk_buf_i64(&w->line, a);
	tk_buf_putc(&w->line, '\t');
	tk_buf_i64(&w->line, b);
	tk_buf_putc(&w->line, '\t');
	tk_buf_i64(&w->line, c);
	tk_buf_putc(&w->line, '\n');
	return emit(w);
}

int tk_kanata_w_insn(struct tk_kanata_writer *w, int64_t id, int64_t sim_id, int64_t thread)
{
	return cmd3(w, "I\t", id, sim_id, thread);
}

int tk_kanata_w_retire(struct tk_kanata_writer *w, int64_t id, int64_t retire_id, int flush)
{
	return cmd3(w, "R\t", id, retire_id, flush ? 1 : 0);
}

int tk_kanata_w_dep(struct tk_kanata_writer *w, int64_t consumer, int64_t producer, int type)
{
	return cmd3(w, "W\t", consumer, producer, type);
}

/* Names must not contain tabs or newlines: they would change the columns. */
static int clean_name(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '\t' || s[i] == '\n' || s[i] == '\r')
			return 0;
	return s[0] != ' ' && s[n - 1] != ' ';
}

static int stage_cmd(struct tk_kanata_writer *w, const char *name, int64_t id, const char *lane,
		     size_t lane_len, const char *stage, size_t stage_len)
{
	int rc;
	if (!clean_name(lane, lane_len) || !clean_name(stage, stage_len))
		return -TK_E_INVAL;
	if ((rc = sync_cycle(w)) < 0)
		return rc;
	tk_buf_puts(&w->line, name);
	tk_buf_i64(&w->line, id);
	tk_buf_putc(&w->line, '\t');
	tk_buf_put(&w->line, lane, lane_len);
	tk_buf_putc(&w->line, '\t');
	tk_buf_put(&w->line, stage, stage_len);
	tk_buf_putc(&w->line, '\n');
	return emit(w);
}

int tk_kanata_w_stage(struct tk_kanata_writer *w, int64_t id, const char *lane, const char *stage)
{
	return stage_cmd(w, "S\t", id, lane, strlen(lane), stage, strlen(stage));
}

int tk_kanata_w_stage_end(struct tk_kanata_writer *w, int64_t id, const char *lane, const char *stage)
{
	return stage_cmd(w, "E\t", id, lane, strlen(lane), stage, strlen(stage));
}

/* escape: 1 = turn newlines into "\n" (text from a simulator); 0 = already Kanata text */
static int label(struct tk_kanata_writer *w, int64_t id, int64_t type, const char *text, size_t n,
		 int escape)
{
	int rc;
	if (type < 0)
		return -TK_E_INVAL;
	if ((rc = sync_cycle(w)) < 0)
		return rc;
	tk_buf_puts(&w->line, "L\t");
	tk_buf_i64(&w->line, id);
	tk_buf_putc(&w->line, '\t');
	tk_buf_i64(&w->line, type);
	tk_buf_putc(&w->line, '\t');
	if (escape) {
		/* a tab would end the field; trailing spaces are kept by the reader, as by Konata */
		for (size_t i = 0; i < n; i++) {
			if (text[i] == '\n')
				tk_buf_puts(&w->line, "\\n");
			else if (text[i] == '\t')
				tk_buf_puts(&w->line, "\\t");
			else if (text[i] != '\r')
				tk_buf_putc(&w->line, text[i]);
		}
	} else {
		tk_buf_put(&w->line, text, n);
	}
	tk_buf_putc(&w->line, '\n');
	return emit(w);
}

int tk_kanata_w_label(struct tk_kanata_writer *w, int64_t id, int type, const char *text, size_t n)
{
	return label(w, id, type, text, n, 1);
}

int tk_kanata_w_cmd(struct tk_kanata_writer *w, const struct tk_kanata_cmd *c)
{
	switch (c->kind) {
	case TK_KANATA_HEADER:
		return 0;
	case TK_KANATA_CYCLE_SET:
		return tk_kanata_w_cycle_to(w, c->a);
	case TK_KANATA_CYCLE:
		return tk_kanata_w_cycle(w, c->a);
	case TK_KANATA_INSN:
		return tk_kanata_w_insn(w, c->id, c->a, c->b);
	case TK_KANATA_LABEL:
		return label(w, c->id, c->a, c->text, c->text_len, 0);
	case TK_KANATA_STAGE_BEGIN:
	case TK_KANATA_STAGE_END:
		return stage_cmd(w, c->kind == TK_KANATA_STAGE_BEGIN ? "S\t" : "E\t", c->id, c->lane,
				 c->lane_len, c->text, c->text_len);
	case TK_KANATA_RETIRE:
		return tk_kanata_w_retire(w, c->id, c->a, (int)c->b);
	case TK_KANATA_DEP:
		return tk_kanata_w_dep(w, c->id, c->a, (int)c->b);
	}
	return -TK_E_INVAL;
}
