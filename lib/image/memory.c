/* Memory image: code bytes by address, from ELF load segments, raw files or buffers.
 * Files are mmap'd once; segments point into the mappings. Lookups scan the segments from
 * the newest, so later additions shadow older ones (ptxed behaves the same). */
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracekit/common.h"
#include "tracekit/image.h"
#include "image/elf_phdrs.h"

struct seg {
	uint64_t start, end;      /* [start, end) */
	const uint8_t *data;
};

struct mapping {
	void *addr;
	size_t len;
	int owned_heap;           /* 1: malloc'd copy, 0: mmap */
};

struct tk_image {
	struct seg *segs;
	size_t nsegs, capsegs;
	struct mapping *maps;
	size_t nmaps, capmaps;
	uint64_t stamp;
};

static uint64_t image_stamp_counter;

struct tk_image *tk_image_new(int *err)
{
	struct tk_image *img = calloc(1, sizeof(*img));

	if (!img) {
		if (err)
			*err = -TK_E_NOMEM;
		return NULL;
	}
	img->stamp = __atomic_add_fetch(&image_stamp_counter, 1, __ATOMIC_RELAXED) << 20;
	if (err)
		*err = 0;
	return img;
}

void tk_image_free(struct tk_image *img)
{
	if (!img)
		return;
	for (size_t i = 0; i < img->nmaps; i++) {
		if (img->maps[i].owned_heap)
			free(img->maps[i].addr);
		else
			munmap(img->maps[i].addr, img->maps[i].len);
	}
	free(img->maps);
	free(img->segs);
	free(img);
}

static int add_mapping(struct tk_image *img, void *addr, size_t len, int heap)
{
	if (img->nmaps == img->capmaps) {
		size_t cap = img->capmaps ? img->capmaps * 2 : 8;
		struct mapping *m = realloc(img->maps, cap * sizeof(*m));

		if (!m)
			return -TK_E_NOMEM;
		img->maps = m;
		img->capmaps = cap;
	}
	img->maps[img->nmaps++] = (struct mapping){ addr, len, heap };
	return 0;
}

static int add_seg(struct tk_image *img, uint64_t start, const uint8_t *data, size_t len)
{
	if (!len)
		return 0;
	if (start + len < start)
		return -TK_E_INVAL;
	if (img->nsegs == img->capsegs) {
		size_t cap = img->capsegs ? img->capsegs * 2 : 8;
		struct seg *s = realloc(img->segs, cap * sizeof(*s));

		if (!s)
			return -TK_E_NOMEM;
		img->segs = s;
		img->capsegs = cap;
	}
	img->segs[img->nsegs++] = (struct seg){ start, start + len, data };
	img->stamp++;
	return 0;
}

static int map_file(struct tk_image *img, const char *path, const uint8_t **data, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *p;

	if (fd < 0) {
		tk_log(TK_LOG_ERROR, "%s: %s", path, strerror(errno));
		return -TK_E_IO;
	}
	if (fstat(fd, &st) < 0 || st.st_size <= 0) {
		tk_log(TK_LOG_ERROR, "%s: empty or unreadable file", path);
		close(fd);
		return -TK_E_IO;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		tk_log(TK_LOG_ERROR, "%s: mmap: %s", path, strerror(errno));
		return -TK_E_IO;
	}
	if (add_mapping(img, p, (size_t)st.st_size, 0) < 0) {
		munmap(p, (size_t)st.st_size);
		return -TK_E_NOMEM;
	}
	*data = p;
	*len = (size_t)st.st_size;
	return 0;
}

int tk_image_add_raw(struct tk_image *img, const char *path, uint64_t addr)
{
	const uint8_t *data;
	size_t len;
	int rc;

	if (!img || !path)
		return -TK_E_INVAL;
	if ((rc = map_file(img, path, &data, &len)) < 0)
		return rc;
	return add_seg(img, addr, data, len);
}

