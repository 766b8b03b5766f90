/* Shared by the PT flow oracle tests: an image of this process's code (its own text and
 * libc's), function entries to jump to, libipt and tracekit decoders that return the
 * executed instruction addresses. */
#ifndef TK_TESTS_PTCOMMON_H
#define TK_TESTS_PTCOMMON_H

#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oracle/ptgen.h"
#include "tracekit/ipt_flow.h"

struct addrs {
	uint64_t *a;
	size_t n, cap;
};

static __attribute__((unused)) void addrs_push(struct addrs *v, uint64_t x)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 4096;
		v->a = realloc(v->a, v->cap * sizeof(*v->a));
		if (!v->a)
			abort();
	}
	v->a[v->n++] = x;
}

static __attribute__((unused)) int add_phdr(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct tk_image *img = ctx;

	(void)size;
	/* this program and libc only: enough real code, deterministic */
	if (info->dlpi_name[0] && !strstr(info->dlpi_name, "libc.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
			tk_image_add_mem(img, (const void *)(info->dlpi_addr + ph->p_vaddr),
					 ph->p_filesz, info->dlpi_addr + ph->p_vaddr);
	}
	return 0;
}

static __attribute__((unused)) struct tk_image *self_image(void)
{
	int err;
	struct tk_image *img = tk_image_new(&err);

	if (img)
		dl_iterate_phdr(add_phdr, img);
	return img;
}

/* libipt reads code through this callback from our image. */
static __attribute__((unused)) int pt_read_cb(uint8_t *buf, size_t size, const struct pt_asid *asid, uint64_t ip,
		      void *ctx)
{
	(void)asid;
	int n = tk_image_read(ctx, ip, buf, size);

	return n > 0 ? n : -pte_nomap;
}

/* libipt's instruction decoder: every instruction ptxed would print. */
static __attribute__((unused)) int libipt_insns(const uint8_t *buf, size_t len, struct tk_image *img, struct addrs *out,
			uint64_t *nerr)
{
	struct pt_config cfg;
	struct pt_insn_decoder *d;
	int status;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	d = pt_insn_alloc_decoder(&cfg);
	if (!d)
		return -1;
	pt_image_set_callback(pt_insn_get_image(d), pt_read_cb, img);
	*nerr = 0;
	for (;;) {
		status = pt_insn_sync_forward(d);
		if (status < 0)
			break;
		for (;;) {
			struct pt_insn insn;

			while (status & pts_event_pending) {
				struct pt_event ev;

				status = pt_insn_event(d, &ev, sizeof(ev));
				if (status < 0)
					break;
			}
			if (status < 0)
				break;
			memset(&insn, 0, sizeof(insn));
			insn.iclass = ptic_error;
			status = pt_insn_next(d, &insn, sizeof(insn));
			if (insn.iclass != ptic_error)
				addrs_push(out, insn.ip);
			if (out->n > 100000000)
				return -1;   /* runaway: the stream is not what we meant */
			if (status < 0)
				break;
		}
		if (status == -pte_eos)
			break;
		if (getenv("PTGEN_DEBUG")) {
			uint64_t off = 0;

			pt_insn_get_offset(d, &off);
			fprintf(stderr, "libipt: %s at offset 0x%llx after %zu insns\n",
				pt_errstr(pt_errcode(status)), (unsigned long long)off, out->n);
			struct tk_isa isa;

			tk_isa_init(&isa);
			for (size_t k = out->n > 60 ? out->n - 60 : 0; k < out->n; k++) {
				uint8_t code[16];
				char text[128] = "";
				int n = tk_image_read(img, out->a[k], code, sizeof(code));

				if (n > 0)
					tk_isa_format(&isa, TK_ISA_64, code, (size_t)n, out->a[k], text,
						      sizeof(text));
				fprintf(stderr, "  %llx %s\n", (unsigned long long)out->a[k], text);
			}
		}
		(*nerr)++;
	}
	pt_insn_free_decoder(d);
	return 0;
}

/* libipt's block decoder: (first ip, instruction count, last ip) per block. */
static __attribute__((unused)) int libipt_blocks(const uint8_t *buf, size_t len, struct tk_image *img, struct addrs *out)
{
	struct pt_config cfg;
	struct pt_block_decoder *d;
	int status;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	d = pt_blk_alloc_decoder(&cfg);
	if (!d)
		return -1;
	pt_image_set_callback(pt_blk_get_image(d), pt_read_cb, img);
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
			memset(&blk, 0, sizeof(blk));
			status = pt_blk_next(d, &blk, sizeof(blk));
			if (blk.ninsn) {
				addrs_push(out, blk.ip);
				addrs_push(out, blk.ninsn);
				addrs_push(out, blk.end_ip);
			}
			if (status < 0)
				break;
		}
		if (status == -pte_eos)
			break;
	}
	pt_blk_free_decoder(d);
	return 0;
}

