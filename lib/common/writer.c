/* Background writer: one thread writes handed-over buffers while the caller fills the
 * next, so that the kernel's copy of the output no longer adds to formatting time. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracekit/common.h"
#include "tracekit/internal/util.h"

/* A large output to a regular file goes past the page cache once it reaches DIRECT_AFTER
 * bytes: the kernel's copy into the cache (and its write-back throttling) cost as much as
 * formatting GBs of text, a direct write almost nothing. Writes must then be whole
 * aligned blocks, so the data is staged; the tail is written normally at the end. A
 * direct write returns when the disk has the data, so a second thread writes each full
 * stage while the writer copies into the other one: the copy no longer leaves the disk
 * idle (it took 40 % of a disk-bound decode's time, at any -j). */
#define DIRECT_AFTER ((uint64_t)64 << 20)
#define DIRECT_ALIGN 4096
#define STAGE_SIZE ((size_t)8 << 20)

struct tk_writer {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int fd, err, errnum, done;   /* errnum: errno of the write that failed (err) */
	char *full;                 /* being written; NULL while the thread is idle */
	size_t full_len, full_cap;
	char *spare;                /* a written buffer, for the caller's next one */
	size_t spare_cap;
	/* direct I/O (see DIRECT_AFTER): on or not, the file's status flags before, bytes
	 * written through the page cache and the last DIRECT_ALIGN of them, and a staging
	 * buffer with `staged` bytes in it */
	int direct, fl;
	uint64_t written;
	size_t ntail;
	char *stage;
	size_t staged;
	char tail[DIRECT_ALIGN];
	/* the I/O thread, started with direct I/O: writes io_buf (NULL: idle) and gives it
	 * back as the next stage; io_undirect: a direct write failed and it left direct I/O */
	pthread_t io_thread;
	pthread_mutex_t io_lock;
	pthread_cond_t io_cond;
	int io_started, io_done, io_err, io_errnum, io_undirect;
	char *io_buf, *io_stage;     /* io_stage: the second stage, while idle */
	size_t io_len;
};

static int write_all(int fd, const char *data, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t r = write(fd, data + off, n - off);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r > 0)
			off += (size_t)r;
	}
	return 0;
}

/* The I/O thread: each handed stage with one direct write. A write the filesystem refuses
 * (or cuts short) ends direct I/O, and the rest goes through the page cache. */
static void *io_main(void *arg)
{
	struct tk_writer *w = arg;

	pthread_mutex_lock(&w->io_lock);
	for (;;) {
		while (!w->io_buf && !w->io_done)
			pthread_cond_wait(&w->io_cond, &w->io_lock);
		if (!w->io_buf)
			break;
		char *buf = w->io_buf;
		size_t len = w->io_len;
		int undirect = w->io_undirect, err = 0, errnum = 0;

		pthread_mutex_unlock(&w->io_lock);
		ssize_t r = undirect ? 0 : write(w->fd, buf, len);
		if (r != (ssize_t)len) {
			size_t off = r > 0 ? (size_t)r : 0;

			if (!undirect)
				fcntl(w->fd, F_SETFL, w->fl);
			undirect = 1;
			if (write_all(w->fd, buf + off, len - off) < 0)
				err = 1, errnum = errno;
		}
		pthread_mutex_lock(&w->io_lock);
		w->io_undirect = undirect;
		if (err && !w->io_err)
			w->io_err = 1, w->io_errnum = errnum;
		w->io_stage = buf;
		w->io_buf = NULL;
		pthread_cond_broadcast(&w->io_cond);
	}
	pthread_mutex_unlock(&w->io_lock);
	return NULL;
}

/* Wait until the I/O thread is idle. Returns -1 (errno set) if a write of it failed;
 * *UNDIRECT: it left direct I/O. */
static int io_wait(struct tk_writer *w, int *undirect)
{
	int rc = 0;

	pthread_mutex_lock(&w->io_lock);
	while (w->io_buf)
		pthread_cond_wait(&w->io_cond, &w->io_lock);
	if (w->io_err)
		rc = -1, errno = w->io_errnum;
	*undirect = w->io_undirect;
	pthread_mutex_unlock(&w->io_lock);
	return rc;
}

