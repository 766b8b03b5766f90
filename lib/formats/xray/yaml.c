/* The llvm-xray YAML trace (what `llvm-xray convert --output-format=yaml` prints), and the
 * record dump (what `llvm-xray fdr-dump` prints, with file offsets). Field order, key
 * spelling, omitted defaults and scalar quoting follow LLVM's YAML writer. */
#include <stdio.h>
#include <stdlib.h>

#include "formats/xray/internal.h"
#include "formats/xray/trace_internal.h"
#include "tracekit/internal/util.h"

/* ---- YAML scalar quoting (the rules of LLVM's needsQuotes) -------------------------------- */

static int all_in(const char *s, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(set, s[i]))
			return 0;
	return n > 0;
}

static size_t digits(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	return i;
}

static int is_numeric(const char *s, size_t n)
{
	if (!n)
		return 0;
#define EQ(lit) (n == sizeof(lit) - 1 && !memcmp(s, lit, n))
	if (EQ(".inf") || EQ(".Inf") || EQ(".INF") || EQ(".nan") || EQ(".NaN") || EQ(".NAN"))
		return 1;
	if (n > 2 && s[0] == '0' && s[1] == 'o')
		return all_in(s + 2, n - 2, "01234567");
	if (n > 2 && s[0] == '0' && s[1] == 'x')
		return all_in(s + 2, n - 2, "0123456789abcdefABCDEF");
	if (s[0] == '+' || s[0] == '-') {
		s++, n--;
		if (EQ(".inf") || EQ(".Inf") || EQ(".INF"))
			return 1;
	}
#undef EQ
	size_t i = 0;
	if (i < n && s[i] == '.') {
		i++;
		size_t d = digits(s + i, n - i);
		if (!d)
			return 0;
		i += d;
	} else {
		size_t d = digits(s, n);
		if (!d)
			return 0;
		i = d;
		if (i < n && s[i] == '.') {
			i++;
			i += digits(s + i, n - i);
		}
	}
	if (i == n)
		return 1;
	if (s[i] != 'e' && s[i] != 'E')
		return 0;
	i++;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		i++;
	size_t d = digits(s + i, n - i);
	return d && i + d == n;
}

enum { Q_NONE, Q_SINGLE, Q_DOUBLE };

static int needs_quotes(const char *s, size_t n)
{
	static const char indicators[] = "-?:\\,[]{}#&*!|>'\"%@`";
	int q = Q_NONE;

	if (!n)
		return Q_SINGLE;
	if (strchr(" \t\r\n\v\f", s[0]) || strchr(" \t\r\n\v\f", s[n - 1]))
		q = Q_SINGLE;
#define EQ(lit) (n == sizeof(lit) - 1 && !memcmp(s, lit, n))
	if (EQ("null") || EQ("Null") || EQ("NULL") || EQ("~") || EQ("true") || EQ("True") ||
	    EQ("TRUE") || EQ("false") || EQ("False") || EQ("FALSE") || is_numeric(s, n))
		q = Q_SINGLE;
#undef EQ
	if (s[0] && strchr(indicators, s[0]))
		q = Q_SINGLE;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
			continue;
		switch (c) {
		case '_': case '-': case '^': case '.': case ',': case ' ': case '\t':
			continue;
		case '\n': case '\r':
			q = Q_SINGLE;
			continue;
		case 0x7f:
			return Q_DOUBLE;
		default:
			if (c <= 0x1f || (c & 0x80))
				return Q_DOUBLE;
			q = Q_SINGLE;
		}
	}
	return q;
}

static void yaml_scalar(struct tk_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	switch (needs_quotes(s, n)) {
	case Q_NONE:
		tk_buf_put(b, s, n);
		return;
	case Q_SINGLE:
		tk_buf_putc(b, '\'');
		for (size_t i = 0; i < n; i++) {
			if (s[i] == '\'')
				tk_buf_putc(b, '\'');
			tk_buf_putc(b, s[i]);
		}
		tk_buf_putc(b, '\'');
		return;
	}
	tk_buf_putc(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;
		switch (c) {
		case '\\': esc = "\\\\"; break;
		case '"': esc = "\\\""; break;
		case 0: esc = "\\0"; break;
		case 7: esc = "\\a"; break;
		case 8: esc = "\\b"; break;
		case 9: esc = "\\t"; break;
		case 10: esc = "\\n"; break;
		case 11: esc = "\\v"; break;
		case 12: esc = "\\f"; break;
		case 13: esc = "\\r"; break;
		case 27: esc = "\\e"; break;
		}
		if (esc) {
			tk_buf_puts(b, esc);
		} else if (c >= 0x20 && c < 0x7f) {
			tk_buf_putc(b, (char)c);
		} else {
			char x[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };
			tk_buf_put(b, x, 4);
		}
	}
	tk_buf_putc(b, '"');
}

/* ---- YAML trace --------------------------------------------------------------------------- */

/* "function" scalars of small ids, formatted once */
#define NAME_CACHE 4096
struct yaml_names {
	char *s[NAME_CACHE];
	uint8_t len[NAME_CACHE];
};

struct yaml_ctx {
	struct tk_buf *out;
	const struct tk_xray_map *map;
	int any;
	struct yaml_names *names;
	int frozen;               /* the names are filled already, read by several threads */
};

