/* libtkbtrace.so start-up: the modules to trace, their symbols and function ranges,
 * every control-transfer instruction found and patched. */
#include "recorder.h"
#include "jtab.h"
#include "leave.h"
#include "sweepops.h"

/* ---- start-up: modules, symbols, CTIs, patching ------------------------------------------ */

struct vec {
	void *p;
	size_t n, cap, elt;
};

static void *vec_push(struct vec *v)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 1024;
		void *p = rec_alloc(cap * v->elt);
		if (!p)
			return NULL;
		if (v->p)
			memcpy(p, v->p, v->n * v->elt);
		rec_free(v->p, v->cap * v->elt);
		v->p = p;
		v->cap = cap;
	}
	return (char *)v->p + v->elt * v->n++;
}

/* Sort N elements of SIZE bytes (8 or 16) by their first u64, in place (heapsort). Not
 * libc's qsort: it keeps state (qsort_r's page size and memory size, computed on its first
 * large sort), and a traced program's first qsort must run as it would without us.
 * Inlined once per SIZE, so that its copies are moves, not calls of mem.c's byte loop
 * (which made sorting a seventh of git's start-up). */
static inline __attribute__((always_inline)) void heap_sort(uint8_t *a, size_t n, size_t size)
{
	uint8_t t[16];
#define KEY(i) (*(const uint64_t *)(const void *)(a + (i) * size))
#define SWAP(i, j) (memcpy(t, a + (i) * size, size), memcpy(a + (i) * size, a + (j) * size, size), \
		    memcpy(a + (j) * size, t, size))
	for (size_t end = n, start = n / 2; end > 1;) {
		size_t root;
		if (start > 0) {
			root = --start;
		} else {
			SWAP(0, end - 1);
			end--;
			root = 0;
		}
		for (size_t child; (child = 2 * root + 1) < end; root = child) {
			if (child + 1 < end && KEY(child + 1) > KEY(child))
				child++;
			if (KEY(root) >= KEY(child))
				break;
			SWAP(root, child);
		}
	}
#undef KEY
#undef SWAP
}

static void sort_u64(void *base, size_t n, size_t size)
{
	if (size == 8)
		heap_sort(base, n, 8);
	else
		heap_sort(base, n, 16);
}

/* Sort the N elements of A, each W (1 or 2) u64 with the key first, by key: a radix sort,
 * one pass per byte in which the keys differ (code addresses: 3 or 4 of the 8), through a
 * scratch copy; heapsort (sort_u64) if the memory is refused. Stable, so for single keys
 * and pairs with unique keys the order is the one any sort gives. Heapsort's random
 * accesses over git's branch targets took 7% of its start-up, over its 16-byte return
 * sites 2-4%. (Elements are copied as words: the recorder's memcpy is a byte loop.) */
static void radix_sort(uint64_t *a, size_t n, size_t w)
{
	static size_t count[8][256];   /* start-up only: one thread */
	uint64_t *tmp = n > 1 ? rec_alloc(n * w * 8) : NULL;
	if (!tmp) {
		if (n > 1)
			sort_u64(a, n, w * 8);
		return;
	}
	memset(count, 0, sizeof count);
	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 8; b++)
			count[b][a[i * w] >> 8 * b & 255]++;
	uint64_t *src = a, *dst = tmp;
	for (int b = 0; b < 8; b++) {
		if (count[b][a[0] >> 8 * b & 255] == n)
			continue;   /* every key has the same byte here */
		size_t at = 0;
		for (int d = 0; d < 256; d++) {
			size_t c = count[b][d];
			count[b][d] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++) {
			size_t j = count[b][src[i * w] >> 8 * b & 255]++;
			dst[j * w] = src[i * w];
			if (w == 2)
				dst[j * w + 1] = src[i * w + 1];
		}
		uint64_t *t = src;
		src = dst;
		dst = t;
	}
	for (size_t i = 0; src != a && i < n * w; i++)
		a[i] = src[i];
	rec_free(tmp, n * w * 8);
}

struct fnrange {
	uint64_t start, end;
};

static size_t reloc_module(struct module *m, uint64_t start, uint64_t end, const struct reloc_entries *ent,
			   const uint64_t *jind, size_t njind);
static uint64_t *reloc_targets, *reloc_jind;
static size_t nreloc_targets, nreloc_jind;
static struct vec reloc_secs[MAX_MODULES];

/* What the relocation pass (reloc_module) needs of each instruction, kept from the linear
 * sweep so that it does not decode the code a second time: one byte at the offset of the
 * instruction's first byte (its length is in the instruction map), freed once the windows
 * are made. */
static uint8_t *reloc_facts[MAX_MODULES];
#define RF_DISP 0x0f      /* reloc_insn.disp_at */
#define RF_MOVABLE 0x10   /* not a CTI, and reloc_movable */
#define RF_NOP 0x20       /* a NOP */
#define RF_CTI 0x40       /* any control transfer (cti_classify's kind is not CTI_NONE) */
#define RF_REL32 0x80     /* a `call rel32` or `jmp rel32` a suffix may end with */


struct scan {
	struct vec ctis, fns, rets, tails, targets, jcc_targets;
	struct vec big_rsp;   /* (address, RSP change as int64) */
};

/* Read-only mapping of a whole ELF file, or NULL. */
static const uint8_t *map_elf(const char *path, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	void *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return NULL;
	const Elf64_Ehdr *eh = f;
	if ((size_t)st.st_size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != EM_X86_64 ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > (uint64_t)st.st_size) {
		munmap(f, (size_t)st.st_size);
		return NULL;
	}
	*size = (size_t)st.st_size;
	return f;
}

/* Function symbols (STT_FUNC) of the mapped ELF file F: from .symtab, or with DYNSYM from
 * .dynsym when there is none. Returns whether a .symtab was read. */
static int fn_symbols(const uint8_t *f, size_t size, const struct module *m, struct scan *sc, int dynsym_ok)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
	int symtab = -1, dynsym = -1;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type == SHT_SYMTAB)
			symtab = i;
		else if (sh[i].sh_type == SHT_DYNSYM)
			dynsym = i;
	}
	int s = symtab >= 0 ? symtab : dynsym_ok ? dynsym : -1;
	if (s < 0 || sh[s].sh_offset + sh[s].sh_size > (uint64_t)size)
		return 0;
	const Elf64_Sym *sym = (const Elf64_Sym *)(f + sh[s].sh_offset);
	size_t n = sh[s].sh_size / sizeof *sym;
	unsigned strs = sh[s].sh_link;
	const char *str = strs < eh->e_shnum && sh[strs].sh_offset + sh[strs].sh_size <= (uint64_t)size ?
			  (const char *)(f + sh[strs].sh_offset) : NULL;
	for (size_t i = 0; i < n; i++) {
		if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC || sym[i].st_shndx == SHN_UNDEF ||
		    !sym[i].st_value)
			continue;
		/* --trigger: the first traced function of that name */
		if (trigger_name && !trigger_at && str && sym[i].st_name < sh[strs].sh_size &&
		    !strncmp(str + sym[i].st_name, trigger_name, sh[strs].sh_size - sym[i].st_name))
			trigger_at = sym[i].st_value + m->bias;
		struct fnrange *r = vec_push(&sc->fns);
		if (r) {
			r->start = sym[i].st_value + m->bias;
			r->end = sym[i].st_size ? r->start + sym[i].st_size : 0;   /* 0: to the next symbol */
		}
	}
	return symtab >= 0;
}

/* Function starts from the loaded .eh_frame_hdr's search table (every function with unwind
 * information, static ones included), for modules without any .symtab: each runs to the
 * next start. A count larger than the segment (a damaged file) is not followed: reading
 * past it crashed the traced program. */
static void fde_starts(const struct module *m, struct scan *sc)
{
	const uint8_t *h = (const uint8_t *)(uintptr_t)m->eh_frame_hdr;
	int64_t count = h ? tk_ehfh_count(h, m->eh_frame_hdr_size) : 0;
	for (int64_t i = 0; i < count; i++) {
		struct fnrange *r = vec_push(&sc->fns);
		if (r) {
			r->start = tk_ehfh_start(h, m->eh_frame_hdr, (size_t)i);
			r->end = 0;
		}
	}
}

