/* Test helper: decode a branch-trace container's per-thread PT streams with libipt's
 * instruction-flow decoder (the reference) and count executed instructions per function of
 * the traced modules; run shell commands. Shared by the btrace oracle tests. */
#ifndef TK_TEST_BTRACE_IPT_H
#define TK_TEST_BTRACE_IPT_H

#include <elf.h>
#include <fcntl.h>
#include <glob.h>
#include <intel-pt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"
#include "tracekit/internal/util.h"

#define BT_MAX_FN 8192

struct bt_fn {
	char name[256];        /* the symbol's names (aliases at the same range), space-separated */
	uint64_t start, end;   /* run-time addresses */
	uint64_t insns;
};

struct bt_counts {
	struct bt_fn fn[BT_MAX_FN];
	int nfn;
	uint64_t insns, decode_errors, threads, other;
	int first_error;
	int last_fn;           /* where code without a symbol (PLT stubs) is charged */
	uint64_t returns;      /* ptic_return instructions */
	uint64_t returns_in;   /* of them, returns to traced code (no disable after them) */
	int keep_ips;          /* record every instruction's address in ips[] */
	uint64_t *ips;
	size_t nips, cap;
};

/* Run a shell command (printf-style); its exit status, 128 if it did not exit. */
static __attribute__((unused, format(printf, 1, 2))) int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static __attribute__((unused)) int bt_fn_cmp(const void *a, const void *b)
{
	const struct bt_fn *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* Function symbols of ELF file PATH loaded with BIAS, from its .symtab. Returns how many
 * were added, or -1. */
static __attribute__((unused)) int bt_read_symtab(struct bt_counts *c, const char *path, uint64_t bias)
{
	int fd = open(path, O_RDONLY), n = 0;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	uint8_t *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return -1;
	const Elf64_Ehdr *eh = (const void *)f;
	const Elf64_Shdr *sh = (const void *)(f + eh->e_shoff);
	int first = c->nfn;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_SYMTAB)
			continue;
		const Elf64_Sym *sym = (const void *)(f + sh[i].sh_offset);
		const char *str = (const char *)(f + sh[sh[i].sh_link].sh_offset);
		for (size_t k = 0; k < sh[i].sh_size / sizeof *sym && c->nfn < BT_MAX_FN; k++) {
			if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || !sym[k].st_value ||
			    sym[k].st_shndx == SHN_UNDEF)
				continue;
			struct bt_fn *fn = &c->fn[c->nfn++];
			snprintf(fn->name, sizeof fn->name, "%s", str + sym[k].st_name);
			fn->start = sym[k].st_value + bias;
			fn->end = fn->start + sym[k].st_size;
			fn->insns = 0;
			if (!sym[k].st_size && sym[k].st_shndx < eh->e_shnum) {
				/* no size: up to the next symbol, within its section (see below) */
				const Elf64_Shdr *sec = &sh[sym[k].st_shndx];
				fn->insns = sec->sh_addr + sec->sh_size + bias;   /* section end, for now */
			}
			n++;
		}
	}
	munmap(f, (size_t)st.st_size);
	/* assembler symbols without a size (_init, crt helpers) run to the next symbol */
	for (int i = first; i < c->nfn; i++) {
		if (c->fn[i].end != c->fn[i].start)
			continue;
		uint64_t next = c->fn[i].insns ? c->fn[i].insns : c->fn[i].start + 1;
		for (int k = first; k < c->nfn; k++)
			if (c->fn[k].start > c->fn[i].start && c->fn[k].start < next)
				next = c->fn[k].start;
		c->fn[i].end = next;
	}
	for (int i = first; i < c->nfn; i++)
		c->fn[i].insns = 0;
	return n;
}

/* Function symbols of a module (PATH, BIAS, build id BID of BIDLEN bytes): its .symtab, or
 * that of its separate debug file (Debian's libc6-dbg for libc), as callgrind finds them. */
static __attribute__((unused)) int bt_load_symbols(struct bt_counts *c, const char *path, uint64_t bias, const uint8_t *bid,
			   unsigned bidlen)
{
	char dbg[256];
	int n = bt_read_symtab(c, path, bias);
	if (n == 0 && tk_debug_file_path(dbg, sizeof dbg, bid, bidlen) == 0)
		n = bt_read_symtab(c, dbg, bias);
	return n < 0 ? -1 : 0;
}