/* Leave direct I/O: the staged tail goes out through the page cache. */
static int direct_end(struct tk_writer *w)
{
	int rc = 0, undirect;

	if (w->direct) {
		rc = io_wait(w, &undirect);
		if (!undirect)
			fcntl(w->fd, F_SETFL, w->fl);
		if (!rc)
			rc = write_all(w->fd, w->stage, w->staged);
		w->direct = 0;
		w->staged = 0;
	}
	return rc;
}

/* Switch FD to direct I/O if it is a regular file and the filesystem lets it. Direct
 * writes start at a block boundary, so the part of the last block written so far (the end
 * of w->tail) is staged and written again, with what follows, from the boundary on. */
static void direct_begin(struct tk_writer *w)
{
	struct stat st;
	off_t at;
	size_t part;
	void *p;

	w->written = 0;   /* try again after as much again, unless it works */
	if (fstat(w->fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (at = lseek(w->fd, 0, SEEK_CUR)) < 0 || (w->fl = fcntl(w->fd, F_GETFL)) < 0 ||
	    (w->fl & O_APPEND))
		return;
	part = (size_t)at % DIRECT_ALIGN;
	if (part > w->ntail)
		return;
	if (!w->stage) {
		if (posix_memalign(&p, DIRECT_ALIGN, STAGE_SIZE))
			return;
		w->stage = p;
	}
	if (!w->io_started) {
		if (posix_memalign(&p, DIRECT_ALIGN, STAGE_SIZE))
			return;
		w->io_stage = p;
		pthread_mutex_init(&w->io_lock, NULL);
		pthread_cond_init(&w->io_cond, NULL);
		if (pthread_create(&w->io_thread, NULL, io_main, w)) {
			pthread_cond_destroy(&w->io_cond);
			pthread_mutex_destroy(&w->io_lock);
			free(w->io_stage);
			w->io_stage = NULL;
			return;
		}
		w->io_started = 1;
	}
	w->io_undirect = 0;   /* the I/O thread is idle: direct_end waited for it */
	if (fcntl(w->fd, F_SETFL, w->fl | O_DIRECT) < 0)
		return;
	if (lseek(w->fd, at - (off_t)part, SEEK_SET) < 0) {
		fcntl(w->fd, F_SETFL, w->fl);
		return;
	}
	memcpy(w->stage, w->tail + w->ntail - part, part);
	w->staged = part;
	w->direct = 1;
}

/* Keep the last DIRECT_ALIGN bytes written through the page cache (for direct_begin). */
static void keep_tail(struct tk_writer *w, const char *data, size_t n)
{
	if (n >= DIRECT_ALIGN) {
		memcpy(w->tail, data + n - DIRECT_ALIGN, DIRECT_ALIGN);
		w->ntail = DIRECT_ALIGN;
		return;
	}
	size_t keep = w->ntail + n > DIRECT_ALIGN ? DIRECT_ALIGN - n : w->ntail;

	memmove(w->tail, w->tail + w->ntail - keep, keep);
	memcpy(w->tail + keep, data, n);
	w->ntail = keep + n;
}

/* Stage DATA; each full stage goes to the I/O thread. Returns -1 on an I/O error; once
 * the I/O thread has left direct I/O, the rest goes through the page cache. */
static int write_direct(struct tk_writer *w, const char *data, size_t n)
{
	int undirect;

	while (n) {
		size_t k = STAGE_SIZE - w->staged < n ? STAGE_SIZE - w->staged : n;

		memcpy(w->stage + w->staged, data, k);
		w->staged += k;
		data += k;
		n -= k;
		if (w->staged < STAGE_SIZE)
			continue;
		if (io_wait(w, &undirect) < 0)
			return -1;
		if (undirect)
			return direct_end(w) < 0 || write_all(w->fd, data, n) < 0 ? -1 : 0;
		pthread_mutex_lock(&w->io_lock);
		w->io_buf = w->stage;
		w->io_len = STAGE_SIZE;
		w->stage = w->io_stage;
		w->io_stage = NULL;
		pthread_cond_broadcast(&w->io_cond);
		pthread_mutex_unlock(&w->io_lock);
		w->staged = 0;
	}
	return 0;
}

static void *writer_main(void *arg)
{
	struct tk_writer *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->full && !w->done)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->full)
			break;
		char *data = w->full;
		size_t n = w->full_len;
		int err = w->err, errnum = w->errnum;

		pthread_mutex_unlock(&w->lock);
		/* decided before a write: one buffer may hold hundreds of MB */
		if (!err && !w->direct && w->written + n >= DIRECT_AFTER)
			direct_begin(w);
		if (!err && w->direct) {
			if (write_direct(w, data, n) < 0)
				err = -TK_E_IO, errnum = errno;
		} else if (!err) {
			if (write_all(w->fd, data, n) < 0)
				err = -TK_E_IO, errnum = errno;
			w->written += n;
			keep_tail(w, data, n);
		}
		pthread_mutex_lock(&w->lock);
		w->err = err;
		w->errnum = errnum;
		if (w->spare) {
			free(data);
		} else {
			w->spare = data;
			w->spare_cap = w->full_cap;
		}
		w->full = NULL;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