static void add_start(const struct module *m, struct scan *sc, uint64_t a)
{
	struct fnrange *r;
	if (a >= m->start && a < m->end && (r = vec_push(&sc->fns))) {
		r->start = a;
		r->end = 0;   /* to the next start */
	}
}

/* Entry points a stripped module names without symbols, which the loader and libc call
 * from untraced code: the entry point (_start), DT_INIT and DT_FINI (_init, _fini, often
 * without unwind entries), and the functions of the init, preinit and fini arrays
 * (frame_dummy, __do_global_dtors_aux), read from memory, where the loader has relocated
 * them. Without them, entering such a function could not be placed (code lost). */
static void dyn_starts(const uint8_t *f, size_t size, const struct module *m, struct scan *sc)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	uint64_t arr[3] = { 0, 0, 0 }, arrsz[3] = { 0, 0, 0 };
	if (eh->e_entry)
		add_start(m, sc, eh->e_entry + m->bias);
	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(f + eh->e_phoff + (uint64_t)i * eh->e_phentsize);
		if ((const uint8_t *)(ph + 1) > f + size || ph->p_type != PT_DYNAMIC || ph->p_offset > size ||
		    ph->p_filesz > size - ph->p_offset)
			continue;
		const Elf64_Dyn *d = (const Elf64_Dyn *)(f + ph->p_offset);
		for (size_t k = 0; k < ph->p_filesz / sizeof *d && d[k].d_tag != DT_NULL; k++)
			switch (d[k].d_tag) {
			case DT_INIT:
			case DT_FINI: add_start(m, sc, d[k].d_un.d_ptr + m->bias); break;
			case DT_INIT_ARRAY: arr[0] = d[k].d_un.d_ptr; break;
			case DT_INIT_ARRAYSZ: arrsz[0] = d[k].d_un.d_val; break;
			case DT_FINI_ARRAY: arr[1] = d[k].d_un.d_ptr; break;
			case DT_FINI_ARRAYSZ: arrsz[1] = d[k].d_un.d_val; break;
			case DT_PREINIT_ARRAY: arr[2] = d[k].d_un.d_ptr; break;
			case DT_PREINIT_ARRAYSZ: arrsz[2] = d[k].d_un.d_val; break;
			default: break;
			}
	}
	for (int j = 0; j < 3; j++) {
		uint64_t a = arr[j] + m->bias;
		if (!arr[j] || a < m->map_lo || a + arrsz[j] > m->map_hi)
			continue;
		for (uint64_t o = 0; o + 8 <= arrsz[j]; o += 8) {
			uint64_t fn;
			memcpy(&fn, (const void *)(uintptr_t)(a + o), 8);
			add_start(m, sc, fn);
		}
	}
}

/* Function ranges and the executable sections, read from the module's file. Functions come
 * from its .symtab, else from the .symtab of its separate debug file (found by build id,
 * as Debian's libc6-dbg installs libc's), else from .dynsym plus the unwind table: a
 * stripped libc exports few of the functions that run (IFUNC variants, static helpers). */
static int load_elf(struct module *m, struct scan *sc, struct vec *secs)
{
	size_t size;
	const uint8_t *f = map_elf(m->path, &size);
	if (!f)
		return -1;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
	const char *shstr = NULL;
	uint64_t shstr_size = 0;
	if (eh->e_shstrndx < eh->e_shnum && sh[eh->e_shstrndx].sh_offset + sh[eh->e_shstrndx].sh_size <= (uint64_t)size) {
		shstr = (const char *)f + sh[eh->e_shstrndx].sh_offset;
		shstr_size = sh[eh->e_shstrndx].sh_size;
	}
	for (int i = 0; i < eh->e_shnum; i++) {
		if ((sh[i].sh_flags & SHF_EXECINSTR) && sh[i].sh_type == SHT_PROGBITS) {
			struct fnrange *r = vec_push(secs);
			if (r) {
				r->start = sh[i].sh_addr + m->bias;
				r->end = r->start + sh[i].sh_size;
			}
			/* PLT stubs have no symbols; each 16-byte slot is an entry point */
			const char *name = shstr && sh[i].sh_name < shstr_size ? shstr + sh[i].sh_name : "";
			uint64_t slot = !strcmp(name, ".plt.got") ? 8 : 16;
			if (!strncmp(name, ".plt", 4) && nplt < MAX_MODULES * 4) {
				plt_lo[nplt] = sh[i].sh_addr + m->bias;
				plt_hi[nplt++] = sh[i].sh_addr + m->bias + sh[i].sh_size;
			}
			if (!strncmp(name, ".plt", 4))
				for (uint64_t a = 0; a + slot <= sh[i].sh_size; a += slot) {
					struct fnrange *fr = vec_push(&sc->fns);
					if (fr) {
						fr->start = sh[i].sh_addr + m->bias + a;
						fr->end = fr->start + slot;
					}
				}
		}
	}
	if (!fn_symbols(f, size, m, sc, 0)) {
		char dbg[64 + 2 * sizeof m->build_id];
		const uint8_t *df = NULL;
		size_t dsize = 0;
		if (tk_debug_file_path(dbg, sizeof dbg, m->build_id, m->build_id_len) == 0)
			df = map_elf(dbg, &dsize);
		if (!df || !fn_symbols(df, dsize, m, sc, 0)) {
			fn_symbols(f, size, m, sc, 1);
			fde_starts(m, sc);
			dyn_starts(f, size, m, sc);
		}
		if (df)
			munmap((void *)df, dsize);
	}
	munmap((void *)f, size);
	return 0;
}

/* The instruction map entry (IM_*) of instruction IN at IP of kind KIND (C its CTI). */
static uint16_t imap_entry(struct scan *sc, uint64_t ip, const ZydisDecodedInstruction *in,
			   const ZydisDecodedOperand *ops, int kind)
{
	uint16_t e = in->length & IM_LEN;
	int64_t d;
	switch (kind) {
	case CTI_NONE:
		if (in->mnemonic == ZYDIS_MNEMONIC_UD2 || in->mnemonic == ZYDIS_MNEMONIC_HLT) {
			e |= IM_STOP | IM_ENDS;
			break;
		}
		if (in->meta.category == ZYDIS_CATEGORY_SYSCALL || in->meta.category == ZYDIS_CATEGORY_SYSRET ||
		    in->meta.category == ZYDIS_CATEGORY_INTERRUPT) {
			e |= IM_STOP;
			break;
		}
		if (!rsp_effect(in, ops, &d)) {
			e |= (uint16_t)((uint8_t)IM_RSP_UNKNOWN << 8);
		} else if (d <= IM_RSP_UNKNOWN || d >= IM_RSP_BIG) {   /* not an int8 of ours */
			struct fnrange *br = vec_push(&sc->big_rsp);
			if (br) {
				br->start = ip;
				br->end = (uint64_t)d;
				e |= (uint16_t)((uint8_t)IM_RSP_BIG << 8);
			} else {
				e |= (uint16_t)((uint8_t)IM_RSP_UNKNOWN << 8);
			}
		} else {
			e |= (uint16_t)((uint8_t)(int8_t)d << 8);
		}
		break;
	case CTI_JMP_DIR:
		e |= IM_JMP | IM_ENDS;
		if (in->raw.imm[0].size == 8)
			e |= IM_REL8;
		break;
	case CTI_CALL_DIR:
		e |= IM_CALL;
		if (in->raw.imm[0].size != 32)
			e = (e & ~IM_CLASS) | IM_STOP;   /* not a form imap_target reads */
		break;
	default:
		e |= IM_STOP;
		if (in->mnemonic == ZYDIS_MNEMONIC_JMP || in->mnemonic == ZYDIS_MNEMONIC_RET)
			e |= IM_ENDS;
		break;
	}
	if (kind == CTI_JMP_DIR && in->raw.imm[0].size != 8 && in->raw.imm[0].size != 32)
		e = (e & ~IM_CLASS) | IM_STOP;
	return e;
}

