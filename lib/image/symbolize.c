/* Symbolisation through ELF symbol tables and DWARF (elfutils libelf/libdw). */
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <libelf.h>
#include <Zydis/Zydis.h>

#include "tracekit/common.h"
#include "tracekit/symbolize.h"
#include "tracekit/internal/eh_frame_hdr.h"
#include "image/elf_phdrs.h"
#include "image/code_file.h"
#include "image/demangle.h"
#include "image/sym_frames.h"
#include "tracekit/internal/util.h"

struct symbol {
	uint64_t addr, size;      /* file addresses */
	const char *name;
};

struct module {
	char *path;
	const char *base;         /* basename of path */
	int fd;
	Elf *elf;
	int dbg_fd;               /* its separate debug file (by build id), for symbols; -1 */
	Elf *dbg_elf;
	Dwarf *dw;
	uint64_t bias, start, end; /* run-time range [start, end) */
	struct symbol *syms;
	size_t nsyms;
	/* a module with no full symbol table: the starts of its unwind table's FDEs (file
	 * addresses), which name no function but mark where local functions begin */
	uint64_t *fde_starts;
	size_t nfde_starts;
	char *strings;            /* kallsyms' names (an ELF's are in its mapping) */
	char *plt_strings;        /* names of PLT stubs ("printf@plt") */
	uint8_t *build_id;
	size_t build_id_len;
	int machine;
	/* address ranges of the CUs, for DWARF without .debug_aranges (clang's default) */
	struct cu_range { uint64_t lo, hi; Dwarf_Off off; } *cus;
	size_t ncus;
	int cus_built;
};

struct idname {
	uint64_t id, addr;
	char *name;
	int has_addr;
};

struct tk_sym {
	struct tk_sym_opts opts;
	struct module *mods;
	size_t nmods, cmods;
	struct idname *ids;
	size_t nids, cids;
	int ids_sorted;
	tk_sym_func_fn resolver;
	void *resolver_ctx;
	struct demangler *dm;     /* names as the options show them */
};

struct tk_sym *tk_sym_new(const struct tk_sym_opts *opts, int *err)
{
	struct tk_sym *s = calloc(1, sizeof *s);
	if (!s) {
		if (err)
			*err = -TK_E_NOMEM;
		return NULL;
	}
	if (opts) {
		size_t n = opts->sz < sizeof s->opts ? opts->sz : sizeof s->opts;
		memcpy(&s->opts, opts, n);
	}
	if (!(s->dm = demangler_new(s->opts.no_demangle ? DEMANGLE_NONE :
				    s->opts.short_names ? DEMANGLE_SHORT : DEMANGLE_FULL))) {
		free(s);
		if (err)
			*err = -TK_E_NOMEM;
		return NULL;
	}
	elf_version(EV_CURRENT);
	if (err)
		*err = 0;
	return s;
}

void tk_sym_free(struct tk_sym *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmods; i++) {
		struct module *m = &s->mods[i];
		if (m->dw)
			dwarf_end(m->dw);
		if (m->elf)
			elf_end(m->elf);
		if (m->fd >= 0)
			close(m->fd);
		if (m->dbg_elf)
			elf_end(m->dbg_elf);
		if (m->dbg_fd >= 0)
			close(m->dbg_fd);
		free(m->path);
		free(m->syms);
		free(m->fde_starts);
		free(m->strings);
		free(m->plt_strings);
		free(m->build_id);
		free(m->cus);
	}
	for (size_t i = 0; i < s->nids; i++)
		free(s->ids[i].name);
	free(s->ids);
	free(s->mods);
	demangler_free(s->dm);
	free(s);
}

/* How internal an alias looks (lower is the name users know): glibc's hidden __GI_ and
 * __EI_ aliases and versioned names last, then by leading underscores (printf before
 * _IO_printf, log1p before __w_log1p, as a debug file lists them all). */
