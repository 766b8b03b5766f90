/* XRay instrumentation map: function id -> function address -> symbol.
 *
 * Facts (LLVM's InstrumentationMap and compiler-rt's xray_init): the ELF section
 * xray_instr_map holds 32-byte sled entries {u64 address, u64 function, u8 kind,
 * u8 always_instrument, u8 version, 13 bytes padding}. From sled version 2 on, both
 * addresses are relative to where the field itself sits (the entry, and the entry + 8).
 * Function ids are assigned in sled order starting at 1, a new id each time the function
 * address changes from one sled to the next.
 * The YAML map (`llvm-xray extract`) lists the same sleds as flow mappings with id,
 * address, function and function-name. */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "formats/xray/internal.h"

struct tk_xray_map {
	int32_t max_id;
	uint64_t *addr;            /* [max_id + 1] */
	char **name;               /* [max_id + 1] */
};

void tk_xray_map_free(struct tk_xray_map *m)
{
	if (!m)
		return;
	if (m->name)
		for (int32_t i = 0; i <= m->max_id; i++)
			free(m->name[i]);
	free(m->name);
	free(m->addr);
	free(m);
}

int32_t tk_xray_map_max_id(const struct tk_xray_map *m) { return m ? m->max_id : 0; }

uint64_t tk_xray_map_addr(const struct tk_xray_map *m, int32_t id)
{
	return m && id > 0 && id <= m->max_id ? m->addr[id] : 0;
}

const char *tk_xray_map_name(const struct tk_xray_map *m, int32_t id)
{
	return m && id > 0 && id <= m->max_id ? m->name[id] : NULL;
}

static int map_set(struct tk_xray_map *m, int32_t id, uint64_t addr, size_t *cap)
{
	if (id <= 0)
		return 0;
	if ((size_t)id >= *cap) {
		size_t n = *cap ? *cap : 256;
		while (n <= (size_t)id)
			n *= 2;
		uint64_t *a = realloc(m->addr, n * sizeof *a);
		if (!a)
			return -TK_E_NOMEM;
		m->addr = a;
		char **nm = realloc(m->name, n * sizeof *nm);
		if (!nm)
			return -TK_E_NOMEM;
		m->name = nm;
		for (size_t i = *cap; i < n; i++) {
			m->addr[i] = 0;
			m->name[i] = NULL;
		}
		*cap = n;
	}
	if (!m->addr[id])
		m->addr[id] = addr;
	if (id > m->max_id)
		m->max_id = id;
	return 0;
}

struct sym {
	uint64_t addr;
	const char *name;
};

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *l = a, *r = b;
	return l->addr < r->addr ? -1 : l->addr > r->addr;
}

/* Name every function address with the ELF symbol that starts there. */
static int name_from_elf(struct tk_xray_map *m, Elf *elf)
{
	Elf_Scn *scn = NULL;
	struct sym *syms = NULL;
	size_t nsyms = 0, cap = 0;
	int rc = 0;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !sh.sh_entsize)
			continue;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    !s.st_value)
				continue;
			const char *nm = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!nm || !*nm)
				continue;
			if (nsyms == cap) {
				cap = cap ? cap * 2 : 1024;
				void *t = realloc(syms, cap * sizeof *syms);
				if (!t) {
					free(syms);
					return -TK_E_NOMEM;
				}
				syms = t;
			}
			syms[nsyms].addr = s.st_value;
			syms[nsyms].name = nm;
			nsyms++;
		}
	}
	if (nsyms)
		qsort(syms, nsyms, sizeof *syms, cmp_sym);
	for (int32_t id = 1; id <= m->max_id && nsyms; id++) {
		struct sym key = { m->addr[id], NULL };
		struct sym *s = bsearch(&key, syms, nsyms, sizeof *syms, cmp_sym);
		if (s && !m->name[id] && !(m->name[id] = strdup(s->name))) {
			rc = -TK_E_NOMEM;
			break;
		}
	}
	free(syms);
	return rc;
}

static struct tk_xray_map *load_elf(int fd, int *err)
{
	struct tk_xray_map *m = calloc(1, sizeof *m);
	Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	size_t shstrndx, cap = 0;
	int rc = -TK_E_NOT_FOUND, found = 0;

