/* Benchmark input: a large Intel PT stream over real code (libc and a big library loaded
 * in this process), written by the test generator (tests/oracle/ptgen.h). Prints the
 * --elf FILE:BASE arguments that place the same code for the decoders.
 * usage: ipt-flow-gen OUT.pt MBYTES [LIBRARY] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <stdio.h>
#include <unistd.h>

#include "oracle/ptgen.h"

static const char *want_lib;
static struct tk_image *img;
static uint64_t *ents;
static size_t nents, capents;

/* Function symbols of FILE loaded at BIAS become entries (indirect targets). */
static void add_syms(const char *file, uint64_t bias)
{
	int fd = open(file, O_RDONLY);
	Elf *e;
	Elf_Scn *scn = NULL;

	if (fd < 0)
		return;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB))
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    !s.st_value || s.st_size < 16)
				continue;
			if (nents == capents) {
				capents = capents ? capents * 2 : 4096;
				ents = realloc(ents, capents * sizeof(*ents));
			}
			ents[nents++] = s.st_value + bias;
		}
	}
	if (e)
		elf_end(e);
	close(fd);
}

static int add_obj(struct dl_phdr_info *info, size_t size, void *ctx)
{
	(void)size, (void)ctx;
	if (!strstr(info->dlpi_name, "libc.so") && !(want_lib && strstr(info->dlpi_name, want_lib)))
		return 0;
	uint64_t minv = UINT64_MAX;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (ph->p_vaddr < minv)
			minv = ph->p_vaddr;
		if (ph->p_flags & PF_X)
			tk_image_add_mem(img, (const void *)(info->dlpi_addr + ph->p_vaddr),
					 ph->p_filesz, info->dlpi_addr + ph->p_vaddr);
	}
	printf("--elf %s:0x%llx\n", info->dlpi_name,
	       (unsigned long long)(info->dlpi_addr + minv));
	add_syms(info->dlpi_name, info->dlpi_addr);
	return 0;
}

int main(int argc, char **argv)
{
	struct ptgen g;
	struct ptgen_opts o = { .seed = 42, .psb_every = 8192, .p_async = 1, .p_taken = 50 };
	int err;
	long len;
	FILE *fp;

	if (argc < 3) {
		fprintf(stderr, "usage: %s OUT.pt MBYTES [LIBRARY]\n", argv[0]);
		return 2;
	}
	if (argc > 3) {
		want_lib = strrchr(argv[3], '/') ? strrchr(argv[3], '/') + 1 : argv[3];
		if (!dlopen(argv[3], RTLD_NOW | RTLD_GLOBAL)) {
			fprintf(stderr, "%s\n", dlerror());
			return 1;
		}
	}
	img = tk_image_new(&err);
	dl_iterate_phdr(add_obj, NULL);
	if (!nents)
		return 1;
	o.entries = ents;
	o.nentries = nents;
	o.max_bytes = strtoull(argv[2], NULL, 0) << 20;
	if (ptgen_init(&g, img, &o) < 0 || (len = ptgen_run(&g)) < 0) {
		fprintf(stderr, "generation failed\n");
		return 1;
	}
	fp = fopen(argv[1], "wb");
	int bad = !fp || fwrite(g.buf, 1, (size_t)len, fp) != (size_t)len;
	if (fp && fclose(fp) != 0)
		bad = 1;
	if (!bad)
		fprintf(stderr, "%ld bytes, %llu instructions\n", len, (unsigned long long)g.insns);
	/* freed: the test suite runs it under LeakSanitizer (oracle/pprof_jobs.sh) */
	ptgen_fini(&g);
	tk_image_free(img);
	free(ents);
	return bad;
}