static int alias_rank(const char *n)
{
	int r = !strncmp(n, "__GI_", 5) || !strncmp(n, "__EI_", 5) || strchr(n, '@') ? 100 : 0;
	while (*n == '_')
		r++, n++;
	return r;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct symbol *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* prefer sized, global-looking names first: stable order by size, rank, then name */
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	int rx = alias_rank(x->name), ry = alias_rank(y->name);
	if (rx != ry)
		return rx < ry ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Sort V's N symbols by address, the aliases of one address in cmp_sym's order, and keep
 * the first of each address; returns how many are kept. (By radix on the address: qsort
 * with cmp_sym took 5 ms of a libLLVM profile's serial start.) */
static size_t sort_symbols(struct symbol *v, size_t n)
{
	if (tk_sort_by_u64(v, n, sizeof *v, offsetof(struct symbol, addr)) < 0) {
		qsort(v, n, sizeof *v, cmp_sym);   /* no memory for the radix sort's copy */
	} else {
		for (size_t i = 0, j; i < n; i = j) {
			for (j = i + 1; j < n && v[j].addr == v[i].addr; j++)
				;
			if (j - i > 1)
				qsort(v + i, j - i, sizeof *v, cmp_sym);
		}
	}
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		if (!w || v[w - 1].addr != v[i].addr)
			v[w++] = v[i];
	return w;
}

struct got_name {
	uint64_t slot;            /* GOT entry (file address) */
	const char *name;         /* symbol whose address the dynamic linker puts there */
};

static const char *got_lookup(const struct got_name *g, size_t n, uint64_t slot)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (g[mid].slot < slot)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && g[lo].slot == slot ? g[lo].name : NULL;
}

/* Symbol I of a symbol table's data; of an ELF64 file (IS64) read in place from the
 * memory image libelf made (GElf's types are ELF64's), checked against its size; other
 * classes through the copying getter. (Relocations are read so below: gelf_getrela
 * was a tenth of loading a large module's symbols, libLLVM's 400 K relocations.) */
static int sym_at(Elf_Data *d, int is64, size_t i, GElf_Sym *s)
{
	if (is64 && d->d_type == ELF_T_SYM && d->d_size % sizeof(Elf64_Sym) == 0) {
		if (i >= d->d_size / sizeof(Elf64_Sym))
			return 0;
		memcpy(s, (const Elf64_Sym *)d->d_buf + i, sizeof *s);
		return 1;
	}
	return i <= INT32_MAX && gelf_getsym(d, (int)i, s) != NULL;
}

/* The GOT slot a PLT entry jumps through: `jmp [rip+disp32]` (ff 25), maybe after endbr64
 * and/or a bnd prefix, as the linkers lay out .plt, .plt.sec and .plt.got entries. */
static int plt_entry_slot(const uint8_t *c, size_t n, uint64_t addr, uint64_t *slot)
{
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	size_t o = 0;
	if (n >= 4 && !memcmp(c, endbr64, 4))
		o = 4;
	if (o < n && c[o] == 0xf2)
		o++;
	if (o + 6 > n || c[o] != 0xff || c[o + 1] != 0x25)
		return 0;
	int32_t disp;
	memcpy(&disp, c + o + 2, 4);
	*slot = addr + o + 6 + (uint64_t)(int64_t)disp;
	return 1;
}

struct plt_stub {
	uint64_t addr, size, slot;   /* the stub, and the GOT slot it jumps through */
};

/* The stubs of M's .plt, .plt.sec and .plt.got sections (malloc'd, *n of them). */
static int plt_stubs(struct module *m, size_t shstrndx, struct plt_stub **out, size_t *n)
{
	struct plt_stub *v = NULL;
	size_t cap = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	*n = 0;
	while ((scn = elf_nextscn(m->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		const char *sname = elf_strptr(m->elf, shstrndx, sh.sh_name);
		if (!sname || (strcmp(sname, ".plt") && strcmp(sname, ".plt.sec") && strcmp(sname, ".plt.got")))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		uint64_t es = sh.sh_entsize ? sh.sh_entsize : 16;
		if (!d || !d->d_buf || d->d_size < sh.sh_size || es > 64)
			continue;
		for (uint64_t e = 0; e + es <= sh.sh_size; e += es) {
			uint64_t slot;
			if (!plt_entry_slot((const uint8_t *)d->d_buf + e, es, sh.sh_addr + e, &slot))
				continue;
			if (*n == cap) {
				struct plt_stub *nv = realloc(v, (cap = cap * 2 + 64) * sizeof *nv);
				if (!nv) {
					free(v);
					return -TK_E_NOMEM;
				}
				v = nv;
			}
			v[(*n)++] = (struct plt_stub){ sh.sh_addr + e, es, slot };
		}
	}
	*out = v;
	return 0;
}

/* Append to G the names of the GOT slots that M's JUMP_SLOT and GLOB_DAT relocations
 * fill, from the RELA sections with SHF_INFO_LINK (the PLT's own, .rela.plt) when
 * PLT_RELA, else from the others (.rela.dyn: libLLVM's has 400 K relocations, read only
 * when a stub's slot is not named by the first). Adds the names' bytes to *NSTR. */
static int got_names(struct module *m, int plt_rela, struct got_name **g, size_t *ng,
		     size_t *cg, size_t *nstr)
{
	int is64 = gelf_getclass(m->elf) == ELFCLASS64;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(m->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize ||
		    !(sh.sh_flags & SHF_INFO_LINK) != !plt_rela)
			continue;
		Elf_Scn *symscn = elf_getscn(m->elf, sh.sh_link);
		GElf_Shdr symsh;
		Elf_Data *d = elf_getdata(scn, NULL), *sd = symscn ? elf_getdata(symscn, NULL) : NULL;
		if (!d || !sd || !gelf_getshdr(symscn, &symsh) || symsh.sh_type != SHT_DYNSYM)
			continue;
		const Elf64_Rela *rv = is64 && d->d_type == ELF_T_RELA ? d->d_buf : NULL;
		size_t n = rv ? d->d_size / sizeof *rv : sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Rela r;
			GElf_Sym sym;
			if (rv)
				r = rv[i];
			else if (i > INT32_MAX || !gelf_getrela(d, (int)i, &r))
				continue;
			unsigned type = (unsigned)GELF_R_TYPE(r.r_info);
			if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) ||
			    !sym_at(sd, is64, GELF_R_SYM(r.r_info), &sym))
				continue;
			const char *name = elf_strptr(m->elf, symsh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			if (*ng == *cg) {
				struct got_name *ng2 = realloc(*g, (*cg = *cg * 2 + 64) * sizeof *ng2);
				if (!ng2)
					return -TK_E_NOMEM;
				*g = ng2;
			}
			(*g)[(*ng)++] = (struct got_name){ r.r_offset, name };
			*nstr += strlen(name) + sizeof "@plt";
		}
	}
	return tk_sort_by_u64(*g, *ng, sizeof **g, offsetof(struct got_name, slot));
}

