/* Kanata reader, tracker, statistics, writer and conversions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracekit/tracekit.h"

/* ---- helpers ------------------------------------------------------------------------------ */
#define MAX_DIAGS 64
struct diags {
	int n;
	uint64_t line[MAX_DIAGS];
	enum tk_kanata_diag_code code[MAX_DIAGS];
	enum tk_log_level level[MAX_DIAGS];
};

static void collect(void *ctx, const struct tk_kanata_diag *d)
{
	struct diags *g = ctx;
	if (g->n < MAX_DIAGS) {
		g->line[g->n] = d->line;
		g->code[g->n] = d->code;
		g->level[g->n] = d->level;
	}
	g->n++;
}

static int has_diag(const struct diags *g, uint64_t line, enum tk_kanata_diag_code code)
{
	for (int i = 0; i < g->n && i < MAX_DIAGS; i++)
		if (g->line[i] == line && g->code[i] == code)
			return 1;
	return 0;
}

/* $DATA is ../shared/data beside the source tree; a worktree one level deeper finds it
 * one more level up. */
static const char *data_dir(void)
{
	static char dir[1024];
	const char *d = getenv("DATA"), *src = getenv("SRC");
	char probe[1100];
	if (d) {
		snprintf(probe, sizeof probe, "%s/kanata", d);
		if (access(probe, R_OK) == 0)
			return d;
	}
	if (src) {
		snprintf(dir, sizeof dir, "%s/../../shared/data", src);
		return dir;
	}
	return "../../../shared/data";
}

static struct tk_input *open_data(const char *name)
{
	char path[2200];
	struct tk_input *in;
	snprintf(path, sizeof path, "%s/kanata/%s", data_dir(), name);
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	return in;
}

/* Commands as a canonical text (cycle included, C lines dropped) for comparisons. */
struct canon {
	struct tk_buf b;
};

static int canon_cmd(void *ctx, const struct tk_kanata_cmd *c)
{
	struct canon *k = ctx;
	if (c->kind == TK_KANATA_CYCLE || c->kind == TK_KANATA_CYCLE_SET || c->kind == TK_KANATA_HEADER)
		return 0;
	tk_buf_printf(&k->b, "%d %lld %lld %lld %lld [%.*s] [%.*s]\n", (int)c->kind, (long long)c->cycle,
		      (long long)c->id, (long long)c->a, (long long)c->b, (int)c->lane_len,
		      c->lane ? c->lane : "", (int)c->text_len, c->text ? c->text : "");
	return 0;
}

static void canon_of(const char *p, size_t n, struct tk_buf *out)
{
	struct canon k;
	int err;
	tk_buf_init(&k.b, -1, 4096);
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .cmd = canon_cmd, .ctx = &k };
	struct tk_kanata_reader *r = tk_kanata_reader_new(&ro, &err);
	assert_non_null(r);
	assert_int_equal(tk_kanata_reader_feed(r, p, n, 1), 0);
	tk_kanata_reader_free(r);
	*out = k.b;
}

static void stats_of(const char *text, struct tk_kanata_stats *st, struct diags *g, uint64_t window,
		     uint64_t slowest)
{
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .window = window, .slowest = slowest,
					   .diag = collect, .ctx = g };
	assert_int_equal(tk_kanata_stats_buf(text, strlen(text), &so, st), 0);
}

static const struct tk_kanata_stage_stats *stage(const struct tk_kanata_stats *st, const char *lane,
						 const char *name)
{
	for (size_t i = 0; i < st->nstages; i++)
		if (!strcmp(st->stages[i].lane, lane) && !strcmp(st->stages[i].stage, name))
			return &st->stages[i];
	fail_msg("no stage %s/%s", lane, name);
	return NULL;
}

/* ---- real files ----------------------------------------------------------------------------- */
static void test_sample2_facts(void **state)
{
	(void)state;
	struct tk_input *in = open_data("kanata-sample-2.log.gz");
	struct tk_kanata_stats st;
	struct diags g = { 0 };
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .diag = collect, .ctx = &g };

	assert_int_equal(tk_kanata_stats_compute(in, &so, &st), 0);
	tk_input_free(in);
	assert_int_equal(st.counts.insns, 4041);
	assert_int_equal(st.counts.retired, 3626);
	assert_int_equal(st.counts.flushed, 374);
	assert_int_equal(st.counts.in_flight, 41);
	assert_int_equal(st.counts.errors, 0);
	assert_int_equal(st.counts.first_cycle, -1);  /* C= -1 */
	/* Konata's IPC: last retire id / last cycle, C= ignored: 3625 / 4543 = 0.798 */
	assert_int_equal(st.konata_last_rid, 3625);
	assert_int_equal(st.konata_last_cycle, 4543);
	assert_int_equal(st.cycles, 4543);
	/* 15 lane-0 stages and lane-1 stl; no W lines */
	size_t lane0 = 0, lane1 = 0;
	for (size_t i = 0; i < st.nstages; i++) {
		if (!strcmp(st.stages[i].lane, "0"))
			lane0++;
		else if (!strcmp(st.stages[i].lane, "1"))
			lane1++;
	}
	assert_int_equal(lane0, 15);
	assert_int_equal(lane1, 1);
	assert_int_equal(stage(&st, "1", "stl")->occupancy, st.stall_cycles);
	assert_int_equal(st.nthreads, 1);
	assert_int_equal(st.threads[0].insns, 4041);
	tk_kanata_stats_free(&st);
}

static void test_sample1_quirks(void **state)
{
	(void)state;
	/* header and lines carry trailing tabs/spaces; no newline at the end */
	struct tk_input *in = open_data("kanata-sample-1.log");
	struct tk_kanata_stats st;
	struct diags g = { 0 };
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .diag = collect, .ctx = &g };
	assert_int_equal(tk_kanata_stats_compute(in, &so, &st), 0);
	tk_input_free(in);
	assert_int_equal(g.n, 0);
	assert_int_equal(st.counts.version, 4);
	assert_int_equal(st.counts.insns, 2);
	assert_int_equal(st.counts.retired, 1);
	assert_int_equal(st.counts.flushed, 1);
	assert_int_equal(st.counts.first_cycle, 216);
	assert_int_equal(st.counts.last_cycle, 219);
	assert_int_equal(stage(&st, "0", "F")->lat.count, 2);
	assert_int_equal(stage(&st, "0", "X")->lat.max, 1);
	tk_kanata_stats_free(&st);
}

static void test_basic_fixture(void **state)
{
	(void)state;
	/* W of type 7, two threads, two lanes, an L after R (warning, kept) */
	struct tk_input *in = open_data("kanata-basic.txt");
	struct tk_kanata_stats st;
	struct diags g = { 0 };
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .diag = collect, .ctx = &g };
	assert_int_equal(tk_kanata_stats_compute(in, &so, &st), 0);
	tk_input_free(in);
	assert_int_equal(st.counts.errors, 0);
	assert_int_equal(st.counts.warnings, 1);
	assert_true(has_diag(&g, 22, TK_KANATA_D_AFTER_RETIRE));
	assert_int_equal(st.nthreads, 2);
	assert_int_equal(st.threads[0].retired, 1);
	assert_int_equal(st.threads[1].flushed, 1);
	/* lane 1 "stl" from cycle 103 to R at 105 */
	assert_int_equal(st.stall_cycles, 2);
	tk_kanata_stats_free(&st);
}