int tk_image_add_mem(struct tk_image *img, const void *buf, size_t n, uint64_t addr)
{
	void *copy;

	if (!img || (!buf && n))
		return -TK_E_INVAL;
	if (!n)
		return 0;
	if (!(copy = malloc(n)))
		return -TK_E_NOMEM;
	memcpy(copy, buf, n);
	if (add_mapping(img, copy, n, 1) < 0) {
		free(copy);
		return -TK_E_NOMEM;
	}
	return add_seg(img, addr, copy, n);
}

int tk_image_add_elf(struct tk_image *img, const char *path, uint64_t base, int has_base)
{
	const uint8_t *data;
	size_t len, nph;
	uint64_t minaddr = UINT64_MAX, bias = 0;
	Elf *elf;
	int rc;

	if (!img || !path)
		return -TK_E_INVAL;
	if ((rc = map_file(img, path, &data, &len)) < 0)
		return rc;
	elf_version(EV_CURRENT);
	elf = elf_memory((char *)data, len);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nph) != 0) {
		tk_log(TK_LOG_ERROR, "%s: not an ELF file: %s", path, elf_errmsg(-1));
		if (elf)
			elf_end(elf);
		return -TK_E_BAD_FORMAT;
	}
	nph = tk_elf_phdr_count(elf);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < minaddr)
			minaddr = ph.p_vaddr;
	}
	if (has_base && minaddr != UINT64_MAX)
		bias = base - minaddr;
	rc = 0;
	for (size_t i = 0; i < nph && rc >= 0; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !ph.p_filesz)
			continue;
		if (ph.p_offset > len || ph.p_filesz > len - ph.p_offset) {
			tk_log(TK_LOG_ERROR, "%s: segment %zu lies outside the file", path, i);
			rc = -TK_E_BAD_FORMAT;
			break;
		}
		rc = add_seg(img, ph.p_vaddr + bias, data + ph.p_offset, ph.p_filesz);
	}
	elf_end(elf);
	if (rc >= 0 && minaddr == UINT64_MAX) {
		tk_log(TK_LOG_ERROR, "%s: no loadable segment", path);
		rc = -TK_E_BAD_FORMAT;
	}
	return rc;
}

int tk_image_elf_build_id(const char *path, uint8_t *id, size_t cap)
{
	const void *bid;
	ssize_t n;
	int fd;
	Elf *elf;

	if (!path || !id)
		return -TK_E_INVAL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -TK_E_IO;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	n = elf ? dwelf_elf_gnu_build_id(elf, &bid) : -1;
	if (n > 0 && (size_t)n <= cap)
		memcpy(id, bid, (size_t)n);
	if (elf)
		elf_end(elf);
	close(fd);
	if (n < 0 || (size_t)n > cap)
		return -TK_E_BAD_FORMAT;
	return (int)n;
}

int tk_image_add_vdso(struct tk_image *img, uint64_t addr, const uint8_t *build_id, size_t len)
{
	const uint8_t *vdso = (const uint8_t *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
	const void *bid;
	uint64_t size = 0;
	size_t nph;
	ssize_t n;
	Elf *elf;

	if (!img || !build_id)
		return -TK_E_INVAL;
	if (!vdso)
		return -TK_E_NOT_FOUND;
	/* the ELF header and program headers come first; the whole image is what PT_LOAD
	 * covers (the kernel maps it at the vDSO's address 0) */
	elf_version(EV_CURRENT);
	if (!(elf = elf_memory((char *)vdso, 4096)) || elf_getphdrnum(elf, &nph) != 0) {
		if (elf)
			elf_end(elf);
		return -TK_E_BAD_FORMAT;
	}
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr == 0)
			size = ph.p_filesz;
	}
	elf_end(elf);
	if (!size || size > (64 << 20))
		return -TK_E_BAD_FORMAT;
	if (!(elf = elf_memory((char *)vdso, (size_t)size)))
		return -TK_E_BAD_FORMAT;
	n = dwelf_elf_gnu_build_id(elf, &bid);
	int same = n > 0 && (size_t)n == len && memcmp(bid, build_id, len) == 0;
	elf_end(elf);
	if (!same)
		return -TK_E_NOT_FOUND;   /* recorded under another kernel */
	return tk_image_add_mem(img, vdso, (size_t)size, addr);
}

