/* Writers read back by real readers: pprof through the npm package pprof-format, Perfetto
 * through `protoc --decode` against tests/tools/perfetto_trace.proto, Chrome JSON through
 * node's JSON parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tracekit/tracekit.h"

static const char *src_dir(void)
{
	const char *s = getenv("SRC");
	return s ? s : "../..";
}

/* main(1) -> a(2) x3 -> b(3); on track 1 also c(4) with a lost exit. */
static size_t stream(struct tk_event *ev)
{
	size_t n = 0;
	uint64_t t = 1000;
#define E(k, f, tr) ev[n++] = (struct tk_event){ .kind = k, .addr = f, .time = t, .track = tr }
	E(TK_EV_FUNC_ENTER, 1, 0);
	for (int i = 0; i < 3; i++) {
		t += 10;
		E(TK_EV_FUNC_ENTER, 2, 0);
		t += 5;
		E(TK_EV_FUNC_ENTER, 3, 0);
		t += 20;
		E(TK_EV_FUNC_EXIT, 3, 0);
		t += 5;
		E(TK_EV_FUNC_EXIT, 2, 0);
		t += 3;
		E(TK_EV_FUNC_ENTER, 4, 1);
		t += 7;
		E(TK_EV_FUNC_EXIT, 4, 1);
	}
	t += 10;
	E(TK_EV_FUNC_EXIT, 1, 0);
	return n;
}

static struct tk_sym *names(void)
{
	struct tk_sym *s = tk_sym_new(NULL, NULL);
	assert_non_null(s);
	tk_sym_set_func(s, 1, "main", 0);
	tk_sym_set_func(s, 2, "alpha", 0);
	tk_sym_set_func(s, 3, "beta", 0);
	tk_sym_set_func(s, 4, "gamma", 0);
	return s;
}

static char *run(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	struct tk_buf b;
	tk_buf_init(&b, -1, 4096);
	char buf[4096];
	size_t k;
	while ((k = fread(buf, 1, sizeof buf, f)) > 0)
		tk_buf_put(&b, buf, k);
	int st = pclose(f);
	if (st != 0)
		fprintf(stderr, "command failed (%d): %s\n", st, cmd);
	assert_int_equal(st, 0);
	tk_buf_putc(&b, 0);
	return b.data;
}

static void write_file(const char *path, const struct tk_buf *b)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b->data, 1, b->len, f), b->len);
	fclose(f);
}

static void test_pprof_roundtrip(void **state)
{
	(void)state;
	struct tk_event ev[64];
	size_t n = stream(ev);
	struct tk_prof *p = tk_prof_new(NULL, NULL);
	assert_int_equal(tk_prof_events(p, ev, n), 0);
	tk_prof_finish(p);
	struct tk_sym *s = names();
	for (int threads = 0; threads < 2; threads++) {
		struct tk_out_opts o = { .sz = sizeof o, .sym = s, .threads = threads };
		struct tk_buf folded, pp;
		tk_buf_init(&folded, -1, 4096);
		tk_buf_init(&pp, -1, 4096);
		assert_int_equal(tk_out_profile(&folded, p, TK_OUT_FOLDED, &o), 0);
		assert_int_equal(tk_out_profile(&pp, p, TK_OUT_PPROF, &o), 0);
		tk_buf_putc(&folded, 0);
		char path[] = "/tmp/tk-pprof-XXXXXX";
		int fd = mkstemp(path);
		assert_true(fd >= 0);
		close(fd);
		write_file(path, &pp);
		char cmd[1024];
		snprintf(cmd, sizeof cmd, "node %s/tests/tools/pprof-folded.js %s", src_dir(), path);
		char *got = run(cmd);
		unlink(path);
		/* first line names the sample type; the rest must equal our folded stacks */
		assert_true(!strncmp(got, "# time ticks\n", 13));
		assert_string_equal(got + 13, folded.data);
		if (!threads)
			assert_non_null(strstr(got, "\nmain;alpha;beta 60\n"));
		free(got);
		tk_buf_free(&folded);
		tk_buf_free(&pp);
	}
	tk_sym_free(s);
	tk_prof_free(p);
}