/* ---- a log worked out by hand -------------------------------------------------------------- */
static const char hand_log[] =
	"Kanata\t0004\n"
	"C=\t10\n"
	"I\t0\t100\t0\n"      /* insn 0 begins at 10 */
	"L\t0\t0\tadd\n"
	"S\t0\t0\tF\n"        /* F 10..11 */
	"I\t1\t101\t1\n"      /* insn 1 (thread 1) begins at 10 */
	"L\t1\t0\tlong\\nload\n"
	"S\t1\t0\tF\n"        /* F 10..12 */
	"C\t1\n"
	"S\t0\t0\tX\n"        /* X 11..13 */
	"C\t1\n"
	"S\t1\t0\tX\n"        /* X 12..16 */
	"S\t1\t1\tstl\n"      /* stall 12..15 */
	"C\t1\n"
	"R\t0\t0\t0\n"        /* insn 0 retires at 13: latency 3 */
	"I\t2\t102\t0\n"      /* insn 2 begins at 13 */
	"S\t2\t0\tF\n"        /* F 13..14 */
	"C\t1\n"
	"R\t2\t1\t1\n"        /* flushed at 14 */
	"C\t1\n"
	"E\t1\t1\tstl\n"      /* stall ends at 15 */
	"C\t1\n"
	"R\t1\t1\t0\n";       /* insn 1 retires at 16: latency 6 */

static void test_hand_stats(void **state)
{
	(void)state;
	struct tk_kanata_stats st;
	struct diags g = { 0 };

	stats_of(hand_log, &st, &g, 4, 5);
	assert_int_equal(g.n, 0);
	assert_int_equal(st.counts.insns, 3);
	assert_int_equal(st.counts.retired, 2);
	assert_int_equal(st.counts.flushed, 1);
	assert_int_equal(st.counts.in_flight, 0);
	assert_int_equal(st.counts.first_cycle, 10);
	assert_int_equal(st.counts.last_cycle, 16);
	assert_int_equal(st.cycles, 6);
	assert_int_equal(st.konata_last_rid, 1);
	assert_int_equal(st.konata_last_cycle, 6);
	/* F: 1, 2, 1 -> count 3, sum 4, max 2, p50 1 */
	const struct tk_kanata_stage_stats *f = stage(&st, "0", "F");
	assert_int_equal(f->lat.count, 3);
	assert_int_equal(f->occupancy, 4);
	assert_int_equal(f->lat.max, 2);
	assert_int_equal(f->lat.p50, 1);
	assert_int_equal(f->lat.p99, 2);
	/* X: 2 (insn 0), 4 (insn 1) */
	const struct tk_kanata_stage_stats *x = stage(&st, "0", "X");
	assert_int_equal(x->lat.count, 2);
	assert_int_equal(x->occupancy, 6);
	assert_int_equal(x->lat.p50, 2);
	assert_int_equal(x->lat.max, 4);
	assert_int_equal(st.stall_cycles, 3);
	/* latency I->R of retired: 3 and 6 */
	assert_int_equal(st.insn_lat.count, 2);
	assert_int_equal(st.insn_lat.sum, 9);
	assert_int_equal(st.insn_lat.max, 6);
	/* threads: 0 has insns 0 and 2, 1 has insn 1 */
	assert_int_equal(st.nthreads, 2);
	assert_int_equal(st.threads[0].thread, 0);
	assert_int_equal(st.threads[0].insns, 2);
	assert_int_equal(st.threads[0].flushed, 1);
	assert_int_equal(st.threads[1].retired, 1);
	/* windows of 4 cycles from 10: [10,14) has the retire at 13, [14,18) the one at 16 */
	assert_int_equal(st.nwindows, 2);
	assert_int_equal(st.window_retired[0], 1);
	assert_int_equal(st.window_retired[1], 1);
	/* slowest: insn 1 (6 cycles, label with \n shown as a space) then insn 0 */
	assert_int_equal(st.nslow, 2);
	assert_int_equal(st.slow[0].id, 1);
	assert_string_equal(st.slow[0].label, "long load");
	assert_int_equal(st.slow[1].id, 0);
	assert_int_equal(st.slow[1].end - st.slow[1].begin, 3);
	tk_kanata_stats_free(&st);
}

/* ---- quirks and violations, one by one ----------------------------------------------------- */
static void test_quirks(void **state)
{
	(void)state;
	struct tk_kanata_stats st;
	struct diags g = { 0 };
	static const char log[] =
		"Kanata\t0004\t \r\n"
		"C=\t -1 \n"
		"C\t  1\t\t  \n"                 /* space padding, trailing tabs */
		"I\t 0\t 5 \t0\n"
		"S\t0\tmain\tF\n"                /* lane as a string */
		"S\t0\tmain\tD\n"                /* closes F */
		"\n"                             /* empty line */
		"C\t2\n"
		"E\t0\tmain\tD\n"
		"R\t0\t0\t0\n";
	stats_of(log, &st, &g, 0, 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(st.counts.first_cycle, -1);
	assert_int_equal(st.counts.last_cycle, 2);
	assert_int_equal(st.counts.retired, 1);
	assert_int_equal(stage(&st, "main", "F")->lat.max, 0);
	assert_int_equal(stage(&st, "main", "D")->lat.max, 2);
	tk_kanata_stats_free(&st);
}

static void test_violations(void **state)
{
	(void)state;
	struct tk_kanata_stats st;
	struct diags g = { 0 };
	static const char log[] =
		"Kanata\t0005\n"          /* 1: version warning */
		"I\t0\t0\t0\n"            /* 2 */
		"Q\t1\n"                  /* 3: unknown command */
		"S\t1\t0\tF\n"            /* 4: id before I */
		"C\t-2\n"                 /* 5: negative delta */
		"E\t0\t0\tF\n"            /* 6: E without S (warning) */
		"I\t0\t1\t0\n"            /* 7: id reused */
		"R\t0\t0\t0\n"            /* 8 */
		"R\t0\t0\t0\n"            /* 9: R twice */
		"W\t0\t0\t0\n"            /* 10: W on a retired consumer */
		"S\t0\t0\tX\n"            /* 11: after R (warning) */
		"I\t1\tx\t0\n"            /* 12: bad number */
		"I\t2\t2\n"               /* 13: missing field */
		"I\t3\t3\t0\n"            /* 14 */
		"W\t3\t9\t0\n"            /* 15: unknown producer (warning) */
		"C=\t-5\n"                /* 16: going back */
		"R\t3\t0\t2\n"            /* 17: bad type */
		"C\t1\n";
	stats_of(log, &st, &g, 0, 0);
	assert_true(has_diag(&g, 1, TK_KANATA_D_VERSION));
	assert_true(has_diag(&g, 3, TK_KANATA_D_UNKNOWN_CMD));
	assert_true(has_diag(&g, 4, TK_KANATA_D_UNKNOWN_ID));
	assert_true(has_diag(&g, 5, TK_KANATA_D_NEG_DELTA));
	assert_true(has_diag(&g, 6, TK_KANATA_D_END_NO_BEGIN));
	assert_true(has_diag(&g, 7, TK_KANATA_D_ID_REUSED));
	assert_true(has_diag(&g, 9, TK_KANATA_D_RETIRE_TWICE));
	assert_true(has_diag(&g, 10, TK_KANATA_D_DEP_RETIRED));
	assert_true(has_diag(&g, 11, TK_KANATA_D_AFTER_RETIRE));
	assert_true(has_diag(&g, 12, TK_KANATA_D_SYNTAX));
	assert_true(has_diag(&g, 13, TK_KANATA_D_SYNTAX));
	assert_true(has_diag(&g, 15, TK_KANATA_D_DEP_PRODUCER));
	assert_true(has_diag(&g, 16, TK_KANATA_D_CYCLE_BACK));
	assert_true(has_diag(&g, 17, TK_KANATA_D_BAD_TYPE));
	assert_int_equal(g.n, 14);
	/* the rest is still read: insn 3 is in flight, the last C counts */
	assert_int_equal(st.counts.insns, 2);
	assert_int_equal(st.counts.retired, 1);
	assert_int_equal(st.counts.in_flight, 1);
	assert_int_equal(st.counts.last_cycle, 1);
	assert_int_equal(st.counts.version, 5);
	tk_kanata_stats_free(&st);
}

/* Fields as Konata splits them (issue 31 items 8 and 26): a label is the fourth field with its
 * trailing spaces, text after a further tab is dropped and reported, and an extra field on
 * S is reported, not folded into the stage name. */
static void test_konata_fields(void **state)
{
	(void)state;
	static const char log[] =
		"Kanata\t0004\n"
		"C=\t0\n"
		"I\t0\t0\t0\n"                   /* 3 */
		"L\t0\t0\t0x00000000: \n"        /* 4: trailing space is part of the label */
		"L\t0\t0\tDASM(x)\tmore\n"      /* 5: text after a further tab is dropped */
		"L\t0\t1\tdetail\t  \r\n"      /* 6: blank extra field, CRLF: nothing to say */
		"S\t0\t0\tF\tx\n"               /* 7: extra field on S */
		"C\t1\n"
		"R\t0\t0\t0\n";
	struct canon k;
	struct diags g = { 0 };
	int err;
	tk_buf_init(&k.b, -1, 4096);
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .cmd = canon_cmd, .ctx = &k,
					    .diag = collect, .diag_ctx = &g };
	struct tk_kanata_reader *r = tk_kanata_reader_new(&ro, &err);
	assert_non_null(r);
	assert_int_equal(tk_kanata_reader_feed(r, log, strlen(log), 1), 0);
	assert_int_equal(g.n, 2);
	assert_true(has_diag(&g, 5, TK_KANATA_D_SYNTAX));
	assert_true(has_diag(&g, 7, TK_KANATA_D_SYNTAX));
	assert_int_equal(tk_kanata_reader_counts(r)->errors, 2);
	tk_kanata_reader_free(r);
	tk_buf_putc(&k.b, 0);
	assert_string_equal(k.b.data,
			    "4 0 0 0 0 [] []\n"
			    "5 0 0 0 0 [] [0x00000000: ]\n"
			    "5 0 0 0 0 [] [DASM(x)]\n"
			    "5 0 0 1 0 [] [detail]\n"
			    "6 0 0 0 0 [0] [F]\n"
			    "8 1 0 0 0 [] []\n");
	tk_buf_free(&k.b);
}

