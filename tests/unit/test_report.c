/* The HTML report's bounds (lib/output/report.c): whatever the trace's size, the page
 * holds summaries of fixed size. Pages from synthetic profiles and pipelines far larger
 * than any bound are written to memory, their data block read back by node's JSON parser,
 * and its parts measured. */
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

#define NFUNCS 60000
#define CHAIN 1000

/* The page's JSON data block run through node: SCRIPT gets it as D and prints one line. */
static char *page_eval(const struct tk_buf *page, const char *script)
{
	char path[] = "/tmp/tk-report-XXXXXX", cmd[8192];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, page->data, page->len), (ssize_t)page->len);
	close(fd);
	snprintf(cmd, sizeof cmd,
		 "node -e 'const t = require(\"fs\").readFileSync(\"%s\", \"utf8\");"
		 "const m = /<script type=\"application\\/json\" id=\"tk-data\">([^<]*)<\\/script>/.exec(t);"
		 "const D = JSON.parse(m[1]); %s'", path, script);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	static char out[4096];
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = 0;
	pclose(p);
	unlink(path);
	return out;
}

static void feed(struct tk_prof *p, struct tk_report *r, struct tk_event *ev, size_t n, int pass)
{
	if (pass == 0)
		assert_int_equal(tk_prof_events(p, ev, n), 0);
	else
		assert_int_equal(tk_report_events(r, ev, n), 0);
}

/* NFUNCS functions called once each on 100 tracks, and a chain of CHAIN nested calls that
 * holds most of the time: rows, flame nodes, depth and lanes all beyond their bounds. */
static void stream(struct tk_prof *p, struct tk_report *r, int pass)
{
	struct tk_event ev[512];
	size_t n = 0;
	uint64_t t = 1000;
#define E(k, f, tr) do { \
		ev[n++] = (struct tk_event){ .kind = k, .addr = f, .time = t++, .track = tr }; \
		if (n == 512) { feed(p, r, ev, n, pass); n = 0; } \
	} while (0)
	for (uint32_t i = 1; i <= NFUNCS; i++) {
		E(TK_EV_FUNC_ENTER, i, i % 100);
		E(TK_EV_FUNC_EXIT, i, i % 100);
	}
	for (uint32_t k = 0; k < CHAIN; k++)
		E(TK_EV_FUNC_ENTER, 100000 + k, 0);
	t += 100000000;
	for (uint32_t k = CHAIN; k-- > 0;)
		E(TK_EV_FUNC_EXIT, 100000 + k, 0);
	feed(p, r, ev, n, pass);
#undef E
}

static void test_profile_bounded(void **state)
{
	(void)state;
	struct tk_prof_opts po = { .sz = sizeof po };
	struct tk_report_opts ro = { .sz = sizeof ro, .title = "big", .format = "synthetic" };
	struct tk_buf page;
	int err;
	struct tk_prof *p = tk_prof_new(&po, &err);
	struct tk_report *r = tk_report_new(&ro, &err);
	assert_non_null(p);
	assert_non_null(r);
	stream(p, r, 0);
	assert_int_equal(tk_prof_finish(p), 0);
	assert_int_equal(tk_report_profile(r, p), 0);
	stream(p, r, 1);
	assert_int_equal(tk_buf_init(&page, -1, 1 << 20), 0);
	assert_int_equal(tk_report_write(r, &page), 0);
	assert_true(page.len < TK_REPORT_MAX_BYTES);
	/* rows: TK_REPORT_TOP shown and the rest summed; every function's call counted once */
	char *got = page_eval(&page,
		"const rows = D.functions.trim().split(\"\\n\").length - 1;"
		"let depth = 0; const walk = (n, d) => { depth = Math.max(depth, d); (n[6] || []).forEach((k) => walk(k, d + 1)); };"
		"walk(D.flame, 0);"
		"console.log([rows, D.functions_rest.rows, D.functions_rest.calls, D.flame_nodes <= 5000 + 300,"
		" depth, D.flame[2], D.timeline.lanes.length, D.timeline.lanes.every((l) => l.calls.length <= 600),"
		" D.timeline.lanes.reduce((s, l) => s + l.calls.reduce((a, b) => a + b, 0), 0)].join(\" \"))");
	/* the rows and the total as profile --to csv and --to folded give them; the flame
	 * graph stops at depth 256 (+ the "(other)" below it); 32 lanes and "other tracks" */
	struct tk_out_opts oo = { .sz = sizeof oo };
	struct tk_buf csv, fold;
	uint64_t rows = 0, total = 0;
	assert_int_equal(tk_buf_init(&csv, -1, 1 << 20), 0);
	assert_int_equal(tk_buf_init(&fold, -1, 1 << 20), 0);
	assert_int_equal(tk_out_profile(&csv, p, TK_OUT_CSV, &oo), 0);
	assert_int_equal(tk_out_profile(&fold, p, TK_OUT_FOLDED, &oo), 0);
	uint64_t rest_calls = 0;
	for (size_t i = 0; i < csv.len; i++)
		if (csv.data[i] == '\n' && ++rows > TK_REPORT_TOP && i + 1 < csv.len)
			/* a row after the first TOP: "name",calls,... (no commas in these names) */
			rest_calls += strtoull(strchr(csv.data + i + 1, ',') + 1, NULL, 10);
	for (size_t i = 0, k = 0; i < fold.len; i++)
		if (fold.data[i] == ' ')
			k = i + 1;
		else if (fold.data[i] == '\n')
			total += strtoull(fold.data + k, NULL, 10);
	rows--;   /* the header */
	assert_true(rows > NFUNCS + CHAIN - 1);
	char want[256];
	snprintf(want, sizeof want, "%d %llu %llu true 257 %llu 33 true %d\n", TK_REPORT_TOP,
		 (unsigned long long)(rows - TK_REPORT_TOP),
		 (unsigned long long)rest_calls, (unsigned long long)total,
		 NFUNCS + CHAIN);
	tk_buf_free(&csv);
	tk_buf_free(&fold);
	assert_string_equal(got, want);
	tk_buf_free(&page);
	tk_report_free(r);
	tk_prof_free(p);
}