static char *perfetto_text(const struct tk_timeline_opts *o, const struct tk_event *ev, size_t n,
			   uint64_t *slices, uint64_t *dropped)
{
	struct tk_buf b;
	tk_buf_init(&b, -1, 4096);
	int err;
	struct tk_timeline *t = tk_timeline_new(&b, o, &err);
	assert_non_null(t);
	/* in two batches, as a decoder would */
	assert_int_equal(tk_timeline_events(t, ev, n / 2), 0);
	assert_int_equal(tk_timeline_events(t, ev + n / 2, n - n / 2), 0);
	assert_int_equal(tk_timeline_finish(t), 0);
	*slices = tk_timeline_slices(t, dropped);
	tk_timeline_free(t);
	char path[] = "/tmp/tk-perfetto-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, &b);
	tk_buf_free(&b);
	char cmd[1024];
	if (o->kind == TK_TIMELINE_PERFETTO)
		snprintf(cmd, sizeof cmd, "protoc --decode=perfetto.Trace -I %s/tests/tools %s/tests/tools/perfetto_trace.proto < %s",
			 src_dir(), src_dir(), path);
	else
		snprintf(cmd, sizeof cmd, "node -e 'const t=JSON.parse(require(\"fs\").readFileSync(process.argv[1]));"
			 "for (const e of t.traceEvents) console.log(e.ph, e.tid, e.ts, e.name||\"\")' %s", path);
	char *text = run(cmd);
	unlink(path);
	return text;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Replay the decoded packets: per sequence, sum incremental timestamps; check that every
 * begin has its end, ends never precede begins, and the absolute times are the trace's. */
static void check_perfetto(const char *text, uint64_t expect_first_begin, uint64_t expect_last_end)
{
	uint64_t ts[64] = { 0 }, first_begin = UINT64_MAX, last_end = 0;
	int depth[64] = { 0 };
	const char *p = text;
	while ((p = strstr(p, "packet {"))) {
		const char *end = strstr(p + 1, "packet {");
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char *pk = strndup(p, len);
		const char *q;
		unsigned seq = 0;
		uint64_t delta = 0;
		if ((q = strstr(pk, "trusted_packet_sequence_id: ")))
			seq = (unsigned)strtoul(q + 28, NULL, 10);
		assert_true(seq < 64);
		if ((q = strstr(pk, "\n  timestamp: ")))
			delta = strtoull(q + 14, NULL, 10);
		if (strstr(pk, "clock_snapshot")) {
			assert_non_null(strstr(pk, "is_incremental: true"));
			ts[seq] = 0;
		}
		ts[seq] += delta;
		if (strstr(pk, "TYPE_SLICE_BEGIN")) {
			depth[seq]++;
			if (ts[seq] < first_begin)
				first_begin = ts[seq];
		}
		if (strstr(pk, "TYPE_SLICE_END")) {
			depth[seq]--;
			assert_true(depth[seq] >= 0);
			if (ts[seq] > last_end)
				last_end = ts[seq];
		}
		free(pk);
		p += len;
	}
	for (int i = 0; i < 64; i++)
		assert_int_equal(depth[i], 0);
	assert_int_equal(first_begin, expect_first_begin);
	assert_int_equal(last_end, expect_last_end);
}

/* Ticks to nanoseconds, rounded down as the 128-bit product and quotient give them, on a
 * clock the 64-bit split serves (an odd TSC rate) and one past it (20 GHz), at times
 * where the remainder's part decides the last digit. */
static void test_timeline_clock_exact(void **state)
{
	(void)state;
	const uint64_t clocks[] = { 2995213117u, 20000000007ull };
	for (size_t c = 0; c < 2; c++) {
		uint64_t tps = clocks[c];
		uint64_t a = 0x7ffffffffff01234ull, b = a + tps - 1;
		struct tk_event ev[2] = {
			{ .kind = TK_EV_FUNC_ENTER, .addr = 2, .time = a },
			{ .kind = TK_EV_FUNC_EXIT, .addr = 2, .time = b },
		};
		struct tk_timeline_opts o = { .sz = sizeof o, .kind = TK_TIMELINE_PERFETTO,
					      .clock = { tps } };
		uint64_t slices, dropped;
		char *text = perfetto_text(&o, ev, 2, &slices, &dropped);
		check_perfetto(text, (uint64_t)((unsigned __int128)a * 1000000000u / tps),
			       (uint64_t)((unsigned __int128)b * 1000000000u / tps));
		free(text);
	}
}

/* The text table stays a table when a value is wider than its column: every row splits
 * into the header's 10 numbers and the name (raw ticks of a long trace have 12+ digits). */
static void test_text_wide_values(void **state)
{
	(void)state;
	struct tk_event ev[2] = {
		{ .kind = TK_EV_FUNC_ENTER, .addr = 2, .time = 1 },
		{ .kind = TK_EV_FUNC_EXIT, .addr = 2, .time = 1 + 170971677517ull },
	};
	struct tk_prof *p = tk_prof_new(NULL, NULL);
	struct tk_sym *sym = names();
	struct tk_out_opts oo = { .sz = sizeof oo, .sym = sym };
	struct tk_buf b;

	assert_non_null(p);
	assert_int_equal(tk_prof_events(p, ev, 2), 0);
	assert_int_equal(tk_prof_finish(p), 0);
	assert_int_equal(tk_buf_init(&b, -1, 4096), 0);
	assert_int_equal(tk_out_profile(&b, p, TK_OUT_TEXT, &oo), 0);
	tk_buf_putc(&b, 0);
	const char *row = strstr(b.data, "alpha");
	assert_non_null(row);
	while (row > b.data && row[-1] != '\n')
		row--;
	int fields = 0;
	for (const char *c = row; *c && *c != '\n'; c++)
		if (*c != ' ' && (c == row || c[-1] == ' '))
			fields++;
	assert_int_equal(fields, 12);   /* and the % column */
	assert_non_null(strstr(row, " 170971677517 170971677517"));
	tk_buf_free(&b);
	tk_sym_free(sym);
	tk_prof_free(p);
}

static void test_perfetto(void **state)
{
	(void)state;
	struct tk_event ev[64];
	size_t n = stream(ev);
	struct tk_sym *s = names();
	struct tk_timeline_opts o = { .sz = sizeof o, .kind = TK_TIMELINE_PERFETTO, .sym = s };
	uint64_t slices, dropped;
	char *text = perfetto_text(&o, ev, n, &slices, &dropped);
	assert_int_equal(slices, 10);
	assert_int_equal(dropped, 0);
	assert_int_equal(count(text, "TYPE_SLICE_BEGIN"), 10);
	assert_int_equal(count(text, "TYPE_SLICE_END"), 10);
	/* each name interned once per sequence: main, alpha, beta on track 0, gamma on 1 */
	assert_int_equal(count(text, "event_names {"), 4);
	assert_non_null(strstr(text, "name: \"alpha\""));
	assert_non_null(strstr(text, "thread_name: \"thread 1\""));
	assert_non_null(strstr(text, "process_name: \"trace\""));
	check_perfetto(text, 1000, ev[n - 1].time);
	free(text);

	/* window [1040, 1100): slices clipped to it; the cap limits what begins */
	o.time_begin = 1040;
	o.time_end = 1100;
	text = perfetto_text(&o, ev, n, &slices, &dropped);
	check_perfetto(text, 1040, 1100);
	free(text);
	o.time_begin = o.time_end = 0;
	o.max_events = 3;
	text = perfetto_text(&o, ev, n, &slices, &dropped);
	assert_int_equal(slices, 3);
	assert_int_equal(dropped, 7);
	assert_int_equal(count(text, "TYPE_SLICE_BEGIN"), 3);
	assert_int_equal(count(text, "TYPE_SLICE_END"), 3);
	free(text);
	tk_sym_free(s);
}

/* Names long enough that a packet's length takes two bytes (and one cut at 512 bytes),
 * written on the calling thread and on the formatter's: protoc reads every packet. */
static void test_perfetto_long_names(void **state)
{
	(void)state;
	char mid[151], huge[701];
	memset(mid, 'm', sizeof mid - 1);
	mid[sizeof mid - 1] = 0;
	memset(huge, 'h', sizeof huge - 1);
	huge[sizeof huge - 1] = 0;
	struct tk_sym *s = names();
	tk_sym_set_func(s, 5, mid, 0);
	tk_sym_set_func(s, 6, huge, 0);
	struct tk_event ev[8];
	size_t n = 0;
	uint64_t t = 1000;
	E(TK_EV_FUNC_ENTER, 5, 0);
	t += 10;
	E(TK_EV_FUNC_ENTER, 6, 0);
	t += 10;
	E(TK_EV_FUNC_EXIT, 6, 0);
	E(TK_EV_FUNC_ENTER, 2, 0);
	t += 300;
	E(TK_EV_FUNC_EXIT, 2, 0);
	E(TK_EV_FUNC_EXIT, 5, 0);
	for (unsigned nt = 1; nt <= 2; nt++) {
		struct tk_timeline_opts o = { .sz = sizeof o, .kind = TK_TIMELINE_PERFETTO, .sym = s,
					      .nthreads = nt };
		uint64_t slices, dropped;
		char *text = perfetto_text(&o, ev, n, &slices, &dropped);
		char want[600];
		assert_int_equal(slices, 3);
		assert_int_equal(count(text, "TYPE_SLICE_BEGIN"), 3);
		assert_int_equal(count(text, "TYPE_SLICE_END"), 3);
		snprintf(want, sizeof want, "name: \"%s\"", mid);
		assert_non_null(strstr(text, want));
		snprintf(want, sizeof want, "name: \"%.512s\"\n", huge);
		assert_non_null(strstr(text, want));
		assert_non_null(strstr(text, "name: \"alpha\""));
		check_perfetto(text, 1000, t);
		free(text);
	}
	tk_sym_free(s);
}
#undef E

/* A deep stack (a random walk's): a return or a resume to a frame far down ends the calls
 * above it, one to an address no frame holds ends only the top call (a return) or none (a
 * resume); calls pushed since the last search are found too (the set of return addresses
 * is brought up to the stack first: each slice's end time says which event ended it). */
static void test_timeline_deep_returns(void **state)
{
	(void)state;
	enum { DEPTH = 3000 };
	struct tk_event *ev = calloc(2 * DEPTH + 16, sizeof *ev);
	assert_non_null(ev);
	size_t n = 0;
	uint64_t t = 1000, at[6];
#define CALL(k) ev[n++] = (struct tk_event){ .kind = TK_EV_CALL, .addr = 0x1000 + 16 * (k), .addr2 = 0x9000 + 16 * (k), .arg = 0x1005 + 16 * (k), .time = t++ }
#define RET(to) ev[n++] = (struct tk_event){ .kind = TK_EV_RETURN, .addr = 0x8000, .addr2 = (to), .time = t++ }
	for (int k = 0; k < DEPTH; k++)
		CALL(k);
	at[0] = t;
	RET(0x1005 + 16 * 1999);              /* frames 1999 and up: 1001 slices end */
	at[1] = t;
	RET(0x7777);                          /* unknown: the top call (1998) ends */
	for (int k = 0; k < 5; k++)
		CALL(5000 + k);                   /* 1998 .. 2002 again */
	at[2] = t;
	RET(0x1005 + 16 * (5000 + 2));        /* ends 2002, 2001, 2000 */
	for (int k = 0; k < 3; k++)
		CALL(6000 + k);                   /* 2000 .. 2002 again, not searched yet */
	ev[n++] = (struct tk_event){ .kind = TK_EV_DISABLE, .addr = 0x8000, .time = t++ };
	at[3] = t;                            /* back in 6000's caller: ends 2002 .. 2000 */
	ev[n++] = (struct tk_event){ .kind = TK_EV_ENABLE, .addr = 0x1005 + 16 * 6000, .time = t++ };
	ev[n++] = (struct tk_event){ .kind = TK_EV_DISABLE, .addr = 0x8000, .time = t++ };
	at[4] = t;
	ev[n++] = (struct tk_event){ .kind = TK_EV_ENABLE, .addr = 0x1005 + 16 * 500, .time = t++ };
	ev[n++] = (struct tk_event){ .kind = TK_EV_DISABLE, .addr = 0x8000, .time = t++ };
	at[5] = t;                            /* no frame: nothing ends; the rest at the finish */
	ev[n++] = (struct tk_event){ .kind = TK_EV_ENABLE, .addr = 0x6666, .time = t++ };
#undef CALL
#undef RET
	static const size_t want[6] = { 1001, 1, 3, 3, 1500, 500 };   /* 1500: frames 500 .. 1999 */
	for (unsigned nt = 1; nt <= 2; nt++) {
		struct tk_timeline_opts o = { .sz = sizeof o, .kind = TK_TIMELINE_CHROME, .nthreads = nt,
					      .clock = { 1000000000 } };
		uint64_t slices, dropped;
		char *text = perfetto_text(&o, ev, n, &slices, &dropped);
		size_t ends[6] = { 0 }, other = 0;
		assert_int_equal(slices, DEPTH + 8);
		for (const char *l = text; (l = strstr(l, "E 0 ")); l++) {
			uint64_t ns = (uint64_t)(strtod(l + 4, NULL) * 1000 + 0.5);
			size_t k = 0;
			while (k < 6 && at[k] != ns)
				k++;
			if (k < 6)
				ends[k]++;
			else
				other++;
		}
		for (size_t k = 0; k < 6; k++)
			if (ends[k] != want[k])
				fail_msg("-j %u: %zu slices end at %llu ns, not %zu", nt, ends[k],
					 (unsigned long long)at[k], want[k]);
		assert_int_equal(other, 0);
		free(text);
	}
	free(ev);
}

static void test_chrome(void **state)
{
	(void)state;
	struct tk_event ev[64];
	size_t n = stream(ev);
	struct tk_sym *s = names();
	struct tk_timeline_opts o = { .sz = sizeof o, .kind = TK_TIMELINE_CHROME, .sym = s,
				      .clock = { 1000000000 } };
	uint64_t slices, dropped;
	char *text = perfetto_text(&o, ev, n, &slices, &dropped);
	assert_int_equal(count(text, "B 0 "), 7);
	assert_int_equal(count(text, "E 0 "), 7);
	assert_int_equal(count(text, "B 1 "), 3);
	assert_non_null(strstr(text, "B 0 1 main\n"));      /* 1000 ns = 1 us */
	assert_non_null(strstr(text, "E 0 1.16 main\n"));   /* main ends at 1160 ns, named */
	free(text);
	tk_sym_free(s);
}

/* ---- pipelines: instruction slices with nested stages --------------------------------------- */
static const char *pl_stage_name(void *ctx, unsigned stage, const char **lane)
{
	static const char *const st[] = { "F", "X", "stl" };
	(void)ctx;
	*lane = stage == 2 ? "stall" : "main";
	return stage < 3 ? st[stage] : NULL;
}

static size_t pl_stream(struct tk_event *ev)
{
	size_t n = 0;
#define PE(k, t, id, a, fl) ev[n++] = (struct tk_event){ .kind = k, .time = t, .addr = id, .arg = a, .flags = fl, .track = 0 }
	PE(TK_EV_INSN_BEGIN, 0, 7, 0, 0);
	PE(TK_EV_STAGE_BEGIN, 0, 7, 0, 0);
	PE(TK_EV_INSN_BEGIN, 1, 8, 0, 0);          /* overlaps 7: takes row 1 */
	PE(TK_EV_STAGE_BEGIN, 1, 8, 0, 0);
	PE(TK_EV_STAGE_BEGIN, 1, 8, 2, 1);          /* stall lane */
	PE(TK_EV_STAGE_END, 2, 7, 0, 0);
	PE(TK_EV_STAGE_BEGIN, 2, 7, 1, 0);
	PE(TK_EV_STAGE_END, 4, 7, 1, 0);
	ev[n++] = (struct tk_event){ .kind = TK_EV_TYPED, .flags = TK_TYPED_INSN_LABEL, .time = 4,
				     .addr = 7, .data = "add r1", .count = 6 };
	PE(TK_EV_RETIRE, 4, 7, 0, 0);
	PE(TK_EV_INSN_BEGIN, 5, 9, 0, 0);           /* row 0 is free again */
	PE(TK_EV_STAGE_END, 6, 8, 0, 0);
	PE(TK_EV_STAGE_END, 6, 8, 2, 1);
	PE(TK_EV_FLUSH, 6, 8, 0, 0);
	PE(TK_EV_STAGE_BEGIN, 7, 9, 0, 0);         /* 9 is still in flight at the end (8) */
	PE(TK_EV_INSN_BEGIN, 8, 10, 0, 0);
#undef PE
	return n;
}

static char *pl_chrome(struct tk_timeline_opts *o, uint64_t *slices, uint64_t *dropped)
{
	struct tk_event ev[32];
	size_t n = pl_stream(ev);
	struct tk_buf b;
	int err;
	tk_buf_init(&b, -1, 4096);
	o->sz = sizeof *o;
	o->kind = TK_TIMELINE_CHROME;
	o->clock.ticks_per_second = 1000000;     /* 1 tick = 1 us */
	o->stage_name = pl_stage_name;
	struct tk_timeline *t = tk_timeline_new(&b, o, &err);
	assert_non_null(t);
	assert_int_equal(tk_timeline_events(t, ev, 7), 0);
	assert_int_equal(tk_timeline_events(t, ev + 7, n - 7), 0);
	assert_int_equal(tk_timeline_finish(t), 0);
	*slices = tk_timeline_slices(t, dropped);
	tk_timeline_free(t);
	tk_buf_putc(&b, 0);
	char *text = strdup((const char *)b.data);
	tk_buf_free(&b);
	return text;
}

static void test_pipeline_chrome(void **state)
{
	(void)state;
	struct tk_timeline_opts o = { 0 };
	uint64_t slices, dropped;
	char *t = pl_chrome(&o, &slices, &dropped);
	/* 4 instructions + 5 stages */
	assert_int_equal(slices, 9);
	assert_int_equal(dropped, 0);
	/* row 0 lane main is tid 1, row 1 tid 9, row 1's stall lane (lane 1) tid 10 */
	assert_non_null(strstr(t, "\"name\":\"add r1\",\"pid\":0,\"tid\":1,\"ts\":0.000,\"dur\":4.000,"
				  "\"args\":{\"id\":7,"));
	assert_non_null(strstr(t, "\"name\":\"X\",\"pid\":0,\"tid\":1,\"ts\":2.000,\"dur\":2.000}"));
	assert_non_null(strstr(t, "\"name\":\"#8 (flushed)\",\"pid\":0,\"tid\":9,\"ts\":1.000,\"dur\":5.000"));
	assert_non_null(strstr(t, "\"name\":\"stl\",\"pid\":0,\"tid\":10,\"ts\":1.000,\"dur\":5.000}"));
	assert_non_null(strstr(t, "\"args\":{\"name\":\"row 1 lane stall\"}"));
	/* 9 reuses row 0; still in flight: ends at the last time seen, its open F too */
	assert_non_null(strstr(t, "\"name\":\"#9 (in flight)\",\"pid\":0,\"tid\":1,\"ts\":5.000,\"dur\":3.000"));
	assert_non_null(strstr(t, "\"name\":\"F\",\"pid\":0,\"tid\":1,\"ts\":7.000,\"dur\":1.000}"));
	assert_non_null(strstr(t, "\"name\":\"#10 (in flight)\",\"pid\":0,\"tid\":9,\"ts\":8.000,\"dur\":0.000"));
	free(t);

	/* a window [3, 6): 7 clipped to 3..4, X to 3..4; 8 and its stages clipped at 3; 9 from 5 to
	 * 6 (the window's end); 10 begins at 8, outside */
	struct tk_timeline_opts w = { .time_begin = 3, .time_end = 6 };
	t = pl_chrome(&w, &slices, &dropped);
	assert_non_null(strstr(t, "\"name\":\"add r1\",\"pid\":0,\"tid\":1,\"ts\":3.000,\"dur\":1.000"));
	assert_non_null(strstr(t, "\"name\":\"#8 (flushed)\",\"pid\":0,\"tid\":9,\"ts\":3.000,\"dur\":3.000"));
	assert_non_null(strstr(t, "\"name\":\"#9 (in flight)\",\"pid\":0,\"tid\":1,\"ts\":5.000,\"dur\":1.000"));
	assert_null(strstr(t, "#10"));
	assert_null(strstr(t, "\"name\":\"F\",\"pid\":0,\"tid\":1,\"ts\":0.000"));
	free(t);

	/* a cap of 2 slices: the first instruction (and its stages) fits, the rest is counted */
	struct tk_timeline_opts c = { .max_events = 2 };
	t = pl_chrome(&c, &slices, &dropped);
	assert_int_equal(dropped, 3);
	assert_non_null(strstr(t, "add r1"));
	assert_null(strstr(t, "#8"));
	free(t);
}

/* Instructions in flight found by id and given rows: 200 in flight at once (four words of
 * the rows' bits), half of their ids equal modulo 4096 (the slots by id share one), one begun
 * twice (the first kept), retired out of order, then ten more taking the lowest free rows.
 * Each slice must carry its own instruction's label, times and id, and two instructions
 * must share a track exactly when a model of Konata's lowest-free-row rule gives them one
 * row. */
#define PL_N 200
#define PL_MORE 10
static uint64_t pl_id(int i)
{
	return i < PL_N / 2 ? 5 + (uint64_t)i * 4096 : i < PL_N ? 1000 + (uint64_t)i : 900000 + (uint64_t)i;
}

static void test_pipeline_ids_rows(void **state)
{
	(void)state;
	enum { N = PL_N + PL_MORE };
	static struct tk_event ev[8 * N];
	static char label[N][16];
	uint64_t begin[N], end[N];
	int row[N], in_flight[N], used[N] = { 0 };
	size_t n = 0;
	for (int i = 0; i < N; i++) {
		snprintf(label[i], sizeof label[i], "L%llu", (unsigned long long)pl_id(i));
		in_flight[i] = 1;
	}
	for (int i = 0; i < PL_N; i++) {
		begin[i] = (uint64_t)i;
		ev[n++] = (struct tk_event){ .kind = TK_EV_INSN_BEGIN, .time = begin[i], .addr = pl_id(i),
					     .addr2 = (uint64_t)i };
		ev[n++] = (struct tk_event){ .kind = TK_EV_TYPED, .flags = TK_TYPED_INSN_LABEL, .time = begin[i],
					     .addr = pl_id(i), .data = label[i], .count = strlen(label[i]) };
		row[i] = i;   /* none ends before the last begins */
		used[i] = 1;
		if (i == 150)   /* instruction 3 begun again: ignored */
			ev[n++] = (struct tk_event){ .kind = TK_EV_INSN_BEGIN, .time = begin[i], .addr = pl_id(3) };
	}
	/* 150 retire, in the order 7k mod 200 (every id once: 7 and 200 are coprime) */
	uint64_t t = PL_N;
	for (int k = 0; k < 150; k++) {
		int i = (7 * k) % PL_N;
		end[i] = ++t;
		in_flight[i] = 0;
		used[row[i]] = 0;
		ev[n++] = (struct tk_event){ .kind = TK_EV_RETIRE, .time = end[i], .addr = pl_id(i) };
	}
	for (int i = PL_N; i < N; i++) {
		begin[i] = ++t;
		int r = 0;
		while (used[r])
			r++;
		row[i] = r;
		used[r] = 1;
		ev[n++] = (struct tk_event){ .kind = TK_EV_INSN_BEGIN, .time = begin[i], .addr = pl_id(i),
					     .addr2 = (uint64_t)i };
		ev[n++] = (struct tk_event){ .kind = TK_EV_TYPED, .flags = TK_TYPED_INSN_LABEL, .time = begin[i],
					     .addr = pl_id(i), .data = label[i], .count = strlen(label[i]) };
	}
	for (int i = 0; i < N; i++)   /* the rest end at the last time seen */
		if (in_flight[i])
			end[i] = t;

	struct tk_timeline_opts o = { .sz = sizeof o, .kind = TK_TIMELINE_CHROME, .clock = { 1000000 },
				      .stage_name = pl_stage_name };
	struct tk_buf b;
	int err;
	tk_buf_init(&b, -1, 4096);
	struct tk_timeline *tl = tk_timeline_new(&b, &o, &err);
	assert_non_null(tl);
	assert_int_equal(tk_timeline_events(tl, ev, n), 0);
	assert_int_equal(tk_timeline_finish(tl), 0);
	uint64_t dropped;
	assert_int_equal(tk_timeline_slices(tl, &dropped), N);
	tk_timeline_free(tl);
	tk_buf_putc(&b, 0);
	const char *text = (const char *)b.data;
	long tid[N];
	for (int i = 0; i < N; i++) {
		char want[160], args[64];
		snprintf(args, sizeof args, "\"args\":{\"id\":%llu,\"sim_id\":%d}", (unsigned long long)pl_id(i), i);
		const char *a = strstr(text, args);
		if (!a)
			fail_msg("no slice of instruction %llu", (unsigned long long)pl_id(i));
		assert_null(strstr(a + 1, args));   /* one slice each */
		const char *obj = a;
		while (obj > text && strncmp(obj, "{\"ph\"", 5))
			obj--;
		snprintf(want, sizeof want, "{\"ph\":\"X\",\"name\":\"%s%s\",\"pid\":0,\"tid\":", label[i],
			 in_flight[i] ? " (in flight)" : "");
		if (strncmp(obj, want, strlen(want)))
			fail_msg("instruction %llu: %.120s", (unsigned long long)pl_id(i), obj);
		char *after;
		tid[i] = strtol(obj + strlen(want), &after, 10);
		snprintf(want, sizeof want, ",\"ts\":%llu.000,\"dur\":%llu.000,", (unsigned long long)begin[i],
			 (unsigned long long)(end[i] - begin[i]));
		if (strncmp(after, want, strlen(want)))
			fail_msg("instruction %llu: times %.60s, want %s", (unsigned long long)pl_id(i), after, want);
	}
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			if ((row[i] == row[j]) != (tid[i] == tid[j]))
				fail_msg("instructions %d and %d: rows %d, %d but tracks %ld, %ld", i, j, row[i],
					 row[j], tid[i], tid[j]);
	tk_buf_free(&b);
}

/* A timeline of EV[0..n), fed in parts of PART events; with THIN, each part first goes
 * through the sink's thin (as a producer holding a chunk's events does). */
static struct tk_buf timeline_bytes(enum tk_timeline_kind kind, unsigned nthreads, int thin,
				    const struct tk_event *ev, size_t n, size_t part, size_t *kept)
{
	struct tk_timeline_opts o = { .sz = sizeof o, .kind = kind, .nthreads = nthreads,
				      .clock = { 3000000000u } };
	struct tk_event *tmp = malloc(part * sizeof *tmp);
	struct tk_buf b;
	int err;

	assert_non_null(tmp);
	tk_buf_init(&b, -1, 4096);
	struct tk_timeline *t = tk_timeline_new(&b, &o, &err);
	assert_non_null(t);
	struct tk_sink s = tk_timeline_sink(t);
	assert_non_null(s.thin);   /* no window, no filter */
	assert_int_equal(tk_timeline_track_name(t, 7, "seventh"), 0);
	*kept = 0;
	for (size_t i = 0; i < n; i += part) {
		size_t m = n - i < part ? n - i : part;
		if (thin) {
			m = s.thin(s.ctx, ev + i, m, tmp);
			assert_int_equal(s.events(s.ctx, tmp, m), 0);
		} else {
			assert_int_equal(s.events(s.ctx, ev + i, m), 0);
		}
		*kept += m;
	}
	assert_int_equal(tk_timeline_finish(t), 0);
	tk_timeline_free(t);
	free(tmp);
	return b;
}

/* -j N's two changes to the writer give the same bytes as feeding it directly: the
 * formatter thread (nthreads > 1: tens of thousands of slices, several blocks of records
 * with track descriptors and interned names between them), and the thinned events (runs
 * of executed blocks whose last time is what counts: calls without a time of their own take
 * the track's last one, a track's first call has no time yet, tracks start late). */
static void test_timeline_threads_thin(void **state)
{
	(void)state;
	size_t cap = 400000, n = 0;
	struct tk_event *ev = calloc(cap, sizeof *ev);
	uint64_t now = 1000, rnd = 12345, keys[4][64];
	uint32_t depth[4] = { 0 };

	assert_non_null(ev);
	while (n + 8 < cap) {
		rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
		unsigned r = (unsigned)(rnd >> 33);
		uint32_t track = n < 50000 ? r % 2 : (r % 3 == 2 ? 7 : r % 2);
		/* a run of blocks, timed or not */
		for (unsigned k = r % 5; k > 0; k--)
			ev[n++] = (struct tk_event){ .kind = TK_EV_BLOCK, .track = track, .addr = 0x1000 + k,
						     .time = (r >> 8) % 3 ? (now += 7) : TK_TIME_NONE };
		/* a call or return without a time takes the track's last one (none yet at first) */
		uint64_t t = (r >> 12) % 4 ? (now += 3) : TK_TIME_NONE;
		uint32_t *d = &depth[track % 4];
		if (((r >> 16) % 2 || !*d) && *d < 64) {
			keys[track % 4][*d] = 1 + (r >> 20) % 300;
			ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .track = track, .time = t,
						     .addr = keys[track % 4][(*d)++] };
		} else if ((r >> 20) % 50) {
			ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .track = track, .time = t,
						     .addr = keys[track % 4][--*d] };
		} else {   /* a gap ends them all */
			ev[n++] = (struct tk_event){ .kind = TK_EV_GAP, .track = track, .time = t };
			*d = 0;
		}
	}
	for (int kind = TK_TIMELINE_PERFETTO; kind <= TK_TIMELINE_CHROME; kind++) {
		size_t kept, all;
		struct tk_buf want = timeline_bytes(kind, 0, 0, ev, n, 1000, &all);
		struct tk_buf got = timeline_bytes(kind, 2, 0, ev, n, 1000, &kept);
		assert_true(want.len > 100000);
		assert_int_equal(got.len, want.len);
		assert_memory_equal(got.data, want.data, want.len);
		tk_buf_free(&got);
		size_t parts[] = { 1, 7, 1024, 50000 };
		for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
			got = timeline_bytes(kind, i % 2 ? 3 : 1, 1, ev, n, parts[i], &kept);
			if (parts[i] > 1)
				assert_true(kept < all * 3 / 4);   /* blocks went */
			assert_int_equal(got.len, want.len);
			assert_memory_equal(got.data, want.data, want.len);
			tk_buf_free(&got);
		}
		tk_buf_free(&want);
	}
	/* with a window the blocks' times open and close slices: nothing is thinned */
	struct tk_buf b;
	tk_buf_init(&b, -1, 4096);
	struct tk_timeline_opts o = { .sz = sizeof o, .kind = TK_TIMELINE_PERFETTO, .time_end = 5000 };
	struct tk_timeline *t = tk_timeline_new(&b, &o, NULL);
	assert_non_null(t);
	assert_null(tk_timeline_sink(t).thin);
	tk_timeline_free(t);
	tk_buf_free(&b);
	free(ev);
}