/* Any split of the input gives the same commands (streaming carry across feeds). */
static void test_split_feeds(void **state)
{
	(void)state;
	struct tk_buf whole, part;
	size_t n = strlen(hand_log);

	canon_of(hand_log, n, &whole);
	for (size_t cut = 1; cut < n; cut += 7) {
		struct canon k;
		int err;
		tk_buf_init(&k.b, -1, 4096);
		struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .cmd = canon_cmd, .ctx = &k };
		struct tk_kanata_reader *r = tk_kanata_reader_new(&ro, &err);
		assert_int_equal(tk_kanata_reader_feed(r, hand_log, cut, 0), 0);
		assert_int_equal(tk_kanata_reader_feed(r, hand_log + cut, n - cut, 1), 0);
		tk_kanata_reader_free(r);
		part = k.b;
		assert_int_equal(part.len, whole.len);
		assert_memory_equal(part.data, whole.data, whole.len);
		tk_buf_free(&part);
	}
	tk_buf_free(&whole);
}

/* ---- writer ----------------------------------------------------------------------------------- */
static void test_writer_api(void **state)
{
	(void)state;
	struct tk_buf out;
	int err;

	tk_buf_init(&out, -1, 4096);
	struct tk_kanata_writer *w = tk_kanata_writer_new(&out, 5, &err);
	assert_non_null(w);
	assert_int_equal(tk_kanata_w_insn(w, 0, 42, 0), 0);
	assert_int_equal(tk_kanata_w_label(w, 0, 0, "ld r1\nmiss", 10), 0);
	assert_int_equal(tk_kanata_w_stage(w, 0, "0", "F"), 0);
	assert_int_equal(tk_kanata_w_cycle(w, 2), 0);
	assert_int_equal(tk_kanata_w_cycle(w, -1), -TK_E_BAD_STATE);   /* append-only time */
	assert_int_equal(tk_kanata_w_cycle_to(w, 6), -TK_E_BAD_STATE);
	assert_int_equal(tk_kanata_w_stage(w, 1, "0", "F"), -TK_E_BAD_STATE);  /* no I */
	assert_int_equal(tk_kanata_w_stage(w, 0, "0", "bad\tname"), -TK_E_INVAL);
	assert_int_equal(tk_kanata_w_stage(w, 0, "0", "X"), 0);
	assert_int_equal(tk_kanata_w_insn(w, 1, 43, 0), 0);
	assert_int_equal(tk_kanata_w_insn(w, 1, 44, 0), -TK_E_BAD_STATE); /* reused */
	assert_int_equal(tk_kanata_w_dep(w, 1, 0, 0), 0);
	assert_int_equal(tk_kanata_w_cycle_to(w, 8), 0);
	assert_int_equal(tk_kanata_w_retire(w, 0, 0, 0), 0);
	assert_int_equal(tk_kanata_w_retire(w, 0, 0, 0), -TK_E_BAD_STATE); /* twice */
	assert_int_equal(tk_kanata_w_retire(w, 1, 1, 1), 0);
	tk_kanata_writer_free(w);
	static const char want[] =
		"Kanata\t0004\nC=\t5\nI\t0\t42\t0\nL\t0\t0\tld r1\\nmiss\nS\t0\t0\tF\nC\t2\n"
		"S\t0\t0\tX\nI\t1\t43\t0\nW\t1\t0\t0\nC\t1\nR\t0\t0\t0\nR\t1\t1\t1\n";
	assert_int_equal(out.len, strlen(want));
	assert_memory_equal(out.data, want, out.len);
	tk_buf_free(&out);
}

/* read -> write -> read gives the same commands at the same cycles */
static void round_trip_file(const char *name)
{
	struct tk_input *in = open_data(name);
	const uint8_t *d;
	size_t n;
	struct tk_buf a, b, out;

	assert_int_equal(tk_input_map(in, &d, &n), 0);
	canon_of((const char *)d, n, &a);
	tk_input_free(in);

	in = open_data(name);
	tk_buf_init(&out, -1, 1 << 16);
	assert_int_equal(tk_kanata_rewrite(in, &out, NULL), 0);
	tk_input_free(in);
	canon_of(out.data, out.len, &b);
	assert_true(a.len > 0);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	tk_buf_free(&a);
	tk_buf_free(&b);
	tk_buf_free(&out);
}

static void test_round_trip(void **state)
{
	(void)state;
	round_trip_file("kanata-sample-1.log");
	round_trip_file("kanata-basic.txt");
	round_trip_file("kanata-sample-2.log.gz");
}

/* The cut keeps what is alive in the window, is valid, and its stage latencies inside the
 * window match the original's for instructions wholly inside it. */
static void test_cut(void **state)
{
	(void)state;
	struct tk_input *in = open_data("kanata-sample-2.log.gz");
	struct tk_buf out;
	struct diags g = { 0 };
	struct tk_kanata_conv_opts co = { .sz = sizeof co, .cycle_from = 1000, .cycle_to = 1200 };
	struct tk_kanata_stats st;

	tk_buf_init(&out, -1, 1 << 16);
	assert_int_equal(tk_kanata_cut(in, &out, &co), 0);
	tk_input_free(in);
	assert_true(out.len > 100);
	assert_memory_equal(out.data, "Kanata\t0004\nC=\t1000\n", 20);
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .diag = collect, .ctx = &g };
	assert_int_equal(tk_kanata_stats_buf(out.data, out.len, &so, &st), 0);
	assert_int_equal(st.counts.errors, 0);
	assert_true(st.counts.insns > 10);
	assert_int_equal(st.counts.first_cycle, 1000);
	assert_true(st.counts.last_cycle < 1200);
	tk_kanata_stats_free(&st);
	tk_buf_free(&out);
}