/* Synthetic symbols "name@plt" for the PLT stubs of an x86-64 module (as objdump and perf
 * name them): each stub of .plt / .plt.sec / .plt.got jumps through a GOT slot, and the
 * slot's JUMP_SLOT or GLOB_DAT relocation names the function. Appended at m->syms + *k. */
static int add_plt_symbols(struct module *m, size_t *k, size_t *cap)
{
	size_t shstrndx, nstub = 0, ngot = 0, cgot = 0, nstr = 0, off = 0;
	struct plt_stub *stub = NULL;
	struct got_name *got = NULL;
	int rc;

	if (m->machine != EM_X86_64 || elf_getshdrstrndx(m->elf, &shstrndx) != 0)
		return 0;
	if ((rc = plt_stubs(m, shstrndx, &stub, &nstub)) < 0 || !nstub)
		return rc;
	rc = got_names(m, 1, &got, &ngot, &cgot, &nstr);
	size_t named = 0;
	while (rc == 0 && named < nstub && got_lookup(got, ngot, stub[named].slot))
		named++;
	if (rc == 0 && named < nstub)
		rc = got_names(m, 0, &got, &ngot, &cgot, &nstr);
	if (rc == 0 && ngot && !(m->plt_strings = malloc(nstr)))
		rc = -TK_E_NOMEM;
	for (size_t i = 0; rc == 0 && ngot && i < nstub; i++) {
		const char *name = got_lookup(got, ngot, stub[i].slot);
		if (!name)
			continue;
		size_t len = strlen(name);
		if (off + len + sizeof "@plt" > nstr)
			break;   /* a name used by two stubs: out of room, keep the rest unnamed */
		if (*k == *cap) {
			size_t nc = *cap * 2 + 16;
			struct symbol *ns = realloc(m->syms, nc * sizeof *ns);
			if (!ns) {
				rc = -TK_E_NOMEM;
				break;
			}
			m->syms = ns;
			*cap = nc;
		}
		char *dst = m->plt_strings + off;
		memcpy(dst, name, len);
		memcpy(dst + len, "@plt", sizeof "@plt");
		off += len + sizeof "@plt";
		m->syms[(*k)++] = (struct symbol){ stub[i].addr, stub[i].size, dst };
	}
	free(stub);
	free(got);
	return rc;
}

/* The symbol table section of E: .symtab, else (with DYNSYM_OK) .dynsym, else NULL. */
static Elf_Scn *symbol_section(Elf *e, int dynsym_ok)
{
	Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			symtab = scn;
		else if (sh.sh_type == SHT_DYNSYM)
			dynsym = scn;
	}
	return symtab ? symtab : dynsym_ok ? dynsym : NULL;
}

/* A stripped module (Debian's libc) keeps its full symbol table in a separate debug file
 * named by its build id (libc6-dbg installs libc's): open it when the module has no
 * .symtab, so that profiles name its internal functions. */
static void open_debug_file(struct module *m)
{
	char path[64 + 2 * 64];
	m->dbg_fd = -1;
	if (symbol_section(m->elf, 0) ||
	    tk_debug_file_path(path, sizeof path, m->build_id, m->build_id_len) < 0)
		return;
	m->dbg_fd = tk_open_code_file(path);
	if (m->dbg_fd < 0)
		return;
	m->dbg_elf = elf_begin(m->dbg_fd, ELF_C_READ_MMAP, NULL);
	if (!m->dbg_elf || elf_kind(m->dbg_elf) != ELF_K_ELF || !symbol_section(m->dbg_elf, 0)) {
		if (m->dbg_elf)
			elf_end(m->dbg_elf);
		m->dbg_elf = NULL;
		close(m->dbg_fd);
		m->dbg_fd = -1;
	}
}

static int load_symbols(struct module *m)
{
	Elf *e = m->dbg_elf ? m->dbg_elf : m->elf;
	Elf_Scn *scn = symbol_section(e, 1);
	GElf_Shdr sh;
	if (!scn)
		return 0;
	gelf_getshdr(scn, &sh);
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !sh.sh_entsize)
		return 0;
	size_t n = sh.sh_size / sh.sh_entsize, k = 0;
	int is64 = gelf_getclass(e) == ELFCLASS64;
	/* the names stay in the file's mapping (open until tk_sym_free): copying them read
	 * every page of a large module's string table (libLLVM: 3.4 MB) before any trace */
	if (!(m->syms = malloc((n + 1) * sizeof *m->syms)))
		return -TK_E_NOMEM;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		if (!sym_at(d, is64, i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value)
			continue;
		const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
		if (name)
			m->syms[k++] = (struct symbol){ sym.st_value, sym.st_size, name };
	}
	size_t cap = n + 1;
	int rc = add_plt_symbols(m, &k, &cap);
	if (rc < 0)
		return rc;
	m->nsyms = sort_symbols(m->syms, k);
	return 0;
}

/* A stripped module's .dynsym lists only exported functions: a callback into a local one
 * (qsort's comparator, a virtual method called from untraced code) would resume tracing
 * at an address that is no known entry, and the profile would lose its stack there. Every
 * function the compiler emitted has an FDE in .eh_frame, and .eh_frame_hdr lists their
 * starts sorted: take those (eh_frame_hdr.h; another layout leaves the module with its
 * symbols alone). */