/* tracekit: instruction addresses per chunk, concatenated in order. */
struct tk_collect {
	struct addrs *chunks;
	struct addrs *out;
	uint64_t gaps;
	uint64_t last_gap_addr;
};

struct tk_collect_chunk {
	struct tk_collect *c;
	size_t i;
	struct tk_flow *flow;
};

static __attribute__((unused)) void collect_insn(void *ctx, uint64_t addr, unsigned len)
{
	(void)len;
	addrs_push(ctx, addr);
}

static struct tk_collect_chunk collect_ctx[4096];

static __attribute__((unused)) int collect_events(void *ctx, const struct tk_event *ev, size_t n)
{
	struct tk_collect_chunk *cc = ctx;

	for (size_t i = 0; i < n; i++)
		if (ev[i].kind == TK_EV_BLOCK)
			tk_flow_block_insns(cc->flow, &ev[i], collect_insn, &cc->c->chunks[cc->i]);
	return 0;
}

static __attribute__((unused)) int collect_begin(void *ctx, size_t i, struct tk_flow *flow, struct tk_sink *sink)
{
	struct tk_collect *c = ctx;

	if (i >= 4096)
		return -TK_E_LIMIT;
	collect_ctx[i] = (struct tk_collect_chunk){ c, i, flow };
	sink->events = collect_events;
	sink->ctx = &collect_ctx[i];
	return 0;
}

static __attribute__((unused)) int collect_merge(void *ctx, size_t i)
{
	struct tk_collect *c = ctx;

	for (size_t k = 0; k < c->chunks[i].n; k++)
		addrs_push(c->out, c->chunks[i].a[k]);
	free(c->chunks[i].a);
	c->chunks[i] = (struct addrs){ 0 };
	return 0;
}

static __attribute__((unused)) int tk_insns(const uint8_t *buf, size_t len, struct tk_image *img, unsigned nthreads,
		    size_t chunk, struct addrs *out, struct tk_ipt_flow_stats *st)
{
	struct tk_collect c = { .out = out };
	struct tk_ipt_flow_consumer cons = { sizeof cons, collect_begin, NULL, collect_merge, &c };
	struct tk_ipt_flow_opts o = { .sz = sizeof(o), .image = img, .nthreads = nthreads,
				      .chunk_bytes = chunk };
	int rc;

	c.chunks = calloc(4096, sizeof(*c.chunks));
	rc = tk_ipt_flow_decode(buf, len, &o, &cons, st);
	free(c.chunks);
	return rc;
}

/* Blocks (ip, n, end) laid over the instruction list: index of the first mismatch or -1. */
static __attribute__((unused)) long blocks_diff(const struct addrs *insns, const struct addrs *blk)
{
	size_t p = 0;

	for (size_t i = 0; i + 2 < blk->n; i += 3) {
		uint64_t n = blk->a[i + 1];

		if (p + n > insns->n || insns->a[p] != blk->a[i] || insns->a[p + n - 1] != blk->a[i + 2])
			return (long)p;
		p += n;
	}
	return p == insns->n ? -1 : (long)p;
}

/* Index of the first difference, or -1. */
/* Whether two texts are equal; if not, prints the first line where they differ. */
static __attribute__((unused)) int same_text(const char *what, const struct tk_buf *a,
					     const struct tk_buf *b)
{
	size_t k = 0, line = 1, from = 0;

	if (a->len == b->len && !memcmp(a->data, b->data, a->len))
		return 1;
	while (k < a->len && k < b->len && a->data[k] == b->data[k])
		if (a->data[k++] == '\n')
			line++, from = k;
	fprintf(stderr, "%s differ at line %zu:\n%.300s\n--\n%.300s\n", what, line,
		a->data + from, b->data + from);
	return 0;
}

static __attribute__((unused)) long first_diff(const struct addrs *a, const struct addrs *b)
{
	size_t n = a->n < b->n ? a->n : b->n;

	for (size_t i = 0; i < n; i++)
		if (a->a[i] != b->a[i])
			return (long)i;
	return a->n == b->n ? -1 : (long)n;
}

/* The index of the first instruction where GOT differs from WANT (-1: none), printed with
 * the instructions around it. */
static __attribute__((unused)) long report_diff(const char *what, const struct addrs *want,
						const struct addrs *got)
{
	long d = first_diff(want, got);

	if (d >= 0) {
		fprintf(stderr, "%s: first difference at insn %ld of %zu/%zu: want %llx got %llx\n",
			what, d, want->n, got->n,
			(unsigned long long)(d < (long)want->n ? want->a[d] : 0),
			(unsigned long long)(d < (long)got->n ? got->a[d] : 0));
		for (long k = d > 3 ? d - 3 : 0; k < d + 3; k++)
			fprintf(stderr, "  %ld: %llx %llx\n", k,
				(unsigned long long)(k < (long)want->n ? want->a[k] : 0),
				(unsigned long long)(k < (long)got->n ? got->a[k] : 0));
	}
	return d;
}

#endif