/* The timeline at -j N with chunks passed ahead (tk_sink.prepare on the producer's threads,
 * take in order): the same bytes as the serial pass over the whole stream, whatever the
 * cuts. The stream mixes what a chunk's pass decides alone (calls and returns of its own
 * frames) with what it must leave to its turn or take for granted: exits and returns to
 * frames below the chunk's, returns to addresses no frame holds or held deeper, tracing
 * stopped and resumed (at entries, at return addresses, after a jump elsewhere), gaps,
 * events without a time, a track that starts late, times that go back, names shared by
 * several keys, and the slice cap reached inside a chunk. */
struct pstack { uint64_t key, ret; int id; };

static size_t prepared_stream(struct tk_event *ev, size_t cap)
{
	struct pstack st[5][40];
	uint32_t depth[5] = { 0 };
	uint64_t now = 5000, rnd = 99;
	size_t n = 0;

	while (n + 4 < cap) {
		rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
		unsigned r = (unsigned)(rnd >> 33), tk = r % (n < cap / 3 ? 4 : 5);
		uint32_t track = tk == 4 ? 9 : tk, *d = &depth[tk];
		struct pstack *s = st[tk];
		now += (r >> 3) % 16 == 0 ? -(uint64_t)3 : 5;   /* now and then back a little */
		uint64_t t = (r >> 7) % 13 ? now : TK_TIME_NONE;
		uint64_t fn = 0x400000 + ((r >> 9) % 64) * 0x100, any = 0x400000 + (r >> 11) % 0x4000;
		unsigned what = (r >> 16) % 100;
		if ((r >> 23) % 3 == 0)
			ev[n++] = (struct tk_event){ .kind = (r >> 25) % 2 ? TK_EV_BLOCK : TK_EV_TIME,
						     .track = track, .addr = any, .time = now };
		if (what < 30 && *d < 40) {   /* a call: at an entry or inside a function */
			uint64_t ret = 0x400000 + (r >> 20) % 0x4000;
			int id = (r >> 26) % 4 == 0;
			s[*d] = (struct pstack){ id ? 1 + (r >> 12) % 40 : ((r >> 27) % 4 ? fn : any), ret, id };
			ev[n++] = id ? (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .track = track, .time = t,
							  .addr = s[*d].key }
				     : (struct tk_event){ .kind = TK_EV_CALL, .track = track, .time = t,
							  .addr = any, .addr2 = s[*d].key, .arg = ret };
			(*d)++;
		} else if (what < 62 && *d) {   /* the top returns or exits */
			struct pstack *f = &s[--*d];
			ev[n++] = f->id ? (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .track = track, .time = t,
							     .addr = f->key }
					: (struct tk_event){ .kind = TK_EV_RETURN, .track = track, .time = t,
							     .addr = any, .addr2 = f->ret };
		} else if (what < 70) {   /* a return to a deeper frame's address, or to none */
			uint64_t to = *d > 2 && what % 2 ? s[*d - 3].ret : (what % 3 ? any : 0);
			ev[n++] = (struct tk_event){ .kind = TK_EV_RETURN, .track = track, .time = t,
						     .addr = any, .addr2 = to };
			*d = *d > 2 && what % 2 ? *d - 3 : (*d ? *d - 1 : 0);
		} else if (what < 76) {   /* an exit of a key deeper down, or of none */
			uint64_t key = *d > 1 && what % 2 ? s[*d - 2].key : 1 + (r >> 12) % 40;
			ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .track = track, .time = t,
						     .addr = key };
			*d = *d > 1 && what % 2 ? *d - 2 : 0;
		} else if (what < 84) {   /* tracing stops here and resumes somewhere */
			uint64_t at = what % 4 == 0 ? fn : what % 4 == 1 && *d ? s[*d - 1].ret :
				      what % 4 == 2 ? any + 2 : any;
			ev[n++] = (struct tk_event){ .kind = TK_EV_DISABLE, .track = track, .time = t,
						     .addr = what % 8 < 4 ? any : 0 };
			if (what == 80)   /* resumed later, below */
				continue;
			ev[n++] = (struct tk_event){ .kind = TK_EV_ENABLE, .track = track, .time = now,
						     .addr = what == 83 ? 0 : at };
			if (*d && at == s[*d - 1].ret)
				(*d)--;
		} else if (what < 88) {   /* resumed (after a stop seen before, or not) */
			ev[n++] = (struct tk_event){ .kind = TK_EV_ENABLE, .track = track, .time = t,
						     .addr = what % 2 && *d > 1 ? s[*d - 2].ret : any };
		} else if (what == 88) {
			ev[n++] = (struct tk_event){ .kind = TK_EV_GAP, .track = track, .time = t };
			*d = 0;
		}
	}
	return n;
}