static int load_fde_starts(struct module *m)
{
	size_t nph = tk_elf_phdr_count(m->elf);
	GElf_Phdr ph;
	int found = 0;
	const char *ident = elf_getident(m->elf, NULL);
	if (symbol_section(m->dbg_elf ? m->dbg_elf : m->elf, 0) || !ident || ident[EI_DATA] != ELFDATA2LSB)
		return 0;
	for (size_t i = 0; i < nph && !found; i++)
		found = gelf_getphdr(m->elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME;
	if (!found || ph.p_filesz < 12)
		return 0;
	Elf_Data *d = elf_getdata_rawchunk(m->elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_BYTE);
	if (!d || !d->d_buf)
		return 0;
	const uint8_t *h = d->d_buf;
	int64_t count = tk_ehfh_count(h, d->d_size);
	if (count < 0) {
		tk_log(TK_LOG_WARN, "%s: .eh_frame_hdr at offset 0x%llx claims %u functions, has "
		       "room for %zu: damaged, not used (local functions are not entries)", m->path,
		       (unsigned long long)ph.p_offset, tk_ehfh_le32(h + 8), (d->d_size - 12) / 8);
		return 0;
	}
	size_t n = (size_t)count;
	/* the linker's FDE for a PLT covers stubs, not a function: its stubs are named
	 * symbols already, and its start (PLT0) is the lazy binder's, jumped to by them */
	uint64_t plt_lo[4], plt_hi[4];
	size_t nplt = 0, shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	if (elf_getshdrstrndx(m->elf, &shstrndx) == 0)
		while ((scn = elf_nextscn(m->elf, scn)) && nplt < 4) {
			const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(m->elf, shstrndx, sh.sh_name) : NULL;
			if (name && !strncmp(name, ".plt", 4)) {
				plt_lo[nplt] = sh.sh_addr;
				plt_hi[nplt++] = sh.sh_addr + sh.sh_size;
			}
		}
	if (!(m->fde_starts = malloc((n + 1) * sizeof *m->fde_starts)))
		return -TK_E_NOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t a = tk_ehfh_start(h, ph.p_vaddr, i);
		size_t j = 0;
		while (j < nplt && !(a >= plt_lo[j] && a < plt_hi[j]))
			j++;
		if (j == nplt)
			m->fde_starts[k++] = a;
	}
	m->nfde_starts = k;
	return 0;
}

int tk_sym_add_elf(struct tk_sym *s, const char *path, uint64_t bias)
{
	if (s->nmods == s->cmods) {
		size_t nc = s->cmods ? s->cmods * 2 : 8;
		struct module *nm = realloc(s->mods, nc * sizeof *nm);
		if (!nm)
			return -TK_E_NOMEM;
		s->mods = nm;
		s->cmods = nc;
	}
	struct module *m = &s->mods[s->nmods];
	memset(m, 0, sizeof *m);
	m->fd = tk_open_code_file(path);
	if (m->fd < 0) {
		tk_log(TK_LOG_ERROR, "%s: cannot open%s", path, m->fd == -2 ? ": not a regular file" : "");
		return -TK_E_IO;
	}
	m->elf = elf_begin(m->fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	if (!m->elf || elf_kind(m->elf) != ELF_K_ELF || !gelf_getehdr(m->elf, &eh)) {
		tk_log(TK_LOG_ERROR, "%s: not an ELF file", path);
		if (m->elf)
			elf_end(m->elf);
		close(m->fd);
		return -TK_E_BAD_FORMAT;
	}
	m->machine = eh.e_machine;
	m->path = strdup(path);
	const char *slash = m->path ? strrchr(m->path, '/') : NULL;
	m->base = slash ? slash + 1 : m->path;
	m->bias = bias;
	size_t nph = tk_elf_phdr_count(m->elf);
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(m->elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
			if (ph.p_vaddr < lo)
				lo = ph.p_vaddr;
			if (ph.p_vaddr + ph.p_memsz > hi)
				hi = ph.p_vaddr + ph.p_memsz;
		}
	}
	if (lo == UINT64_MAX)
		lo = hi = 0;
	m->start = lo + bias;
	m->end = hi + bias;
	const void *bid;
	ssize_t bl = dwelf_elf_gnu_build_id(m->elf, &bid);
	if (bl > 0 && (m->build_id = malloc((size_t)bl))) {
		memcpy(m->build_id, bid, (size_t)bl);
		m->build_id_len = (size_t)bl;
	}
	open_debug_file(m);
	int rc = load_symbols(m);
	if (rc >= 0)
		rc = load_fde_starts(m);
	if (!s->opts.no_dwarf)
		m->dw = dwarf_begin_elf(m->elf, DWARF_C_READ, NULL); /* NULL: no debug info */
	s->nmods++;
	if (rc < 0)
		return rc;
	return (int)(s->nmods - 1);
}

