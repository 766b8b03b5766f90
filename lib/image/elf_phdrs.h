/* Program headers of an ELF file that libelf can read (lib/image). */
#ifndef TK_IMAGE_ELF_PHDRS_H
#define TK_IMAGE_ELF_PHDRS_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>

/* How many program headers E has, 0 when libelf cannot read them. A damaged e_phnum (or
 * its PN_XNUM extension in section 0) may claim billions: libelf then fails to load the
 * table and every gelf_getphdr fails, and a loop over the claimed count would spin on
 * those failures (the fuzzer's ten-second hang). A table that loads fits in the file. */
static inline size_t tk_elf_phdr_count(Elf *e)
{
	size_t n = 0;
	GElf_Phdr ph;

	if (!e || elf_getphdrnum(e, &n) != 0 || !n || !gelf_getphdr(e, 0, &ph))
		return 0;
	return n;
}

/* --elf FILE:BASE with BASE 0 on an executable linked at fixed addresses (ET_EXEC, a
 * non-PIE program or vmlinux): it can run only where it is linked, so 0 means "as
 * linked" (as libipt's ptxed takes it), not "move its lowest segment to 0". */
static inline int tk_elf_base_as_linked(Elf *e, uint64_t base)
{
	GElf_Ehdr eh;

	return base == 0 && gelf_getehdr(e, &eh) && eh.e_type == ET_EXEC;
}

#endif