#define PUT_LIT(b, lit) tk_buf_put(b, lit, sizeof(lit) - 1)

static const char *const kind_names[] = {
	"function-enter", "function-exit", "function-tail-exit", "function-enter-arg",
	"custom-event", "typed-event",
};

static void function_name(struct tk_buf *b, const struct tk_xray_map *map, int32_t id)
{
	char tmp[40];
	int n;
	if (!map) {
		n = snprintf(tmp, sizeof tmp, "%d", id);
		yaml_scalar(b, tmp, (size_t)n);
		return;
	}
	const char *name = tk_xray_map_name(map, id);
	if (name) {
		yaml_scalar(b, name, strlen(name));
		return;
	}
	uint64_t addr = tk_xray_map_addr(map, id);
	if (addr)
		n = snprintf(tmp, sizeof tmp, "@(%llx)", (unsigned long long)addr);
	else
		n = snprintf(tmp, sizeof tmp, "#%d", id);
	yaml_scalar(b, tmp, (size_t)n);
}

/* ID's scalar into the cache (NULL: too long to keep, or no memory). */
static const char *name_fill(struct yaml_names *nc, const struct tk_xray_map *map, int32_t id)
{
	struct tk_buf t;
	char *nm = NULL;

	if (tk_buf_init(&t, -1, 64) < 0)
		return NULL;
	function_name(&t, map, id);
	if (!t.err && t.len < 256 && (nm = malloc(t.len + 1))) {
		memcpy(nm, t.data, t.len);
		nc->s[id] = nm;
		nc->len[id] = (uint8_t)t.len;
	}
	tk_buf_free(&t);
	return nm;
}

static int yaml_rec(void *ctx, const struct tk_xray_rec *r)
{
	struct yaml_ctx *y = ctx;
	struct tk_buf *b = y->out;

	if (!y->any) {
		y->any = 1;
		tk_buf_putc(b, '\n');
	}
	PUT_LIT(b, "  - { type: ");
	tk_buf_u64(b, r->rec_type);
	PUT_LIT(b, ", func-id: ");
	tk_buf_i64(b, r->func_id);
	PUT_LIT(b, ", function: ");
	if (r->func_id > 0 && r->func_id < NAME_CACHE) {
		const char *nm = y->names->s[r->func_id];
		if (!nm && !y->frozen)
			nm = name_fill(y->names, y->map, r->func_id);
		if (nm)
			tk_buf_put(b, nm, y->names->len[r->func_id]);
		else
			function_name(b, y->map, r->func_id);
	} else {
		function_name(b, y->map, r->func_id);
	}
	if (r->nargs) {
		tk_buf_puts(b, ", args: [ ");
		for (unsigned i = 0; i < r->nargs; i++) {
			if (i)
				tk_buf_puts(b, ", ");
			tk_buf_u64(b, r->args[i]);
		}
		tk_buf_puts(b, " ]");
	}
	PUT_LIT(b, ", cpu: ");
	tk_buf_u64(b, r->cpu);
	if (r->tid) {
		PUT_LIT(b, ", thread: ");
		tk_buf_u64(b, r->tid);
	}
	if (r->pid) {
		PUT_LIT(b, ", process: ");
		tk_buf_u64(b, r->pid);
	}
	PUT_LIT(b, ", kind: ");
	tk_buf_puts(b, kind_names[r->type]);
	PUT_LIT(b, ", tsc: ");
	tk_buf_u64(b, r->tsc);
	if (!r->data_len) {
		PUT_LIT(b, ", data: '' }\n");
	} else {
		PUT_LIT(b, ", data: ");
		yaml_scalar(b, (const char *)r->data, r->data_len);
		PUT_LIT(b, " }\n");
	}
	if (b->fd >= 0 && b->len > (1u << 20))
		tk_buf_flush(b);
	return b->err;
}

/* ---- YAML in blocks at once (-j N) ------------------------------------------------------ */

/* The merged records cut into blocks of BLOCK_RECORDS, formatted on the workers while the
 * calling thread takes the next blocks off the merge and writes the formatted ones in
 * order. Formatting is most of the work (two thirds of -j 1's samples: the integers); the
 * merge stays on one thread, as its streams' records stay in one core's cache (taken in
 * turns by the workers, they moved between cores at every block: -j 2 spent 40 % more
 * CPU than -j 1, and took 0.98 s against 1.35 s). A block holds the printed fields of its
 * records, 32 bytes each: the merge's arrays are then used again at once, as at -j 1, and
 * stay in its core's cache (pointers to its records, kept until their block was written,
 * cost -j 2's merging thread more than the copies: it read and wrote a dozen arrays in
 * turn, each last read on the other core). Each block's text goes into a buffer the
 * formatting thread filled before (tk_bufs): the slots' own buffers, filled by either
 * thread in turn, cost -j 2 a sixth more CPU than -j 1. Blocks of 4,096 records keep a
 * block's text (about 600 kB) in a core's cache: 16,384 took 3 % longer. */
#define BLOCK_RECORDS 4096
#define YAML_BLOCKS_MIN_BUF 512   /* bytes of log per buffer, on average */

/* A record as a block holds it: the fields the YAML prints, in half a cache line, or (one
 * with arguments or data: type YREC_FULL) where the block's extra bytes hold a copy of the
 * whole record, its arguments and its data. */