int tk_sym_add_elf_at(struct tk_sym *s, const char *path, uint64_t base)
{
	int fd = tk_open_code_file(path);
	if (fd < 0) {
		tk_log(TK_LOG_ERROR, "%s: cannot open%s", path, fd == -2 ? ": not a regular file" : "");
		return -TK_E_IO;
	}
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	uint64_t lo = UINT64_MAX;
	size_t nph = tk_elf_phdr_count(e);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < lo)
			lo = ph.p_vaddr;
	}
	int as_linked = e && tk_elf_base_as_linked(e, base);
	if (e)
		elf_end(e);
	close(fd);
	if (lo == UINT64_MAX) {
		tk_log(TK_LOG_ERROR, "%s: no loadable segment", path);
		return -TK_E_BAD_FORMAT;
	}
	return tk_sym_add_elf(s, path, as_linked ? 0 : base - (lo & ~(uint64_t)4095));
}

int tk_sym_bias_from_map(const char *path, uint64_t start, uint64_t offset, uint64_t *bias)
{
	int fd = tk_open_code_file(path), rc = -TK_E_NOT_FOUND;
	if (fd < 0)
		return -TK_E_IO;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t nph = 0;
	if (e && elf_getphdrnum(e, &nph) == 0) {
		nph = tk_elf_phdr_count(e);
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			uint64_t align = ph.p_align > 1 ? ph.p_align : 4096;
			if (align > 4096)
				align = 4096; /* mappings are page granular */
			if ((ph.p_offset & ~(align - 1)) == offset) {
				*bias = start - (ph.p_vaddr - (ph.p_offset - offset));
				rc = 0;
				break;
			}
		}
	} else {
		rc = -TK_E_BAD_FORMAT;
	}
	if (e)
		elf_end(e);
	close(fd);
	return rc;
}

int tk_sym_add_range(struct tk_sym *s, const char *name, uint64_t start, uint64_t end)
{
	if (s->nmods == s->cmods) {
		size_t nc = s->cmods ? s->cmods * 2 : 8;
		struct module *nm = realloc(s->mods, nc * sizeof *nm);
		if (!nm)
			return -TK_E_NOMEM;
		s->mods = nm;
		s->cmods = nc;
	}
	struct module *m = &s->mods[s->nmods];
	memset(m, 0, sizeof *m);
	m->fd = m->dbg_fd = -1;
	m->path = strdup(name);
	if (!m->path)
		return -TK_E_NOMEM;
	m->base = m->path;
	m->start = start;
	m->end = end;
	m->bias = start;
	return (int)s->nmods++;
}

/* One line of a kallsyms listing: "ADDRESS TYPE NAME[\t[MODULE]]". 1: a text symbol, 0:
 * another symbol (or an address hidden from the reader: kptr_restrict gives zeros), -1:
 * not such a line. */
static int kallsyms_line(char *line, uint64_t *addr, char **name)
{
	char *end, *type, *nm;

	*addr = strtoull(line, &end, 16);
	if (end == line || *end != ' ' || !end[1] || end[2] != ' ')
		return -1;
	type = end + 1;
	nm = type + 2;
	nm[strcspn(nm, " \t\n")] = 0;
	if (!*nm)
		return -1;
	*name = nm;
	return (*type == 't' || *type == 'T') && *addr != 0;
}

int tk_sym_add_kallsyms(struct tk_sym *s, const char *path, const char *name)
{
	FILE *f = fopen(path, "re");
	struct symbol *syms = NULL;
	size_t n = 0, cap = 0, nstr = 0, cstr = 0;
	char *strings = NULL, *line = NULL, *nm;
	size_t linecap = 0, lineno = 0, bad = 0, first_bad = 0;
	uint64_t addr;
	int rc = 0, kind;

	if (!f)
		return -TK_E_IO;
	while (getline(&line, &linecap, f) > 0) {
		lineno++;
		if ((kind = kallsyms_line(line, &addr, &nm)) < 0 && !bad++)
			first_bad = lineno;
		if (kind <= 0)
			continue;
		size_t len = strlen(nm) + 1;
		if (n == cap) {
			void *v = realloc(syms, (cap = cap ? 2 * cap : 4096) * sizeof *syms);
			if (!v) {
				rc = -TK_E_NOMEM;
				break;
			}
			syms = v;
		}
		if (nstr + len > cstr) {
			void *v = realloc(strings, cstr = 2 * (nstr + len) + 65536);
			if (!v) {
				rc = -TK_E_NOMEM;
				break;
			}
			strings = v;
		}
		memcpy(strings + nstr, nm, len);
		/* the name's offset for now: strings moves as it grows */
		syms[n++] = (struct symbol){ addr, 0, (const char *)(uintptr_t)nstr };
		nstr += len;
	}
	free(line);
	fclose(f);
	if (bad)
		tk_log(TK_LOG_WARN, "%s: line %zu: not a kallsyms line (address, type, name); %zu "
		       "such lines skipped, the others read", path, first_bad, bad);
	if (rc == 0 && !n)
		rc = -TK_E_NOT_FOUND;
	if (rc == 0)
		rc = tk_sym_add_range(s, name, 0, 0);
	if (rc < 0) {
		free(syms);
		free(strings);
		return rc;
	}
	for (size_t i = 0; i < n; i++)
		syms[i].name = strings + (uintptr_t)syms[i].name;
	size_t w = sort_symbols(syms, n);
	/* a listing has no sizes: each symbol runs to the next (the last names its address) */
	for (size_t i = 0; i + 1 < w; i++)
		syms[i].size = syms[i + 1].addr - syms[i].addr;
	struct module *m = &s->mods[rc];
	m->syms = syms;
	m->nsyms = w;
	m->strings = strings;
	m->bias = 0;
	m->start = syms[0].addr;
	m->end = syms[w - 1].addr + 1;
	return rc;
}

