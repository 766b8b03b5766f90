/* The other trace files of a followed recording: `record --btrace` (following exec, fork,
 * posix_spawn and system) names each process's file after the first one, BASE: BASE.<pid>
 * for another process, BASE.<pid>.<n> for the n-th program a process exec'd into. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/btrace.h"

struct related {
	char *path;
	unsigned long pid, gen;
};

/* NAME is PREFIX followed by ".<pid>" or ".<pid>.<gen>": 1 and the numbers. */
static int parse_suffix(const char *name, const char *prefix, size_t plen, unsigned long *pid,
			unsigned long *gen)
{
	if (strncmp(name, prefix, plen) || name[plen] != '.')
		return 0;
	const char *s = name + plen + 1;
	char *end;
	if (*s < '0' || *s > '9')
		return 0;
	*pid = strtoul(s, &end, 10);
	*gen = 0;
	if (*end == '.') {
		s = end + 1;
		if (*s < '0' || *s > '9')
			return 0;
		*gen = strtoul(s, &end, 10);
	}
	return *end == 0;
}

static int cmp_related(const void *a, const void *b)
{
	const struct related *l = a, *r = b;
	if (l->pid != r->pid)
		return l->pid < r->pid ? -1 : 1;
	return l->gen < r->gen ? -1 : l->gen > r->gen;
}

int tk_btrace_related(const char *base, char ***paths, size_t *n)
{
	const char *slash = strrchr(base, '/');
	size_t dlen = slash ? (size_t)(slash - base) : 0;
	const char *file = slash ? slash + 1 : base;
	char *dir = slash ? strndup(base, dlen ? dlen : 1) : strdup(".");
	struct related *v = NULL;
	size_t nv = 0, cap = 0;
	int rc = 0;

	*paths = NULL;
	*n = 0;
	if (!dir)
		return -TK_E_NOMEM;
	DIR *d = opendir(dir);
	if (!d) {
		free(dir);
		return -TK_E_IO;
	}
	for (struct dirent *e; (e = readdir(d));) {
		unsigned long pid, gen;
		if (!parse_suffix(e->d_name, file, strlen(file), &pid, &gen))
			continue;
		if (nv == cap) {
			size_t nc = cap ? cap * 2 : 8;
			struct related *q = realloc(v, nc * sizeof *v);
			if (!q) {
				rc = -TK_E_NOMEM;
				break;
			}
			v = q;
			cap = nc;
		}
		size_t len = (slash ? dlen + 1 : 0) + strlen(e->d_name) + 1;
		char *p = malloc(len);
		if (!p) {
			rc = -TK_E_NOMEM;
			break;
		}
		if (slash)
			memcpy(p, base, dlen + 1);
		strcpy(p + (slash ? dlen + 1 : 0), e->d_name);
		v[nv++] = (struct related){ p, pid, gen };
	}
	closedir(d);
	free(dir);
	char **out = rc == 0 && nv ? malloc(nv * sizeof *out) : NULL;
	if (rc == 0 && nv && !out)
		rc = -TK_E_NOMEM;
	if (rc == 0 && nv) {
		qsort(v, nv, sizeof *v, cmp_related);
		for (size_t i = 0; i < nv; i++)
			out[i] = v[i].path;
		*paths = out;
		*n = nv;
	} else {
		for (size_t i = 0; i < nv; i++)
			free(v[i].path);
	}
	free(v);
	return rc;
}

void tk_btrace_related_free(char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}