/* PATH as an ELF file with program headers (of type TYPE unless 0), its descriptor in *FD
 * (the caller closes both); NULL and *ERR if it is not one. */
static Elf *elf_open(const char *path, unsigned type, int *fd, int *err)
{
	GElf_Ehdr eh;
	size_t nph;
	Elf *elf;

	if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		*err = -TK_E_IO;
		return NULL;
	}
	elf_version(EV_CURRENT);
	elf = elf_begin(*fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    (type && eh.e_type != type) || elf_getphdrnum(elf, &nph) != 0) {
		if (elf)
			elf_end(elf);
		close(*fd);
		*err = -TK_E_BAD_FORMAT;
		return NULL;
	}
	return elf;
}

int tk_image_elf_mapped(const char *path, uint64_t addr, uint64_t pgoff, uint64_t *bias,
			uint64_t *base)
{
	uint64_t minaddr = UINT64_MAX;
	size_t nph;
	int found = 0, fd, err;
	Elf *elf;

	if (!path || !bias || !base)
		return -TK_E_INVAL;
	if (!(elf = elf_open(path, 0, &fd, &err)))
		return err;
	nph = tk_elf_phdr_count(elf);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ph.p_vaddr < minaddr)
			minaddr = ph.p_vaddr;
		/* the segment the mapping's first page belongs to: the loader maps from the
		 * page holding p_offset, and p_vaddr agrees with p_offset modulo the page */
		uint64_t first_page = ph.p_offset & ~(uint64_t)0xfff;
		if (!found && pgoff >= first_page && pgoff < ph.p_offset + ph.p_filesz) {
			*bias = addr - (ph.p_vaddr - (ph.p_offset - pgoff));
			found = 1;
		}
	}
	elf_end(elf);
	close(fd);
	if (!found || minaddr == UINT64_MAX)
		return -TK_E_NOT_FOUND;
	*base = minaddr + *bias;
	return 0;
}

/* The value of symbol NAME in an ET_EXEC file's symbol table, and the address of its lowest
 * loadable segment (what tk_image_add_elf's BASE places). */
int tk_image_elf_symbol(const char *path, const char *name, uint64_t *value, uint64_t *lowest)
{
	uint64_t minaddr = UINT64_MAX;
	int found = 0, fd, err;
	size_t nph;
	Elf *elf;

	if (!path || !name || !value || !lowest)
		return -TK_E_INVAL;
	if (!(elf = elf_open(path, ET_EXEC, &fd, &err)))
		return err;
	nph = tk_elf_phdr_count(elf);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < minaddr)
			minaddr = ph.p_vaddr;
	}
	for (Elf_Scn *scn = NULL; !found && (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *n;
			if (gelf_getsym(d, (int)i, &sym) && sym.st_shndx != SHN_UNDEF &&
			    (n = elf_strptr(elf, sh.sh_link, sym.st_name)) && !strcmp(n, name)) {
				*value = sym.st_value;
				found = 1;
				break;
			}
		}
	}
	elf_end(elf);
	close(fd);
	if (!found || minaddr == UINT64_MAX)
		return -TK_E_NOT_FOUND;
	*lowest = minaddr;
	return 0;
}