/* ---- gem5 ------------------------------------------------------------------------------------- */
static void test_gem5_basic(void **state)
{
	(void)state;
	struct tk_input *in = open_data("gem5-basic.txt");
	struct tk_buf out;
	struct tk_gem5_result res;

	tk_buf_init(&out, -1, 4096);
	assert_int_equal(tk_gem5_to_kanata(in, &out, NULL, &res), 0);
	tk_input_free(in);
	assert_int_equal(res.ticks_per_cycle, 1000);
	assert_int_equal(res.insns, 1);
	assert_int_equal(res.retired, 1);
	/* stages 1 cycle apart from cycle 1, R one cycle after Rt */
	struct tk_kanata_stats st;
	assert_int_equal(tk_kanata_stats_buf(out.data, out.len, NULL, &st), 0);
	assert_int_equal(st.counts.retired, 1);
	assert_int_equal(st.counts.first_cycle, 1);
	assert_int_equal(st.counts.last_cycle, 8);
	assert_int_equal(st.nstages, 7);
	assert_string_equal(st.stages[0].stage, "F");
	assert_string_equal(st.stages[6].stage, "Rt");
	tk_kanata_stats_free(&st);
	assert_non_null(memmem(out.data, out.len, "0x00001000: add r1, r2", 22));
	tk_buf_free(&out);
}

static void test_gem5_order_squash(void **state)
{
	(void)state;
	/* out of seqNum order, a squash (retire 0) with decode never reached, a colon inside
	 * the disassembly, a debug prefix, 500 ticks per cycle */
	static const char g5[] =
		"O3PipeView:fetch:2000:0x10:0:6:  ld r1, [r2]: x\n"
		"O3PipeView:decode:2500\nO3PipeView:rename:3000\nO3PipeView:dispatch:3500\n"
		"O3PipeView:issue:4000\nO3PipeView:complete:5000\nO3PipeView:retire:6000:store:0\n"
		"1000: system.cpu: O3PipeView:fetch:1000:0x0c:0:5: nop\n"
		"O3PipeView:decode:0\nO3PipeView:rename:0\nO3PipeView:dispatch:0\n"
		"O3PipeView:issue:0\nO3PipeView:complete:0\nO3PipeView:retire:0\n";
	char path[] = "/tmp/tk_gem5_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, g5, sizeof g5 - 1), (ssize_t)(sizeof g5 - 1));
	close(fd);
	struct tk_input *in;
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	struct tk_buf out;
	struct tk_gem5_result res;
	tk_buf_init(&out, -1, 4096);
	assert_int_equal(tk_gem5_to_kanata(in, &out, NULL, &res), 0);
	tk_input_free(in);
	unlink(path);
	assert_int_equal(res.ticks_per_cycle, 500);
	assert_int_equal(res.insns, 2);
	assert_int_equal(res.squashed, 1);
	assert_int_equal(res.retired, 1);
	assert_int_equal(res.out_of_order, 0);
	tk_buf_putc(&out, 0);
	static const char want[] =
		"Kanata\t0004\nC=\t2\n"
		"I\t0\t5\t0\nL\t0\t0\t0x0c: nop\nL\t0\t1\tseqNum 5, fetch tick 1000\nS\t0\t0\tF\n"
		"C\t1\nR\t0\t0\t1\n"
		"C\t1\nI\t1\t6\t0\nL\t1\t0\t0x10: ld r1, [r2]: x\nL\t1\t1\tseqNum 6, fetch tick 2000\n"
		"S\t1\t0\tF\nC\t1\nS\t1\t0\tDc\nC\t1\nS\t1\t0\tRn\nC\t1\nS\t1\t0\tDs\nC\t1\n"
		"S\t1\t0\tIs\nC\t2\nS\t1\t0\tCm\nC\t2\nS\t1\t0\tRt\nC\t1\nR\t1\t0\t0\n";
	assert_string_equal(out.data, want);
	tk_buf_free(&out);
}

/* 20,000 instructions whose records arrive out of seqNum order (gem5 prints an instruction
 * when it leaves the pipeline): the window sorts them, every instruction is written once in
 * seqNum order, and the log reads back clean. Every 7th is squashed after issue. */
static void test_gem5_window_sort(void **state)
{
	(void)state;
	char path[] = "/tmp/tk_gem5w_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	const int n = 20000;
	for (int k = 0; k < n; k++) {
		/* swap neighbours in blocks of 64: record order is 63, 62, ..., 0, 127, ... */
		int i = (k / 64) * 64 + 63 - k % 64;
		if (i >= n)
			i = k;
		uint64_t t = 1000 + (uint64_t)i * 250;  /* 250 ticks per cycle, one fetch per cycle */
		int squash = i % 7 == 3;
		fprintf(f, "O3PipeView:fetch:%llu:0x%x:0:%d: op%d a, b\n", (unsigned long long)t,
			0x1000 + 4 * i, 100 + i, i);
		fprintf(f, "O3PipeView:decode:%llu\nO3PipeView:rename:%llu\nO3PipeView:dispatch:%llu\n",
			(unsigned long long)(t + 250), (unsigned long long)(t + 500),
			(unsigned long long)(t + 750));
		fprintf(f, "O3PipeView:issue:%llu\nO3PipeView:complete:%llu\nO3PipeView:retire:%llu\n",
			(unsigned long long)(t + 1000), squash ? 0ULL : (unsigned long long)(t + 1500),
			squash ? 0ULL : (unsigned long long)(t + 2000));
	}
	fclose(f);
	struct tk_input *in;
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	struct tk_buf out;
	struct tk_gem5_result res;
	tk_buf_init(&out, -1, 1 << 20);
	assert_int_equal(tk_gem5_to_kanata(in, &out, NULL, &res), 0);
	tk_input_free(in);
	unlink(path);
	assert_int_equal(res.ticks_per_cycle, 250);
	assert_int_equal(res.insns, (uint64_t)n);
	assert_int_equal(res.out_of_order, 0);
	int squashed = 0;
	for (int i = 0; i < n; i++)
		squashed += i % 7 == 3;
	assert_int_equal(res.squashed, (uint64_t)squashed);

	/* read back: clean, and I lines carry seqNums 100, 101, ... in order */
	struct canon k;
	int err;
	tk_buf_init(&k.b, -1, 1 << 20);
	struct diags g = { 0 };
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1, .cmd = canon_cmd,
					    .diag = collect, .ctx = &k, .diag_ctx = &g };
	struct tk_kanata_reader *r = tk_kanata_reader_new(&ro, &err);
	assert_int_equal(tk_kanata_reader_feed(r, out.data, out.len, 1), 0);
	const struct tk_kanata_counts *c = tk_kanata_reader_counts(r);
	assert_int_equal(g.n, 0);
	assert_int_equal(c->insns, (uint64_t)n);
	assert_int_equal(c->retired, (uint64_t)(n - squashed));
	assert_int_equal(c->flushed, (uint64_t)squashed);
	assert_int_equal(c->in_flight, 0);
	tk_kanata_reader_free(r);
	int64_t expect = 100;
	tk_buf_putc(&k.b, 0);
	for (char *line = k.b.data; *line;) {
		int kind;
		long long cyc, id, a;
		char *eol = strchr(line, '\n');
		if (eol)
			*eol = 0;  /* sscanf measures its whole input string */
		if (sscanf(line, "%d %lld %lld %lld", &kind, &cyc, &id, &a) == 4 && kind == TK_KANATA_INSN) {
			assert_int_equal(a, expect);
			assert_int_equal(id, expect - 100);
			/* fetch cycle = tick / 250 */
			assert_int_equal(cyc, (1000 + (expect - 100) * 250) / 250);
			expect++;
		}
		if (!eol)
			break;
		line = eol + 1;
	}
	assert_int_equal(expect, 100 + n);
	tk_buf_free(&k.b);
	tk_buf_free(&out);
}