struct yrec {
	union {
		uint64_t tsc;
		size_t off;            /* YREC_FULL: in the block's extra bytes */
	} u;
	int32_t func_id;
	uint32_t tid, pid;
	uint16_t cpu, rec_type;
	uint8_t type;
};
#define YREC_FULL 0xff

struct yblock {
	size_t n;
	struct yrec *recs;
	struct tk_buf extra;       /* YREC_FULL records' copies */
	struct tk_buf *text;       /* from ypar.texts, until written */
};

/* R, its arguments and its data copied into B's extra bytes (they point into the merge's
 * arrays and the input, both used again or given back once the merge moves on). */
static int copy_full(struct yblock *b, struct yrec *y, const struct tk_xray_rec *r)
{
	y->u.off = b->extra.len;
	y->type = YREC_FULL;
	tk_buf_put(&b->extra, r, sizeof *r);
	if (r->nargs)
		tk_buf_put(&b->extra, r->args, (size_t)r->nargs * sizeof *r->args);
	if (r->data_len)
		tk_buf_put(&b->extra, r->data, r->data_len);
	static const char pad[8];
	tk_buf_put(&b->extra, pad, -b->extra.len & 7);   /* (the next record's arguments
							    aligned) */
	return b->extra.err;
}

/* The record Y stands for (FULL: room for a whole one). */
static const struct tk_xray_rec *yrec_get(const struct yblock *b, const struct yrec *y,
					  struct tk_xray_rec *full)
{
	if (y->type != YREC_FULL) {
		*full = (struct tk_xray_rec){ .tsc = y->u.tsc, .func_id = y->func_id, .tid = y->tid,
					      .pid = y->pid, .cpu = y->cpu,
					      .rec_type = y->rec_type, .type = y->type };
		return full;
	}
	const uint8_t *p = (const uint8_t *)b->extra.data + y->u.off;
	memcpy(full, p, sizeof *full);
	full->args = full->nargs ? (const uint64_t *)(p + sizeof *full) : NULL;
	full->data = full->data_len ? p + sizeof *full + full->nargs * sizeof *full->args : NULL;
	return full;
}

struct ypar {
	struct xr_merge *m;
	struct yaml_ctx *y;       /* the output, map and names (filled before: read by every
				     worker) */
	size_t block;             /* records per block */
	struct yblock *slots;     /* block i's at i % nslots (the pool's window) */
	size_t nslots;
	int ended;                /* the merge is done */
	size_t nblocks;           /* blocks with records, once ended */
	struct tk_bufs *texts;    /* the blocks' text, each filled on one thread */
};

/* Job I's block (the next one off the merge, or none once it has ended) into its slot,
 * before the pool starts job I: 0, or an error. */
static int block_take(struct ypar *P, size_t i)
{
	struct yblock *b = &P->slots[i % P->nslots];
	const struct tk_xray_rec *r;
	size_t n = 0;
	int rc = 1;

	b->n = 0;
	b->extra.len = 0;
	if (P->ended)
		return 0;
	if (!b->recs && !(b->recs = malloc(P->block * sizeof *b->recs)))
		return -TK_E_NOMEM;
	/* the first window's blocks are taken before the workers start: small ones (six full
	 * blocks of 16,384 records were 35 ms of serial merging at -j 2, half the serial
	 * part) */
	size_t want = i < P->nslots && P->block >= 64 ? P->block / 16 : P->block;
	while (n < want && (rc = xr_merge_next(P->m, &r)) > 0) {
		struct yrec *y = &b->recs[n++];
		if (r->nargs || r->data_len) {
			int c = copy_full(b, y, r);
			if (c < 0) {
				rc = c;
				break;
			}
		} else {
			*y = (struct yrec){ { r->tsc }, r->func_id, r->tid, r->pid, r->cpu,
					    r->rec_type, r->type };
		}
	}
	b->n = n;
	if (rc < 0)
		return rc;
	if (!rc) {
		P->ended = 1;
		P->nblocks = n ? i + 1 : i;
	}
	return 0;
}

/* On a worker: block I into its text (the block was taken before the pool started job I:
 * the pool's lock orders the two). */
static int yaml_block_work(void *ctx, size_t i)
{
	struct ypar *P = ctx;
	struct yblock *b = &P->slots[i % P->nslots];
	int rc = 0;

	/* the merge's next buffers first: it is the run's one serial stage */
	xr_merge_work_ahead(P->m);
	if (!(b->text = tk_bufs_take(P->texts)))
		return -TK_E_NOMEM;
	/* the first record of all follows "records:" on a line of its own */
	struct yaml_ctx y = { b->text, P->y->map, i > 0, P->y->names, 1 };
	struct tk_xray_rec full;
	for (size_t k = 0; k < b->n && rc >= 0; k++)
		rc = yaml_rec(&y, yrec_get(b, &b->recs[k], &full));
	return rc < 0 ? rc : b->text->err;
}

#define YAML_DONE 0x59414d4c   /* -YAML_DONE stops the run: the blocks are all out (no tk_error) */

/* On the calling thread, in order: block I's text out, and the block that job I + nslots
 * formats taken into its slot. */
