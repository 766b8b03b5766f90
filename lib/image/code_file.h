/* Opening code files: executables, libraries, debug files (lib/image). */
#ifndef TK_IMAGE_CODE_FILE_H
#define TK_IMAGE_CODE_FILE_H

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* A descriptor for PATH; -1 (errno set) if it cannot be opened, -2 if it is not a regular
 * file. A trace names its code files; one replaced by a FIFO would block open() and reads
 * forever, a device would never end: open without blocking, accept regular files only. */
static inline int tk_open_code_file(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		return -2;
	}
	return fd;
}

#endif