/* Does the instruction set EAX/RAX to an immediate? Its value, else -1. */
static long eax_imm(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	if (in->mnemonic != ZYDIS_MNEMONIC_MOV || in->operand_count_visible != 2 ||
	    ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER || ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
	    (ops[0].reg.value != ZYDIS_REGISTER_EAX && ops[0].reg.value != ZYDIS_REGISTER_RAX))
		return -1;
	return (long)(ops[1].imm.value.u & 0xffffffff);
}

/* The sweep's decoding: the traced code's range and what each Zydis definition does to RSP
 * (sweepops.h; the table is allocated for the scan). */
static struct sweep_ops sweep_ops;

/* Decode the instruction at IP, which must end by END and, unless it is a NOP, by the next
 * function start LIM: the unwind table (used for function starts without a symbol table)
 * starts libc's signal return code one byte early, inside the padding before it, and the
 * decoding must not restart there. *OPS: its operands in BUF, or all-zero ones where the
 * sweep needs none (sweepops.h). */
static int decode_at(const struct module *m, uint64_t ip, uint64_t lim, uint64_t end,
		     ZydisDecodedInstruction *in, ZydisDecodedOperand *buf, const ZydisDecodedOperand **ops)
{
	if (!sweep_decode(&decoder, &sweep_ops, m->orig + (ip - m->start), end - ip, in, buf, ops))
		return 0;
	return ip + in->length <= lim || in->mnemonic == ZYDIS_MNEMONIC_NOP;
}

/* Decode a section linearly, restarting at every function start it meets. */
static void sweep(struct module *m, struct scan *sc, uint64_t start, uint64_t end,
		  const uint64_t *starts, size_t nstarts)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand buf[ZYDIS_MAX_OPERAND_COUNT];
	const ZydisDecodedOperand *ops;
	long k = last_le(starts, nstarts, start);
	size_t next = (size_t)(k + 1);
	uint64_t ip = start;
	long eax = -1;   /* the value the previous instruction put in eax, or -1 */

	while (ip < end) {
		while (next < nstarts && starts[next] < ip)
			next++;
		if (next < nstarts && starts[next] == ip)
			next++;
		uint64_t lim = next < nstarts && starts[next] < end ? starts[next] : end;
		if (!decode_at(m, ip, lim, end, &in, buf, &ops)) {
			ip = ip + 1 < lim ? ip + 1 : lim;
			eax = -1;
			continue;
		}
		struct cti c;
		int kind = cti_classify(&c, ip, &in, ops);
		c.orig = m->orig[ip - m->start];
		m->imap[ip - m->start] = imap_entry(sc, ip, &in, ops, kind);
		struct reloc_insn ri;
		int sx = reloc_suffix_insn(ip, &in, ops, kind, &ri);
		reloc_facts[m - modules][ip - m->start] = (uint8_t)((kind != CTI_NONE ? RF_CTI : 0) |
			(sx == 2 ? RF_REL32 : sx == 1 ? RF_MOVABLE | ri.disp_at : 0) |
			(in.mnemonic == ZYDIS_MNEMONIC_NOP ? RF_NOP : 0));
		if (kind == CTI_JMP_DIR && in_plt(c.target) && !in_plt(ip)) {
			struct fnrange *t = vec_push(&sc->tails);   /* (target, jump) */
			if (t) {
				t->start = c.target;
				t->end = ip;
			}
		}
		if (kind == CTI_JCC || kind == CTI_JCXZ || kind == CTI_LOOP || kind == CTI_JMP_DIR ||
		    kind == CTI_CALL_DIR) {
			uint64_t *t = vec_push(kind == CTI_JCC ? &sc->jcc_targets : &sc->targets);
			if (t)
				*t = c.target;
		}
		/* a code address the instruction forms may be stored and jumped to (leave.h) */
		uint64_t refs[4];
		for (int r = jl_refs(ip, &in, ops, refs); r-- > 0;) {
			uint64_t *t = module_of(refs[r]) ? vec_push(&sc->targets) : NULL;
			if (t)
				*t = refs[r];
		}
		if (kind == CTI_CALL_DIR || kind == CTI_CALL_IND) {
			struct fnrange *r = vec_push(&sc->rets);   /* (return site, call) */
			if (r) {
				r->start = ip + in.length;
				r->end = ip;
			}
		}
		/* Every system call traps (on_syscall), except rt_sigreturn: the return from a
		 * signal handler, ours included, runs it with the handler's mask (SIGTRAP
		 * blocked), and it is never a traced thread's (handlers return through the
		 * recorder's wrapper). */
		if (kind == CTI_SYSCALL && eax == SYS_rt_sigreturn)
			kind = CTI_OTHER;
		if (kind == CTI_JCC || kind == CTI_JCXZ || kind == CTI_LOOP || kind == CTI_JMP_IND ||
		    kind == CTI_CALL_IND || kind == CTI_RET || kind == CTI_SYSCALL) {
			struct cti *p = vec_push(&sc->ctis);
			if (p)
				*p = c;
		}
		eax = eax_imm(&in, ops);
		ip += in.length;
	}
}

static int refused_modules;

/* The name of a function the recorder runs while handling a trap that lies in [lo, hi), or
 * NULL: such a module cannot be patched with int3 (a trap inside the SIGTRAP handler, where
 * SIGTRAP is blocked, kills the process). The handler calls no other module (rt.h, mem.c;
 * tests/oracle/btrace_nolibc.sh checks the library), so only the recorder itself is left. */
static const char *recorder_code_in(uint64_t lo, uint64_t hi)
{
	static const struct {
		const char *name;
		const void *fn;
	} used[] = {
		{ "the recorder", (const void *)on_trap },
	};
	for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
		uint64_t a = (uint64_t)(uintptr_t)used[i].fn;
		if (a >= lo && a < hi)
			return used[i].name;
	}
	return NULL;
}

static int add_module(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *want = data;
	char path[PATH_MAX];
	(void)size;

	if (nmodules >= MAX_MODULES)
		return 1;
	if (!info->dlpi_name || !info->dlpi_name[0]) {
		if (want[0])
			return 0;
		ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
		if (n <= 0)
			return 0;
		path[n] = 0;
	} else {
		if (!want[0] || !realpath(info->dlpi_name, path) || !is_wanted(want, info->dlpi_name, path))
			return 0;
	}
	struct module *m = &modules[nmodules];
	uint64_t lo = UINT64_MAX, hi = 0;
	memset(m, 0, sizeof *m);
	snprintf(m->path, sizeof m->path, "%s", path);
	m->bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD) {
			if (!m->map_lo || ph->p_vaddr + m->bias < m->map_lo)
				m->map_lo = ph->p_vaddr + m->bias;
			if (ph->p_vaddr + ph->p_filesz + m->bias > m->map_hi)
				m->map_hi = ph->p_vaddr + ph->p_filesz + m->bias;
			if (m->nseg < 8 && (ph->p_flags & PF_R)) {
				m->seg_lo[m->nseg] = ph->p_vaddr + m->bias;
				m->seg_hi[m->nseg++] = ph->p_vaddr + ph->p_filesz + m->bias;
			}
		}
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			if (ph->p_vaddr + m->bias < lo)
				lo = ph->p_vaddr + m->bias;
			if (ph->p_vaddr + ph->p_memsz + m->bias > hi)
				hi = ph->p_vaddr + ph->p_memsz + m->bias;
		}
		if (ph->p_type == PT_GNU_EH_FRAME) {
			m->eh_frame_hdr = ph->p_vaddr + m->bias;
			m->eh_frame_hdr_size = ph->p_memsz;
		}
		if (ph->p_type == PT_NOTE) {
			const uint8_t *p = (const uint8_t *)(m->bias + ph->p_vaddr), *e = p + ph->p_memsz;
			while (p + 12 <= e) {
				const Elf64_Nhdr *nh = (const Elf64_Nhdr *)p;
				const uint8_t *name = p + 12, *desc = name + ((nh->n_namesz + 3) & ~3u);
				if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
				    !memcmp(name, "GNU", 4) && nh->n_descsz <= sizeof m->build_id) {
					memcpy(m->build_id, desc, nh->n_descsz);
					m->build_id_len = nh->n_descsz;
				}
				p = desc + ((nh->n_descsz + 3) & ~3u);
			}
		}
	}
	if (lo >= hi)
		return 0;
	const char *needed = recorder_code_in(lo, hi);
	if (needed) {
		/* its int3s would trap inside our own SIGTRAP handler, where SIGTRAP is blocked:
		 * the kernel kills the program */
		char why[PATH_MAX + 128];
		snprintf(why, sizeof why, "%s is not traced: the recorder's trap handler runs its "
			 "code (%s)", path, needed);
		say2("module ", why, "");
		refused_modules++;
		return want[0] ? 1 : 0;
	}
	m->start = lo;
	m->end = hi;
	m->orig = rec_alloc(hi - lo);
	m->imap = rec_alloc((hi - lo) * sizeof *m->imap);
	reloc_facts[nmodules] = rec_alloc(hi - lo);
	if (!m->orig || !m->imap || !reloc_facts[nmodules])
		return 0;
	memcpy(m->orig, (const void *)lo, hi - lo);
	nmodules++;
	return want[0] ? 1 : 1;
}