/* Sort the functions and merge aliases (the same range) into one entry with all names. */
static __attribute__((unused)) void bt_sort_symbols(struct bt_counts *c)
{
	int k = 0;
	qsort(c->fn, (size_t)c->nfn, sizeof c->fn[0], bt_fn_cmp);
	for (int i = 0; i < c->nfn; i++) {
		if (k && c->fn[k - 1].start == c->fn[i].start && c->fn[k - 1].end == c->fn[i].end) {
			size_t l = strlen(c->fn[k - 1].name);
			snprintf(c->fn[k - 1].name + l, sizeof c->fn[0].name - l, " %s", c->fn[i].name);
			continue;
		}
		c->fn[k++] = c->fn[i];
	}
	c->nfn = k;
}

/* Executable segments of PATH into a libipt image. */
static __attribute__((unused)) int bt_add_image(struct pt_image *img, const char *path, uint64_t bias)
{
	int fd = open(path, O_RDONLY);
	Elf64_Ehdr eh;
	if (fd < 0 || pread(fd, &eh, sizeof eh, 0) != sizeof eh)
		return -1;
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != sizeof ph)
			break;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			if (pt_image_add_file(img, path, ph.p_offset, ph.p_filesz, NULL, ph.p_vaddr + bias) < 0) {
				close(fd);
				return -1;
			}
	}
	close(fd);
	return 0;
}

/* Like callgrind, charge code without a symbol (PLT stubs) to the function before it. */
static __attribute__((unused)) void bt_count(struct bt_counts *c, uint64_t ip)
{
	int lo = 0, hi = c->nfn;
	c->insns++;
	if (c->keep_ips) {
		if (c->nips == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 4096;
			if (!(c->ips = realloc(c->ips, c->cap * sizeof *c->ips)))
				abort();
		}
		c->ips[c->nips++] = ip;
	}
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (c->fn[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the innermost range holding IP among the few that start at or before it */
	for (int i = lo - 1; i >= 0 && i >= lo - 8; i--)
		if (ip < c->fn[i].end) {
			c->fn[i].insns++;
			c->last_fn = i + 1;
			return;
		}
	if (c->last_fn)
		c->fn[c->last_fn - 1].insns++;
	else
		c->other++;
}

/* Decode one PT stream; decode errors are counted (a clean trace has none). */
static __attribute__((unused)) void bt_decode_stream(struct bt_counts *c, const struct tk_btrace *bt, const uint8_t *pt, size_t n)
{
	struct pt_config cfg;
	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)pt;
	cfg.end = (uint8_t *)pt + n;
	struct pt_insn_decoder *dec = pt_insn_alloc_decoder(&cfg);
	if (!dec) {
		c->decode_errors++;
		return;
	}
	struct pt_image *img = pt_insn_get_image(dec);
	for (size_t i = 0; i < tk_btrace_module_count(bt); i++) {
		const struct tk_btrace_module *m = tk_btrace_module(bt, i);
		bt_add_image(img, m->path, m->bias);
	}
	c->last_fn = 0;
	int after_ret = 0;
	for (;;) {
		int st = pt_insn_sync_forward(dec);
		if (st < 0) {
			if (st != -pte_eos) {
				c->decode_errors++;
				if (!c->first_error)
					c->first_error = st;
			}
			break;
		}
		for (;;) {
			while (st & pts_event_pending) {
				struct pt_event ev;
				st = pt_insn_event(dec, &ev, sizeof ev);
				if (st < 0)
					break;
				if (ev.type == ptev_disabled || ev.type == ptev_async_disabled ||
				    ev.type == ptev_overflow)
					after_ret = 0;
			}
			if (st < 0)
				break;
			struct pt_insn insn;
			st = pt_insn_next(dec, &insn, sizeof insn);
			if (st < 0)
				break;
			bt_count(c, insn.ip);
			c->returns_in += after_ret;
			after_ret = insn.iclass == ptic_return;
			c->returns += after_ret;
		}
		if (st == -pte_eos)
			break;
		c->decode_errors++;
		if (!c->first_error) {
			uint64_t off = 0;
			pt_insn_get_offset(dec, &off);
			fprintf(stderr, "libipt: %s at stream offset 0x%llx\n", pt_errstr(pt_errcode(st)),
				(unsigned long long)off);
			c->first_error = st;
		}
	}
	pt_insn_free_decoder(dec);
}

/* The whole file at PATH (malloc'd, *LEN bytes), or NULL. */
static __attribute__((unused)) uint8_t *bt_read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	uint8_t *data = malloc((size_t)st.st_size + 1);
	if (!data || read(fd, data, (size_t)st.st_size) != st.st_size) {
		close(fd);
		free(data);
		return NULL;
	}
	close(fd);
	*len = (size_t)st.st_size;
	return data;
}