	if (!m) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) != 0) {
		rc = -TK_E_BAD_FORMAT;
		goto fail;
	}
	int be = elf_getident(elf, NULL)[EI_DATA] == ELFDATA2MSB;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!nm || strcmp(nm, "xray_instr_map"))
			continue;
		Elf_Data *d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		found = 1;
		const uint8_t *p = d->d_buf;
		size_t n = d->d_size / 32;
		int32_t id = 0;
		uint64_t cur = 0;
		for (size_t i = 0; i < n; i++) {
			const uint8_t *e = p + i * 32;
			uint64_t at = sh.sh_addr + i * 32;
			uint64_t fn = xr_rd64(e + 8, be);
			if (e[18] >= 2)
				fn += at + 8;
			if (id == 0 || fn != cur) {
				id++;
				cur = fn;
				if ((rc = map_set(m, id, fn, &cap)) < 0)
					goto fail;
			}
		}
	}
	if (!found) {
		rc = -TK_E_NOT_FOUND;
		goto fail;
	}
	if ((rc = name_from_elf(m, elf)) < 0)
		goto fail;
	elf_end(elf);
	*err = 0;
	return m;
fail:
	if (elf)
		elf_end(elf);
	tk_xray_map_free(m);
	*err = rc;
	return NULL;
}

/* Value after "key: " in a flow mapping line; copies a (possibly quoted) scalar. */
static int yaml_field(const char *line, const char *key, char *out, size_t outsz)
{
	char pat[48];
	snprintf(pat, sizeof pat, " %s: ", key);
	const char *v = strstr(line, pat);
	if (!v)
		return -1;
	v += strlen(pat);
	size_t k = 0;
	if (*v == '\'' || *v == '"') {
		char q = *v++;
		while (*v && k + 1 < outsz) {
			if (*v == q) {
				if (q == '\'' && v[1] == '\'') {
					out[k++] = '\'';
					v += 2;
					continue;
				}
				break;
			}
			out[k++] = *v++;
		}
	} else {
		while (*v && *v != ',' && *v != '}' && k + 1 < outsz)
			out[k++] = *v++;
		while (k && out[k - 1] == ' ')
			k--;
	}
	out[k] = 0;
	return 0;
}

static struct tk_xray_map *load_yaml(FILE *f, int *err)
{
	struct tk_xray_map *m = calloc(1, sizeof *m);
	char line[4096], val[1024];
	size_t cap = 0;
	int rc = 0, entries = 0;

	if (!m) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	while (fgets(line, sizeof line, f)) {
		if (!strstr(line, "{ id: "))
			continue;
		char *end;
		if (yaml_field(line, "id", val, sizeof val) < 0)
			continue;
		long id = strtol(val, &end, 0);
		if (*end || id <= 0 || id > 0x0fffffff)
			continue;
		if (yaml_field(line, "function", val, sizeof val) < 0)
			continue;
		uint64_t fn = strtoull(val, &end, 0);
		if ((rc = map_set(m, (int32_t)id, fn, &cap)) < 0)
			goto fail;
		entries++;
		if (yaml_field(line, "function-name", val, sizeof val) == 0 && val[0] &&
		    !m->name[id] && !(m->name[id] = strdup(val))) {
			rc = -TK_E_NOMEM;
			goto fail;
		}
	}
	if (!entries) {
		rc = -TK_E_BAD_FORMAT;
		goto fail;
	}
	*err = 0;
	return m;
fail:
	tk_xray_map_free(m);
	*err = rc;
	return NULL;
}

struct tk_xray_map *tk_xray_map_load(const char *path, int *err)
{
	uint8_t magic[4] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct tk_xray_map *m;

	if (fd < 0) {
		*err = -TK_E_IO;
		return NULL;
	}
	if (read(fd, magic, 4) == 4 && !memcmp(magic, "\177ELF", 4)) {
		m = load_elf(fd, err);
		close(fd);
		return m;
	}
	lseek(fd, 0, SEEK_SET);
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		*err = -TK_E_IO;
		return NULL;
	}
	m = load_yaml(f, err);
	fclose(f);
	return m;
}

int tk_xray_map_to_sym(const struct tk_xray_map *map, struct tk_sym *sym)
{
	for (int32_t id = 1; id <= tk_xray_map_max_id(map); id++) {
		const char *nm = tk_xray_map_name(map, id);
		uint64_t addr = tk_xray_map_addr(map, id);
		if (!nm && !addr)
			continue;
		int rc = tk_sym_set_func(sym, (uint64_t)id, nm, nm ? 0 : addr);
		if (rc < 0)
			return rc;
	}
	return 0;
}