/* 300,000 instructions of 12 stages: the diagram keeps its window, the rest are counted. */
static void pipeline(struct tk_report *r)
{
	struct tk_event ev[64];
	static const char label[] = "addi a1, a1, 0x1";
	for (uint64_t i = 0; i < 300000; i++) {
		size_t n = 0;
		uint64_t t = i / 2;
		ev[n++] = (struct tk_event){ .kind = TK_EV_INSN_BEGIN, .addr = i, .addr2 = 4 * i, .time = t };
		for (unsigned s = 0; s < 12; s++) {
			ev[n++] = (struct tk_event){ .kind = TK_EV_STAGE_BEGIN, .addr = i, .arg = s, .time = t + s };
			ev[n++] = (struct tk_event){ .kind = TK_EV_STAGE_END, .addr = i, .arg = s,
						     .time = t + s + 1 + (i % 7 == 0) * s };
		}
		ev[n++] = (struct tk_event){ .kind = TK_EV_TYPED, .flags = TK_TYPED_INSN_LABEL, .addr = i,
					     .data = label, .count = sizeof label - 1, .time = t + 40 };
		ev[n++] = (struct tk_event){ .kind = i % 10 == 9 ? TK_EV_FLUSH : TK_EV_RETIRE, .addr = i,
					     .time = t + 40 + (i == 123456) * 1000 };
		assert_int_equal(tk_report_events(r, ev, n), 0);
	}
}

static void test_pipeline_bounded(void **state)
{
	(void)state;
	struct tk_report_opts ro = { .sz = sizeof ro, .title = "pipe" };
	struct tk_buf page;
	int err;
	for (int windowed = 0; windowed < 2; windowed++) {
		if (windowed) {    /* alive in [100000, 100010): begun in [99960, 100010) */
			ro.window_begin = 100000;
			ro.window_end = 100010;
		}
		struct tk_report *r = tk_report_new(&ro, &err);
		assert_non_null(r);
		pipeline(r);
		assert_int_equal(tk_buf_init(&page, -1, 1 << 20), 0);
		assert_int_equal(tk_report_write(r, &page), 0);
		assert_true(page.len < TK_REPORT_MAX_BYTES);
		char *got = page_eval(&page,
			"const P = D.pipeline, w = P.window.insns;"
			"console.log([P.insns, P.retired, P.flushed, P.in_flight, P.ipc.retired.length <= 600,"
			" P.ipc.retired.reduce((a, b) => a + b, 0), P.slowest.length, P.slowest[0][0],"
			" P.stages.length, P.stages[3].count, w.length, w[0][0], w[w.length - 1][0], w[0][7].length].join(\" \"))");
		char want[256];
		if (windowed)
			snprintf(want, sizeof want, "300000 270000 30000 0 true 270000 100 123456 12 300000 "
				 "100 199920 200019 12\n");
		else
			snprintf(want, sizeof want, "300000 270000 30000 0 true 270000 100 123456 12 300000 "
				 "%d 0 %d 12\n", TK_REPORT_WINDOW, TK_REPORT_WINDOW - 1);
		assert_string_equal(got, want);
		tk_buf_free(&page);
		tk_report_free(r);
	}
}

/* Ended instructions' records are used again for later ones (report.c's spare list): a
 * later instruction without a label or with fewer stages shows none of an earlier one's. */