/* A kallsyms listing of 64 functions 256 bytes apart from 0x400000 (names and entries),
 * and function ids 1..40 named g0..g19 twice over (two ids, one name). */
static struct tk_sym *prepared_sym(void)
{
	char path[] = "/tmp/tk-kallsymsXXXXXX";
	int fd = mkstemp(path), err;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	assert_non_null(f);
	for (unsigned i = 0; i < 64; i++)
		fprintf(f, "%016x T f%u\n", 0x400000 + i * 0x100, i);
	fclose(f);
	struct tk_sym *s = tk_sym_new(NULL, &err);
	assert_non_null(s);
	assert_true(tk_sym_add_kallsyms(s, path, "test") >= 0);
	unlink(path);
	for (unsigned id = 1; id <= 40; id++) {
		char name[16];
		snprintf(name, sizeof name, "g%u", id % 20);
		assert_int_equal(tk_sym_set_func(s, id, name, 0), 0);
	}
	return s;
}

/* EV[0..n) through a timeline: serially (cuts NULL), or thinned and prepared chunk by
 * chunk at the cuts, in runs, every chunk prepared before the first one's turn; the runs
 * formatted on the writer's threads, or (HERE) at their turn without threads. */
static struct tk_buf prepared_bytes(enum tk_timeline_kind kind, struct tk_sym *sym, uint64_t max,
				    const struct tk_event *ev, size_t n, const size_t *cuts, size_t ncuts,
				    int here, size_t *nprepared)
{
	struct tk_timeline_opts o = { .sz = sizeof o, .kind = kind, .sym = sym, .max_events = max,
				      .nthreads = cuts && !here ? 2 : 0, .prepare = cuts && here,
				      .clock = { 1000000000u } };
	struct tk_buf b;
	int err;

	tk_buf_init(&b, -1, 4096);
	struct tk_timeline *t = tk_timeline_new(&b, &o, &err);
	assert_non_null(t);
	struct tk_sink s = tk_timeline_sink(t);
	if (!cuts) {
		assert_int_equal(s.events(s.ctx, ev, n), 0);
	} else {
		assert_non_null(s.prepare);
		struct tk_event *held = malloc(n * sizeof *held);
		size_t *at = malloc((ncuts + 2) * sizeof *at), *len = malloc((ncuts + 1) * sizeof *len);
		void **prep = calloc(ncuts + 1, sizeof *prep);
		assert_true(held && at && len && prep);
		size_t pos = 0, from = 0;
		*nprepared = 0;
		for (size_t c = 0; c <= ncuts; c++) {
			size_t to = c < ncuts ? cuts[c] : n;
			at[c] = pos;
			len[c] = s.thin(s.ctx, ev + from, to - from, held + pos);
			/* prepared as the producer holds them: in runs (of 1 to 600) */
			for (size_t k = 0, m; k < len[c] && (k == 0 || prep[c]); k += m) {
				m = c % 3 ? 1 + (k * 7 + c) % 600 : 1;
				m = m < len[c] - k ? m : len[c] - k;
				prep[c] = s.prepare(s.ctx, prep[c], held + pos + k, m);
			}
			*nprepared += prep[c] != NULL;
			pos += len[c];
			from = to;
		}
		for (size_t c = 0; c <= ncuts; c++) {
			if (prep[c])
				assert_int_equal(s.take(s.ctx, held + at[c], len[c], 0, prep[c]), 0);
			else if (len[c])
				assert_int_equal(s.events(s.ctx, held + at[c], len[c]), 0);
		}
		free(held);
		free(at);
		free(len);
		free(prep);
	}
	assert_int_equal(tk_timeline_finish(t), 0);
	tk_timeline_free(t);
	return b;
}