struct tk_writer *tk_writer_start(int fd, int *err)
{
	struct tk_writer *w = calloc(1, sizeof *w);

	if (!w) {
		if (err)
			*err = -TK_E_NOMEM;
		return NULL;
	}
	w->fd = fd;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	if (pthread_create(&w->thread, NULL, writer_main, w)) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		free(w);
		if (err)
			*err = -TK_E_NOMEM;
		return NULL;
	}
	return w;
}

int tk_writer_submit(struct tk_writer *w, struct tk_buf *b)
{
	if (b->err)
		return b->err;
	pthread_mutex_lock(&w->lock);
	while (w->full)
		pthread_cond_wait(&w->cond, &w->lock);
	int err = w->err, errnum = w->errnum;
	if (!err && b->len) {
		w->full = b->data;
		w->full_len = b->len;
		w->full_cap = b->cap;
		b->data = w->spare;
		if (w->spare)
			b->cap = w->spare_cap;
		w->spare = NULL;
		b->len = 0;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	if (!b->data && !(b->data = tk_malloc_huge(b->cap)))   /* (megabytes: huge pages) */
		err = -TK_E_NOMEM;
	if (err) {
		b->err = err;
		b->errnum = err == -TK_E_IO ? errnum : 0;
		if (!b->data)
			b->cap = 0;
	}
	return err;
}

int tk_writer_stop(struct tk_writer *w)
{
	pthread_mutex_lock(&w->lock);
	w->done = 1;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	int err = w->err, errnum = w->errnum;
	if (direct_end(w) < 0 && !err)
		err = -TK_E_IO, errnum = errno;
	if (w->io_started) {
		pthread_mutex_lock(&w->io_lock);
		w->io_done = 1;
		pthread_cond_broadcast(&w->io_cond);
		pthread_mutex_unlock(&w->io_lock);
		pthread_join(w->io_thread, NULL);
		pthread_cond_destroy(&w->io_cond);
		pthread_mutex_destroy(&w->io_lock);
		free(w->io_stage);
	}
	free(w->stage);
	free(w->spare);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
	if (err == -TK_E_IO)
		errno = errnum;
	return err;
}

/* ---- output files ------------------------------------------------------------------ */

int tk_outfile_same(const char *path, const char *const *inputs, size_t n)
{
	struct stat o, s;

	if (stat(path, &o) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (inputs[i] && stat(inputs[i], &s) == 0 && s.st_dev == o.st_dev &&
		    s.st_ino == o.st_ino)
			return (int)i;
	return -1;
}

struct tk_outfile {
	int fd;
	char *path, *tmp;   /* tmp: NULL when written directly */
	int slot;           /* in open_tmp, or -1 */
};

/* The temporary files of the outputs open now, which a signal handler removes
 * (tk_outfile_catch_signals): it reads the slots without locks. */
#define OPEN_SLOTS 16
static _Atomic(char *) open_tmp[OPEN_SLOTS];

static int tmp_register(char *tmp)
{
	for (int i = 0; i < OPEN_SLOTS; i++) {
		char *none = NULL;
		if (atomic_compare_exchange_strong(&open_tmp[i], &none, tmp))
			return i;
	}
	return -1;   /* more outputs at once than slots: that one is not removed on a signal */
}

static void on_stop_signal(int sig)
{
	for (int i = 0; i < OPEN_SLOTS; i++) {
		char *tmp = atomic_load(&open_tmp[i]);
		if (tmp)
			unlink(tmp);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

int tk_outfile_catch_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa, old;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		/* a signal ignored by whoever started us stays ignored */
		if (sigaction(sigs[i], NULL, &old) < 0)
			return -TK_E_IO;
		if (old.sa_handler != SIG_IGN && sigaction(sigs[i], &sa, NULL) < 0)
			return -TK_E_IO;
	}
	return 0;
}

struct tk_outfile *tk_outfile_open(const char *path, int *err)
{
	struct tk_outfile *f = calloc(1, sizeof *f);
	struct stat st;
	int e, exists;

	/* a symbolic link: replace the file it names, not the link */
	if (f && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
		f->path = realpath(path, NULL);
	if (!f || (!f->path && !(f->path = strdup(path)))) {
		free(f);
		*err = -TK_E_NOMEM;
		return NULL;
	}
	f->fd = -1;
	f->slot = -1;
	exists = stat(f->path, &st) == 0;
	if (!exists || S_ISREG(st.st_mode)) {
		/* ".NAME.tk-PID-N" beside the file: the rename stays on one filesystem */
		const char *slash = strrchr(f->path, '/');
		size_t dir = slash ? (size_t)(slash - f->path) + 1 : 0;
		size_t cap = strlen(f->path) + 48;

		if (!(f->tmp = malloc(cap))) {
			e = ENOMEM;
			goto fail;
		}
		for (unsigned k = 0; f->fd < 0 && k < 100; k++) {
			snprintf(f->tmp, cap, "%.*s.%s.tk-%ld-%u", (int)dir, f->path,
				 f->path + dir, (long)getpid(), k);
			f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (f->fd < 0 && errno != EEXIST)
				break;
		}
		if (f->fd >= 0 && exists)
			fchmod(f->fd, st.st_mode & 07777);   /* keep the replaced file's mode */
		if (f->fd < 0 && exists && errno == EACCES) {
			/* a writable file in a directory that is not: write it in place */
			free(f->tmp);
			f->tmp = NULL;
			f->fd = open(f->path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		}
	} else {
		f->fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	}
	if (f->fd >= 0) {
		if (f->tmp)
			f->slot = tmp_register(f->tmp);
		return f;
	}
	e = errno;
fail:
	free(f->tmp);
	free(f->path);
	free(f);
	*err = e == ENOMEM ? -TK_E_NOMEM : -TK_E_IO;
	errno = e;
	return NULL;
}

int tk_outfile_fd(const struct tk_outfile *f)
{
	return f->fd;
}

int tk_outfile_close(struct tk_outfile *f, int keep)
{
	int rc = 0, e = 0;

	if (close(f->fd) < 0 && keep)
		rc = -TK_E_IO, e = errno;
	if (f->slot >= 0)
		atomic_store(&open_tmp[f->slot], NULL);
	if (f->tmp) {
		if (keep && !rc && rename(f->tmp, f->path) < 0)
			rc = -TK_E_IO, e = errno;
		if (!keep || rc)
			unlink(f->tmp);
	}
	free(f->tmp);
	free(f->path);
	free(f);
	if (rc)
		errno = e;
	return rc;
}
