/* What `tracekit profile` pays for Intel PT before its profile builder sees an event: the
 * flow decoded on one thread in count mode, as profile decodes it (blocks counted in the
 * walker, calls, returns and blocks at function entries as events, the entries from the
 * --elf files' symbols and FDEs), the events thrown away and the block counts taken at the
 * end. A floor for `profile -j 1`: however fast the builder, profile takes at least this.
 * usage: ipt-walk-floor FILE.pt --elf FILE:BASE ... [--events]
 *   --events   also count the events by kind (stderr) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tracekit/common.h"
#include "tracekit/event.h"
#include "tracekit/flow.h"
#include "tracekit/image.h"
#include "tracekit/internal/util.h"
#include "tracekit/ipt_flow.h"
#include "tracekit/symbolize.h"

struct run {
	const uint64_t *entries;
	size_t nentries;
	int by_kind;
	uint64_t kinds[TK_EV__COUNT];
};

static int thrown_away(void *ctx, const struct tk_event *ev, size_t n)
{
	struct run *r = ctx;
	if (r->by_kind)
		for (size_t i = 0; i < n; i++)
			r->kinds[ev[i].kind < TK_EV__COUNT ? ev[i].kind : 0]++;
	return 0;
}

static int begin(void *ctx, size_t chunk, struct tk_flow *flow, struct tk_sink *sink)
{
	struct run *r = ctx;
	(void)chunk;
	*sink = (struct tk_sink){ .events = thrown_away, .ctx = r };
	return tk_flow_set_count_mode(flow, 1, r->entries, r->nentries);
}

static int no_block(void *ctx, uint64_t start, uint64_t last, int mode, uint64_t execs,
		    uint64_t insns)
{
	(void)ctx, (void)start, (void)last, (void)mode, (void)execs, (void)insns;
	return 0;
}

static int done(void *ctx, struct tk_flow *flow)
{
	(void)ctx;
	return tk_flow_take_counts(flow, no_block, NULL);
}

int main(int argc, char **argv)
{
	struct run r = { 0 };
	struct stat st;
	int err, fd;

	if (argc < 2) {
		fprintf(stderr, "usage: ipt-walk-floor FILE.pt --elf FILE:BASE ... [--events]\n");
		return 2;
	}
	struct tk_image *img = tk_image_new(&err);
	struct tk_sym *sym = tk_sym_new(NULL, &err);
	if (!img || !sym)
		return 3;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--events")) {
			r.by_kind = 1;
			continue;
		}
		if (strcmp(argv[i], "--elf") || i + 1 >= argc)
			return 2;
		char *arg = argv[++i], *colon = strrchr(arg, ':');
		if (tk_image_add_elf_arg(img, arg) < 0 || !colon)
			return 3;
		*colon = 0;
		err = tk_sym_add_elf_at(sym, arg, strtoull(colon + 1, NULL, 0));
		*colon = ':';
		if (err < 0)
			return 3;
	}
	uint64_t *entries;
	size_t n;
	if (tk_sym_entries(sym, &entries, &n) < 0)
		return 3;
	qsort(entries, n, sizeof *entries, tk_cmp_u64);   /* sorted, as the profile keeps them */
	r.entries = entries;
	r.nentries = n;

	if ((fd = open(argv[1], O_RDONLY)) < 0 || fstat(fd, &st) < 0) {
		perror(argv[1]);
		return 3;
	}
	const uint8_t *buf = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE,
				  fd, 0);
	if (buf == MAP_FAILED)
		return 3;
	struct tk_ipt_flow_opts o = { .sz = sizeof o, .image = img, .nthreads = 1 };
	struct tk_ipt_flow_consumer c = { .sz = sizeof c, .begin = begin, .done = done, .ctx = &r };
	struct tk_ipt_flow_stats s = { 0 };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = tk_ipt_flow_decode(buf, (size_t)st.st_size, &o, &c, &s);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (err < 0) {
		fprintf(stderr, "decode: %s\n", tk_strerror(err));
		return 1;
	}
	printf("insn: %llu\ndecode: %.3f s\n", (unsigned long long)s.insns,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
	for (int k = 0; r.by_kind && k < TK_EV__COUNT; k++)
		if (r.kinds[k])
			fprintf(stderr, "events of kind %d: %llu\n", k, (unsigned long long)r.kinds[k]);
	free(entries);
	tk_sym_free(sym);
	tk_image_free(img);
	return 0;
}