static void test_timeline_prepared(void **state)
{
	(void)state;
	size_t cap = 300000;
	struct tk_event *ev = calloc(cap, sizeof *ev);
	assert_non_null(ev);
	size_t n = prepared_stream(ev, cap), ncuts = 0, cuts[400];
	struct tk_sym *sym = prepared_sym();
	uint64_t rnd = 7;

	for (size_t at = 0; ncuts < 400;) {   /* chunks of 1 to ~3000 events, some of 20000 */
		rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
		at += ncuts % 13 == 5 ? 20000 : 1 + (rnd >> 33) % (ncuts % 7 ? 3000 : 40);
		if (at >= n)
			break;
		cuts[ncuts++] = at;
	}
	assert_true(ncuts > 100);
	for (int kind = TK_TIMELINE_PERFETTO; kind <= TK_TIMELINE_CHROME; kind++) {
		uint64_t caps[] = { 0, 20000 };   /* the second reached inside a chunk */
		for (size_t c = 0; c < 4; c++) {
			size_t prepared;
			struct tk_buf want = prepared_bytes(kind, sym, caps[c / 2], ev, n, NULL, 0, 0, NULL);
			struct tk_buf got = prepared_bytes(kind, sym, caps[c / 2], ev, n, cuts, ncuts, c % 2,
							   &prepared);
			assert_true(want.len > 100000);
			assert_true(prepared > ncuts / 2);   /* most chunks passed ahead */
			assert_int_equal(got.len, want.len);
			assert_memory_equal(got.data, want.data, want.len);
			tk_buf_free(&want);
			tk_buf_free(&got);
		}
	}
	tk_sym_free(sym);
	free(ev);
}