static int scan_module(struct module *m, struct scan *sc)
{
	struct vec secs = { .elt = sizeof(struct fnrange) };
	size_t fn0 = sc->fns.n;
	if (load_elf(m, sc, &secs) < 0)
		return -1;
	/* restart points: this module's function starts */
	size_t ns = sc->fns.n - fn0;
	uint64_t *starts = rec_alloc((ns + 1) * sizeof *starts);
	if (!starts)
		return -1;
	for (size_t i = 0; i < ns; i++)
		starts[i] = ((struct fnrange *)sc->fns.p)[fn0 + i].start;
	radix_sort(starts, ns, 1);
	struct fnrange *sr = secs.p;
	for (size_t i = 0; i < secs.n; i++) {
		uint64_t s = sr[i].start < m->start ? m->start : sr[i].start;
		uint64_t e = sr[i].end > m->end ? m->end : sr[i].end;
		if (s < e)
			sweep(m, sc, s, e, starts, ns);
	}
	rec_free(starts, (ns + 1) * sizeof *starts);
	reloc_secs[m - modules] = secs;   /* the relocation pass walks them again */
	return 0;
}


/* The jumps to the trampolines made at start-up (start_tramps), written by patch(). */
static struct window *tramp_jumps;
static size_t ntramp_jumps;

/* From the first int3 on, a call into a traced libc traps: from here on, raw system calls. */
static int patch(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < nmodules; i++) {
		uint64_t a = modules[i].start & ~(uint64_t)(pg - 1);
		size_t len = modules[i].end - a;
		if (rt_syscall(SYS_mprotect, a, len, PROT_READ | PROT_WRITE | PROT_EXEC, 0, 0, 0) < 0)
			return -1;
	}
	for (size_t i = 0; i < nctis; i++)
		*(volatile uint8_t *)(uintptr_t)ctis[i].addr = 0xcc;
	/* after the int3s: a window's jump may cover its CTI */
	for (size_t i = 0; i < nwindows; i++)
		memcpy((void *)(uintptr_t)windows[i].at, windows[i].jmp, windows[i].len);
	for (size_t i = 0; i < ntramp_jumps; i++)
		memcpy((void *)(uintptr_t)tramp_jumps[i].at, tramp_jumps[i].jmp, tramp_jumps[i].len);
	trigger_patch();
	for (int i = 0; i < nmodules; i++) {
		uint64_t a = modules[i].start & ~(uint64_t)(pg - 1);
		rt_syscall(SYS_mprotect, a, modules[i].end - a, PROT_READ | PROT_EXEC, 0, 0, 0);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);   /* no mfence: built -mgeneral-regs-only */
	return 0;
}

/* The instructions of the function of the jump through a register C, from its start up
 * to C: the last JT_WINDOW of them into WIN, oldest first, their number into *K; LEA_T:
 * per register, the table of its last `lea reg, [rip + T]`. 0 if it does not decode up to
 * C. Start-up only (one thread). */
static int insns_before(const struct cti *c, struct jt_insn *win, int *k, uint64_t *lea_t)
{
	static struct jt_insn hist[JT_WINDOW];
	const struct module *m = module_of(c->addr);
	long f = last_le(fn_start, nfns, c->addr);
	uint64_t ip;
	int n = 0;

	if (!m || f < 0 || c->addr >= fn_end[f] || c->is_mem || c->base >= 16)
		return 0;
	for (ip = fn_start[f]; ip < c->addr;) {
		struct jt_insn *x = &hist[n % JT_WINDOW];
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, m->orig + (ip - m->start), c->addr - ip, &x->in, x->ops)))
			return 0;
		x->ip = ip;
		if (x->in.mnemonic == ZYDIS_MNEMONIC_LEA && x->ops[1].mem.base == ZYDIS_REGISTER_RIP &&
		    x->ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER) {
			uint8_t g = cti_greg(x->ops[0].reg.value);
			if (g < 16)
				lea_t[g] = ip + x->in.length + (uint64_t)x->ops[1].mem.disp.value;
		}
		n++;
		ip += x->in.length;
	}
	if (ip != c->addr)
		return 0;
	*k = n < JT_WINDOW ? n : JT_WINDOW;
	for (int i = 0; i < *k; i++)
		win[i] = hist[(n - *k + i) % JT_WINDOW];
	return 1;
}

/* A compiler's jump table behind the indirect jump C (see jtab.h): pushes its N targets
 * T + T[i] to TARGETS and returns 1 if every one is inside the jump's function; 0
 * otherwise. */
static int jump_table(const struct cti *c, struct vec *targets)
{
	static struct jt_insn win[JT_WINDOW];   /* start-up only: one thread */
	const struct module *m = module_of(c->addr);
	long f = last_le(fn_start, nfns, c->addr);
	uint64_t lea_t[16] = { 0 }, table = 0, entries = 0;
	int k;

	if (!insns_before(c, win, &k, lea_t))
		return 0;
	if (!jt_shape(win, k, c->base, lea_t, &table, &entries))
		return 0;
	if (table < m->map_lo || table + 4 * entries > m->map_hi)
		return 0;   /* never read outside the module's loaded file contents */
	size_t first = targets->n;
	for (uint64_t i = 0; i < entries; i++) {
		int32_t e;
		memcpy(&e, (const void *)(uintptr_t)(table + 4 * i), 4);
		uint64_t t = table + (uint64_t)(int64_t)e;
		uint64_t *slot = t >= fn_start[f] && t < fn_end[f] ? vec_push(targets) : NULL;
		if (!slot) {
			targets->n = first;
			return 0;
		}
		*slot = t;
	}
	return 1;
}

/* Is the jump through a register C's target a word loaded from memory (leave.h)? */
static int jump_leaves(const struct cti *c, const struct reloc_entries *ent)
{
	static struct jt_insn win[JT_WINDOW];   /* start-up only: one thread */
	uint64_t lea_t[16] = { 0 };
	int k;
	return insns_before(c, win, &k, lea_t) && jl_loaded(win, k, c->addr, c->base, ent);
}

/* Every word of the traced modules' loaded file contents (code sections aside: sweep reads
 * their operands) that is an address in their code, pushed to TARGETS: aligned 8-byte
 * words, and aligned 4-byte words where code lies below 4 GiB (absolute 32-bit addresses
 * of executables that are not position-independent). Stored addresses are aligned (the
 * ABI aligns pointers); reading every byte offset found false ones in python3.11's
 * .rodata, one of them on its bytecode dispatch. Returns -1 if memory runs out. */
