/* Throughput of the analysis layer on synthetic events (bench/analysis-events.sh).
 *   analysis-bench MODE N   MODE: prof-insn | prof-func | prof-insn-nodur | prof-func-nodur |
 *                                 perfetto | chrome
 * Feeds N events (a pre-generated, balanced 1M-event pattern, repeated) in batches of
 * TK_EVENT_BATCH, as a decoder would, and prints events/s on one core. */
#include <fcntl.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracekit/tracekit.h"
#include "tracekit/internal/util.h"

#define PATTERN (1u << 20)

/* CPU time of this thread: the machine may be shared, and the target is per core. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Instruction-level (blocks, calls, returns) or function-level (enter/exit) events on 4
 * tracks, in runs of 256 events per track. Calls follow a fixed call graph (500 functions, each calling one of 3 callees,
 * at most 24 deep), as programs do, so call paths repeat; the call depth returns to 0 at
 * the end of the pattern. */
static struct tk_event *pattern(int func_level)
{
	struct tk_event *ev = malloc(PATTERN * sizeof *ev);
	uint64_t x = 42, t[4] = { 0 };
	int depth[4] = { 0 };
	uint64_t stack[4][64], fns[4][64];
	size_t n = 0;
	while (n < PATTERN) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned r = (unsigned)(x >> 33), op = (r >> 5) % 10;
		/* decoders deliver runs of one thread's events (a buffer, a PSB span) */
		unsigned tr = (unsigned)(n >> 8) & 3;
		size_t left = PATTERN - n;
		struct tk_event *e = &ev[n];
		t[tr] += 1 + (r >> 20) % 16;
		*e = (struct tk_event){ .time = t[tr], .track = tr };
		if ((size_t)(depth[0] + depth[1] + depth[2] + depth[3]) >= left) {
			op = 9; /* unwind so the pattern is balanced */
			while (!depth[tr])
				tr = (tr + 1) & 3;
			e->track = tr;
			e->time = t[tr];
		}
		if (!func_level && op < 5) {
			e->kind = TK_EV_BLOCK;
			/* a block at a given address always has the same length */
			e->addr = 0x400000 + ((r >> 8) % 4096) * 32;
			e->count = 1 + (e->addr >> 5) % 12;
			e->addr2 = e->addr + e->count * 3;
		} else if (op < 7 + func_level && depth[tr] < 24) {
			uint64_t caller = depth[tr] ? fns[tr][depth[tr] - 1] : (r >> 8) % 8;
			uint64_t fn = (caller * 31 + ((r >> 8) % 3) * 7 + 1) % 500;
			fns[tr][depth[tr]] = fn;
			if (func_level) {
				e->kind = TK_EV_FUNC_ENTER;
				e->addr = fn;
			} else {
				e->kind = TK_EV_CALL;
				e->addr2 = 0x500000 + fn * 64;
				e->arg = 0x400000 + ((r >> 12) % 4096) * 32 + 5;
			}
			stack[tr][depth[tr]++] = func_level ? fn : e->arg;
		} else if (depth[tr]) {
			uint64_t v = stack[tr][--depth[tr]];
			if (func_level) {
				e->kind = TK_EV_FUNC_EXIT;
				e->addr = v;
			} else {
				e->kind = TK_EV_RETURN;
				e->addr2 = v;
			}
		} else {
			e->kind = TK_EV_BLOCK;
			e->addr = 0x400000;
			e->addr2 = 0x400010;
			e->count = 5;
		}
		n++;
	}
	/* every call ends within the pattern, so repeating it (with the same times) is a
	 * valid stream; the timer measures the consumer alone */
	return ev;
}

static int count_path(void *ctx, const struct tk_prof_frame *f, size_t depth,
		      const struct tk_prof_path_stats *st)
{
	(void)f, (void)depth, (void)st;
	++*(uint64_t *)ctx;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: analysis-bench prof-insn|prof-func|perfetto|chrome N\n");
		return 2;
	}
	const char *mode = argv[1];
	uint64_t total = strtoull(argv[2], NULL, 0);
	int func_level = !strncmp(mode, "prof-func", 9) || !strcmp(mode, "perfetto") || !strcmp(mode, "chrome");
	struct tk_event *ev = pattern(func_level);
	struct tk_prof *p = NULL;
	struct tk_timeline *tl = NULL;
	struct tk_buf out;
	struct tk_sink sink;
	int fd = open("/dev/null", O_WRONLY);
	tk_buf_init(&out, fd, 1 << 20);
	if (!strncmp(mode, "prof", 4)) {
		/* "-nodur": without keeping every call's duration (no percentiles) */
		struct tk_prof_opts po = { .sz = sizeof po,
			.flags = strstr(mode, "-nodur") ? TK_PROF_NO_DURATIONS : 0 };
		p = tk_prof_new(&po, NULL);
		sink = tk_prof_sink(p);
	} else {
		struct tk_timeline_opts o = { .sz = sizeof o, .max_events = UINT64_MAX,
			.kind = strcmp(mode, "chrome") ? TK_TIMELINE_PERFETTO : TK_TIMELINE_CHROME };
		tl = tk_timeline_new(&out, &o, NULL);
		sink = tk_timeline_sink(tl);
	}
	uint64_t done = 0, t0 = cpu_ns(), w0 = tk_now_ns();
	while (done < total) {
		for (size_t i = 0; i < PATTERN && done < total; i += TK_EVENT_BATCH) {
			size_t n = PATTERN - i < TK_EVENT_BATCH ? PATTERN - i : TK_EVENT_BATCH;
			if (n > total - done)
				n = (size_t)(total - done);
			if (sink.events(sink.ctx, ev + i, n) < 0) {
				fprintf(stderr, "sink failed\n");
				return 1;
			}
			done += n;
		}
	}
	if (p)
		tk_prof_finish(p);
	if (tl)
		tk_timeline_finish(tl);
	tk_buf_flush(&out);
	uint64_t t1 = cpu_ns(), w1 = tk_now_ns();
	double s = (double)(t1 - t0) / 1e9;
	printf("%s: %llu events in %.3f s CPU (%.3f s wall): %.1f M events/s per core\n", mode,
	       (unsigned long long)done, s, (double)(w1 - w0) / 1e9, (double)done / s / 1e6);
	if (p) {
		struct tk_prof_summary sum;
		tk_prof_summary(p, &sum);
		uint64_t paths = 0;
		tk_prof_walk_paths(p, count_path, &paths);
		printf("  calls %llu, returns %llu, instructions %llu, orphans %llu, call paths %llu\n",
		       (unsigned long long)sum.calls, (unsigned long long)sum.returns,
		       (unsigned long long)sum.insns, (unsigned long long)sum.orphans,
		       (unsigned long long)paths);
	}
	if (tl) {
		uint64_t dropped;
		printf("  slices %llu\n", (unsigned long long)tk_timeline_slices(tl, &dropped));
	}
	tk_prof_free(p);
	tk_timeline_free(tl);
	tk_buf_free(&out);
	free(ev);
	return 0;
}
