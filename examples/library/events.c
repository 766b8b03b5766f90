/* Stream every event of a trace, in order, to a callback of your own (here: count them by
 * kind and sum the instructions of executed blocks). With -c BYTES the trace is cut into
 * chunks of about BYTES, decoded on every core; the events still come in order.
 *
 *   events [-c BYTES] TRACE [ELF[:BASE]...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tracekit/tracekit.h>

struct counts {
	uint64_t kind[TK_EV__COUNT];
	uint64_t insns;
};

/* Called with each batch of events, in input order. */
static int on_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct counts *c = ctx;

	for (size_t i = 0; i < n; i++) {
		if (ev[i].kind < TK_EV__COUNT)
			c->kind[ev[i].kind]++;
		if (ev[i].kind == TK_EV_BLOCK)
			c->insns += ev[i].count;
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t chunk = 0;

	if (argc > 2 && !strcmp(argv[1], "-c")) {
		chunk = (size_t)strtoull(argv[2], NULL, 10);
		argc -= 2;
		argv += 2;
	}
	struct tk_source_opts so = { .sz = sizeof so, .elf = (const char *const *)argv + 2,
				     .nelf = argc > 2 ? (size_t)argc - 2 : 0, .chunk_bytes = chunk };
	struct counts c = { { 0 }, 0 };
	struct tk_source *s;

	if (argc < 2) {
		fprintf(stderr, "usage: events [-c BYTES] TRACE [ELF[:BASE]...]\n");
		return 2;
	}
	if (tk_source_open(&s, argv[1], &so) < 0)
		return 3;
	int rc = tk_run_events(s, (struct tk_sink){ on_events, &c });
	for (unsigned k = 1; rc >= 0 && k < TK_EV__COUNT; k++)
		if (c.kind[k])
			printf("%-12s %llu\n", tk_event_kind_name(k), (unsigned long long)c.kind[k]);
	printf("instructions %llu\n", (unsigned long long)c.insns);
	int lost = tk_source_report(s);
	tk_source_free(s);
	return rc < 0 ? 3 : lost;
}