/* ---- neutral events ---------------------------------------------------------------------- */
struct ev_log {
	struct tk_buf b;
	uint64_t n[TK_EV__COUNT];
};

static int ev_sink(void *ctx, const struct tk_event *ev, size_t n)
{
	struct ev_log *l = ctx;
	for (size_t i = 0; i < n; i++) {
		l->n[ev[i].kind]++;
		if (ev[i].kind == TK_EV_TYPED && ev[i].flags == TK_TYPED_INSN_LABEL) {
			tk_buf_printf(&l->b, "label t%llu id%llu %.*s\n", (unsigned long long)ev[i].time,
				      (unsigned long long)ev[i].addr, (int)ev[i].count,
				      (const char *)ev[i].data);
			continue;
		}
		tk_buf_printf(&l->b, "%s t%llu id%llu a%llu f%u\n", tk_event_kind_name(ev[i].kind),
			      (unsigned long long)ev[i].time, (unsigned long long)ev[i].addr,
			      (unsigned long long)ev[i].arg, ev[i].flags);
	}
	return 0;
}

static void test_decode_events(void **state)
{
	(void)state;
	char path[] = "/tmp/tk_kanata_ev_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, hand_log, sizeof hand_log - 1), (ssize_t)(sizeof hand_log - 1));
	close(fd);
	struct tk_input *in;
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	struct ev_log l = { 0 };
	tk_buf_init(&l.b, -1, 4096);
	int err;
	struct tk_kanata_decoder *d = tk_kanata_decoder_new((struct tk_sink){ ev_sink, &l }, &err);
	assert_non_null(d);
	assert_int_equal(tk_kanata_decode(d, in), 0);
	tk_input_free(in);
	unlink(path);
	/* 3 I; stages F F X X stl F; 2 retired, 1 flushed */
	assert_int_equal(l.n[TK_EV_INSN_BEGIN], 3);
	assert_int_equal(l.n[TK_EV_STAGE_BEGIN], 6);
	assert_int_equal(l.n[TK_EV_STAGE_END], 6);
	assert_int_equal(l.n[TK_EV_RETIRE], 2);
	assert_int_equal(l.n[TK_EV_FLUSH], 1);
	assert_int_equal(l.n[TK_EV_GAP], 0);
	const char *lane;
	/* stages are numbered in order of their first S: F, X, stl */
	assert_string_equal(tk_kanata_decoder_stage(d, 1, &lane), "X");
	assert_string_equal(lane, "0");
	assert_string_equal(tk_kanata_decoder_stage(d, 2, &lane), "stl");
	assert_string_equal(lane, "1");
	assert_null(tk_kanata_decoder_stage(d, 3, &lane));
	/* insn 0: F from 0 (cycle 10) ends at 1 when X begins; X ends at 3 before its retire */
	tk_buf_putc(&l.b, 0);
	assert_non_null(strstr(l.b.data, "stage-end t1 id0 a0 f0\nstage-begin t1 id0 a1 f0\n"));
	assert_non_null(strstr(l.b.data, "stage-end t3 id0 a1 f0\nlabel t3 id0 add\nretire t3 id0 a0 f0\n"));
	/* labels unescaped, newlines shown as spaces; insn 2 has none */
	assert_non_null(strstr(l.b.data, "label t6 id1 long load\nretire t6 id1 a1 f0\n"));
	assert_int_equal(l.n[TK_EV_TYPED], 2);
	/* the stall lane (1) of insn 1: begins at 2, ends at 5 */
	assert_non_null(strstr(l.b.data, "stage-begin t2 id1 a2 f1\n"));
	assert_non_null(strstr(l.b.data, "stage-end t5 id1 a2 f1\n"));
	tk_kanata_decoder_free(d);
	tk_buf_free(&l.b);
}

/* ---- bounded memory on one 100 MB line --------------------------------------------------------- */
static long maxrss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void test_huge_line(void **state)
{
	(void)state;
	char path[] = "/tmp/tk_kanata_huge_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	static const char head[] = "Kanata\t0004\nI\t0\t0\t0\nL\t0\t0\t";
	static const char tail[] = "\nS\t0\t0\tF\nC\t1\nR\t0\t0\t0\n";
	size_t chunk = 1 << 20;
	char *buf = malloc(chunk);
	memset(buf, 'x', chunk);
	assert_int_equal(write(fd, head, sizeof head - 1), (ssize_t)(sizeof head - 1));
	for (int i = 0; i < 100; i++)
		assert_int_equal(write(fd, buf, chunk), (ssize_t)chunk);
	assert_int_equal(write(fd, tail, sizeof tail - 1), (ssize_t)(sizeof tail - 1));
	close(fd);
	free(buf);

	long before = maxrss_kb();
	struct tk_input *in;
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	struct diags g = { 0 };
	struct tk_kanata_stats st;
	struct tk_kanata_stats_opts so = { .sz = sizeof so, .diag = collect, .ctx = &g };
	assert_int_equal(tk_kanata_stats_compute(in, &so, &st), 0);
	tk_input_free(in);
	unlink(path);
	long grown = maxrss_kb() - before;
	print_message("peak memory grew by %ld KiB on a 100 MiB line\n", grown);
	/* the line is skipped with its line number; the rest is read */
	assert_true(has_diag(&g, 3, TK_KANATA_D_LONG_LINE));
	assert_int_equal(st.counts.retired, 1);
	assert_int_equal(st.counts.lines, 6);
	/* the default limit is 16 MiB: a skipped line is not held in memory beyond it (holding
	 * the 100 MiB line would take more than 100 MiB; ASan adds its own overhead) */
	assert_true(grown < 80 * 1024);
	tk_kanata_stats_free(&st);
}

/* ---- -j N equals -j 1 whatever the split ---------------------------------------------------- */
int kn_stats_buf_parallel(const char *p, size_t n, const struct tk_kanata_stats_opts *opts,
			  struct tk_kanata_stats *st, int *fell_back);
void kn_stats_set_chunk_bytes(size_t n);

struct diag_log {
	struct tk_buf b;
};

static void log_diag(void *ctx, const struct tk_kanata_diag *d)
{
	struct diag_log *l = ctx;
	tk_buf_printf(&l->b, "%llu %d %d %s\n", (unsigned long long)d->line, (int)d->level, (int)d->code,
		      d->msg);
}

static void counts_text(const struct tk_kanata_counts *c, struct tk_buf *b)
{
	tk_buf_printf(b, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %lld %lld %u\n",
		      (unsigned long long)c->lines, (unsigned long long)c->commands,
		      (unsigned long long)c->bytes, (unsigned long long)c->errors,
		      (unsigned long long)c->warnings, (unsigned long long)c->insns,
		      (unsigned long long)c->retired, (unsigned long long)c->flushed,
		      (unsigned long long)c->in_flight, (long long)c->first_cycle,
		      (long long)c->last_cycle, c->version);
}

static void stats_text(const struct tk_kanata_stats *st, struct tk_buf *b)
{
	counts_text(&st->counts, b);
	tk_buf_printf(b, "%llu %llu %llu %d %llu\n", (unsigned long long)st->cycles,
		      (unsigned long long)st->konata_last_rid, (unsigned long long)st->konata_last_cycle,
		      st->have_rid, (unsigned long long)st->stall_cycles);
	const struct tk_kanata_latency *l = &st->insn_lat;
	tk_buf_printf(b, "L %llu %llu %llu %llu %llu\n", (unsigned long long)l->count,
		      (unsigned long long)l->sum, (unsigned long long)l->max, (unsigned long long)l->p50,
		      (unsigned long long)l->p99);
	for (size_t i = 0; i < st->nstages; i++) {
		l = &st->stages[i].lat;
		tk_buf_printf(b, "S %s %s %llu %llu %llu %llu %llu %llu\n", st->stages[i].lane,
			      st->stages[i].stage, (unsigned long long)st->stages[i].occupancy,
			      (unsigned long long)l->count, (unsigned long long)l->sum,
			      (unsigned long long)l->max, (unsigned long long)l->p50,
			      (unsigned long long)l->p99);
	}
	for (size_t i = 0; i < st->nthreads; i++)
		tk_buf_printf(b, "T %lld %llu %llu %llu\n", (long long)st->threads[i].thread,
			      (unsigned long long)st->threads[i].insns,
			      (unsigned long long)st->threads[i].retired,
			      (unsigned long long)st->threads[i].flushed);
	for (size_t i = 0; i < st->nwindows; i++)
		tk_buf_printf(b, "W %llu\n", (unsigned long long)st->window_retired[i]);
	for (size_t i = 0; i < st->nslow; i++)
		tk_buf_printf(b, "X %lld %lld %lld %s\n", (long long)st->slow[i].id,
			      (long long)st->slow[i].begin, (long long)st->slow[i].end, st->slow[i].label);
}

