/* A real program whose work runs in libc, for the flow benchmark's recorded inputs: it
 * formats records with snprintf, parses them back with strtol/strtod, sorts them with
 * qsort and strcmp, searches them with bsearch, and churns malloc/free, ROUNDS times.
 * Recorded with `--module main --module libc.so.6`, most of its instructions are libc's.
 * usage: ipt-flow-libc [N] [ROUNDS]   (N records, default 20000; ROUNDS, default 3) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 20000;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	char **rec = malloc(n * sizeof *rec);
	unsigned long long check = 0;

	if (!rec || !n)
		return 1;
	for (int r = 0; r < rounds; r++) {
		char line[128];

		for (size_t i = 0; i < n; i++) {
			unsigned h = (unsigned)(i * 2654435761u + (unsigned)r * 40503u);

			snprintf(line, sizeof line, "item-%08x %lu %.3f %s", h, (unsigned long)i,
				 (double)h / 65536.0, (h & 1) ? "odd" : "even");
			rec[i] = strdup(line);
		}
		qsort(rec, n, sizeof *rec, by_name);
		for (size_t i = 0; i < n; i++) {
			char *end, *sp = strchr(rec[i], ' ');
			unsigned long v = strtoul(sp + 1, &end, 10);
			double d = strtod(end, &end);

			check += v + (unsigned long long)d + strlen(rec[i]);
			if (bsearch(&rec[i], rec, n, sizeof *rec, by_name) == NULL)
				return 1;
		}
		for (size_t i = 0; i < n; i++)
			free(rec[i]);
	}
	printf("%llu\n", check);
	free(rec);
	return 0;
}