/* Decode every thread of the container at PATH. Returns 0 or -1 (unreadable). */
static __attribute__((unused)) int bt_decode_file(struct bt_counts *c, const char *path)
{
	size_t len;
	uint8_t *data = bt_read_file(path, &len);
	if (!data)
		return -1;
	int err = 0;
	struct tk_btrace *bt = tk_btrace_open(data, len, NULL, &err);
	if (!bt) {
		free(data);
		return -1;
	}
	if (c->nfn == 0) {
		for (size_t i = 0; i < tk_btrace_module_count(bt); i++) {
			const struct tk_btrace_module *m = tk_btrace_module(bt, i);
			bt_load_symbols(c, m->path, m->bias, m->build_id, m->build_id_len);
		}
		bt_sort_symbols(c);
	}
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		uint8_t *pt;
		size_t n;
		if (tk_btrace_thread_stream(bt, i, &pt, &n) == 0) {
			bt_decode_stream(c, bt, pt, n);
			free(pt);
			c->threads++;
		}
	}
	tk_btrace_free(bt);
	free(data);
	return 0;
}

/* PAT is a name or several joined by '+' (main+main.cold): does NAME (N bytes) match one? */
static __attribute__((unused)) int bt_name_match(const char *pat, const char *name, size_t n)
{
	while (*pat) {
		size_t l = strcspn(pat, "+");
		if (l == n && !strncmp(pat, name, n))
			return 1;
		pat += l + (pat[l] == '+');
	}
	return 0;
}

/* callgrind_annotate's per-function table of every output file PREFIX*, read once: running
 * the perl script once per function name cost minutes on the libc cases of a loaded machine.
 * The cache is keyed by the files' names, sizes and times, so a new valgrind run is seen. */
static __attribute__((unused)) const char *bt_cg_table(const char *prefix)
{
	static char key[4096], *text;
	char now[4096] = "", cmd[1024], pattern[600];
	glob_t g;
	snprintf(pattern, sizeof pattern, "%s*", prefix);
	if (glob(pattern, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++) {
			struct stat st;
			size_t l = strlen(now);
			if (stat(g.gl_pathv[i], &st) == 0)
				snprintf(now + l, sizeof now - l, "%s:%lld:%lld.%09ld;", g.gl_pathv[i],
					 (long long)st.st_size, (long long)st.st_mtim.tv_sec,
					 st.st_mtim.tv_nsec);
		}
		globfree(&g);
	}
	if (text && !strcmp(now, key))
		return text;
	free(text);
	snprintf(key, sizeof key, "%s", now);
	snprintf(cmd, sizeof cmd, "for f in %s*; do callgrind_annotate --auto=no --threshold=100 --inclusive=no $f; done", prefix);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t len = 0, cap = 1 << 16, got;
	text = malloc(cap);
	assert_non_null(text);
	while ((got = fread(text + len, 1, cap - len - 1, p)) > 0)
		if ((len += got) + 1 == cap) {
			text = realloc(text, cap *= 2);
			assert_non_null(text);
		}
	text[len] = 0;
	pclose(p);
	return text;
}

/* callgrind's self cost (Ir) of the functions PAT names (bt_name_match) over every output
 * file PREFIX*, recursion levels (deep'2) included. */
static __attribute__((unused)) uint64_t bt_cg_self(const char *prefix, const char *pat)
{
	char line[4096];
	uint64_t total = 0;
	const char *t = bt_cg_table(prefix);
	while (*t) {
		size_t n = strcspn(t, "\n");
		snprintf(line, sizeof line, "%.*s", (int)n, t);
		t += n + (t[n] != 0);
		char *s = line, *colon, *end;
		while (*s == ' ')
			s++;
		if (!(*s >= '0' && *s <= '9') || strstr(s, "=>"))
			continue;
		uint64_t v = 0;
		for (; (*s >= '0' && *s <= '9') || *s == ','; s++)
			if (*s != ',')
				v = v * 10 + (uint64_t)(*s - '0');
		if (!(colon = strstr(s, "):")) && !(colon = strchr(s, ':')))
			continue;
		/* "(12.3%)  file:function [object]" */
		char *name = strrchr(s, ':');
		if (!name)
			continue;
		name++;
		end = name + strcspn(name, " '\n[");
		if (bt_name_match(pat, name, (size_t)(end - name)))
			total += v;
	}
	return total;
}

/* Instructions of the functions PAT names (a function counts once, by any of its aliases). */
static __attribute__((unused)) uint64_t bt_fn_insns(const struct bt_counts *c, const char *pat)
{
	uint64_t n = 0;
	for (int i = 0; i < c->nfn; i++)
		for (const char *a = c->fn[i].name; *a;) {
			size_t l = strcspn(a, " ");
			if (bt_name_match(pat, a, l)) {
				n += c->fn[i].insns;
				break;
			}
			a += l + (a[l] == ' ');
		}
	return n;
}

#endif