static int yaml_block_merge(void *ctx, size_t i)
{
	struct ypar *P = ctx;
	struct yblock *b = &P->slots[i % P->nslots];
	struct tk_buf *out = P->y->out;

	if (b->n)
		tk_buf_put_large(out, b->text->data, b->text->len);
	tk_bufs_give(P->texts, b->text);
	b->text = NULL;
	if (out->err)
		return out->err;
	if (P->ended && i + 1 >= P->nblocks)
		return -YAML_DONE;
	return block_take(P, i + P->nslots);   /* (slot I's next job) */
}

/* tk_xray_yaml's records at once on NT workers; ANY: whether there were any. */
static int yaml_parallel(struct tk_xray *x, struct yaml_ctx *y, unsigned nt, size_t block, int *any)
{
	struct ypar P = { .y = y, .block = block ? block : BLOCK_RECORDS };
	int rc;

	*any = 0;
	/* the names every worker reads, made first */
	for (int32_t id = 1; id < NAME_CACHE; id++)
		name_fill(y->names, y->map, id);
	if (!(P.m = xr_merge_new(x, nt, &rc)))
		return rc;
	/* From three threads on, the buffers' expansion leaves the merging thread (a quarter
	 * of its work): at -j 2 the merge and the formatting already keep both threads busy,
	 * and each record would cross between the cores twice more */
	if (rc >= 0 && nt >= 3)
		rc = xr_merge_ahead(P.m);
	P.nslots = 2 * (size_t)nt + 2;
	if (rc >= 0 && (!(P.slots = calloc(P.nslots, sizeof *P.slots)) ||
			!(P.texts = tk_bufs_new(P.nslots + nt))))
		rc = -TK_E_NOMEM;
	for (size_t k = 0; k < P.nslots && rc >= 0; k++)
		rc = tk_buf_init(&P.slots[k].extra, -1, 0);
	/* the window's first blocks; later ones as the merges free their slots */
	for (size_t k = 0; rc >= 0 && k < P.nslots; k++)
		rc = block_take(&P, k);
	/* at most a block per 8 bytes of log (the smallest record), the first window's small
	 * ones, and one: the last block's merge stops the run */
	size_t njobs = x->n / 8 / P.block + P.nslots + 2;
	/* (the merge is the heavy stage here: the calling thread formats only when it waits) */
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = nt, .window = P.nslots,
				   .caller_works = 1 };
	if (rc >= 0 && (!P.ended || P.nblocks)) {
		rc = tk_pool_run(&po, njobs, yaml_block_work, yaml_block_merge, &P);
		/* the last block's merge stops the run: running out of jobs first would lose
		 * records, refused */
		rc = rc == -YAML_DONE ? 0 : rc < 0 ? rc : -TK_E_INTERNAL;
	}
	*any = P.nblocks > 0;
	for (size_t k = 0; P.slots && k < P.nslots; k++) {
		free(P.slots[k].recs);
		tk_buf_free(&P.slots[k].extra);
	}
	tk_bufs_free(P.texts);
	free(P.slots);
	xr_merge_free(P.m);
	return rc;
}

int tk_xray_yaml_with(struct tk_xray *x, const struct tk_xray_map *map, struct tk_buf *out,
		      const struct tk_xray_yaml_opts *opts)
{
	struct tk_xray_yaml_opts o = { 0 };
	if (opts)
		memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
	const struct tk_xray_header *h = tk_xray_header(x);
	struct yaml_names *nc = calloc(1, sizeof *nc);
	if (!nc)
		return -TK_E_NOMEM;
	struct yaml_ctx y = { out, map, 0, nc, 0 };

	tk_buf_puts(out, "---\nheader:\n  version:         ");
	tk_buf_u64(out, h->version);
	tk_buf_puts(out, "\n  type:            ");
	tk_buf_u64(out, h->type);
	tk_buf_puts(out, h->constant_tsc ? "\n  constant-tsc:    true" : "\n  constant-tsc:    false");
	tk_buf_puts(out, h->nonstop_tsc ? "\n  nonstop-tsc:     true" : "\n  nonstop-tsc:     false");
	tk_buf_puts(out, "\n  cycle-frequency: ");
	tk_buf_u64(out, h->cycle_frequency);
	tk_buf_puts(out, "\nrecords:");
	int rc, any;
	unsigned nt = o.nthreads ? o.nthreads : x->opts.nthreads;
	/* in blocks only where buffers hold more than a few records (or when asked for a
	 * block size: tests of the blocks' seams): the merge keeps each buffer of a block
	 * with arrays of its own (basic-mode runs of one record, threads taking turns: 38 MB
	 * took 16.6 s and 561 MB in blocks, 0.74 s in order) */
	if (nt > 1 && x->nbufs && (o.block_records || x->n / x->nbufs >= YAML_BLOCKS_MIN_BUF)) {
		rc = yaml_parallel(x, &y, nt, o.block_records, &any);
	} else {
		rc = tk_xray_walk_sorted(x, yaml_rec, &y);
		any = y.any;
	}
	for (size_t i = 0; i < NAME_CACHE; i++)
		free(nc->s[i]);
	free(nc);
	if (rc < 0)
		return rc;
	/* an empty sequence is written inline */
	tk_buf_puts(out, any ? "...\n" : "         []\n...\n");
	return out->err;
}

int tk_xray_yaml(struct tk_xray *x, const struct tk_xray_map *map, struct tk_buf *out)
{
	return tk_xray_yaml_with(x, map, out, NULL);
}

