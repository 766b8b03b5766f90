/* A fuzz input as a file the library opens by name: an in-memory file, /proc/self/fd/N. */
#ifndef TK_FUZZ_FILE_H
#define TK_FUZZ_FILE_H
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* DATA in a new in-memory file named in PATH (N bytes); its descriptor, or -1. */
static inline int fuzz_file(const uint8_t *data, size_t size, char *path, size_t n)
{
	int fd = memfd_create("fuzz", 0);

	if (fd < 0)
		return -1;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return -1;
	}
	snprintf(path, n, "/proc/self/fd/%d", fd);
	return fd;
}
#endif