/* Returns 1 if the parallel run fell back to a sequential read. */
static int keep_all_diags;   /* compare_parallel: -j N with keep_diags */

static int compare_parallel(const char *p, size_t n, size_t chunk)
{
	struct diag_log l1, l2;
	struct tk_kanata_stats s1, s2;
	struct tk_buf t1, t2;
	int fell = 0;

	tk_buf_init(&l1.b, -1, 4096);
	tk_buf_init(&l2.b, -1, 4096);
	struct tk_kanata_stats_opts o1 = { .sz = sizeof o1, .window = 50, .slowest = 7,
					   .diag = log_diag, .ctx = &l1 };
	struct tk_kanata_stats_opts o2 = o1;
	o2.ctx = &l2;
	o2.jobs = 2;
	o2.keep_diags = keep_all_diags;
	assert_int_equal(tk_kanata_stats_buf(p, n, &o1, &s1), 0);
	kn_stats_set_chunk_bytes(chunk);
	assert_int_equal(kn_stats_buf_parallel(p, n, &o2, &s2, &fell), 0);
	kn_stats_set_chunk_bytes(0);
	if (!fell) {
		tk_buf_init(&t1, -1, 4096);
		tk_buf_init(&t2, -1, 4096);
		stats_text(&s1, &t1);
		stats_text(&s2, &t2);
		tk_buf_putc(&t1, 0);
		tk_buf_putc(&t2, 0);
		assert_string_equal(t2.data, t1.data);
		tk_buf_putc(&l1.b, 0);
		tk_buf_putc(&l2.b, 0);
		assert_string_equal(l2.b.data, l1.b.data);
		tk_buf_free(&t1);
		tk_buf_free(&t2);
	}
	tk_kanata_stats_free(&s1);
	tk_kanata_stats_free(&s2);
	tk_buf_free(&l1.b);
	tk_buf_free(&l2.b);
	return fell;
}

static void test_parallel_equals_serial(void **state)
{
	(void)state;
	struct tk_input *in = open_data("kanata-sample-2.log.gz");
	const uint8_t *d;
	size_t n;
	assert_int_equal(tk_input_map(in, &d, &n), 0);
	/* many split points, from tiny chunks to a few */
	static const size_t sizes[] = { 8192, 65536, 300000, 1000000 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		assert_int_equal(compare_parallel((const char *)d, n, sizes[i]), 0);
	tk_input_free(in);
	/* violations and quirks split everywhere: equal, or honestly fell back */
	static const char bad[] =
		"Kanata\t0004\nC=\t5\nI\t0\t0\t0\nS\t0\t0\tF\nQ\t1\nS\t9\t0\tF\nC\t1\n"
		"I\t1\t1\t1\nL\t1\t0\tlabel\\nx\nW\t1\t0\t0\nW\t1\t8\t0\nS\t0\t1\tstl\nC\t2\n"
		"E\t0\t0\tX\nE\t0\t1\tstl\nR\t0\t0\t0\nL\t0\t1\tafter\nR\t0\t0\t0\nW\t0\t1\t0\n"
		"C\t-1\nC\t3\nS\t1\t0\tX\nR\t1\t1\t0\nI\t2\t2\t0\nC\t1\n";
	static const size_t splits[] = { 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233 };
	for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++)
		compare_parallel(bad, sizeof bad - 1, splits[i]);
	/* C= lines in every chunk (some going back), instructions in flight across every seam:
	 * a chunk parsed before its start is known waits for it at a C=, and does not fall back */
	struct tk_buf cs;
	int64_t cyc = 0;
	tk_buf_init(&cs, -1, 4096);
	tk_buf_printf(&cs, "Kanata\t0004\nC=\t100\n");
	for (int i = 0; i < 3000; i++) {
		tk_buf_printf(&cs, "I\t%d\t%d\t%d\nS\t%d\t0\tF\n", i, i, i % 2, i);
		if (i >= 6)
			tk_buf_printf(&cs, "R\t%d\t%d\t0\n", i - 6, i - 6);
		cyc += 1 + i % 3;
		if (i % 5 == 0)
			tk_buf_printf(&cs, "C=\t%lld\n", (long long)(i % 35 ? 100 + cyc : 50));
		else
			tk_buf_printf(&cs, "C\t%d\n", 1 + i % 3);
	}
	static const size_t cuts[] = { 64, 500, 4096, 20000 };
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
		assert_int_equal(compare_parallel(cs.data, cs.len, cuts[i]), 0);
	tk_buf_free(&cs);
	/* an id reused across chunks must fall back, and still give the serial answer */
	static const char reuse[] = "Kanata\t0004\nI\t0\t0\t0\nC\t1\nR\t0\t0\t0\nC\t1\nI\t0\t1\t0\nC\t1\n";
	int fell = 0;
	for (size_t chunk = 1; chunk < sizeof reuse; chunk++)
		fell += compare_parallel(reuse, sizeof reuse - 1, chunk);
	assert_true(fell > 0);
}

/* check -j N: thousands of violations in a chunk, each delivered with its text in -j 1's
 * order (without keep_diags, past 256 a chunk they come textless: the log differs) */
static void test_parallel_keeps_all_diags(void **state)
{
	(void)state;
	struct tk_buf b;
	tk_buf_init(&b, -1, 4096);
	tk_buf_printf(&b, "Kanata\t0004\nC=\t0\n");
	for (int i = 0; i < 4000; i++) {
		tk_buf_printf(&b, "I\t%d\t%d\t0\nS\t%d\t0\tF\nC\t1\n", i, i, i);
		if (i >= 3)   /* retired three later: its L and S after R (warnings), an E of nothing */
			tk_buf_printf(&b, "R\t%d\t%d\t0\nL\t%d\t0\tlate\nS\t%d\t0\tX\nE\t%d\t0\tQ\n",
				      i - 3, i - 3, i - 3, i - 3, i);
		if (i % 500 == 7)
			tk_buf_printf(&b, "S\t%d\t0\tF\n", 100000 + i);   /* an id never begun: an error */
	}
	struct tk_kanata_stats st;
	struct tk_kanata_stats_opts o = { .sz = sizeof o };
	assert_int_equal(tk_kanata_stats_buf(b.data, b.len, &o, &st), 0);
	assert_true(st.counts.warnings > 10000 && st.counts.errors >= 8);
	tk_kanata_stats_free(&st);
	keep_all_diags = 1;
	static const size_t cuts[] = { 64, 4096, 50000, 300000 };
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
		assert_int_equal(compare_parallel(b.data, b.len, cuts[i]), 0);
	keep_all_diags = 0;
	tk_buf_free(&b);
}