/* ---- dump ---------------------------------------------------------------------------------- */

static void dump_data(struct tk_buf *b, const uint8_t *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
			tk_buf_putc(b, (char)p[i]);
		} else {
			char x[4] = { '\\', 'x', hex[p[i] >> 4], hex[p[i] & 15] };
			tk_buf_put(b, x, 4);
		}
	}
}

static inline __attribute__((always_inline)) void dump_record(struct tk_buf *b, const struct tk_xray_header *h,
			const struct tk_xray_record *r)
{
	static const char *const fn_names[] = {
		"Function Enter", "Function Exit", "Function Tail Exit", "Function Enter With Arg",
	};
	static const char *const basic_types[] = { "enter", "exit", "tail-exit", "enter-args" };
	char tmp[64];

	switch (r->kind) {
	case TK_XRAY_BUFFER_EXTENTS:
		tk_buf_puts(b, "<Buffer: size = ");
		tk_buf_u64(b, r->value);
		tk_buf_puts(b, " bytes>");
		break;
	case TK_XRAY_NEW_BUFFER:
		tk_buf_puts(b, "<Thread ID: ");
		tk_buf_i64(b, r->tid);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_END_OF_BUFFER:
		tk_buf_puts(b, "<End of Buffer>");
		break;
	case TK_XRAY_WALLTIME:
		snprintf(tmp, sizeof tmp, "%06u", r->nanos);
		tk_buf_puts(b, "<Wall Time: seconds = ");
		tk_buf_u64(b, r->seconds);
		tk_buf_putc(b, '.');
		tk_buf_puts(b, tmp);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_PID:
		tk_buf_puts(b, "<PID: ");
		tk_buf_i64(b, r->pid);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_NEW_CPU:
		tk_buf_puts(b, "<CPU: id = ");
		tk_buf_u64(b, r->cpu);
		tk_buf_puts(b, ", tsc = ");
		tk_buf_u64(b, r->tsc);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_TSC_WRAP:
		tk_buf_puts(b, "<TSC Wrap: base = ");
		tk_buf_u64(b, r->tsc);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_CALL_ARG:
		tk_buf_puts(b, "<Call Argument: data = ");
		tk_buf_u64(b, r->value);
		tk_buf_puts(b, " (hex = 0x");
		tk_buf_hex(b, r->value, 0);
		tk_buf_puts(b, ")>");
		break;
	case TK_XRAY_CUSTOM:
		if (h->version >= 5) {
			tk_buf_puts(b, "<Custom Event: delta = +");
			tk_buf_i64(b, r->sdelta);
		} else {
			tk_buf_puts(b, "<Custom Event: tsc = ");
			tk_buf_u64(b, r->tsc);
			tk_buf_puts(b, ", cpu = ");
			tk_buf_u64(b, r->cpu);
		}
		tk_buf_puts(b, ", size = ");
		tk_buf_i64(b, r->data_size);
		tk_buf_puts(b, ", data = '");
		dump_data(b, r->data, (size_t)r->data_size);
		tk_buf_puts(b, "'>");
		break;
	case TK_XRAY_TYPED:
		tk_buf_puts(b, "<Typed Event: delta = +");
		tk_buf_i64(b, r->sdelta);
		tk_buf_puts(b, ", type = ");
		tk_buf_u64(b, r->event_type);
		tk_buf_puts(b, ", size = ");
		tk_buf_i64(b, r->data_size);
		tk_buf_puts(b, ", data = '");
		dump_data(b, r->data, (size_t)r->data_size);
		tk_buf_puts(b, "'>");
		break;
	case TK_XRAY_FUNCTION:
		tk_buf_putc(b, '<');
		tk_buf_puts(b, fn_names[r->fn & 3]);
		tk_buf_puts(b, ": #");
		tk_buf_i64(b, r->func_id);
		tk_buf_puts(b, " delta = +");
		tk_buf_u64(b, r->delta);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_BASIC_FUNCTION:
		tk_buf_puts(b, "<Function: ");
		tk_buf_puts(b, basic_types[r->fn & 3]);
		tk_buf_puts(b, " #");
		tk_buf_i64(b, r->func_id);
		tk_buf_puts(b, ", cpu = ");
		tk_buf_u64(b, r->cpu);
		tk_buf_puts(b, ", tsc = ");
		tk_buf_u64(b, r->tsc);
		tk_buf_puts(b, ", thread = ");
		tk_buf_u64(b, (uint32_t)r->tid);
		tk_buf_puts(b, ", process = ");
		tk_buf_u64(b, (uint32_t)r->pid);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_BASIC_ARG:
		tk_buf_puts(b, "<Argument: #");
		tk_buf_i64(b, r->func_id);
		tk_buf_puts(b, ", thread = ");
		tk_buf_u64(b, (uint32_t)r->tid);
		tk_buf_puts(b, ", data = ");
		tk_buf_u64(b, r->value);
		tk_buf_puts(b, " (hex = 0x");
		tk_buf_hex(b, r->value, 0);
		tk_buf_puts(b, ")>");
		break;
	}
}

/* Where a walk's records go: text into OUT, damage into GAPS and BAD, and its messages
 * logged at once or (KEEP: a chunk's, for the merge) kept in order. */
