/* Text buffers kept for the thread that filled them (tk_bufs): see util.h. */
#include <pthread.h>
#include <stdlib.h>

#include "tracekit/internal/util.h"

struct bufs_node {
	struct tk_buf b;           /* first: tk_bufs_give gets the node from it */
	pthread_t filler;
	struct bufs_node *next;    /* in the free list */
	struct bufs_node *made;    /* the one made before */
};

struct tk_bufs {
	pthread_mutex_t lock;
	struct bufs_node *free_list, *made;
	size_t nmade, most;
};

struct tk_bufs *tk_bufs_new(size_t most)
{
	struct tk_bufs *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	p->most = most;
	return p;
}

struct tk_buf *tk_bufs_take(struct tk_bufs *p)
{
	pthread_t self = pthread_self();
	struct bufs_node **at, *n = NULL;

	pthread_mutex_lock(&p->lock);
	for (at = &p->free_list; *at && !pthread_equal((*at)->filler, self); at = &(*at)->next)
		;
	/* another thread's buffer only when no more may be made: its lines come across once */
	if (!*at && p->nmade >= p->most)
		at = &p->free_list;
	if (*at) {
		n = *at;
		*at = n->next;
	} else if ((n = calloc(1, sizeof *n))) {
		if (tk_buf_init(&n->b, -1, 0) < 0) {
			free(n);
			n = NULL;
		} else {
			n->made = p->made;
			p->made = n;
			p->nmade++;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (!n)
		return NULL;
	n->filler = self;
	n->b.len = 0;
	n->b.err = n->b.errnum = 0;
	return &n->b;
}

struct tk_buf *tk_bufs_take_room(struct tk_bufs *p, size_t bytes)
{
	struct tk_buf *b = tk_bufs_take(p);

	if (!b || b->cap >= bytes)
		return b;
	/* empty: new memory rather than realloc's copy of nothing; from 1 MiB on huge pages,
	 * where a chunk's megabytes of text faulted in page by page were most of what the
	 * dumps' -j 2 spent over -j 1 (XRay's: 5,800 faults) */
	char *m = tk_malloc_huge(bytes);
	if (m) {
		free(b->data);
		b->data = m;
		b->cap = bytes;
	} else if (tk_buf_reserve(b, bytes) < 0) {
		tk_bufs_give(p, b);
		return NULL;
	}
	return b;
}

void tk_bufs_give(struct tk_bufs *p, struct tk_buf *b)
{
	struct bufs_node *n = (struct bufs_node *)b;
	if (!b)
		return;
	pthread_mutex_lock(&p->lock);
	n->next = p->free_list;
	p->free_list = n;
	pthread_mutex_unlock(&p->lock);
}

void tk_bufs_free(struct tk_bufs *p)
{
	if (!p)
		return;
	for (struct bufs_node *n = p->made, *next; n; n = next) {
		next = n->made;
		tk_buf_free(&n->b);
		free(n);
	}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

size_t tk_bufs_stream_bytes(void)
{
	const char *e = getenv("TK_BUFS_STREAM");
	long long v = e ? atoll(e) : 0;

	return v > 0 ? (size_t)v : (size_t)1 << 20;
}

void tk_bufs_stream(struct tk_buf *text, struct tk_buf *out, const size_t *next, size_t chunk)
{
	if (out->fd < 0 || __atomic_load_n(next, __ATOMIC_ACQUIRE) != chunk)
		return;
	tk_buf_put_large(out, text->data, text->len);
	text->len = 0;
}