static void test_pipeline_reused(void **state)
{
	(void)state;
	struct tk_report_opts ro = { .sz = sizeof ro, .title = "reuse", .window_begin = 1000,
				     .window_end = 1010 };
	static const char label[] = "old label";
	struct tk_event ev[16];
	struct tk_buf page;
	int err;
	struct tk_report *r = tk_report_new(&ro, &err);
	assert_non_null(r);
	/* 100 labelled instructions of 5 stages, all ended before the window */
	for (uint64_t i = 0; i < 100; i++) {
		size_t n = 0;
		ev[n++] = (struct tk_event){ .kind = TK_EV_INSN_BEGIN, .addr = i, .time = i };
		for (unsigned s = 0; s < 5; s++)
			ev[n++] = (struct tk_event){ .kind = TK_EV_STAGE_BEGIN, .addr = i, .arg = s, .time = i };
		ev[n++] = (struct tk_event){ .kind = TK_EV_TYPED, .flags = TK_TYPED_INSN_LABEL, .addr = i,
					     .data = label, .count = sizeof label - 1, .time = i };
		ev[n++] = (struct tk_event){ .kind = TK_EV_RETIRE, .addr = i, .time = i + 3 };
		assert_int_equal(tk_report_events(r, ev, n), 0);
	}
	/* in the window, no label: one of one stage, one slow of none */
	struct tk_event late[] = {
		{ .kind = TK_EV_INSN_BEGIN, .addr = 100, .time = 1000 },
		{ .kind = TK_EV_STAGE_BEGIN, .addr = 100, .arg = 7, .time = 1000 },
		{ .kind = TK_EV_RETIRE, .addr = 100, .time = 1002 },
		{ .kind = TK_EV_INSN_BEGIN, .addr = 101, .time = 1005 },
		{ .kind = TK_EV_RETIRE, .addr = 101, .time = 1505 },
	};
	assert_int_equal(tk_report_events(r, late, sizeof late / sizeof *late), 0);
	assert_int_equal(tk_buf_init(&page, -1, 1 << 16), 0);
	assert_int_equal(tk_report_write(r, &page), 0);
	char *got = page_eval(&page,
		"const P = D.pipeline, w = P.window.insns, s = P.slowest;"
		"console.log(JSON.stringify([w.map(x => [x[0], x[6], x[7].length]), s[0][0], s[0][5],"
		" s.filter(x => x[5] === \"old label\").length]))");
	assert_string_equal(got, "[[[100,\"\",1],[101,\"\",0]],101,\"\",99]\n");
	tk_buf_free(&page);
	tk_report_free(r);
}

/* A name that closes the data's <script> block is written so that it cannot. */
static void test_script_escape(void **state)
{
	(void)state;
	struct tk_sym *sym = tk_sym_new(NULL, NULL);
	struct tk_prof_opts po = { .sz = sizeof po };
	struct tk_event ev[] = {
		{ .kind = TK_EV_FUNC_ENTER, .addr = 1, .time = 1 },
		{ .kind = TK_EV_FUNC_EXIT, .addr = 1, .time = 5 },
	};
	struct tk_buf page;
	int err;
	assert_non_null(sym);
	tk_sym_set_func(sym, 1, "</script><script>alert(1)</script>", 0);
	struct tk_report_opts ro = { .sz = sizeof ro, .title = "</script>x", .sym = sym };
	struct tk_prof *p = tk_prof_new(&po, &err);
	struct tk_report *r = tk_report_new(&ro, &err);
	assert_int_equal(tk_prof_events(p, ev, 2), 0);
	assert_int_equal(tk_prof_finish(p), 0);
	assert_int_equal(tk_report_profile(r, p), 0);
	assert_int_equal(tk_buf_init(&page, -1, 1 << 16), 0);
	assert_int_equal(tk_report_write(r, &page), 0);
	assert_int_equal(tk_buf_reserve(&page, 1), 0);
	page.data[page.len] = 0;
	const char *data = strstr(page.data, "id=\"tk-data\">");
	assert_non_null(data);
	/* the block ends at the first "</": there must be none inside it */
	const char *end = strstr(data, "</");
	assert_non_null(end);
	assert_memory_equal(end, "</script>\n<script>", 18);
	assert_string_equal(page_eval(&page, "console.log(D.title, D.names.includes(\"</script><script>alert(1)</script>\"))"),
			    "</script>x true\n");
	tk_buf_free(&page);
	tk_report_free(r);
	tk_prof_free(p);
	tk_sym_free(sym);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_profile_bounded),
		cmocka_unit_test(test_pipeline_bounded),
		cmocka_unit_test(test_pipeline_reused),
		cmocka_unit_test(test_script_escape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