enum { NOTE_SKIPPED, NOTE_PLAIN, NOTE_MISSING };
struct xd_note {
	uint64_t off, skipped;
	const char *msg;          /* the cursor's, a literal */
	int kind;
};

struct xd {
	struct tk_buf *out;
	struct tk_gap_stats *gaps;
	long bad;
	int no_offset, keep, err;
	struct xd_note *notes;
	size_t nnotes, cap;
};

static void note_log(const struct xd_note *m)
{
	if (m->kind == NOTE_SKIPPED)
		tk_log(TK_LOG_WARN, "offset 0x%llx: %s; skipped %llu bytes", (unsigned long long)m->off,
		       m->msg, (unsigned long long)m->skipped);
	else if (m->kind == NOTE_MISSING)
		tk_log(TK_LOG_WARN, "offset 0x%llx: %s (%llu bytes missing)", (unsigned long long)m->off,
		       m->msg, (unsigned long long)m->skipped);
	else
		tk_log(TK_LOG_WARN, "offset 0x%llx: %s", (unsigned long long)m->off, m->msg);
}

static void note(struct xd *d, int kind, uint64_t off, const char *msg, uint64_t skipped)
{
	struct xd_note m = { off, skipped, msg, kind };

	if (!d->keep) {
		note_log(&m);
		return;
	}
	if (d->nnotes == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 16;
		struct xd_note *p = realloc(d->notes, cap * sizeof *p);
		if (!p) {
			d->err = -TK_E_NOMEM;
			return;
		}
		d->notes = p;
		d->cap = cap;
	}
	d->notes[d->nnotes++] = m;
}

/* One step of the cursor (RC, R, MSG, SKIPPED: what tk_xray_next gave) into D. */
/* (inlined, with dump_record: calls per record cost 5 % of a dump) */
static inline __attribute__((always_inline)) void dump_step(struct xd *d, const struct tk_xray_header *h, int rc,
		      const struct tk_xray_record *r, const char *msg, uint64_t skipped)
{
	struct tk_buf *out = d->out;

	if (!d->no_offset) {
		tk_buf_puts(out, "0x");
		tk_buf_hex(out, r->offset, 8);
		tk_buf_puts(out, "  ");
	}
	if (rc < 0) {
		d->bad++;
		tk_buf_puts(out, "<Error: ");
		tk_buf_puts(out, msg);
		tk_buf_puts(out, "; skipped ");
		tk_buf_u64(out, skipped);
		tk_buf_puts(out, " bytes>\n");
		note(d, NOTE_SKIPPED, r->offset, msg, skipped);
		if (d->gaps)
			tk_gap_stats_add(d->gaps, r->offset, skipped);
		return;
	}
	dump_record(out, h, r);
	tk_buf_putc(out, '\n');
	if (msg && !strcmp(msg, XR_MSG_TYPED_SHORT)) {
		note(d, NOTE_PLAIN, r->offset, msg, 0);
	} else if (msg) {
		d->bad++;
		note(d, skipped ? NOTE_MISSING : NOTE_PLAIN, r->offset, msg, skipped);
		if (d->gaps)
			tk_gap_stats_add(d->gaps, r->offset, skipped);
	}
}

static void dump_header(struct tk_buf *out, const struct tk_xray_header *h)
{
	tk_buf_puts(out, "<Header: version = ");
	tk_buf_u64(out, h->version);
	tk_buf_puts(out, h->type == TK_XRAY_FDR ? ", type = 1 (FDR)" : ", type = 0 (basic)");
	tk_buf_puts(out, ", constant-tsc = ");
	tk_buf_u64(out, (uint64_t)h->constant_tsc);
	tk_buf_puts(out, ", nonstop-tsc = ");
	tk_buf_u64(out, (uint64_t)h->nonstop_tsc);
	tk_buf_puts(out, ", cycle-frequency = ");
	tk_buf_u64(out, h->cycle_frequency);
	if (h->type == TK_XRAY_FDR && h->version == 1) {
		tk_buf_puts(out, ", buffer-size = ");
		tk_buf_u64(out, h->v1_buffer_size);
	}
	tk_buf_puts(out, h->big_endian ? ", big-endian>\n" : ">\n");
}

/* ---- chunks at once (-j N) ------------------------------------------------------------- */
/* Chunks start at buffers (FDR version 2 on: each opens with its extents) or at records
 * (basic mode: 32 bytes each, no state), about CHUNK bytes apart. A chunk's walk goes on
 * until the cursor stands at a later chunk's start outside any buffer: from there the walk
 * in order would do what that chunk's does. A chunk the walk before it went past (a
 * buffer whose extents reach beyond the next start) is not used. Version 1's fixed-size
 * buffers keep state across their ends: it is read in order. */
#define XD_CHUNK ((size_t)1 << 20)
#define XD_BIG ((size_t)8 << 20)    /* a buffer longer than this: the log in order */

struct xchunk {
	struct xd d;
	struct tk_buf *text;        /* from xdump.texts, until merged */
	struct tk_gap_stats gaps;
	size_t end;                 /* the chunk its walk stopped at (nch: the end) */
	size_t end_off;
};