/* ---- function ids ------------------------------------------------------------------------- */

static int cmp_id(const void *a, const void *b)
{
	const struct idname *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

int tk_sym_set_func(struct tk_sym *s, uint64_t id, const char *name, uint64_t addr)
{
	if (s->nids == s->cids) {
		size_t nc = s->cids ? s->cids * 2 : 64;
		struct idname *n = realloc(s->ids, nc * sizeof *n);
		if (!n)
			return -TK_E_NOMEM;
		s->ids = n;
		s->cids = nc;
	}
	char *c = name ? strdup(name) : NULL;
	if (name && !c)
		return -TK_E_NOMEM;
	s->ids[s->nids++] = (struct idname){ id, addr, c, addr != 0 };
	s->ids_sorted = 0;
	return 0;
}

void tk_sym_set_func_resolver(struct tk_sym *s, tk_sym_func_fn fn, void *ctx)
{
	s->resolver = fn;
	s->resolver_ctx = ctx;
}

static const struct idname *find_id(struct tk_sym *s, uint64_t id)
{
	if (!s->nids)
		return NULL;
	if (!s->ids_sorted) {
		qsort(s->ids, s->nids, sizeof *s->ids, cmp_id);
		s->ids_sorted = 1;
	}
	size_t lo = 0, hi = s->nids;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->ids[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* the last entry wins when an id was set twice */
	const struct idname *r = NULL;
	for (; lo < s->nids && s->ids[lo].id == id; lo++)
		r = &s->ids[lo];
	return r;
}

int tk_sym_func_addr(struct tk_sym *s, uint64_t id, uint64_t *addr)
{
	const struct idname *n = find_id(s, id);
	if (n && n->has_addr) {
		*addr = n->addr;
		return 0;
	}
	if (s->resolver) {
		const char *name = NULL;
		uint64_t a = 0;
		if (s->resolver(s->resolver_ctx, id, &name, &a) == 0 && a) {
			*addr = a;
			return 0;
		}
	}
	return -TK_E_NOT_FOUND;
}

const char *tk_sym_func_name(struct tk_sym *s, uint64_t id, char *buf, size_t n)
{
	const struct idname *e = find_id(s, id);
	uint64_t addr = 0;
	if (e && e->name)
		return demangle(s->dm, e->name);
	if (e && e->has_addr)
		addr = e->addr;
	if (!addr && s->resolver) {
		const char *name = NULL;
		if (s->resolver(s->resolver_ctx, id, &name, &addr) == 0 && name) {
			snprintf(buf, n, "%s", demangle(s->dm, name));
			return buf;
		}
	}
	if (addr) {
		struct tk_sym_info si;
		if (tk_sym_lookup(s, addr, &si) == 0 && si.func && si.func_start == addr) {
			snprintf(buf, n, "%s", si.func);
			return buf;
		}
		return tk_sym_addr_name(s, addr, 1, buf, n);
	}
	snprintf(buf, n, "#%llu", (unsigned long long)id);
	return buf;
}

/* ---- addresses ------------------------------------------------------------------------------ */

static struct module *find_module(struct tk_sym *s, uint64_t addr)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (addr >= s->mods[i].start && addr < s->mods[i].end)
			return &s->mods[i];
	return NULL;
}

static const struct symbol *find_symbol(const struct module *m, uint64_t fa)
{
	size_t lo = 0, hi = m->nsyms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->syms[mid].addr <= fa)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	const struct symbol *sy = &m->syms[lo - 1];
	/* a symbol without size (e.g. _init) names its own address only, so code after it
	 * (PLT stubs) is not taken for it */
	if (sy->size ? fa >= sy->addr + sy->size : fa != sy->addr)
		return NULL;
	return sy;
}

static void build_cu_ranges(struct module *m)
{
	size_t cap = 0;
	Dwarf_Off off = 0, next;
	size_t hsize;
	m->cus_built = 1;
	while (dwarf_nextcu(m->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		if (dwarf_offdie(m->dw, off + hsize, &cu)) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t it = 0;
			while ((it = dwarf_ranges(&cu, it, &base, &lo, &hi)) > 0) {
				if (m->ncus == cap) {
					size_t nc = cap ? cap * 2 : 64;
					struct cu_range *nr = realloc(m->cus, nc * sizeof *nr);
					if (!nr)
						return;
					m->cus = nr;
					cap = nc;
				}
				m->cus[m->ncus++] = (struct cu_range){ lo, hi, off + hsize };
			}
		}
		off = next;
	}
}

/* The compile unit covering file address FA. */
static int find_cu(struct module *m, uint64_t fa, Dwarf_Die *cu)
{
	if (dwarf_addrdie(m->dw, fa, cu))
		return 1;
	if (!m->cus_built)
		build_cu_ranges(m);
	for (size_t i = 0; i < m->ncus; i++)
		if (fa >= m->cus[i].lo && fa < m->cus[i].hi)
			return dwarf_offdie(m->dw, m->cus[i].off, cu) != NULL;
	return 0;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a))
		n = dwarf_formstring(&a);
	if (!n && dwarf_attr_integrate(die, DW_AT_name, &a))
		n = dwarf_formstring(&a);
	return n;
}

