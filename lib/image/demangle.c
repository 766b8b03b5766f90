/* Demangling through libiberty's cplus_demangle (Debian libiberty-dev), the demangler of
 * c++filt, gdb and perf: one maintained implementation for C++ and both Rust schemes.
 * Results are cached by name (a profile asks for the same few names again and again). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "image/demangle.h"
#include "tracekit/common.h"

struct entry {
	char *name;               /* the raw name (key) */
	char *shown;              /* what it shows as; NULL: the name itself */
};

struct demangler {
	enum demangle_mode mode;
	pthread_mutex_t lock;
	struct entry *tab;        /* open addressing, name == NULL: free */
	size_t n, mask;
};

struct demangler *demangler_new(enum demangle_mode mode)
{
	struct demangler *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->mode = mode;
	pthread_mutex_init(&d->lock, NULL);
	return d;
}

void demangler_free(struct demangler *d)
{
	if (!d)
		return;
	for (size_t i = 0; d->tab && i <= d->mask; i++) {
		free(d->tab[i].name);
		free(d->tab[i].shown);
	}
	free(d->tab);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ULL;
	return h;
}

/* Drop template arguments "<...>" and parameter lists "(...)" from a demangled name,
 * keeping operator names (operator<, operator()) and "(anonymous namespace)". */
static void shorten(char *s)
{
	static const char anon[] = "(anonymous namespace)";
	static const char op[] = "operator";
	char *w = s;
	for (const char *r = s; *r;) {
		if (!strncmp(r, anon, sizeof anon - 1)) {
			memmove(w, r, sizeof anon - 1);
			w += sizeof anon - 1;
			r += sizeof anon - 1;
		} else if (!strncmp(r, op, sizeof op - 1) &&
			   (r == s || !(r[-1] == '_' || (r[-1] >= 'a' && r[-1] <= 'z') ||
					(r[-1] >= 'A' && r[-1] <= 'Z') || (r[-1] >= '0' && r[-1] <= '9')))) {
			/* the operator's own characters are part of its name */
			memmove(w, r, sizeof op - 1);
			w += sizeof op - 1;
			r += sizeof op - 1;
			if ((r[0] == '(' && r[1] == ')') || (r[0] == '[' && r[1] == ']')) {
				*w++ = *r++;
				*w++ = *r++;
			} else {
				while (*r && strchr("+-*/%^&|~!=<>,", *r))
					*w++ = *r++;
			}
		} else if (*r == '<' && (r == s || (r - s >= 2 && r[-1] == ':' && r[-2] == ':'))) {
			/* a qualified path (Rust's "<T as Trait>::f", "<Sq<u64>>::area") */
			*w++ = *r++;
		} else if (*r == '<' || *r == '(') {
			int depth = 0;
			do {
				if (*r == '<' || *r == '(')
					depth++;
				else if (*r == '>' || *r == ')')
					depth--;
				r++;
			} while (*r && depth > 0);
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
}

/* Printable ASCII only: nothing to escape. */
static int plain(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

/* S with its control characters escaped (tk_buf_text), or NULL when nothing changes. */
static char *escaped(const char *s)
{
	struct tk_buf b;
	size_t n = strlen(s);
	if (plain(s) || tk_buf_init(&b, -1, 4 * n + 1) < 0)
		return NULL;
	tk_buf_text(&b, s, n);
	tk_buf_putc(&b, 0);
	if (b.err || !strcmp(b.data, s)) {
		tk_buf_free(&b);
		return NULL;
	}
	return b.data;
}

static char *demangled(enum demangle_mode mode, const char *name)
{
	/* c++filt's options: parameters, and Rust legacy hashes as they are; a short name
	 * without parameters (which also drops return types and qualifiers) */
	int flags = mode == DEMANGLE_SHORT ? DMGL_ANSI : DMGL_PARAMS | DMGL_ANSI | DMGL_VERBOSE;
	/* a version or a PLT stub ("_ZdlPv@plt", "_Zx@@GLIBCXX_3.4"): the name before the
	 * '@' demangled, the rest kept, as objdump -C and perf show them */
	const char *at = strchr(name, '@');
	char *r;
	if (at) {
		char *base = strndup(name, (size_t)(at - name));
		char *d = base ? cplus_demangle(base, flags) : NULL;
		r = NULL;
		if (d && (r = malloc(strlen(d) + strlen(at) + 1)))
			strcat(strcpy(r, d), at);
		free(d);
		free(base);
	} else {
		r = cplus_demangle(name, flags);
	}
	if (mode == DEMANGLE_SHORT) {
		if (!r && (strchr(name, '<') || strchr(name, '(')))
			r = strdup(name);
		if (r)
			shorten(r);
	}
	if (r && !strcmp(r, name)) {
		free(r);
		r = NULL;
	}
	return r;
}

/* What NAME shows as, NULL: itself. A name is text from a file: its control characters
 * are escaped here, so that no output shows them raw. */
static char *make(enum demangle_mode mode, const char *name)
{
	char *r = mode == DEMANGLE_NONE ? NULL : demangled(mode, name);
	char *e = escaped(r ? r : name);
	if (e) {
		free(r);
		r = e;
	}
	return r;
}

const char *demangle(struct demangler *d, const char *name)
{
	if (!d || !name)
		return name;
	/* mangled names start _Z (C++, Rust legacy) or _R (Rust v0); a short name also
	 * shortens names given demangled (XRay instrumentation maps, DWARF names) */
	if ((d->mode == DEMANGLE_NONE || !(name[0] == '_' && (name[1] == 'Z' || name[1] == 'R'))) &&
	    !(d->mode == DEMANGLE_SHORT && (strchr(name, '<') || strchr(name, '('))) && plain(name))
		return name;
	const char *out = name;
	pthread_mutex_lock(&d->lock);
	if (!d->tab || (d->n + 1) * 2 > d->mask + 1) {
		size_t size = d->tab ? (d->mask + 1) * 2 : 64;
		struct entry *t = calloc(size, sizeof *t);
		if (!t)
			goto out;
		for (size_t i = 0; d->tab && i <= d->mask; i++) {
			if (!d->tab[i].name)
				continue;
			size_t k = hash(d->tab[i].name) & (size - 1);
			while (t[k].name)
				k = (k + 1) & (size - 1);
			t[k] = d->tab[i];
		}
		free(d->tab);
		d->tab = t;
		d->mask = size - 1;
	}
	size_t k = hash(name) & d->mask;
	for (; d->tab[k].name; k = (k + 1) & d->mask)
		if (!strcmp(d->tab[k].name, name))
			goto found;
	if (!(d->tab[k].name = strdup(name)))
		goto out;
	d->tab[k].shown = make(d->mode, name);
	d->n++;
found:
	if (d->tab[k].shown)
		out = d->tab[k].shown;
out:
	pthread_mutex_unlock(&d->lock);
	return out;
}