struct xdump {
	const uint8_t *data;
	size_t len;
	struct tk_input *in;        /* the file DATA maps (NULL: none) */
	struct tk_xray_cursor c0;   /* at the first record */
	size_t *starts, nch;
	struct xchunk *ch;
	size_t next;                /* the next chunk the merge uses (atomic: the chunk's
				     worker reads it, tk_bufs_stream) */
	int no_offset, release_input;
	struct tk_buf *out;
	struct tk_gap_stats *gaps;
	struct tk_progress *progress;
	long bad;
	struct tk_bufs *texts;      /* the chunks' text, each filled on one thread */
};

/* A cursor at a chunk's start stands where the walk in order would, fresh. */
static int at_start(const struct tk_xray_cursor *c, size_t start)
{
	return c->off == start && (c->h.type == TK_XRAY_BASIC || !c->in_buffer || c->off >= c->buf_end);
}

static int xchunk_walk(void *ctx, size_t i)
{
	struct xdump *X = ctx;
	struct xchunk *k = &X->ch[i];
	struct tk_xray_cursor c = X->c0;
	struct tk_xray_record r;
	const char *msg;
	uint64_t skipped;
	size_t next = i + 1;
	int rc;

	if (!(k->text = tk_bufs_take_room(X->texts, 8 * (X->starts[next < X->nch ? next : i] -
							 X->starts[i]) + 4096)))
		return -TK_E_NOMEM;
	k->d = (struct xd){ .out = k->text, .gaps = &k->gaps, .no_offset = X->no_offset, .keep = 1 };
	c.off = X->starts[i];
	c.in_buffer = 0;
	c.buf_end = 0;
	k->end = X->nch;
	size_t stream_step = tk_bufs_stream_bytes(), stream_at = stream_step;
	/* (per record only a compare with the next chunk's start: the cursor stands at a
	 * later start only once it reaches it; errors are sticky, looked at with the text) */
	size_t next_start = next < X->nch ? X->starts[next] : SIZE_MAX;
	for (;;) {
		if (c.off >= next_start) {
			while (next < X->nch && X->starts[next] < c.off)
				next++;     /* gone past that start */
			if (next < X->nch && at_start(&c, X->starts[next])) {
				k->end = next;
				break;
			}
			next_start = next < X->nch ? X->starts[next] : SIZE_MAX;
		}
		if ((rc = tk_xray_next(&c, &r, &msg, &skipped)) == 0)
			break;
		dump_step(&k->d, &c.h, rc, &r, msg, skipped);
		tk_buf_write_ahead(k->text);
		if (k->text->len >= stream_at) {   /* (its turn come: out, as in order) */
			if (k->text->err || k->d.err)
				break;
			tk_bufs_stream(k->text, X->out, &X->next, i);
			stream_at = k->text->len + stream_step;
		}
	}
	if (k->text->err || k->d.err)
		return k->text->err ? k->text->err : k->d.err;
	k->end_off = k->end < X->nch ? X->starts[k->end] : X->len;
	return 0;
}

static void xchunk_free(struct xchunk *k)
{
	free(k->d.notes);
	k->d.notes = NULL;
}

static int xchunk_merge(void *ctx, size_t i)
{
	struct xdump *X = ctx;
	struct xchunk *k = &X->ch[i];

	if (i == X->next) {
		tk_buf_put_large(X->out, k->text->data, k->text->len);
		for (size_t j = 0; j < k->d.nnotes; j++)
			note_log(&k->d.notes[j]);
		if (X->gaps)
			tk_gap_stats_merge(X->gaps, &k->gaps);
		X->bad += k->d.bad;
		__atomic_store_n(&X->next, k->end, __ATOMIC_RELEASE);
		if (X->release_input)
			tk_release_pages(X->data, X->starts[i], k->end_off);
		if (X->progress)
			tk_progress_set(X->progress, k->end_off);
	}
	/* the text buffer for a later chunk: not given back and faulted in again */
	tk_bufs_give(X->texts, k->text);
	k->text = NULL;
	xchunk_free(k);
	return X->out->err;
}

/* The 17 bytes at O that tell a buffer start (zeros past the end): read with pread from
 * the file when there is one, so that planning maps none of it (fault-around would map
 * the whole log before the first chunk is dumped). */
static void peek(const struct xdump *X, size_t o, uint8_t q[17])
{
	size_t k = X->len - o < 17 ? X->len - o : 17;
	long got = X->in ? tk_input_pread(X->in, q, k, o) : -1;

	if (got != (long)k)
		memcpy(q, X->data + o, k);
	memset(q + k, 0, 17 - k);
}

/* The end of the buffer at O when its extents are right (the next buffer starts there,
 * or the log ends); 0 else (damage: the mapping's full checks decide). */
static size_t plain_buffer_end(const struct xdump *X, size_t o)
{
	const struct tk_xray_header *h = &X->c0.h;
	uint8_t q[17];

	if (X->len - o < 16)
		return 0;
	peek(X, o, q);
	if (!xr_buffer_start_bytes(q, X->len - o, h))
		return 0;
	size_t end = o + 16 + (size_t)xr_rd64(q + 1, h->big_endian);
	if (end == X->len)
		return end;
	if (X->len - end < 16)
		return 0;
	peek(X, end, q);
	return xr_buffer_start_bytes(q, X->len - end, h) ? end : 0;
}