/* ---- the decoder in parallel chunks: the events of a decoding in order ------------------- */
static int ev_record(void *ctx, const struct tk_event *ev, size_t n)
{
	struct tk_buf *b = ctx;
	for (size_t i = 0; i < n; i++) {
		const struct tk_event *e = &ev[i];
		tk_buf_printf(b, "%s %llu %llu %llu %llu %u %u ", tk_event_kind_name(e->kind),
			      (unsigned long long)e->time, (unsigned long long)e->addr,
			      (unsigned long long)e->addr2, (unsigned long long)e->count, e->track,
			      e->flags);
		if (e->kind == TK_EV_TYPED)
			tk_buf_printf(b, "'%.*s'\n", (int)e->count, (const char *)e->data);
		else
			tk_buf_printf(b, "%llu\n", (unsigned long long)e->arg);
	}
	return 0;
}

/* Everything a decoding of the file PATH gives (events, names, counts, gaps) as text into B:
 * in order with JOBS 1, else in chunks of CHUNK bytes. */
static void decode_text(const char *path, unsigned jobs, size_t chunk, struct tk_buf *b)
{
	struct tk_input *in;
	int err;

	tk_buf_init(b, -1, 4096);
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	struct tk_kanata_decoder *d = tk_kanata_decoder_new((struct tk_sink){ ev_record, b }, &err);
	assert_non_null(d);
	tk_kanata_decoder_set_jobs(d, jobs, chunk, NULL);
	assert_int_equal(tk_kanata_decode(d, in), 0);
	const char *name, *lane;
	for (unsigned i = 0; (name = tk_kanata_decoder_stage(d, i, &lane)); i++)
		tk_buf_printf(b, "stage %u %s %s\n", i, name, lane);
	counts_text(tk_kanata_decoder_counts(d), b);
	const struct tk_gap_stats *g = tk_kanata_decoder_gaps(d);
	tk_buf_printf(b, "gaps %llu:", (unsigned long long)g->count);
	for (uint64_t i = 0; i < g->count && i < TK_GAP_FIRST_OFFSETS; i++)
		tk_buf_printf(b, " %llu", (unsigned long long)g->first_offsets[i]);
	tk_buf_putc(b, 0);
	tk_kanata_decoder_free(d);
	tk_input_free(in);
}

/* The log P[0..N) decoded in chunks of each size of CHUNKS, on 2 and 3 threads: what a
 * decoding in order gives; the number of events. */
static size_t compare_decode(const char *p, size_t n, const size_t *chunks, size_t nchunks)
{
	char path[] = "/tmp/tk_kanata_par_XXXXXX";
	int fd = mkstemp(path);
	struct tk_buf want, got;
	size_t events = 0;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	close(fd);
	decode_text(path, 1, 0, &want);
	for (const char *q = want.data; (q = strchr(q, '\n')); q++)
		events++;
	for (size_t i = 0; i < nchunks; i++)
		for (unsigned jobs = 2; jobs <= 3; jobs++) {
			decode_text(path, jobs, chunks[i], &got);
			if (strcmp(got.data, want.data))
				fprintf(stderr, "chunks of %zu, %u threads: not the events in order\n",
					chunks[i], jobs);
			assert_string_equal(got.data, want.data);
			tk_buf_free(&got);
		}
	tk_buf_free(&want);
	unlink(path);
	return events;
}

/* Ids far from 0 (a log whose numbering starts at 200,000,000): a chunk's reader holds its
 * set of begun ids from its first id on, not from 0 (32 MiB zeroed per chunk: report -j 2
 * of such a log took 13 times as long as -j 1); an id below the chunk's first is neither
 * taken as seen nor lost; -j 2 equals -j 1 at every split. */
struct tk_kanata_reader;
void kn_reader_chunk_begin(struct tk_kanata_reader *r, int first, int64_t cycle, uint64_t line_base,
			   uint64_t byte_base);
int kn_reader_seen(const struct tk_kanata_reader *r, int64_t id);
size_t kn_reader_seen_words(const struct tk_kanata_reader *r);

static void test_parallel_far_ids(void **state)
{
	(void)state;
	const long long base = 200000000;
	struct tk_buf b;
	tk_buf_init(&b, -1, 4096);
	tk_buf_printf(&b, "Kanata\t0004\nC=\t0\n");
	for (int i = 0; i < 2000; i++) {
		/* two threads whose ids interleave out of order: every eighth pair swapped */
		long long id = base + (i % 8 == 6 ? i + 1 : i % 8 == 7 ? i - 1 : i);
		tk_buf_printf(&b, "I\t%lld\t%d\t%d\nS\t%lld\t0\tF\n", id, i, i % 2, id);
		if (i >= 5) {
			long long r = base + (i - 5);
			tk_buf_printf(&b, "E\t%lld\t0\tF\nR\t%lld\t%d\t0\n", r, r, i - 5);
		}
		if (i == 1500)   /* an id begun twice in one chunk */
			tk_buf_printf(&b, "I\t%lld\t9999\t0\n", id);
		tk_buf_printf(&b, "C\t1\n");
	}
	static const size_t cuts[] = { 700, 4096, 30000 };
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
		assert_int_equal(compare_parallel(b.data, b.len, cuts[i]), 0);

	/* a chunk's reader alone */
	int err;
	struct tk_kanata_reader_opts ro = { .sz = sizeof ro, .semantic = 1 };
	struct tk_kanata_reader *r = tk_kanata_reader_new(&ro, &err);
	assert_non_null(r);
	kn_reader_chunk_begin(r, 0, 0, 0, 0);
	static const char lines[] = "I\t200000100\t0\t0\nI\t200000300\t1\t0\nI\t199999000\t2\t0\n";
	assert_int_equal(tk_kanata_reader_feed(r, lines, sizeof lines - 1, 0), 0);
	assert_true(kn_reader_seen(r, 200000100) && kn_reader_seen(r, 200000300) &&
		    kn_reader_seen(r, 199999000));
	assert_false(kn_reader_seen(r, 200000099) || kn_reader_seen(r, 199998999) ||
		     kn_reader_seen(r, 5));
	print_message("a chunk's set of ids: %zu words\n", kn_reader_seen_words(r));
	assert_true(kn_reader_seen_words(r) <= 128);   /* (from 0: 4,194,304) */
	tk_kanata_reader_free(r);

	/* a whole log numbered from 1: its set slides as the ids fill it (from 0 it never did:
	 * id 0 was never begun, and past 2^28 ids every I was refused) */
	r = tk_kanata_reader_new(&ro, &err);
	assert_non_null(r);
	tk_buf_free(&b);
	tk_buf_init(&b, -1, 4096);
	tk_buf_printf(&b, "Kanata\t0004\nC=\t0\n");
	for (int i = 1; i <= 100000; i++)
		tk_buf_printf(&b, "I\t%d\t%d\t0\nR\t%d\t%d\t0\n", i, i, i, i);
	assert_int_equal(tk_kanata_reader_feed(r, b.data, b.len, 1), 0);
	assert_int_equal(tk_kanata_reader_counts(r)->errors, 0);
	assert_true(kn_reader_seen(r, 1) && kn_reader_seen(r, 777) && kn_reader_seen(r, 100000));
	assert_false(kn_reader_seen(r, 0) || kn_reader_seen(r, 100001));
	assert_int_equal(kn_reader_seen_words(r), 64);
	tk_kanata_reader_free(r);
	tk_buf_free(&b);
}

/* The planning's seams read with pread (kn_line_seam_in) are the mapping's
 * (kn_line_seam_by) at every position and chunk size: short lines, lines longer than the
 * pread's 512 bytes, a last line without its newline. */
size_t kn_line_seam_by(const char *data, size_t len, size_t pos, size_t bytes);
size_t kn_line_seam_in(const struct tk_input *in, const char *data, size_t len, size_t pos,
		       size_t bytes);

