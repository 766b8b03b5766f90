/* Memory image: the code bytes a trace ran over (ELF segments, raw files, buffers). */
#ifndef TRACEKIT_IMAGE_H
#define TRACEKIT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tk_image;

struct tk_image *tk_image_new(int *err);
void tk_image_free(struct tk_image *img);

/* Load the PT_LOAD segments of an ELF file. With HAS_BASE the file is relocated so that
 * its lowest loadable segment starts at BASE (ptxed's --elf FILE:BASE). */
int tk_image_add_elf(struct tk_image *img, const char *path, uint64_t base, int has_base);
/* Where the loader put an ELF file whose page at file offset PGOFF is mapped at ADDR (a
 * perf MMAP record): its BIAS (run-time minus ELF address, for the symbolizer) and the
 * BASE of its lowest segment (tk_image_add_elf). -TK_E_NOT_FOUND when no loadable segment
 * holds PGOFF. */
int tk_image_elf_mapped(const char *path, uint64_t addr, uint64_t pgoff, uint64_t *bias,
			uint64_t *base);
/* The value of symbol NAME (from .symtab) of an ET_EXEC file such as vmlinux, and the
 * address of its lowest loadable segment. -TK_E_NOT_FOUND without it; -TK_E_BAD_FORMAT for
 * other files (shared objects, position-independent programs). */
int tk_image_elf_symbol(const char *path, const char *name, uint64_t *value, uint64_t *lowest);
/* The GNU build-id of an ELF file into ID (at most CAP bytes): its length, 0 if it has
 * none, or -TK_E_*. */
int tk_image_elf_build_id(const char *path, uint8_t *id, size_t cap);
/* Copy this machine's vDSO to ADDR if its build-id is BUILD_ID (LEN bytes): the code a
 * traced process ran there, when it ran on this kernel. -TK_E_NOT_FOUND otherwise. */
int tk_image_add_vdso(struct tk_image *img, uint64_t addr, const uint8_t *build_id, size_t len);
/* Load a whole raw file at ADDR (ptxed's --raw FILE:ADDR). */
int tk_image_add_raw(struct tk_image *img, const char *path, uint64_t addr);
/* Copy N bytes from BUF to ADDR. */
int tk_image_add_mem(struct tk_image *img, const void *buf, size_t n, uint64_t addr);
/* Parse and load ptxed-style arguments: "FILE[:BASE]" for ELF, "FILE[:FROM[-TO]]:ADDR"
 * for raw (bytes FROM to TO, TO excluded, of the file at ADDR; the whole file without). */
int tk_image_add_elf_arg(struct tk_image *img, const char *arg);
int tk_image_add_raw_arg(struct tk_image *img, const char *arg);

/* Copy up to N bytes at ADDR into BUF. Returns the number of contiguous bytes available
 * (> 0), or -TK_E_NOMAP if ADDR is not in the image. Later additions win on overlap. */
int tk_image_read(const struct tk_image *img, uint64_t addr, void *buf, size_t n);

/* Direct access: pointer to the bytes at ADDR and how many follow contiguously, or NULL. */
const uint8_t *tk_image_ptr(const struct tk_image *img, uint64_t addr, size_t *avail);

/* Number of segments, and a stamp that changes whenever the image changes (caches key on
 * it). */
size_t tk_image_nsegments(const struct tk_image *img);
uint64_t tk_image_stamp(const struct tk_image *img);

#ifdef __cplusplus
}
#endif
#endif