/* The chunks' starts, about CHUNK bytes apart; 0 when there are fewer than two. */
static size_t xd_plan(struct xdump *X, size_t chunk)
{
	const struct tk_xray_header *h = &X->c0.h;
	size_t first = X->c0.off, cap = X->len / chunk + 2, n = 0;

	if ((h->type == TK_XRAY_FDR && h->version < 2) || !(X->starts = malloc(cap * sizeof *X->starts)))
		return 0;
	X->starts[n++] = first;
	if (h->type == TK_XRAY_BASIC) {
		size_t step = (chunk + 31) / 32 * 32;
		for (size_t o = first + step; o < X->len && n < cap; o += step)
			X->starts[n++] = o;
		return n;
	}
	for (size_t o = first, last = first; o < X->len && n < cap;) {
		struct xr_extent ex;
		size_t end = plain_buffer_end(X, o);
		if (!end) {   /* damage: the full checks, on the mapping */
			if (!xr_buffer_start_at(X->data, X->len, o, h)) {
				/* on at the next buffer (whatever the walk does there, a chunk
				 * starts only where it lands) */
				o = xr_find_buffer(X->data, X->len, o + 1, h);
				continue;
			}
			if ((end = xr_buffer_end(X->data, X->len, o, h, &ex)) <= o)
				break;
		}
		if (end - o > XD_BIG) {
			n = 0;      /* a chunk's text waits for its turn: huge buffers in order */
			break;
		}
		if (o - last >= chunk) {
			X->starts[n++] = o;
			last = o;
		}
		o = end;
	}
	return n;
}

static long dump_parallel(const uint8_t *data, size_t len, const struct tk_xray_dump_opts *o,
			  struct tk_buf *out, struct tk_gap_stats *gaps, int *done)
{
	struct xdump X = { .data = data, .len = len, .in = o->input, .no_offset = o->no_offset,
			   .release_input = o->release_input, .out = out, .gaps = gaps,
			   .progress = o->progress };
	long rc;

	*done = 0;
	if ((rc = tk_xray_cursor_init(&X.c0, data, len)) < 0)
		return rc;
	if ((X.nch = xd_plan(&X, o->chunk_bytes ? o->chunk_bytes : XD_CHUNK)) < 2) {
		free(X.starts);
		return 0;
	}
	*done = 1;
	if (!(X.ch = calloc(X.nch, sizeof *X.ch))) {
		free(X.starts);
		return -TK_E_NOMEM;
	}
	unsigned nt = o->nthreads ? o->nthreads : 1;
	if (!(X.texts = tk_bufs_new(2 * (size_t)nt + 2))) {
		free(X.ch);
		free(X.starts);
		return -TK_E_NOMEM;
	}
	dump_header(out, &X.c0.h);
	struct tk_pool_opts po = { .sz = sizeof po, .nthreads = o->nthreads };
	rc = tk_pool_run(&po, X.nch, xchunk_walk, xchunk_merge, &X);
	for (size_t i = 0; i < X.nch; i++)
		xchunk_free(&X.ch[i]);
	tk_bufs_free(X.texts);
	free(X.ch);
	free(X.starts);
	/* a failed write is the output's to say (out->err), as in order: not the log's */
	return rc < 0 && !out->err ? rc : X.bad;
}

long tk_xray_dump_with(const uint8_t *data, size_t len, const struct tk_xray_dump_opts *opts,
		       struct tk_buf *out, struct tk_gap_stats *gaps)
{
	struct tk_xray_dump_opts o = { 0 };
	struct tk_xray_cursor c;
	struct tk_xray_record r;
	const char *msg;
	uint64_t skipped, n = 0;
	size_t released = 0;
	int rc;

	memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
	if (o.nthreads > 1) {
		int done;
		long bad = dump_parallel(data, len, &o, out, gaps, &done);
		if (done || bad < 0)
			return bad;
	}
	if ((rc = tk_xray_cursor_init(&c, data, len)) < 0)
		return rc;
	struct xd d = { .out = out, .gaps = gaps, .no_offset = o.no_offset };
	dump_header(out, &c.h);
	while ((rc = tk_xray_next(&c, &r, &msg, &skipped)) != 0) {
		dump_step(&d, &c.h, rc, &r, msg, skipped);
		if (out->fd >= 0 && out->len > (1u << 20))
			tk_buf_flush(out);
		if (o.progress && !(++n & 4095))   /* (the clock is read at most every 4096 records) */
			tk_progress_set(o.progress, c.off);
		if (o.release_input && c.off - released >= (8u << 20)) {
			tk_release_pages(data, released, c.off);
			released = c.off;
		}
	}
	return d.bad;
}

long tk_xray_dump(const uint8_t *data, size_t len, int no_offset, int release_input,
		  struct tk_buf *out, struct tk_gap_stats *gaps)
{
	struct tk_xray_dump_opts o = { .sz = sizeof o, .no_offset = no_offset,
				       .release_input = release_input };
	return tk_xray_dump_with(data, len, &o, out, gaps);
}

long tk_xray_dump_progress(const uint8_t *data, size_t len, int no_offset, int release_input,
			   struct tk_buf *out, struct tk_gap_stats *gaps,
			   struct tk_progress *progress)
{
	struct tk_xray_dump_opts o = { .sz = sizeof o, .no_offset = no_offset,
				       .release_input = release_input, .progress = progress };
	return tk_xray_dump_with(data, len, &o, out, gaps);
}
