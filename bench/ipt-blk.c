/* The anchor: decode a PT stream with libipt's block decoder (pt_blk_next), the way
 * ptxed --block-decoder --quiet does, and count instructions. Like ptxed, the ELF
 * segments go through an image section cache (pt_iscache), which keeps them mapped:
 * without it libipt maps and unmaps a file's section each time the flow moves between
 * two files (a program and libc: tens of seconds of system time on a 7 MB trace).
 * usage: ipt-blk FILE.pt --elf FILE:BASE ... */
#include <fcntl.h>
#include <gelf.h>
#include <intel-pt.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int load_elf(struct pt_image_section_cache *iscache, struct pt_image *image,
		    const char *arg)
{
	char *file = strdup(arg), *colon = strrchr(file, ':');
	uint64_t base = 0, minv = UINT64_MAX;
	size_t n;
	int fd;
	Elf *e;

	if (colon) {
		*colon = 0;
		base = strtoull(colon + 1, NULL, 0);
	}
	fd = open(file, O_RDONLY);
	elf_version(EV_CURRENT);
	e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	if (!e || elf_getphdrnum(e, &n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < minv)
			minv = ph.p_vaddr;
	}
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		int isid = pt_iscache_add_file(iscache, file, ph.p_offset, ph.p_filesz,
					       ph.p_vaddr - minv + base);

		if (isid < 0 || pt_image_add_cached(image, iscache, isid, NULL) < 0)
			return -1;
	}
	elf_end(e);
	close(fd);
	free(file);
	return 0;
}

int main(int argc, char **argv)
{
	struct pt_config cfg;
	struct pt_block_decoder *d;
	struct pt_image *image;
	struct stat st;
	uint64_t insns = 0, errors = 0;
	uint8_t *buf;
	int fd, status;

	if (argc < 2)
		return 2;
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0)
		return 3;
	buf = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + st.st_size;
	d = pt_blk_alloc_decoder(&cfg);
	image = pt_blk_get_image(d);
	struct pt_image_section_cache *iscache = pt_iscache_alloc(NULL);

	for (int i = 2; i + 1 < argc; i += 2)
		if (!strcmp(argv[i], "--elf") && load_elf(iscache, image, argv[i + 1]) < 0) {
			fprintf(stderr, "cannot load %s\n", argv[i + 1]);
			return 1;
		}
	for (;;) {
		status = pt_blk_sync_forward(d);
		if (status < 0)
			break;
		for (;;) {
			struct pt_block blk;

			while (status & pts_event_pending) {
				struct pt_event ev;

				status = pt_blk_event(d, &ev, sizeof(ev));
				if (status < 0)
					break;
			}
			if (status < 0)
				break;
			status = pt_blk_next(d, &blk, sizeof(blk));
			insns += blk.ninsn;
			if (status < 0)
				break;
		}
		if (status == -pte_eos)
			break;
		errors++;
	}
	printf("insn: %llu\nerrors: %llu\n", (unsigned long long)insns, (unsigned long long)errors);
	pt_blk_free_decoder(d);
	pt_iscache_free(iscache);
	return 0;
}