static int data_labels(struct vec *targets)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < nmodules; i++) {
		lo = modules[i].start < lo ? modules[i].start : lo;
		hi = modules[i].end > hi ? modules[i].end : hi;
	}
	for (int i = 0; i < nmodules; i++) {
		const struct module *m = &modules[i];
		const struct fnrange *sec = reloc_secs[i].p;
		for (int k = 0; k < m->nseg; k++) {
			for (uint64_t a = (m->seg_lo[k] + 3) & ~3ull; a + 4 <= m->seg_hi[k]; a += 4) {
				for (size_t j = 0; j < reloc_secs[i].n; j++)   /* skip a code section */
					if (a >= sec[j].start && a < sec[j].end)
						a = (sec[j].end + 3) & ~3ull;
				if (a + 4 > m->seg_hi[k])
					break;
				uint64_t v = 0;
				uint32_t w;
				if (a % 8 == 0 && a + 8 <= m->seg_hi[k])
					memcpy(&v, (const void *)(uintptr_t)a, 8);
				memcpy(&w, (const void *)(uintptr_t)a, 4);
				for (int pass = 0; pass < 2; pass++, v = hi <= 0xffffffffull ? w : 0) {
					uint64_t *t;
					if (v < lo || v >= hi || !module_of(v))
						continue;
					if (!(t = vec_push(targets)))
						return -1;
					*t = v;
				}
			}
		}
	}
	return 0;
}

/* The length of the instruction the sweep decoded at A of module M (0: none starts there),
 * and its relocation facts (RF_*). */
static unsigned insn_at(const struct module *m, uint64_t a, unsigned *facts)
{
	*facts = reloc_facts[m - modules][a - m->start];
	return m->imap[a - m->start] & IM_LEN;
}

/* The end of the NOP padding from A on (NOPs that end by LIM). */
static uint64_t padding_end(const struct module *m, uint64_t a, uint64_t lim)
{
	uint64_t start = a;
	unsigned len, rf;
	while (a < lim && a - start < 16 && (len = insn_at(m, a, &rf)) && (rf & RF_NOP) && a + len <= lim)
		a += len;
	return a;
}

/* The movable instructions the jcc ending at IP falls into, up to RELOC_MAX_INSNS and 16
 * bytes (a window needs at most 5), into SUF; stops after a direct call or jmp rel32, and at
 * any other CTI, a function start LIM or anything that cannot move. Returns how many. */
static int reloc_suffix(const struct module *m, uint64_t ip, uint64_t lim, struct reloc_insn *suf)
{
	unsigned len, rf;
	int n = 0;
	for (uint64_t a = ip; n < RELOC_MAX_INSNS && a < lim && a - ip < 16; a += len) {
		if (!(len = insn_at(m, a, &rf)))
			break;
		if (rf & RF_REL32) {
			suf[n++] = (struct reloc_insn){ a, 5, 0, m->orig[a - m->start] == 0xe8 ? RELOC_CALL : RELOC_JMP };
			break;
		}
		if (!(rf & RF_MOVABLE))
			break;
		suf[n++] = (struct reloc_insn){ a, (uint8_t)len, (uint8_t)(rf & RF_DISP), 0 };
	}
	return n;
}

/* The CTI at IP (cti_find), for IPs that only grow: the sweep pushed a section's CTIs in
 * address order, so the one after the last found is most often the next one asked for; a
 * hash lookup (two cache misses) otherwise. *CUR: the last found, NULL at first. */
static const struct cti *cti_next(const struct cti **cur, uint64_t ip)
{
	const struct cti *c = *cur, *end = ctis + nctis;
	while (c && c < end && c->addr < ip && c->addr >= (*cur)->addr)
		c++;
	if (c && c < end && c->addr == ip)
		return *cur = c;
	c = cti_find(ip);
	if (c)
		*cur = c;
	return c;
}

/* Relocate the windows around module M's short jcc, returns and jumps or calls through a
 * register (see reloc.h, reloc_install), walking the instructions sweep() decoded. ENT:
 * where code may be entered (direct targets, return sites, function starts); JIND: every
 * unrecognised indirect jump, sorted. Returns how many were relocated. */