/* Where inlined call SCOPE was made: its file and line in the function around it. */
static void call_site(Dwarf_Die *cu, Dwarf_Die *scope, const char **file, unsigned *line)
{
	Dwarf_Attribute a;
	Dwarf_Word w;
	if (dwarf_attr(scope, DW_AT_call_line, &a) && dwarf_formudata(&a, &w) == 0)
		*line = (unsigned)w;
	if (dwarf_attr(scope, DW_AT_call_file, &a) && dwarf_formudata(&a, &w) == 0) {
		Dwarf_Files *files;
		size_t nf;
		if (dwarf_getsrcfiles(cu, &files, &nf) == 0 && w < nf)
			*file = dwarf_filesrc(files, w, NULL, NULL);
	}
}

static void inline_info(struct tk_sym *s, Dwarf_Die *cu, uint64_t fa, struct tk_sym_info *si)
{
	Dwarf_Die *scopes = NULL;
	int n = dwarf_getscopes(cu, fa, &scopes);
	for (int i = 0; i < n; i++) {
		if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
			continue;
		si->inline_func = demangle(s->dm, die_name(&scopes[i]));
		call_site(cu, &scopes[i], &si->inline_file, &si->inline_line);
		break;
	}
	free(scopes);
}

int tk_sym_frames(struct tk_sym *s, uint64_t addr, struct tk_sym_frame *out, int max)
{
	struct module *m = find_module(s, addr);
	Dwarf_Die cu;
	if (!m || !m->dw || max < 1)
		return 0;
	uint64_t fa = addr - m->bias;
	if (!find_cu(m, fa, &cu))
		return 0;
	Dwarf_Line *l = dwarf_getsrc_die(&cu, fa);
	int line = 0;
	if (!l || dwarf_lineno(l, &line) != 0)
		return 0;
	struct tk_sym_frame at = { NULL, dwarf_linesrc(l, NULL, NULL), (unsigned)line };
	if (!at.file)
		return 0;
	int k = 0;
	Dwarf_Die *scopes = NULL;
	int n = s->opts.no_inline ? 0 : dwarf_getscopes(&cu, fa, &scopes);
	/* innermost scope first: each inlined call moves the position to its call site */
	for (int i = 0; i < n && dwarf_tag(&scopes[i]) != DW_TAG_subprogram; i++) {
		if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
			continue;
		if (k == max - 1) {        /* deeper than OUT holds: the line alone */
			k = 0;
			at = out[0];
			at.func = NULL;
			break;
		}
		out[k] = at;
		out[k++].func = demangle(s->dm, die_name(&scopes[i]));
		call_site(&cu, &scopes[i], &at.file, &at.line);
	}
	free(scopes);
	out[k++] = at;
	return k;
}

int tk_sym_lookup(struct tk_sym *s, uint64_t addr, struct tk_sym_info *si)
{
	memset(si, 0, sizeof *si);
	struct module *m = find_module(s, addr);
	if (!m)
		return 0;
	si->module = m->path;
	uint64_t fa = addr - m->bias;
	si->module_offset = fa;
	si->build_id = m->build_id;
	si->build_id_len = m->build_id_len;
	const struct symbol *sy = find_symbol(m, fa);
	if (sy) {
		si->func = demangle(s->dm, sy->name);
		si->func_start = sy->addr + m->bias;
		si->func_size = sy->size;
	}
	if (m->dw) {
		Dwarf_Die cu;
		if (find_cu(m, fa, &cu)) {
			Dwarf_Line *l = dwarf_getsrc_die(&cu, fa);
			int line = 0, col = 0;
			if (l) {
				si->file = dwarf_linesrc(l, NULL, NULL);
				dwarf_lineno(l, &line);
				dwarf_linecol(l, &col);
				si->line = (unsigned)line;
				si->column = (unsigned)col;
			}
			if (!s->opts.no_inline)
				inline_info(s, &cu, fa, si);
		}
	}
	return 0;
}

const char *tk_sym_addr_name(struct tk_sym *s, uint64_t addr, int with_offset, char *buf, size_t n)
{
	struct tk_sym_info si;
	tk_sym_lookup(s, addr, &si);
	if (si.func) {
		if (with_offset && addr != si.func_start)
			snprintf(buf, n, "%s+0x%llx", si.func, (unsigned long long)(addr - si.func_start));
		else
			snprintf(buf, n, "%s", si.func);
	} else if (si.module) {
		const char *slash = strrchr(si.module, '/');
		snprintf(buf, n, "%s+0x%llx", slash ? slash + 1 : si.module,
			 (unsigned long long)si.module_offset);
	} else {
		snprintf(buf, n, "0x%llx", (unsigned long long)addr);
	}
	return buf;
}

/* Code bytes of the module at file address FA, from its section headers. */
static const uint8_t *code_at(struct module *m, uint64_t fa, size_t *avail)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while (m->elf && (scn = elf_nextscn(m->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		if (fa < sh.sh_addr || fa >= sh.sh_addr + sh.sh_size)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size < sh.sh_size)
			return NULL;
		*avail = sh.sh_addr + sh.sh_size - fa;
		return (const uint8_t *)d->d_buf + (fa - sh.sh_addr);
	}
	return NULL;
}