/* A chunk prepared one event at a time whose last event ends every frame it opened: its
 * records are held in one array grown as events come (an overflow shows under ASan). */
static void test_timeline_prepared_deep(void **state)
{
	(void)state;
	size_t n = 4095;
	struct tk_event *ev = calloc(n, sizeof *ev);
	assert_non_null(ev);
	for (size_t i = 0; i + 1 < n; i++)
		ev[i] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .time = 10 + i, .addr = 1 + i };
	ev[n - 1] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .time = 10 + n, .addr = 1 };
	for (int kind = TK_TIMELINE_PERFETTO; kind <= TK_TIMELINE_CHROME; kind++) {
		struct tk_buf want, got;
		tk_buf_init(&want, -1, 4096);
		tk_buf_init(&got, -1, 4096);
		struct tk_timeline_opts o = { .sz = sizeof o, .kind = kind };
		struct tk_timeline *t = tk_timeline_new(&want, &o, NULL);
		assert_non_null(t);
		assert_int_equal(tk_timeline_events(t, ev, n), 0);
		assert_int_equal(tk_timeline_events(t, ev, n), 0);
		assert_int_equal(tk_timeline_finish(t), 0);
		tk_timeline_free(t);
		for (int here = 0; here < 2; here++) {   /* the writer's threads, or none */
			got.len = 0;
			o.nthreads = here ? 0 : 2;
			o.prepare = here;
			t = tk_timeline_new(&got, &o, NULL);
			assert_non_null(t);
			struct tk_sink s = tk_timeline_sink(t);
			void *p = NULL;
			for (size_t i = 0; i < n; i++)
				assert_non_null(p = s.prepare(s.ctx, p, ev + i, 1));
			/* the first chunk: its track is not described yet, so its turn is
			 * serial; a second, on a described track, is taken as prepared */
			assert_int_equal(s.take(s.ctx, ev, n, 0, p), 0);
			p = NULL;
			for (size_t i = 0; i < n; i++)
				assert_non_null(p = s.prepare(s.ctx, p, ev + i, 1));
			assert_int_equal(s.take(s.ctx, ev, n, 0, p), 0);
			assert_int_equal(tk_timeline_finish(t), 0);
			tk_timeline_free(t);
			assert_int_equal(got.len, want.len);
			assert_memory_equal(got.data, want.data, want.len);
		}
		tk_buf_free(&want);
		tk_buf_free(&got);
	}
	free(ev);
}

