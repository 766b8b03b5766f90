/* The chunk decoder (tk_xray_decode_chunks: FDR buffers expanded and delivered in one pass)
 * and tk_xray_decode on two threads (the same chunks, their events held for their turn)
 * against the buffer-at-a-time decoder (tk_xray_decode on one: expand, then patch and
 * deliver): the same events in the same order and the same statistics, on every test log and on
 * every one-byte corruption of them (damaged buffers, bad ids, truncation, call arguments,
 * custom and typed events, inherited state). */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tracekit/tracekit.h"

struct evlog {
	struct tk_event *ev;
	size_t n, cap;
};

/* Payloads live only during the sink call: kept as a hash of their bytes. */
static uint64_t payload_hash(const struct tk_event *e)
{
	uint64_t h = 14695981039346656037ull;
	for (uint64_t i = 0; i < e->count; i++)
		h = (h ^ ((const uint8_t *)e->data)[i]) * 1099511628211ull;
	return h;
}

/* EV appended to the log CTX as they are (events collected already). */
static void append(struct evlog *l, const struct tk_event *ev, size_t n)
{
	if (l->n + n > l->cap) {
		size_t cap = (l->n + n) * 2;
		l->ev = realloc(l->ev, cap * sizeof *l->ev);
		assert_non_null(l->ev);
		l->cap = cap;
	}
	memcpy(l->ev + l->n, ev, n * sizeof *ev);
	l->n += n;
}

static int collect(void *ctx, const struct tk_event *ev, size_t n)
{
	struct evlog *l = ctx;
	append(l, ev, n);
	for (size_t i = l->n - n; i < l->n; i++) {
		struct tk_event *e = &l->ev[i];
		if ((e->kind == TK_EV_CUSTOM || e->kind == TK_EV_TYPED) && e->data)
			e->arg = payload_hash(e);
	}
	return 0;
}

/* chunk consumers: each chunk's events, appended to the total in merge order */
struct chunks {
	struct evlog total;
};

static int chunk_begin(void *ctx, size_t chunk, struct tk_sink *sink, void **consumer)
{
	(void)ctx, (void)chunk;
	struct evlog *l = calloc(1, sizeof *l);
	assert_non_null(l);
	*sink = (struct tk_sink){ collect, l };
	*consumer = l;
	return 0;
}

static int chunk_merge(void *ctx, size_t chunk, void *consumer)
{
	struct chunks *c = ctx;
	struct evlog *l = consumer;
	(void)chunk;
	if (l->n)
		append(&c->total, l->ev, l->n);
	free(l->ev);
	free(l);
	return 0;
}

struct result {
	struct evlog ev;
	struct tk_xray_stats st;
	struct tk_xray_thread_info th[64];
	size_t nth;
	int rc;
};

static void decode(const uint8_t *data, size_t len, unsigned nt, int chunked, struct result *r)
{
	struct tk_xray_opts o = { .sz = sizeof o, .nthreads = nt };
	int err;
	memset(r, 0, sizeof *r);
	struct tk_xray *x = tk_xray_open(data, len, &o, &err);
	if (!x) {
		r->rc = err;
		return;
	}
	if (chunked) {
		static const struct tk_xray_chunk_ops ops = { chunk_begin, chunk_merge };
		struct chunks c = { 0 };
		r->rc = tk_xray_decode_chunks(x, &ops, &c);
		r->ev = c.total;
	} else {
		r->rc = tk_xray_decode(x, (struct tk_sink){ collect, &r->ev });
	}
	r->st = *tk_xray_stats(x);
	r->nth = tk_xray_thread_count(x);
	for (size_t i = 0; i < r->nth && i < 64; i++)
		r->th[i] = *tk_xray_thread(x, i);
	tk_xray_free(x);
}