/* Split "FILE:NUM" at the last colon when what follows parses as a number. */
static int split_arg(const char *arg, char **file, uint64_t *num, int *has_num)
{
	const char *colon = strrchr(arg, ':');
	char *end;

	*has_num = 0;
	if (colon && colon[1]) {
		errno = 0;
		unsigned long long v = strtoull(colon + 1, &end, 0);

		if (!*end && !errno) {
			*num = v;
			*has_num = 1;
			*file = strndup(arg, (size_t)(colon - arg));
			return *file ? 0 : -TK_E_NOMEM;
		}
	}
	*file = strdup(arg);
	return *file ? 0 : -TK_E_NOMEM;
}

int tk_image_add_elf_arg(struct tk_image *img, const char *arg)
{
	char *file;
	uint64_t base = 0;
	int has, rc;

	if ((rc = split_arg(arg, &file, &base, &has)) < 0)
		return rc;
	rc = tk_image_add_elf(img, file, base, has);
	free(file);
	return rc;
}

/* ptxed's optional part of a raw file: FROM (to the end) or FROM-TO (TO excluded) after
 * the file's name. Returns 1 and cuts it off FILE if there is one, 0 if not, < 0 if bad. */
static int raw_range(char *file, uint64_t *from, uint64_t *to)
{
	char *colon = strrchr(file, ':'), *end;

	if (!colon || !colon[1])
		return 0;
	errno = 0;
	*from = strtoull(colon + 1, &end, 0);
	*to = UINT64_MAX;
	if (*end == '-' && end[1])
		*to = strtoull(end + 1, &end, 0);
	if (*end || errno)
		return 0;   /* a ':' of the name */
	*colon = 0;
	return *to > *from ? 1 : -TK_E_INVAL;
}

int tk_image_add_raw_arg(struct tk_image *img, const char *arg)
{
	const uint8_t *data;
	char *file;
	uint64_t addr = 0, from = 0, to = UINT64_MAX;
	size_t len;
	int has, rc;

	if ((rc = split_arg(arg, &file, &addr, &has)) < 0)
		return rc;
	if (!has || (rc = raw_range(file, &from, &to)) < 0) {
		tk_log(TK_LOG_ERROR, "%s: --raw needs FILE[:FROM[-TO]]:ADDR", arg);
		free(file);
		return -TK_E_INVAL;
	}
	if (!rc) {
		rc = tk_image_add_raw(img, file, addr);
	} else if ((rc = map_file(img, file, &data, &len)) >= 0) {
		if (from >= len) {
			tk_log(TK_LOG_ERROR, "%s: offset past the end of the file", arg);
			rc = -TK_E_INVAL;
		} else {
			rc = add_seg(img, addr, data + from, to - from < len - from ? to - from : len - from);
		}
	}
	free(file);
	return rc;
}

const uint8_t *tk_image_ptr(const struct tk_image *img, uint64_t addr, size_t *avail)
{
	for (size_t i = img->nsegs; i-- > 0;) {
		const struct seg *s = &img->segs[i];

		if (addr >= s->start && addr < s->end) {
			uint64_t lim = s->end;

			/* A newer segment that starts inside this one cuts the run short. */
			for (size_t j = i + 1; j < img->nsegs; j++)
				if (img->segs[j].start > addr && img->segs[j].start < lim)
					lim = img->segs[j].start;
			*avail = (size_t)(lim - addr);
			return s->data + (addr - s->start);
		}
	}
	*avail = 0;
	return NULL;
}

int tk_image_read(const struct tk_image *img, uint64_t addr, void *buf, size_t n)
{
	size_t avail;
	const uint8_t *p;

	if (!img || !buf)
		return -TK_E_INVAL;
	p = tk_image_ptr(img, addr, &avail);
	if (!p)
		return -TK_E_NOMAP;
	if (avail < n)
		n = avail;
	if (n > INT32_MAX)
		n = INT32_MAX;
	memcpy(buf, p, n);
	return (int)n;
}

size_t tk_image_nsegments(const struct tk_image *img)
{
	return img ? img->nsegs : 0;
}

uint64_t tk_image_stamp(const struct tk_image *img)
{
	return img ? img->stamp : 0;
}