int tk_sym_line_ranges(struct tk_sym *s, uint64_t start, uint64_t end, uint64_t total_insns,
		       tk_sym_range_fn fn, void *ctx)
{
	struct module *m = find_module(s, start);
	Dwarf_Die cu;
	if (!m || !m->dw || end < start)
		return 0;
	uint64_t fa = start - m->bias, fend = end - m->bias;
	if (!find_cu(m, fa, &cu))
		return 0;
	size_t avail = 0;
	const uint8_t *code = code_at(m, fa, &avail);
	const char *cur_file = NULL;
	unsigned cur_line = 0;
	uint64_t cur_n = 0, cur_a = fa;
	int rc = 0;

	if (code && (m->machine == EM_X86_64 || m->machine == EM_AARCH64)) {
		ZydisDecoder dec;
		ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
		uint64_t a = fa;
		while (a <= fend && a - fa < avail) {
			size_t len = 4;
			if (m->machine == EM_X86_64) {
				ZydisDecodedInstruction insn;
				if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, NULL, code + (a - fa),
									      avail - (a - fa), &insn)))
					break;
				len = insn.length;
			}
			Dwarf_Line *l = dwarf_getsrc_die(&cu, a);
			const char *file = l ? dwarf_linesrc(l, NULL, NULL) : NULL;
			int line = 0;
			if (l)
				dwarf_lineno(l, &line);
			if (cur_n && (file != cur_file || (unsigned)line != cur_line)) {
				if (cur_file && (rc = fn(ctx, cur_a + m->bias, cur_file, cur_line, cur_n)) < 0)
					return rc;
				cur_n = 0;
			}
			if (!cur_n)
				cur_a = a;
			cur_file = file;
			cur_line = (unsigned)line;
			cur_n++;
			a += len;
		}
		if (cur_n && cur_file)
			rc = fn(ctx, cur_a + m->bias, cur_file, cur_line, cur_n);
		return rc;
	}
	/* no code bytes: whole block on one line when its ends agree */
	Dwarf_Line *l1 = dwarf_getsrc_die(&cu, fa), *l2 = dwarf_getsrc_die(&cu, fend);
	int n1 = 0, n2 = 0;
	if (!l1 || !l2)
		return 0;
	dwarf_lineno(l1, &n1);
	dwarf_lineno(l2, &n2);
	const char *f1 = dwarf_linesrc(l1, NULL, NULL), *f2 = dwarf_linesrc(l2, NULL, NULL);
	if (f1 && f1 == f2 && n1 == n2)
		return fn(ctx, start, f1, (unsigned)n1, total_insns);
	if (f1 && (rc = fn(ctx, start, f1, (unsigned)n1, 0)) < 0)
		return rc;
	if (f2 && (f2 != f1 || n2 != n1))
		rc = fn(ctx, end, f2, (unsigned)n2, 0);
	return rc;
}

struct lines_ctx {
	tk_sym_line_fn fn;
	void *ctx;
};

static int lines_cb(void *ctx, uint64_t addr, const char *file, unsigned line, uint64_t insns)
{
	struct lines_ctx *c = ctx;
	(void)addr;
	return c->fn(c->ctx, file, line, insns);
}

int tk_sym_lines(struct tk_sym *s, uint64_t start, uint64_t end, uint64_t total_insns,
		 tk_sym_line_fn fn, void *ctx)
{
	struct lines_ctx c = { fn, ctx };
	return tk_sym_line_ranges(s, start, end, total_insns, lines_cb, &c);
}

const char *tk_sym_build_id(struct tk_sym *s, int module, char *buf, size_t n)
{
	size_t k = 0;
	if (n)
		buf[0] = 0;
	if (module < 0 || (size_t)module >= s->nmods)
		return buf;
	const struct module *m = &s->mods[module];
	for (size_t i = 0; i < m->build_id_len && k + 3 <= n; i++, k += 2)
		snprintf(buf + k, 3, "%02x", m->build_id[i]);
	return buf;
}

int tk_sym_module_count(const struct tk_sym *s)
{
	return (int)s->nmods;
}

int tk_sym_module(const struct tk_sym *s, int index, const char **path, uint64_t *bias,
		  uint64_t *start, uint64_t *end)
{
	if (index < 0 || (size_t)index >= s->nmods)
		return -TK_E_INVAL;
	const struct module *m = &s->mods[index];
	if (path)
		*path = m->path;
	if (bias)
		*bias = m->bias;
	if (start)
		*start = m->start;
	if (end)
		*end = m->end;
	return 0;
}

int tk_sym_entries(const struct tk_sym *s, uint64_t **out, size_t *n)
{
	size_t total = 0, k = 0;
	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < s->nmods; i++)
		total += s->mods[i].nsyms + s->mods[i].nfde_starts;
	uint64_t *e = malloc((total + 1) * sizeof *e);
	if (!e)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < s->nmods; i++) {
		/* both lists are in address order: merged, the whole is sorted in one pass unless
		 * the modules overlap or are out of order (then sorted below) */
		const struct module *m = &s->mods[i];
		size_t a = 0, b = 0;
		while (a < m->nsyms || b < m->nfde_starts)
			e[k++] = m->bias + (b == m->nfde_starts ||
					    (a < m->nsyms && m->syms[a].addr <= m->fde_starts[b])
					    ? m->syms[a++].addr : m->fde_starts[b++]);
	}
	if (tk_sort_u64(e, k) < 0) {
		free(e);
		return -TK_E_NOMEM;
	}
	*out = e;
	*n = k;
	return 0;
}