static void test_seams_read_as_mapped(void **state)
{
	(void)state;
	char path[] = "/tmp/tk_kanata_seam_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	struct tk_buf b;
	tk_buf_init(&b, -1, 4096);
	tk_buf_printf(&b, "Kanata\t0004\nC=\t0\n");
	for (int i = 0; i < 60; i++) {
		size_t label = i % 7 == 3 ? 700 + (size_t)i * 13 : (size_t)(i % 5) * 9;
		tk_buf_printf(&b, "I\t%d\t%d\t0\nL\t%d\t0\t", i, i, i);
		for (size_t k = 0; k < label; k++)
			tk_buf_putc(&b, (char)('a' + k % 26));
		tk_buf_printf(&b, "\nC\t1\n");
	}
	tk_buf_printf(&b, "R\t0\t0\t0");   /* (no newline at the end) */
	assert_int_equal(write(fd, b.data, b.len), (long)b.len);
	close(fd);

	struct tk_input *in;
	const uint8_t *data;
	size_t len;
	assert_int_equal(tk_input_open(&in, path, NULL), 0);
	assert_int_equal(tk_input_map(in, &data, &len), 0);
	assert_int_equal(len, b.len);
	const size_t sizes[] = { 1, 5, 64, 511, 512, 513, 1000, 4096 };
	size_t long_seams = 0;
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
		for (size_t pos = 0; pos < len; pos++) {
			size_t want = kn_line_seam_by((const char *)data, len, pos, sizes[s]);
			assert_int_equal(kn_line_seam_in(in, (const char *)data, len, pos, sizes[s]), want);
			size_t end = pos + sizes[s];
			long_seams += end < len && want - end > 512;
		}
	assert_true(long_seams > 0);   /* (the fallback to the mapping was taken) */
	tk_input_free(in);
	unlink(path);
	tk_buf_free(&b);
}

static void test_parallel_decode(void **state)
{
	(void)state;
	/* a recorded log, cut everywhere from tiny chunks to a few */
	struct tk_input *in = open_data("kanata-sample-2.log.gz");
	const uint8_t *d;
	size_t n;
	assert_int_equal(tk_input_map(in, &d, &n), 0);
	static const size_t sizes[] = { 4096, 65536, 300000 };
	assert_true(compare_decode((const char *)d, n, sizes, 3) > 10000);
	tk_input_free(in);
	/* instructions in flight across every seam, their stages, labels and producers (W) in
	 * later chunks than their I; C= lines (some going back: errors), a stage first seen
	 * late and stages in another order in every chunk (their numbers are mapped), lines
	 * naming ids never begun (gaps) */
	struct tk_buf b;
	int64_t cyc = 100;
	tk_buf_init(&b, -1, 4096);
	tk_buf_printf(&b, "Kanata\t0004\nC=\t100\n");
	for (int i = 0; i < 3000; i++) {
		tk_buf_printf(&b, "I\t%d\t%d\t%d\nL\t%d\t0\tinsn %d\n", i, 7 * i, i % 3, i, i);
		tk_buf_printf(&b, "S\t%d\t0\t%s\n", i, i % 7 ? "F" : "D");
		if (i >= 1)
			tk_buf_printf(&b, "W\t%d\t%d\t0\n", i, i - 1);
		if (i >= 4)
			tk_buf_printf(&b, "S\t%d\t0\tX\nL\t%d\t0\t more\nS\t%d\t1\t%s\n", i - 4, i - 4,
				      i - 4, i > 1500 ? "late" : "stl");
		if (i >= 9)
			tk_buf_printf(&b, "E\t%d\t1\t%s\nR\t%d\t%d\t%d\n", i - 9, i - 9 > 1500 ? "late" : "stl",
				      i - 9, i - 9, i % 11 == 0);
		if (i % 97 == 5)
			tk_buf_printf(&b, "S\t%d\t0\tF\n", 100000 + i);
		cyc += 1 + i % 3;
		if (i % 5 == 0)
			tk_buf_printf(&b, "C=\t%lld\n", (long long)(i % 35 ? cyc : 50));
		else
			tk_buf_printf(&b, "C\t%d\n", 1 + i % 3);
	}
	static const size_t cuts[] = { 64, 500, 4096, 20000, 100000 };
	assert_true(compare_decode(b.data, b.len, cuts, 5) > 20000);
	tk_buf_free(&b);
	/* an id reused across chunks: the rest of the log from that chunk on is read in order */
	tk_buf_init(&b, -1, 4096);
	tk_buf_printf(&b, "Kanata\t0004\nC=\t7\n");
	for (int i = 0; i < 400; i++)
		tk_buf_printf(&b, "I\t%d\t%d\t0\nS\t%d\t0\tF\nC\t1\nR\t%d\t%d\t0\n", i % 250, i, i % 250,
			      i % 250, i);
	static const size_t small[] = { 100, 999 };
	compare_decode(b.data, b.len, small, 2);
	tk_buf_free(&b);
}

/* Counts a source's events, per chunk, merged in order. */
struct ev_count {
	size_t per_chunk[4096], total, chunks;
};

static int count_events(void *ctx, const struct tk_event *ev, size_t n)
{
	(void)ev;
	*(size_t *)ctx += n;
	return 0;
}

static int count_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct ev_count *c = ctx;
	(void)flow;
	assert_true(i < 4096);
	*sink = (struct tk_sink){ .events = count_events, .ctx = &c->per_chunk[i] };
	return 0;
}

static int count_merge(void *ctx, size_t i)
{
	struct ev_count *c = ctx;
	c->total += c->per_chunk[i];
	c->chunks++;
	return 0;
}

/* The events of the recorded log through a consumer C read up to SZ; tk_source_run's
 * return. */
static int run_sized(struct tk_chunk_consumer c, size_t sz, struct ev_count *out)
{
	char path[2200];
	struct tk_source_opts so = { .sz = sizeof so, .nthreads = 2 };
	struct tk_source *s;

	snprintf(path, sizeof path, "%s/kanata/kanata-sample-2.log.gz", data_dir());
	assert_int_equal(tk_source_open(&s, path, &so), 0);
	c.sz = sz;
	c.ctx = out;
	int rc = tk_source_run(s, &c);
	tk_source_free(s);
	return rc;
}

/* tk_source_run reads a consumer up to its sz: a caller built with an older, shorter
 * struct gets every event; one whose sz stops short of ctx is refused. */
static void test_source_consumer_sz(void **state)
{
	(void)state;
	static struct ev_count whole, older, refused;
	struct tk_chunk_consumer c = { 0, count_begin, count_merge, NULL, NULL, NULL };

	assert_int_equal(run_sized(c, sizeof c, &whole), 0);
	assert_true(whole.total > 10000);
	assert_int_equal(run_sized(c, offsetof(struct tk_chunk_consumer, ctx) + sizeof c.ctx, &older), 0);
	assert_int_equal(older.total, whole.total);
	assert_int_equal(older.chunks, whole.chunks);
	assert_int_equal(run_sized(c, offsetof(struct tk_chunk_consumer, ctx), &refused), -TK_E_INVAL);
	assert_int_equal(refused.chunks, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample2_facts),
		cmocka_unit_test(test_source_consumer_sz),
		cmocka_unit_test(test_sample1_quirks),
		cmocka_unit_test(test_basic_fixture),
		cmocka_unit_test(test_hand_stats),
		cmocka_unit_test(test_quirks),
		cmocka_unit_test(test_violations),
		cmocka_unit_test(test_split_feeds),
		cmocka_unit_test(test_konata_fields),
		cmocka_unit_test(test_writer_api),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_cut),
		cmocka_unit_test(test_gem5_basic),
		cmocka_unit_test(test_gem5_order_squash),
		cmocka_unit_test(test_gem5_window_sort),
		cmocka_unit_test(test_decode_events),
		cmocka_unit_test(test_huge_line),
		cmocka_unit_test(test_parallel_equals_serial),
		cmocka_unit_test(test_parallel_keeps_all_diags),
		cmocka_unit_test(test_parallel_decode),
		cmocka_unit_test(test_seams_read_as_mapped),
		cmocka_unit_test(test_parallel_far_ids),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
