/* Background writer: one thread writes handed-over buffers while the caller fills the
 * next, so that the kernel's copy of the output no longer adds to formatting time. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "tracekit/common.h"

struct tk_writer {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int fd, err, done;
	char *full;                 /* being written; NULL while the thread is idle */
	size_t full_len, full_cap;
	char *spare;                /* a written buffer, for the caller's next one */
	size_t spare_cap;
};

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
		size_t n = w->full_len, off = 0;
		int err = w->err;

		pthread_mutex_unlock(&w->lock);
		while (!err && off < n) {
			ssize_t r = write(w->fd, data + off, n - off);
			if (r < 0 && errno != EINTR)
				err = -TK_E_IO;
			else if (r > 0)
				off += (size_t)r;
		}
		pthread_mutex_lock(&w->lock);
		w->err = err;
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
	int err = w->err;
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
	if (!b->data && !(b->data = malloc(b->cap)))
		err = -TK_E_NOMEM;
	if (err) {
		b->err = err;
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
	int err = w->err;
	free(w->spare);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
	return err;
}
