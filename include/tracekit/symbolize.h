/* Symbolisation: code address -> function, module+offset, source file:line (DWARF line
 * tables), inlined function (DWARF inline info), build-id; function id -> name for traces
 * that name functions by number (XRay). Uses elfutils libelf/libdw. Never fails on a
 * missing symbol: an unknown address prints as module+0xoffset or 0xaddress. */
#ifndef TRACEKIT_SYMBOLIZE_H
#define TRACEKIT_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tk_sym;

struct tk_sym_opts {
	size_t sz;        /* sizeof(struct tk_sym_opts) */
	int no_dwarf;     /* symbols only: no line tables, no inline info */
	int no_inline;    /* no inline info */
	/* Names are demangled (C++ Itanium, Rust legacy and v0) as c++filt prints them, unless
	 * NO_DEMANGLE; SHORT_NAMES drops template arguments and parameters. */
	int no_demangle;
	int short_names;
};

TK_API struct tk_sym *tk_sym_new(const struct tk_sym_opts *opts, int *err);
TK_API void tk_sym_free(struct tk_sym *s);

/* Add an ELF file whose code runs at file address + BIAS (0 for non-PIE executables; for
 * a PIE or shared object, the load address of its first PT_LOAD minus that segment's
 * aligned p_vaddr, i.e. the start of its first mapping). Returns a module index >= 0. */
TK_API int tk_sym_add_elf(struct tk_sym *s, const char *path, uint64_t bias);
/* Add an ELF file whose lowest loadable segment starts at BASE (ptxed's --elf FILE:BASE;
 * BASE 0 on an ET_EXEC file: where it is linked). */
TK_API int tk_sym_add_elf_at(struct tk_sym *s, const char *path, uint64_t base);
/* Load bias of PATH from a mapping at START of file offset OFFSET (as in /proc/PID/maps). */
TK_API int tk_sym_bias_from_map(const char *path, uint64_t start, uint64_t offset, uint64_t *bias);
/* Name a module-less range (e.g. a JIT region or vDSO) for module+offset output. */
TK_API int tk_sym_add_range(struct tk_sym *s, const char *name, uint64_t start, uint64_t end);
/* The text symbols of a /proc/kallsyms listing (the running kernel's and its modules'
 * functions at their run-time addresses; perf record --kcore keeps a copy), as one module
 * named NAME. -TK_E_NOT_FOUND when it lists none (addresses hidden: all zero). */
TK_API int tk_sym_add_kallsyms(struct tk_sym *s, const char *path, const char *name);

/* Function ids (XRay): a table filled by the decoder, or a callback. A callback returns 0
 * and sets *name (kept by the caller) and/or *addr (resolved through the ELF symbols). */
TK_API int tk_sym_set_func(struct tk_sym *s, uint64_t id, const char *name, uint64_t addr);
typedef int (*tk_sym_func_fn)(void *ctx, uint64_t id, const char **name, uint64_t *addr);
TK_API void tk_sym_set_func_resolver(struct tk_sym *s, tk_sym_func_fn fn, void *ctx);

struct tk_sym_info {
	const char *func;         /* symbol (outermost function; demangled as the options say),
				     NULL if unknown */
	uint64_t func_start;      /* its run-time address */
	uint64_t func_size;
	const char *module;       /* module path, NULL if the address is in none */
	uint64_t module_offset;   /* address - bias (the file address) */
	const char *file;         /* source file (DWARF), NULL if unknown */
	unsigned line, column;
	const char *inline_func;  /* innermost inlined function at the address, or NULL */
	const char *inline_file;  /* where INLINE_FUNC was inlined into its caller */
	unsigned inline_line;
	const uint8_t *build_id;  /* NULL if the module has none */
	size_t build_id_len;
};
/* Fill INFO for a run-time address. Returns 0 (info may be partly empty) or -TK_E_*.
 * Strings live as long as S. */
TK_API int tk_sym_lookup(struct tk_sym *s, uint64_t addr, struct tk_sym_info *info);

/* Name of a function id: from the table, the resolver, or "#ID". Valid until the next call
 * with the same BUF. */
TK_API const char *tk_sym_func_name(struct tk_sym *s, uint64_t id, char *buf, size_t n);
/* Name of a code address: "func", "func+0x1c" (with offsets), "module+0xoff" or "0xaddr". */
TK_API const char *tk_sym_addr_name(struct tk_sym *s, uint64_t addr, int with_offset, char *buf, size_t n);
/* The run-time address of a function id when known (for source lines of XRay functions). */
TK_API int tk_sym_func_addr(struct tk_sym *s, uint64_t id, uint64_t *addr);

/* Source lines covered by [start, end] (END = address of the last instruction).
 * For each line range the callback gets the line, and the number of instructions of the
 * range that lie in it (decoded from the module's code bytes: x86-64 and AArch64; when the
 * code cannot be decoded, instruction counts are 0 except for one-line ranges, whose count
 * is passed through as TOTAL_INSNS). */
typedef int (*tk_sym_line_fn)(void *ctx, const char *file, unsigned line, uint64_t insns);
TK_API int tk_sym_lines(struct tk_sym *s, uint64_t start, uint64_t end, uint64_t total_insns,
		 tk_sym_line_fn fn, void *ctx);

/* Run-time entry addresses of every function symbol of every module (for
 * tk_prof_opts.entries), ascending, with repeats. A module without a full
 * symbol table (stripped, no debug file) adds the starts of its .eh_frame_hdr table: its
 * local functions, which callbacks from untraced code enter. *out is malloc'd (free()). */
TK_API int tk_sym_entries(const struct tk_sym *s, uint64_t **out, size_t *n);

/* Build-id of module INDEX as lower-case hex ("" if none). */
TK_API const char *tk_sym_build_id(struct tk_sym *s, int module, char *buf, size_t n);
TK_API int tk_sym_module_count(const struct tk_sym *s);
/* Path, bias and the run-time address range of module INDEX. */
TK_API int tk_sym_module(const struct tk_sym *s, int index, const char **path, uint64_t *bias,
		  uint64_t *start, uint64_t *end);

#ifdef __cplusplus
}
#endif
#endif