static int same_event(const struct tk_event *a, const struct tk_event *b)
{
	if (a->kind != b->kind || a->time != b->time || a->addr != b->addr ||
	    a->addr2 != b->addr2 || a->count != b->count || a->track != b->track ||
	    a->flags != b->flags)
		return 0;
	return a->arg == b->arg;   /* a payload's hash for custom and typed events */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Gap counts and bytes; the first offsets as a set (the chunk decoder notes a thread's
 * ring-wrap gap when its chunk is merged, after the chunk's damaged regions). */
static int same_gaps(const struct tk_gap_stats *a, const struct tk_gap_stats *b)
{
	uint64_t x[TK_GAP_FIRST_OFFSETS], y[TK_GAP_FIRST_OFFSETS];
	if (a->count != b->count || a->bytes_skipped != b->bytes_skipped)
		return 0;
	if (a->count > TK_GAP_FIRST_OFFSETS)
		return 1;
	memcpy(x, a->first_offsets, sizeof x);
	memcpy(y, b->first_offsets, sizeof y);
	qsort(x, a->count, sizeof *x, cmp_u64);
	qsort(y, b->count, sizeof *y, cmp_u64);
	return !memcmp(x, y, a->count * sizeof *x);
}

static void compare(const struct result *a, const struct result *b, const char *what)
{
	if (a->rc != b->rc || a->ev.n != b->ev.n)
		fail_msg("%s: rc %d/%d, %zu/%zu events", what, a->rc, b->rc, a->ev.n, b->ev.n);
	for (size_t i = 0; i < a->ev.n; i++)
		if (!same_event(&a->ev.ev[i], &b->ev.ev[i]))
			fail_msg("%s: event %zu differs (kind %u/%u, time %llu/%llu)", what, i,
				 a->ev.ev[i].kind, b->ev.ev[i].kind,
				 (unsigned long long)a->ev.ev[i].time,
				 (unsigned long long)b->ev.ev[i].time);
	const struct tk_xray_stats *s = &a->st, *t = &b->st;
	if (s->records != t->records || s->function_records != t->function_records ||
	    s->custom_events != t->custom_events || s->typed_events != t->typed_events ||
	    s->call_args != t->call_args || s->orphan_exits != t->orphan_exits ||
	    s->first_tsc != t->first_tsc || s->last_tsc != t->last_tsc || s->cpus != t->cpus ||
	    !same_gaps(&s->gaps, &t->gaps))
		fail_msg("%s: statistics differ (records %llu/%llu, gaps %llu/%llu at 0x%llx/0x%llx, orphans %llu/%llu, tsc %llu-%llu/%llu-%llu, cpus %llu/%llu)",
			 what, (unsigned long long)s->records, (unsigned long long)t->records,
			 (unsigned long long)s->gaps.count, (unsigned long long)t->gaps.count,
			 (unsigned long long)s->gaps.first_offsets[0],
			 (unsigned long long)t->gaps.first_offsets[0],
			 (unsigned long long)s->orphan_exits, (unsigned long long)t->orphan_exits,
			 (unsigned long long)s->first_tsc, (unsigned long long)s->last_tsc,
			 (unsigned long long)t->first_tsc, (unsigned long long)t->last_tsc,
			 (unsigned long long)s->cpus, (unsigned long long)t->cpus);
	assert_int_equal(a->nth, b->nth);
	for (size_t i = 0; i < a->nth && i < 64; i++)
		if (memcmp(&a->th[i], &b->th[i], sizeof a->th[i]))
			fail_msg("%s: thread %zu statistics differ", what, i);
}

/* J2: also on two threads (several chunks; slower: threads are started per call) */
static size_t check_log(const uint8_t *data, size_t len, const char *name, int j2)
{
	struct result ref, c1, c2 = { 0 }, h2 = { 0 };
	char what[600];

	decode(data, len, 1, 0, &ref);
	decode(data, len, 1, 1, &c1);
	snprintf(what, sizeof what, "%s -j 1", name);
	compare(&ref, &c1, what);
	if (j2) {
		decode(data, len, 2, 1, &c2);
		snprintf(what, sizeof what, "%s -j 2", name);
		compare(&ref, &c2, what);
		decode(data, len, 2, 0, &h2);
		snprintf(what, sizeof what, "%s -j 2, held", name);
		compare(&ref, &h2, what);
	}
	size_t n = ref.ev.n;
	free(ref.ev.ev);
	free(c1.ev.ev);
	free(c2.ev.ev);
	free(h2.ev.ev);
	return n;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *d = malloc((size_t)n + 1);
	assert_non_null(d);
	assert_int_equal(fread(d, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return d;
}

/* A hand-made FDR v5 log with the inheritance quirks the test logs lack: a buffer that
 * begins with custom and typed events (function id, CPU, record type and base TSC from the
 * thread's previous buffer), call arguments after events and after an exit (which turn
 * that record into an enter with arguments), an argument before any record, and a thread
 * whose first record is an exit with no base TSC. */
struct mk {
	uint8_t b[8192];
	size_t n, ext;
};
static void mk_meta(struct mk *m, unsigned kind, const void *body, size_t len)
{
	memset(m->b + m->n, 0, 16);
	m->b[m->n] = (uint8_t)(kind << 1 | 1);
	memcpy(m->b + m->n + 1, body, len);
	m->n += 16;
}
static void mk_u32(struct mk *m, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		m->b[m->n++] = (uint8_t)(v >> (8 * i));
}
static void mk_fn(struct mk *m, unsigned type, uint32_t id, uint32_t delta)
{
	mk_u32(m, id << 4 | type << 1);
	mk_u32(m, delta);
}
static void mk_buffer(struct mk *m, int32_t tid, uint32_t usec, int cpu, uint64_t tsc)
{
	uint8_t body[15] = { 0 };
	if (m->ext) {           /* size of the previous buffer */
		uint64_t size = m->n - m->ext;
		memcpy(m->b + m->ext - 15, &size, 8);
	}
	mk_meta(m, 7, body, 0);        /* BufferExtents, size filled in later */
	m->ext = m->n;
	memcpy(body, &tid, 4);
	mk_meta(m, 0, body, 4);        /* NewBuffer */
	uint64_t sec = 1700000000;
	memcpy(body, &sec, 8);
	memcpy(body + 8, &usec, 4);
	mk_meta(m, 4, body, 12);       /* WalltimeMarker */
	int32_t pid = 4242;
	mk_meta(m, 9, &pid, 4);        /* Pid */
	if (cpu >= 0) {
		uint16_t c = (uint16_t)cpu;
		memcpy(body, &c, 2);
		memcpy(body + 2, &tsc, 8);
		mk_meta(m, 2, body, 10);   /* NewCPUId */
	}
}
static void mk_event(struct mk *m, int typed, uint16_t etype, const char *data, int32_t delta)
{
	uint8_t body[15] = { 0 };
	int32_t len = (int32_t)strlen(data);
	memcpy(body, &len, 4);
	memcpy(body + 4, &delta, 4);
	if (typed)
		memcpy(body + 8, &etype, 2);
	mk_meta(m, typed ? 8 : 5, body, typed ? 10 : 8);
	memcpy(m->b + m->n, data, (size_t)len);
	m->n += (size_t)len;
}
static void mk_arg(struct mk *m, uint64_t v)
{
	mk_meta(m, 6, &v, 8);
}
static size_t make_quirks(uint8_t *out)
{
	struct mk m = { .n = 32 };
	uint64_t freq = 1000000000;
	memset(m.b, 0, 32);
	m.b[0] = 5;                    /* version 5, FDR, constant + nonstop TSC */
	m.b[2] = 1;
	m.b[4] = 3;
	memcpy(m.b + 8, &freq, 8);
	mk_buffer(&m, 101, 100, 2, 1000);
	mk_fn(&m, 0, 7, 0);
	mk_event(&m, 1, 3, "ab", 1);
	mk_fn(&m, 0, 9, 4);
	mk_buffer(&m, 101, 200, -1, 0);
	mk_event(&m, 0, 0, "cd", 2);
	mk_arg(&m, 5);
	mk_event(&m, 1, 4, "efg", 1);
	mk_arg(&m, 6);
	mk_fn(&m, 1, 9, 3);
	mk_arg(&m, 11);
	mk_fn(&m, 1, 7, 3);
	mk_buffer(&m, 202, 300, -1, 0);
	mk_arg(&m, 9);
	mk_fn(&m, 1, 8, 5);
	mk_fn(&m, 0, 8, 5);
	mk_fn(&m, 2, 8, 5);
	mk_buffer(&m, 303, 400, 1, 50);
	uint64_t size = m.n - m.ext;
	memcpy(m.b + m.ext - 15, &size, 8);
	memcpy(out, m.b, m.n);
	return m.n;
}

/* Three threads of six buffers, each with a custom and a typed event whose payloads
 * differ: several chunks at -j 2, whose events are held until their turn. */
static size_t make_many(uint8_t *out)
{
	struct mk m = { .n = 32 };
	uint64_t freq = 1000000000;
	memset(m.b, 0, 32);
	m.b[0] = 5;
	m.b[2] = 1;
	m.b[4] = 3;
	memcpy(m.b + 8, &freq, 8);
	for (int32_t t = 0; t < 3; t++) {
		for (uint32_t k = 0; k < 6; k++) {
			char c[16], ty[16];
			mk_buffer(&m, 100 + t, 100 * k, t, 1000 * (k + 1));
			mk_fn(&m, 0, 3 + k, 1);
			snprintf(c, sizeof c, "c%d.%u", t, k);
			snprintf(ty, sizeof ty, "typed %u/%d", k, t);
			mk_event(&m, 0, 0, c, 2);
			mk_event(&m, 1, (uint16_t)k, ty, 1);
			mk_fn(&m, 1, 3 + k, 5);
		}
	}
	uint64_t size = m.n - m.ext;
	memcpy(m.b + m.ext - 15, &size, 8);
	memcpy(out, m.b, m.n);
	return m.n;
}

/* The log, then every byte after the file header changed two ways, then cut short. */
static size_t check_variants(const uint8_t *d, size_t len, const char *name)
{
	size_t events = check_log(d, len, name, 1);
	uint8_t *m = malloc(len + 1);
	assert_non_null(m);
	for (size_t i = 32; i < len; i++) {
		static const uint8_t flips[] = { 0x01, 0xff };
		for (size_t k = 0; k < sizeof flips; k++) {
			char what[300];
			memcpy(m, d, len);
			m[i] ^= flips[k];
			snprintf(what, sizeof what, "%s byte %zu ^ 0x%02x", name, i, flips[k]);
			check_log(m, len, what, i % 8 == 0);
		}
	}
	for (size_t cut = 32; cut < len; cut += 7) {
		char what[300];
		snprintf(what, sizeof what, "%s cut at %zu", name, cut);
		check_log(d, cut, what, cut % 4 == 0);
	}
	free(m);
	return events;
}

static void test_inheritance_quirks(void **state)
{
	(void)state;
	uint8_t log[2048];
	size_t len = make_quirks(log);
	struct result r;
	tk_set_log(NULL, NULL);
	decode(log, len, 1, 0, &r);
	/* 10 records; the arguments turn the custom event, the second typed event and an
	 * exit into enters with arguments (as llvm-xray's reader does) */
	assert_int_equal(r.st.records, 10);
	assert_int_equal(r.st.call_args, 3);
	assert_int_equal(r.st.custom_events, 0);
	assert_int_equal(r.st.typed_events, 1);
	assert_int_equal(r.st.function_records, 9);
	assert_int_equal(r.st.gaps.count, 1);     /* thread 202 starts with an exit */
	free(r.ev.ev);
	assert_true(check_variants(log, len, "quirks") >= 10);
}

static void test_held_payloads(void **state)
{
	(void)state;
	uint8_t log[8192];
	size_t len = make_many(log), n = 0;
	struct tk_xray_opts o = { .sz = sizeof o, .nthreads = 2 };
	int err;
	tk_set_log(NULL, NULL);
	struct tk_xray *x = tk_xray_open(log, len, &o, &err);
	assert_non_null(x);
	assert_int_equal(tk_xray_chunks(x, NULL, NULL, NULL, &n), 0);
	assert_true(n >= 2);
	tk_xray_free(x);
	struct result r;
	decode(log, len, 1, 0, &r);
	assert_int_equal(r.st.custom_events, 18);
	assert_int_equal(r.st.typed_events, 18);
	free(r.ev.ev);
	assert_true(check_variants(log, len, "many") >= 72);
}

/* A consumer that notes which threads begin chunks. A worker's chunk waits (up to 5 s) for
 * the calling thread to begin one when it should decode too, so the outcome does not hang
 * on how a loaded machine schedules the two threads. */
struct who_begins {
	pthread_t caller;
	int wait_for_caller;
	int by_caller, by_workers;   /* (atomic) */
	size_t events;
};

static int count_only(void *ctx, const struct tk_event *ev, size_t n)
{
	(void)ev;
	__atomic_add_fetch((size_t *)ctx, n, __ATOMIC_RELAXED);
	return 0;
}

static int who_begin(void *ctx, size_t chunk, struct tk_flow *flow, struct tk_sink *sink)
{
	struct who_begins *w = ctx;
	(void)chunk, (void)flow;
	if (pthread_equal(pthread_self(), w->caller)) {
		__atomic_add_fetch(&w->by_caller, 1, __ATOMIC_RELAXED);
	} else {
		__atomic_add_fetch(&w->by_workers, 1, __ATOMIC_RELAXED);
		for (int ms = 0; w->wait_for_caller && ms < 5000 &&
				 !__atomic_load_n(&w->by_caller, __ATOMIC_RELAXED); ms++)
			usleep(1000);
	}
	*sink = (struct tk_sink){ .events = count_only, .ctx = &w->events };
	return 0;
}

static int who_merge(void *ctx, size_t chunk)
{
	(void)ctx, (void)chunk;
	return 0;
}

/* The XRay source honours tk_chunk_consumer.caller_decodes as the other sources do: the
 * calling thread decodes chunks between its merges when asked to (a profile's heavy merges
 * otherwise ran beside two decoding threads on two cores), never when not. */
static void test_source_caller_decodes(void **state)
{
	(void)state;
	uint8_t log[8192];
	size_t len = make_many(log);
	char path[] = "/tmp/tk-xray-callerXXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, log, len), (ssize_t)len);
	close(fd);
	tk_set_log(NULL, NULL);
	size_t events[2] = { 0 };
	for (int caller_decodes = 0; caller_decodes <= 1; caller_decodes++) {
		struct tk_source_opts so = { .sz = sizeof so, .nthreads = 2 };
		struct tk_source *s;
		struct who_begins w = { .caller = pthread_self(), .wait_for_caller = caller_decodes };
		struct tk_chunk_consumer c = { sizeof c, who_begin, who_merge, NULL, NULL, &w, caller_decodes };
		assert_int_equal(tk_source_open(&s, path, &so), 0);
		assert_int_equal(tk_source_run(s, &c), 0);
		tk_source_free(s);
		assert_true(w.by_caller + w.by_workers >= 2);
		if (caller_decodes)
			assert_true(w.by_caller >= 1);
		else
			assert_int_equal(w.by_caller, 0);
		events[caller_decodes] = w.events;
	}
	unlink(path);
	assert_true(events[0] > 0);
	assert_int_equal(events[0], events[1]);
}

static void test_logs_and_corruptions(void **state)
{
	(void)state;
	const char *src = getenv("SRC");
	char dir[512], path[1024];
	size_t files = 0, events = 0, fdr = 0;
	snprintf(dir, sizeof dir, "%s/tests/data/xray", src ? src : "..");
	DIR *dd = opendir(dir);
	assert_non_null(dd);
	tk_set_log(NULL, NULL);
	for (struct dirent *de; (de = readdir(dd));) {
		size_t nl = strlen(de->d_name), len;
		if (nl < 6 || strcmp(de->d_name + nl - 5, ".xray"))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		uint8_t *d = slurp(path, &len);
		events += check_variants(d, len, de->d_name);
		files++;
		struct tk_xray_header h;
		fdr += tk_xray_read_header(d, len, &h) == 0 && h.type == TK_XRAY_FDR;
		free(d);
	}
	closedir(dd);
	assert_true(files >= 10);
	assert_true(fdr >= 5);
	assert_true(events > 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inheritance_quirks),
		cmocka_unit_test(test_held_payloads),
		cmocka_unit_test(test_source_caller_decodes),
		cmocka_unit_test(test_logs_and_corruptions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
