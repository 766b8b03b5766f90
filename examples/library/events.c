/* Stream every event of a trace, in order, to a callback of your own (here: count them by
 * kind and sum the instructions of executed blocks).
 *
 *   events TRACE [ELF[:BASE]...] */
#include <stdio.h>

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
	struct tk_source_opts so = { .sz = sizeof so, .elf = (const char *const *)argv + 2,
				     .nelf = argc > 2 ? (size_t)argc - 2 : 0 };
	struct counts c = { { 0 }, 0 };
	struct tk_source *s;

	if (argc < 2) {
		fprintf(stderr, "usage: events TRACE [ELF[:BASE]...]\n");
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