/* Past the cap a prepared chunk makes no slices of its own, but the ends of slices begun
 * before the cap, below its frames, still come (in order, after its events). */
static void test_timeline_prepared_capped(void **state)
{
	(void)state;
	struct tk_event ev[64];
	size_t n = 0;

	ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .time = 1, .addr = 1 };
	ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .time = 2, .addr = 2 };
	size_t second = n;   /* a chunk of its own: the first describes the track */
	for (int i = 0; i < 20; i++) {
		ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .time = 3 + 2 * (uint64_t)i, .addr = 3 };
		ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .time = 4 + 2 * (uint64_t)i, .addr = 3 };
	}
	ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .time = 50, .addr = 2 };
	ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_ENTER, .time = 51, .addr = 4 };
	ev[n++] = (struct tk_event){ .kind = TK_EV_FUNC_EXIT, .time = 52, .addr = 1 };
	for (int kind = TK_TIMELINE_PERFETTO; kind <= TK_TIMELINE_CHROME; kind++) {
		struct tk_buf want, got;
		uint64_t dropped;
		tk_buf_init(&want, -1, 4096);
		tk_buf_init(&got, -1, 4096);
		struct tk_timeline_opts o = { .sz = sizeof o, .kind = kind, .max_events = 3 };
		struct tk_timeline *t = tk_timeline_new(&want, &o, NULL);
		assert_non_null(t);
		assert_int_equal(tk_timeline_events(t, ev, n), 0);
		assert_int_equal(tk_timeline_finish(t), 0);
		assert_int_equal(tk_timeline_slices(t, &dropped), 3);
		assert_int_equal(dropped, 20);
		tk_timeline_free(t);
		o.nthreads = 2;
		t = tk_timeline_new(&got, &o, NULL);
		assert_non_null(t);
		struct tk_sink s = tk_timeline_sink(t);
		size_t cuts[] = { 0, second, second + 3, n };
		for (size_t c = 0; c + 1 < 4; c++) {
			void *p = s.prepare(s.ctx, NULL, ev + cuts[c], cuts[c + 1] - cuts[c]);
			assert_non_null(p);
			assert_int_equal(s.take(s.ctx, ev + cuts[c], cuts[c + 1] - cuts[c], 0, p), 0);
		}
		assert_int_equal(tk_timeline_finish(t), 0);
		assert_int_equal(tk_timeline_slices(t, &dropped), 3);
		assert_int_equal(dropped, 20);
		tk_timeline_free(t);
		assert_int_equal(got.len, want.len);
		assert_memory_equal(got.data, want.data, want.len);
		tk_buf_free(&want);
		tk_buf_free(&got);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pprof_roundtrip),
		cmocka_unit_test(test_text_wide_values),
		cmocka_unit_test(test_perfetto),
		cmocka_unit_test(test_perfetto_long_names),
		cmocka_unit_test(test_timeline_deep_returns),
		cmocka_unit_test(test_timeline_clock_exact),
		cmocka_unit_test(test_chrome),
		cmocka_unit_test(test_pipeline_chrome),
		cmocka_unit_test(test_pipeline_ids_rows),
		cmocka_unit_test(test_timeline_threads_thin),
		cmocka_unit_test(test_timeline_prepared),
		cmocka_unit_test(test_timeline_prepared_deep),
		cmocka_unit_test(test_timeline_prepared_capped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