static size_t reloc_module(struct module *m, uint64_t start, uint64_t end, const struct reloc_entries *ent,
			   const uint64_t *jind, size_t njind)
{
	struct reloc_insn ring[RELOC_MAX_INSNS + 1], suf[RELOC_MAX_INSNS];
	int nring = 0, stopped = 1, pad = 0;   /* pad: in NOPs right after a jump or return */
	size_t done = 0;
	/* jcc rel8, returns and calls or jumps through a register left without a window (where
	 * the straight-line code before it starts, and the CTI), and runs of padding (start,
	 * end), for the islands (jcc only) and the tails */
	struct vec lone = { .elt = sizeof(struct fnrange) }, runs = { .elt = sizeof(struct fnrange) };
	uint64_t ip = start, covered = 0;
	long f = -1, k = last_le(fn_start, nfns, start);
	const struct cti *cur = NULL;   /* the last trapped CTI met (cti_next) */

	while (ip < end) {
		while (k + 1 < (long)nfns && fn_start[k + 1] <= ip)
			k++;   /* the function of IP (IP only grows) */
		if (k != f) {
			nring = 0;   /* never relocate across a function start */
			pad = 0;
			f = k;
		}
		size_t nx = (size_t)(k + 1);
		while (nx < nfns && fn_start[nx] <= ip)
			nx++;
		uint64_t lim = nx < nfns && fn_start[nx] < end ? fn_start[nx] : end;
		unsigned len, rf;
		if (!(len = insn_at(m, ip, &rf))) {   /* sweep() could not decode there */
			nring = 0;
			stopped = 1;
			pad = 0;
			ip = ip + 1 < lim ? ip + 1 : lim;
			continue;
		}
		if (pad && (!(rf & RF_NOP) || ip + len > lim || reloc_entered(ent, ip - 1, ip + 1)))
			pad = 0;   /* from an entry on, NOPs may run */
		if (pad) {
			/* never executed: a run grows (past the bytes a ret's window took) */
			struct fnrange *r = runs.n ? &((struct fnrange *)runs.p)[runs.n - 1] : NULL;
			uint64_t from = ip > covered ? ip : covered;
			if (r && r->end == ip)
				r->end = ip + len;
			else if (from < ip + len && (r = vec_push(&runs)))
				*r = (struct fnrange){ from, ip + len };
			ip += len;
			continue;
		}
		if (!(rf & RF_CTI)) {
			/* Padding after a jump or return is never fallen into; what follows it may be
			 * entered by the unwinder (a landing pad), so no window starts in it. */
			if (!(rf & RF_MOVABLE)) {
				nring = 0;
			} else if (!(nring == 0 && stopped && (rf & RF_NOP))) {
				if (nring == RELOC_MAX_INSNS + 1) {
					memmove(ring, ring + 1, sizeof ring[0] * RELOC_MAX_INSNS);
					nring--;
				}
				ring[nring++] = (struct reloc_insn){ ip, (uint8_t)len, (uint8_t)(rf & RF_DISP), 0 };
				stopped = 0;
			}
			ip += len;
			continue;
		}
		uint16_t e = m->imap[ip - m->start];
		stopped = pad = (e & IM_ENDS) != 0;
		/* the CTIs that may get a window are all trapped ones (class IM_STOP), in ctis */
		const struct cti *tc = (e & IM_CLASS) == IM_STOP ? cti_next(&cur, ip) : NULL;
		int kind = tc ? tc->kind : CTI_OTHER;
		int jcc8 = kind == CTI_JCC && len == 2;
		struct reloc_window w;
		/* an indirect jump that may land anywhere in its function: its trampoline (or its
		 * trap) sends a landing inside a window to the window's trampoline (window_entry) */
		if (kind == CTI_JMP_IND && reloc_any_between(jind, njind, ip - 1, ip + 1))
			ctis[tc - ctis].cond = CTI_COMPUTED;
		if ((jcc8 || kind == CTI_RET || ((kind == CTI_CALL_IND || kind == CTI_JMP_IND) && reloc_indirect_ok(tc))) &&
		    f >= 0 && ip < fn_end[f] && !in_plt(ip)) {
			uint64_t room = ip + len;
			/* after a ret, alignment padding is never executed: the jump may cover it */
			if (kind == CTI_RET)
				room = padding_end(m, room, lim);
			int nsuf = jcc8 ? reloc_suffix(m, room, lim, suf) : 0;
			/* a not-taken path that runs into a trapped ret: the suffix up to it moves too
			 * (the overwritten bytes stay B..B+5), so the path ends in the ret's tail */
			const struct reloc_insn *ls = nsuf ? &suf[nsuf - 1] : NULL;
			const struct cti *rc = ls && !ls->transfer ? cti_find(ls->addr + ls->len) : NULL;
			int chosen = reloc_choose(ring, nring, ip, len, room, suf, nsuf, ent, covered, &w);
			if (chosen && rc && rc->kind == CTI_RET && nsuf > w.nsuf &&
			    reloc_install(tc, (size_t)(tc - ctis), ring + w.first, nring - w.first, suf, nsuf) == 0)
				w.nsuf = nsuf;
			else if (chosen)
				chosen = reloc_install(tc, (size_t)(tc - ctis), ring + w.first, nring - w.first, suf, w.nsuf) == 0;
			if (!chosen) {
				struct fnrange *l = vec_push(&lone);
				if (l)
					*l = (struct fnrange){ nring ? ring[0].addr : ip, ip };
			}
			if (chosen) {
				done++;
				covered = w.b + 5;   /* padding after a ret may be another window's start */
				if (debug > 2) {
					char msg[128];
					snprintf(msg, sizeof msg, "relocated 0x%llx.. (%d before, %d after) for the CTI at 0x%llx",
						 (unsigned long long)(w.b - m->bias), nring - w.first, w.nsuf,
						 (unsigned long long)(ip - m->bias));
					say(msg);
				}
			}
		}
		nring = 0;
		ip += len;
	}
	/* Islands: each lone jcc rel8 (in address order) takes the first 5 bytes of padding within
	 * its rel8 reach that hold no entry; a run is used from its start on. */
	struct fnrange *rs = runs.p;
	size_t r0 = 0;
	for (size_t k = 0; k < lone.n; k++) {
		struct fnrange *l = &((struct fnrange *)lone.p)[k];
		uint64_t a = l->end;
		const struct cti *tc = cti_find(a);
		if (tc && tc->kind != CTI_JCC)
			continue;
		while (r0 < runs.n && rs[r0].end < a + 2 - 128 + 5)
			r0++;
		for (size_t r = r0; tc && r < runs.n && rs[r].start <= a + 2 + 127; r++) {
			uint64_t at = rs[r].start;
			while (at + 5 <= rs[r].end && at < a + 2 - 128)
				at++;
			if (at + 5 > rs[r].end || at > a + 2 + 127 || reloc_entered(ent, at - 1, at + 5))
				continue;
			if (island_install((size_t)(tc - ctis), at) == 0) {
				rs[r].start = at + 5;
				done++;
				l->end = 0;
			}
			break;
		}
	}
	/* Tails: the CTIs still without a window, each with the instructions before it. A ret
	 * may have a tail without them already (path_to): this one replaces it as the copy
	 * paths go to, so that a branch to an instruction before the ret (`jae 1f` to `1: pop
	 * %rbx; ret`: git's 500 traps at one ret in git status) runs into the copy, not the trap. */
	for (size_t k = 0; k < lone.n; k++) {
		const struct fnrange *l = &((struct fnrange *)lone.p)[k];
		const struct cti *tc = l->end ? cti_find(l->end) : NULL;
		unsigned len, rf;
		uint64_t a = l->start;
		int n = 0;
		for (; tc && a < l->end && n < RELOC_MAX_INSNS + 1; a += len) {
			if (!(len = insn_at(m, a, &rf)))
				break;
			ring[n++] = (struct reloc_insn){ a, (uint8_t)len, (uint8_t)(rf & RF_DISP), 0 };
		}
		if (a != l->end)   /* the copied instructions must lead to the CTI */
			n = 0;
		if (tc && !n && cti_slot[tc - ctis])
			continue;   /* a ret's tail without them is made */
		if (tc && tail_install((size_t)(tc - ctis), ring, n) == 0 && debug > 2) {
			char msg[128];
			snprintf(msg, sizeof msg, "a tail (%d before) for the CTI at 0x%llx", n,
				 (unsigned long long)(l->end - m->bias));
			say(msg);
		}
	}
	rec_free(lone.p, lone.cap * lone.elt);
	rec_free(runs.p, runs.cap * runs.elt);
	return done;
}

/* Sort the (key, value) pairs of V by key (UNIQUE: no two keys equal) into two arrays, and
 * free V. */
static int split_pairs(struct vec *v, uint64_t **keys, uint64_t **vals, size_t *n, int unique)
{
	struct fnrange *p = v->p;
	*n = v->n;
	if (unique)
		radix_sort(&p->start, *n, 2);
	else
		sort_u64(p, *n, sizeof *p);
	*keys = rec_alloc((*n + 1) * sizeof **keys);
	*vals = rec_alloc((*n + 1) * sizeof **vals);
	if (!*keys || !*vals)
		return -1;
	for (size_t i = 0; i < *n; i++) {
		(*keys)[i] = p[i].start;
		(*vals)[i] = p[i].end;
	}
	rec_free(p, v->cap * v->elt);
	v->p = NULL;
	return 0;
}

/* Each trapped system call of module M runs natively from a stub near it, `syscall; jmp
 * back` (on_syscall); the stub's address is kept in the CTI's target. */
static int syscall_stubs(void)
{
	for (int m = 0; m < nmodules; m++) {
		size_t n = 0;
		for (size_t i = 0; i < nctis; i++)
			n += ctis[i].kind == CTI_SYSCALL && module_of(ctis[i].addr) == &modules[m];
		if (!n)
			continue;
		size_t size = (n * 8 + 4095) & ~(size_t)4095;
		uint8_t *p = map_near(m, size);
		if (!p)
			return -1;
		for (size_t i = 0; i < nctis; i++) {
			struct cti *c = &ctis[i];
			if (c->kind != CTI_SYSCALL || module_of(c->addr) != &modules[m])
				continue;
			int32_t rel = (int32_t)((int64_t)(c->addr + c->len) - (int64_t)(uintptr_t)(p + 7));
			p[0] = 0x0f;
			p[1] = 0x05;
			p[2] = 0xe9;
			memcpy(p + 3, &rel, 4);
			p[7] = 0xcc;
			c->target = (uint64_t)(uintptr_t)p;
			p += 8;
		}
	}
	return 0;
}

/* This process's trace file, after the base name OUT_PATH: the program `record` started
 * (TK_BTRACE_ROOT, or any process without TK_BTRACE_FOLLOW) writes OUT; with FOLLOW, another
 * process writes OUT.<pid>, and the N-th program a process exec's into writes OUT.<pid>.<N>
 * (TK_BTRACE_EXEC=<pid>:<N>, set by our exec wrappers). Forked children switch to OUT.<pid>
 * by themselves (child_switch). */
static void trace_name(char *buf, size_t n)
{
	const char *root = getenv("TK_BTRACE_ROOT"), *ex = getenv("TK_BTRACE_EXEC");
	long pid = getpid();
	unsigned long epid = 0, gen = 0;

	if (follow && ex && sscanf(ex, "%lu:%lu", &epid, &gen) == 2 && (long)epid == pid && gen) {
		exec_gen = (unsigned)gen;
		snprintf(buf, n, "%s.%ld.%u", out_path, pid, exec_gen);
	} else if (follow && root && atol(root) != pid) {
		snprintf(buf, n, "%s.%ld", out_path, pid);
	} else {
		snprintf(buf, n, "%s", out_path);
	}
}

