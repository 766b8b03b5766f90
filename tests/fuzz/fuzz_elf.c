/* Fuzz the ELF readers a user's --elf file goes through: symbols (.symtab/.dynsym, PLT
 * stubs, the FDE starts of a stripped module), the code image and the kernel's reference
 * symbol; and the same bytes as a kallsyms listing (perf's kcore_dir). DWARF is left to
 * elfutils' own fuzzing (no_dwarf). The input lives in a memfd, named by its /proc path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tracekit/tracekit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64], buf[256];

	if (fd < 0 && (fd = memfd_create("fuzz_elf", MFD_CLOEXEC)) < 0)
		return 0;
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);

	struct tk_sym_opts so = { .sz = sizeof so, .no_dwarf = 1 };
	struct tk_sym *s = tk_sym_new(&so, NULL);
	if (s) {
		const uint64_t base = 0x400000;
		if (tk_sym_add_elf(s, path, base) >= 0) {
			uint64_t *e = NULL, lo = 0, hi = 0;
			size_t n = 0;
			if (tk_sym_entries(s, &e, &n) == 0) {
				/* every entry names something without reading out of bounds */
				for (size_t i = 0; i < n && i < 64; i++) {
					struct tk_sym_info si;
					(void)tk_sym_lookup(s, e[i], &si);
					(void)tk_sym_addr_name(s, e[i] + 1, 1, buf, sizeof buf);
				}
				free(e);
			}
			if (tk_sym_module(s, 0, NULL, NULL, &lo, &hi) == 0 && hi > lo)
				(void)tk_sym_addr_name(s, lo + (hi - lo) / 2, 1, buf, sizeof buf);
			(void)tk_sym_build_id(s, 0, buf, sizeof buf);
		}
		tk_sym_free(s);
	}

	if ((s = tk_sym_new(&so, NULL))) {
		if (tk_sym_add_kallsyms(s, path, "[kernel.kallsyms]") >= 0) {
			uint64_t *e = NULL;
			size_t n = 0;
			if (tk_sym_entries(s, &e, &n) == 0) {
				for (size_t i = 0; i < n && i < 64; i++)
					(void)tk_sym_addr_name(s, e[i] + 1, 1, buf, sizeof buf);
				free(e);
			}
		}
		tk_sym_free(s);
	}
	uint64_t value, lowest;
	(void)tk_image_elf_symbol(path, "_text", &value, &lowest);

	struct tk_image *img = tk_image_new(NULL);
	if (img) {
		if (tk_image_add_elf(img, path, 0x400000, 1) >= 0) {
			uint8_t code[64];
			(void)tk_image_read(img, 0x400000, code, sizeof code);
			(void)tk_image_read(img, 0x401000, code, sizeof code);
		}
		tk_image_free(img);
	}
	return 0;
}