__attribute__((constructor(101))) static void btrace_init(void)
{
	const char *out = getenv("TK_BTRACE_OUT");
	const char *mods = getenv("TK_BTRACE_MODULES");
	struct scan sc = { .ctis = { .elt = sizeof(struct cti) }, .fns = { .elt = sizeof(struct fnrange) },
			   .rets = { .elt = sizeof(struct fnrange) }, .tails = { .elt = sizeof(struct fnrange) },
			   .targets = { .elt = sizeof(uint64_t) }, .jcc_targets = { .elt = sizeof(uint64_t) }, .big_rsp = { .elt = sizeof(struct fnrange) } };
	struct sigaction sa, old;

	real_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
	if (!out || !*out || !real_sigaction)
		return;
	clock_calibrate();
	/* out_path is the base name: every other process's trace is named after it. Without
	 * TK_BTRACE_FOLLOW, the programs this one starts (exec without our wrappers, system(),
	 * posix_spawn) inherit an environment without it: they are not traced, and must not
	 * overwrite the trace. (unsetenv, unlike setenv, does not allocate: the program's heap
	 * stays untouched.) */
	snprintf(out_path, sizeof out_path, "%s", out);
	follow = getenv("TK_BTRACE_FOLLOW") && !strcmp(getenv("TK_BTRACE_FOLLOW"), "1");
	char first[PATH_MAX + 48];
	trace_name(first, sizeof first);
	if (!follow)
		unsetenv("TK_BTRACE_OUT");
	struct rlimit_k {
		uint64_t cur, max;
	} nofile;
	if (rt_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &nofile, 0, 0) == 0 && nofile.cur >= 128)
		out_fd_floor = (int)(nofile.cur >= 2048 ? 1024 : nofile.cur - 64);   /* past loops to 1024 */
	long efd = rt_syscall(SYS_fcntl, 2, F_DUPFD_CLOEXEC, nofile.cur >= 128 ? nofile.cur - 1 : 0, 0, 0, 0);
	struct stat est;
	if (efd >= 0)
		err_fd = (int)efd;
	if (rt_syscall(SYS_fstat, err_fd, &est, 0, 0, 0, 0) == 0) {
		err_dev = est.st_dev;
		err_ino = est.st_ino;
	}
	debug = getenv("TK_BTRACE_DEBUG") ? atoi(getenv("TK_BTRACE_DEBUG")) : 0;
	/* --ring SIZE: the last SIZE bytes of each thread's stream, in whole pieces (each starts
	 * with a PSB+, so the snapshot decodes from its first piece on); --max-size */
	if (getenv("TK_BTRACE_RING") && (ring_bytes = strtoull(getenv("TK_BTRACE_RING"), NULL, 10)))
		ring_pieces = (ring_bytes + BUF_CAP - 1) / BUF_CAP;
	/* TK_BTRACE_CALL_TIMES=0: TSCs only where tracing starts again (a version 1 stream) */
	call_times = !(getenv("TK_BTRACE_CALL_TIMES") && !strcmp(getenv("TK_BTRACE_CALL_TIMES"), "0"));
	if (getenv("TK_BTRACE_MAX_SIZE"))
		max_size = strtoull(getenv("TK_BTRACE_MAX_SIZE"), NULL, 10);
	/* --trigger FUNCTION[:N]: its address comes from the symbols (fn_symbols) */
	if (getenv("TK_BTRACE_TRIGGER") && *getenv("TK_BTRACE_TRIGGER")) {
		trigger_name = getenv("TK_BTRACE_TRIGGER");
		trigger_n = getenv("TK_BTRACE_TRIGGER_N") ? strtoull(getenv("TK_BTRACE_TRIGGER_N"), NULL, 10) : 1;
		trigger_n = trigger_n ? trigger_n : 1;
	}
	ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);

	if (!mods || !*mods) {
		dl_iterate_phdr(add_module, (void *)"");
	} else {
		char list[4096], *save = NULL;
		snprintf(list, sizeof list, "%s", mods);
		for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
			int before = nmodules, refused = refused_modules;
			if (!strcmp(p, "main"))
				dl_iterate_phdr(add_module, (void *)"");
			else
				dl_iterate_phdr(add_module, p);
			if (nmodules == before && refused_modules == refused) {
				say2("module ", p, " is not loaded at start-up; not traced");
				if (npending < MAX_MODULES)
					snprintf(pending[npending++], PATH_MAX, "%s", p);
			}
		}
	}
	if (!nmodules) {
		say("no module to trace");
		return;
	}
	sweep_ops.code_lo = UINT64_MAX;
	for (int i = 0; i < nmodules; i++) {
		sweep_ops.code_lo = modules[i].start < sweep_ops.code_lo ? modules[i].start : sweep_ops.code_lo;
		sweep_ops.code_hi = modules[i].end > sweep_ops.code_hi ? modules[i].end : sweep_ops.code_hi;
	}
	sweep_ops.defs = rec_alloc(SWEEP_DEFS * sizeof *sweep_ops.defs);
	for (int i = 0; i < nmodules; i++)
		if (scan_module(&modules[i], &sc) < 0) {
			say2("cannot read ", modules[i].path, "; not recording");
			return;
		}
	rec_free(sweep_ops.defs, SWEEP_DEFS * sizeof *sweep_ops.defs);
	sweep_ops.defs = NULL;

	ctis = sc.ctis.p;
	nctis = sc.ctis.n;
	size_t hsize = 1024;
	while (hsize < nctis * 2)
		hsize *= 2;
	cti_hash = rec_alloc(hsize * sizeof *cti_hash);
	cti_hash_mask = hsize - 1;
	if (!cti_hash)
		return;
	if (debug > 3)
		site_traps = rec_alloc((nctis + 1) * sizeof *site_traps);
	cti_trapped = rec_alloc(nctis + 1);
	for (size_t i = 0; i < nctis; i++) {
		size_t h = tk_hash64(ctis[i].addr) & cti_hash_mask;
		while (cti_hash[h])
			h = (h + 1) & cti_hash_mask;
		cti_hash[h] = (uint32_t)i + 1;
	}
	struct fnrange *fr = sc.fns.p;
	sort_u64(fr, sc.fns.n, sizeof *fr);
	nfns = sc.fns.n;
	fn_start = rec_alloc((nfns + 1) * sizeof *fn_start);
	fn_end = rec_alloc((nfns + 1) * sizeof *fn_end);
	if (!fn_start || !fn_end)
		return;
	for (size_t i = 0; i < nfns; i++) {
		fn_start[i] = fr[i].start;
		fn_end[i] = fr[i].end;
		if (!fn_end[i]) {   /* assembler symbols without a size run to the next one */
			size_t j = i + 1;
			while (j < nfns && fr[j].start == fr[i].start)
				j++;
			const struct module *m = module_of(fr[i].start);
			fn_end[i] = j < nfns ? fr[j].start : m ? m->end : fr[i].start + 1;
			if (m && fn_end[i] > m->end)
				fn_end[i] = m->end;
		}
	}
	rec_free(fr, sc.fns.cap * sc.fns.elt);
	if (split_pairs(&sc.rets, &ret_sites, &ret_calls, &nret_sites, 1) < 0 ||
	    split_pairs(&sc.tails, &tj_target, &tj_src, &ntj, 0) < 0 ||
	    split_pairs(&sc.big_rsp, &big_rsp_addr, &big_rsp_delta, &nbig_rsp, 1) < 0)
		return;
	if (syscall_stubs() < 0) {
		say("cannot map the system call stubs near the traced code; not recording");
		return;
	}

	/* Functions whose every jump through a register is a recognised table or loads a stored
	 * address (leave.h), and jumps through memory, may be relocated; the other jumps are
	 * kept in reloc_jind. Where code may be entered: direct targets, the addresses code
	 * forms (sweep), those in the traced modules' data, the tables' targets. */
	reloc_jind = rec_alloc((nctis + 1) * sizeof *reloc_jind);
	uint8_t *is_table = rec_alloc(nctis + 1);
	size_t njreg = 0, ntables = 0, nleave = 0;   /* jumps through a register; tables; loaded */
	for (size_t i = 0; reloc_jind && is_table && i < nctis; i++) {
		if (ctis[i].kind != CTI_JMP_IND || ctis[i].is_mem)
			continue;
		njreg++;
		is_table[i] = (uint8_t)jump_table(&ctis[i], &sc.targets);
		ntables += is_table[i];
	}
	if (data_labels(&sc.targets) < 0 || !is_table)
		reloc_jind = NULL;
	reloc_targets = sc.targets.p;
	nreloc_targets = sc.targets.n;
	if (reloc_targets)
		radix_sort(reloc_targets, nreloc_targets, 1);
	uint64_t *jcc_t = sc.jcc_targets.p;
	if (jcc_t)
		radix_sort(jcc_t, sc.jcc_targets.n, 1);
	struct reloc_entries ent = { { reloc_targets, ret_sites, fn_start, jcc_t },
				     { nreloc_targets, nret_sites, nfns, sc.jcc_targets.n } };
	for (size_t i = 0; reloc_jind && i < nctis; i++) {
		if (ctis[i].kind != CTI_JMP_IND || ctis[i].is_mem || is_table[i])
			continue;
		if (jump_leaves(&ctis[i], &ent)) {
			nleave++;
			continue;
		}
		reloc_jind[nreloc_jind++] = ctis[i].addr;
		if (debug > 2) {
			const struct module *m = module_of(ctis[i].addr);
			char msg[128];
			snprintf(msg, sizeof msg, "the jump at 0x%llx computes its target (neither a "
				 "table nor a loaded address)", (unsigned long long)(ctis[i].addr - (m ? m->bias : 0)));
			say(msg);
		}
	}
	if (debug && reloc_jind) {
		char msg[160];
		snprintf(msg, sizeof msg, "jumps through a register: %zu, of which %zu jump tables "
			 "recognised and %zu to a loaded address", njreg, ntables, nleave);
		say(msg);
	}
	if (reloc_jind)
		radix_sort(reloc_jind, nreloc_jind, 1);
	else
		reloc_targets = NULL;   /* without it, no relocation */
	if (getenv("TK_BTRACE_RELOCATE") && !strcmp(getenv("TK_BTRACE_RELOCATE"), "0"))
		reloc_targets = NULL;

	real_sigaction(SIGTRAP, NULL, &old);
	if (old.sa_handler != SIG_DFL) {
		say("SIGTRAP already has a handler in this process; not recording");
		return;
	}
	out_fd = open_output(first);
	if (out_fd < 0) {
		say("cannot create the trace file; not recording");
		return;
	}
	write_header(strcmp(first, out_path) ? (uint32_t)getppid() : 0);
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	/* Nothing may interrupt an emulation half-way, not even libc's internal SIGCANCEL and
	 * SIGSETXID, which sigfillset leaves out: their handlers run libc, which may be traced
	 * (a trap while the handler runs kills the process). */
	memset(&sa.sa_mask, 0xff, sizeof sa.sa_mask);
	if (real_sigaction(SIGTRAP, &sa, NULL) < 0)
		return;
	/* The kernel returns from our handler into libc's __restore_rt (sa_restorer) with
	 * SIGTRAP still blocked: nothing there may trap. It holds no branch, and its
	 * rt_sigreturn is the one system call left untrapped (sweep); check it. */
	struct sigaction cur;
	real_sigaction(SIGTRAP, NULL, &cur);
	for (uint64_t a = (uint64_t)(uintptr_t)cur.sa_restorer; cur.sa_restorer && a < (uint64_t)(uintptr_t)cur.sa_restorer + 16; a++)
		if (cti_find(a)) {
			real_sigaction(SIGTRAP, &old, NULL);
			say("the signal return code (sa_restorer) would be patched; not recording");
			return;
		}
	uint64_t trapbit = 1ull << (SIGTRAP - 1);   /* a program may start with it blocked */
	rt_sigmask(SIG_UNBLOCK, &trapbit, NULL);
	pthread_atfork(NULL, NULL, after_fork_child);
	ts_lock_setup();
	fixed_segments_setup();
	resolve_nonlocal();
	real_pthread_sigmask = (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "pthread_sigmask");
	real_pthread_create = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))
		dlsym(RTLD_NEXT, "pthread_create");
	real_execve = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execve");
	real_execvpe = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execvpe");
	tk_btrace_real_vfork = dlsym(RTLD_NEXT, "vfork");
	exits_traced = module_of((uint64_t)(uintptr_t)dlsym(RTLD_NEXT, "_exit")) != NULL;
	out_pid = getpid();
	const char *tr = getenv("TK_BTRACE_TRAMPOLINES");
	uint64_t fsb = rt_fs_base();
	int64_t fs_off = (int64_t)((uint64_t)(uintptr_t)&ttls - fsb);
	ttls_fs_off = (int32_t)fs_off;
	if ((!tr || strcmp(tr, "0")) && fs_off == ttls_fs_off &&
	    (tramp_jumps = rec_alloc((nctis + 1) * sizeof *tramp_jumps))) {
		for (int i = 0; i < nmodules; i++)
			tramp_setup(i);
		tramps_on = 1;
	}
	windows = tramps_on && reloc_targets ? rec_alloc((2 * nctis + 1) * sizeof *windows) : NULL;
	cti_slot = windows ? rec_alloc((nctis + 1) * sizeof *cti_slot) : NULL;
	for (int i = 0; windows && i < nmodules; i++) {
		struct fnrange *sr = reloc_secs[i].p;
		/* the module's entries as bits: no binary searches for the windows' questions */
		struct reloc_entries ment = ent;
		size_t nbits = (modules[i].end - modules[i].start + 7) / 8;
		uint8_t *b0 = rec_alloc(nbits), *b1 = rec_alloc(nbits);
		if (b0 && b1) {
			ment.bits_lo = modules[i].start;
			ment.bits_hi = modules[i].end;
			reloc_entries_bits(&ment, b0, b1);
		}
		for (size_t k = 0; k < reloc_secs[i].n; k++) {
			uint64_t s = sr[k].start < modules[i].start ? modules[i].start : sr[k].start;
			uint64_t e = sr[k].end > modules[i].end ? modules[i].end : sr[k].end;
			if (s < e)
				nrelocated += reloc_module(&modules[i], s, e, &ment, reloc_jind, nreloc_jind);
		}
		rec_free(b0, nbits);
		rec_free(b1, nbits);
		paths_link(i);
	}
	if (windows)
		sort_u64(windows, nwindows, sizeof *windows);   /* for window_entry */
	if (tramps_on) {
		size_t made = start_tramps(tramp_jumps, &ntramp_jumps);
		if (debug) {
			char msg[96];
			snprintf(msg, sizeof msg, "%zu trampolines of jcc rel32 and calls or jumps through "
				 "[rip + disp] made at start-up", made);
			say(msg);
		}
	}
	for (int i = 0; i < nmodules; i++) {
		rec_free(reloc_facts[i], modules[i].end - modules[i].start);
		reloc_facts[i] = NULL;
	}
	if (trigger_name && !trigger_at)
		say2("--trigger ", trigger_name, ": no function of that name in the traced modules; "
		     "recording to the end");
	if (trigger_at && (!tramps_on || trigger_setup() < 0)) {
		say2("--trigger ", trigger_name, ": cannot make the call counters (no memory near the "
		     "code); recording to the end");
		trigger_at = 0;
	}
	if (patch() < 0)
		refuse("cannot make the code writable (mprotect refused); not recording");
	rec_free(tramp_jumps, (nctis + 1) * sizeof *tramp_jumps);
	for (int sig = 1; sig < 65; sig++) {
		struct sigaction fa;
		if (is_fatal(sig) && real_sigaction(sig, NULL, &fa) == 0 && fa.sa_handler == SIG_DFL) {
			fatal_action(&fa);
			real_sigaction(sig, &fa, NULL);
		}
	}
	if (getenv("TK_BTRACE_SNAPSHOT_SIGNAL")) {
		struct sigaction sn;
		fatal_action(&sn);   /* every signal but SIGTRAP blocked while it runs */
		sn.sa_sigaction = on_snapshot;
		sn.sa_flags |= SA_RESTART;
		snapshot_sig = atoi(getenv("TK_BTRACE_SNAPSHOT_SIGNAL"));
		if (snapshot_sig <= 0 || snapshot_sig >= 65 || snapshot_sig == SIGTRAP ||
		    real_sigaction(snapshot_sig, &sn, NULL) < 0)
			snapshot_sig = 0;
	}
	active = 1;
}
