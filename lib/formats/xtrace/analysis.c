/* xtrace statistics and neutral events, per chunk (chunks start at snapshot positions, so
 * -j N merges to the same result as -j 1). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "formats/xtrace/internal.h"
#include "tracekit/internal/util.h"

/* ---- a set of 64-byte lines, with a filter in front ------------------------------------ */
struct lineset {
	struct tk_u64set set;
	uint64_t recent[8192];   /* direct-mapped filter of lines known to be in the set */
};

/* Most accesses hit a line seen a moment ago: check a small direct-mapped filter first. */
static inline void lineset_note(struct lineset *s, uint64_t line)
{
	uint64_t *r = &s->recent[(line ^ line >> 13) & 8191];
	if (*r == line + 1)
		return;
	*r = line + 1;
	tk_u64set_add(&s->set, line);
}

/* Per-chunk seam state kept in the stats so that merging in order is exact. */
struct seam {
	int first_el, last_el;     /* -1: no instruction */
};

void tk_xtrace_stats_init(struct tk_xtrace_stats *s, unsigned flags)
{
	memset(s, 0, sizeof *s);
	s->flags = flags;
	s->time_first = s->time_last = TK_TIME_NONE;
	if (flags & TK_XT_STATS_FOOTPRINT) {
		s->fp_code = calloc(1, sizeof(struct lineset));
		s->fp_data = calloc(1, sizeof(struct lineset));
	}
	/* Where the chunk's EL starts and ends, for counting switches at the seams. */
	struct seam *sm = malloc(sizeof *sm);
	if (sm)
		sm->first_el = sm->last_el = -1;
	s->seam = sm;
}

void tk_xtrace_stats_free(struct tk_xtrace_stats *s)
{
	struct lineset *ls[2] = { s->fp_code, s->fp_data };
	for (int i = 0; i < 2; i++)
		if (ls[i]) {
			tk_u64set_free(&ls[i]->set);
			free(ls[i]);
		}
	free(s->seam);
	s->fp_code = s->fp_data = s->seam = NULL;
}

uint64_t tk_xtrace_stats_code_lines(const struct tk_xtrace_stats *s)
{
	return s->fp_code ? ((struct lineset *)s->fp_code)->set.n : 0;
}

uint64_t tk_xtrace_stats_data_lines(const struct tk_xtrace_stats *s)
{
	return s->fp_data ? ((struct lineset *)s->fp_data)->set.n : 0;
}

static int u64_order(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

int tk_xtrace_stats_lines(const struct tk_xtrace_stats *s, int data, uint64_t **lines, size_t *n)
{
	const struct lineset *ls = data ? s->fp_data : s->fp_code;
	size_t k = 0;

	*n = ls ? ls->set.n : 0;
	if (!(*lines = malloc((*n ? *n : 1) * sizeof **lines)))
		return -TK_E_NOMEM;
	for (size_t i = 0; ls && i < ls->set.cap; i++)
		if (ls->set.slot[i])
			(*lines)[k++] = ls->set.slot[i] - 1;
	qsort(*lines, k, sizeof **lines, u64_order);
	return 0;
}

int tk_xtrace_stats_add_line(struct tk_xtrace_stats *s, int data, uint64_t line)
{
	struct lineset *ls = data ? s->fp_data : s->fp_code;
	int rc = ls ? tk_u64set_add(&ls->set, line) : -TK_E_INVAL;
	return rc < 0 ? rc : 0;
}

void tk_xtrace_stats_els(const struct tk_xtrace_stats *s, int *first, int *last)
{
	const struct seam *sm = s->seam;
	*first = sm ? sm->first_el : -1;
	*last = sm ? sm->last_el : -1;
}

void tk_xtrace_stats_set_els(struct tk_xtrace_stats *s, int first, int last)
{
	struct seam *sm = s->seam;
	if (sm) {
		sm->first_el = first;
		sm->last_el = last;
	}
}

void tk_xtrace_stats_merge(struct tk_xtrace_stats *into, const struct tk_xtrace_stats *from)
{
	for (int i = 0; i < TK_XT__COUNT; i++)
		into->items[i] += from->items[i];
	into->bytes += from->bytes;
	for (int i = 0; i < 4; i++)
		into->insns[i] += from->insns[i];
	for (int i = 0; i < TK_A64__COUNT; i++)
		into->cls[i] += from->cls[i];
	into->cond_taken += from->cond_taken;
	into->cond_not_taken += from->cond_not_taken;
	into->el_switches += from->el_switches;
	into->loads += from->loads;
	into->stores += from->stores;
	into->load_bytes += from->load_bytes;
	into->store_bytes += from->store_bytes;
	for (int i = 0; i < 16; i++)
		into->mem_size[i] += from->mem_size[i];
	for (int i = 0; i <= TK_XT_MAX_SYSCALL; i++)
		into->syscalls[i] += from->syscalls[i];
	into->pc_unknown += from->pc_unknown;
	if (into->time_first == TK_TIME_NONE)
		into->time_first = from->time_first;
	if (from->time_last != TK_TIME_NONE)
		into->time_last = from->time_last;
	struct seam *a = into->seam, *b = from->seam;
	if (a && b && b->first_el >= 0) {
		if (a->last_el >= 0 && a->last_el != b->first_el)
			into->el_switches++;
		if (a->first_el < 0)
			a->first_el = b->first_el;
		a->last_el = b->last_el;
	}
	struct lineset *sets[2][2] = { { into->fp_code, from->fp_code },
				       { into->fp_data, from->fp_data } };
	for (int k = 0; k < 2; k++) {
		struct lineset *dst = sets[k][0], *src = sets[k][1];
		if (!dst || !src)
			continue;
		for (size_t i = 0; i < src->set.cap; i++)
			if (src->set.slot[i])
				tk_u64set_add(&dst->set, src->set.slot[i] - 1);
	}
}

/* PC of the PCINST at OFF (a chunk end), or TK_XTRACE_PC_UNKNOWN. */
static uint64_t pc_at(const uint8_t *p, size_t n, size_t off)
{
	if (off + 13 <= n && (p[off] & 0x3f) == 0x09)
		return tk_le64(p + off + 1);
	return TK_XTRACE_PC_UNKNOWN;
}

/* Item length by token byte: 0 unknown, XT_LEN_VAR for SYSCALL_VEC (count-dependent). */
#define XT_LEN_VAR 0xffff
static uint16_t len_tab[256];
static pthread_once_t len_once = PTHREAD_ONCE_INIT;

static void len_init(void)
{
	uint8_t b[16] = { 0 };
	for (unsigned t = 0; t < 256; t++) {
		b[0] = (uint8_t)t;
		size_t l = xt_item_len(b, sizeof b);
		len_tab[t] = t == TK_XT_TOK_MISC(4) ? XT_LEN_VAR : (uint16_t)(l == SIZE_MAX ? 0 : l);
	}
}

/* Opcode -> class, direct-mapped: the same few hundred opcodes repeat in hot loops. */
#define CLS_CACHE 4096
struct cls_cache {
	uint32_t op[CLS_CACHE];
	uint8_t cls[CLS_CACHE];
};

static inline unsigned classify_cached(struct cls_cache *c, uint32_t op)
{
	size_t h = (op ^ op >> 12 ^ op >> 24) & (CLS_CACHE - 1);
	if (c->op[h] == op && c->cls[h] != 0xff)
		return c->cls[h];
	unsigned cls = tk_a64_classify(op);
	c->op[h] = op;
	c->cls[h] = (uint8_t)cls;
	return cls;
}

/* Fold a chunk's token histogram into the counters. */
/* The exception level of the next instruction: 1 if it differs from the current one (the
 * first instruction's level is noted in SM, not counted as a switch). */
static inline unsigned el_step(int *el, int nel, struct seam *sm)
{
	if (*el < 0) {
		if (sm)
			sm->first_el = nel;
		*el = nel;
	}
	unsigned sw = nel != *el;
	*el = nel;
	return sw;
}

static void fold_hist(struct tk_xtrace_stats *s, const uint64_t *hist)
{
	for (unsigned t = 0; t < 256; t++) {
		uint64_t c = hist[t];
		if (!c)
			continue;
		unsigned hi = t >> 3;
		switch (t & 7) {
		case 1:
			s->items[(hi & 7) ? TK_XT_PCINST : TK_XT_INST] += c;
			s->insns[t >> 6] += c;
			break;
		case 2:
			s->mem_size[t >> 4] += c;
			if (t & 8) {
				s->items[TK_XT_STORE] += c;
				s->stores += c;
				s->store_bytes += c << (t >> 4);
			} else {
				s->items[TK_XT_LOAD] += c;
				s->loads += c;
				s->load_bytes += c << (t >> 4);
			}
			break;
		case 3:
			s->items[TK_XT_STXR + hi] += c;
			break;
		case 4:
			s->items[hi == 1 ? TK_XT_ALLGPR : hi == 3 ? TK_XT_FLAGS : TK_XT_SYSCALL_VEC] += c;
			break;
		default:
			s->items[TK_XT_TIME] += c;
		}
	}
}

int tk_xtrace_stats_chunk(const struct tk_xtrace *t, size_t ci, struct tk_xtrace_stats *s,
			  struct tk_gap_stats *gaps)
{
	size_t n, begin, end;
	const uint8_t *p = xt_data(t, &n);
	tk_xtrace_chunk(t, ci, &begin, &end);
	pthread_once(&len_once, len_init);
	struct lineset *fc = s->fp_code, *fd = s->fp_data;
	struct seam *sm = s->seam;
	uint64_t pc = TK_XTRACE_PC_UNKNOWN, last_code_line = UINT64_MAX;
	unsigned prev_cls = TK_A64_OTHER;
	int el = -1, svc_pending = 0, full = !(s->flags & TK_XT_STATS_COUNTS);
	size_t off = begin;
	uint64_t *hist = calloc(256, sizeof *hist);
	struct cls_cache *cc = full ? malloc(sizeof *cc) : NULL;
	if (!hist || (full && !cc)) {
		free(hist);
		free(cc);
		return -TK_E_NOMEM;
	}
	if (cc)
		memset(cc->cls, 0xff, sizeof cc->cls);
	/* Counters in locals: stores through hist[] could alias *s and force reloads. */
	uint64_t ncls[TK_A64__COUNT] = { 0 }, n_cond = 0, n_taken = 0, n_switch = 0;

	while (off < end) {
		const uint8_t *q = p + off;
		unsigned tok = q[0];
		/* The next item's offset is the loop's critical path: compute INST/PCINST and
		 * MEM lengths (most items) from the token instead of loading them; the class
		 * branch is predicted, so the load does not wait. */
		size_t len;
		if ((tok & 0x37) == 0x01)
			len = 5 + (tok & 8);
		else if ((tok & 7) == 2)
			len = 9 + ((size_t)1 << (tok >> 4));
		else if ((len = len_tab[tok]) == XT_LEN_VAR)
			len = xt_item_len(q, end - off);
		if (len == 0 || len == SIZE_MAX || len > end - off) {
			size_t to = end;
			if (tk_xtrace_nchunks(t) == 1)
				to = tk_xtrace_resync(p, end, off);
			tk_log(TK_LOG_ERROR, "offset 0x%zx: %s (token 0x%02x); skipped %zu bytes to "
			       "the next sync point at 0x%zx", off,
			       len == 0 ? "unknown token" : "item runs past the end of the data",
			       tok, to - off, to);
			tk_gap_stats_add(gaps, off, to - off);
			pc = TK_XTRACE_PC_UNKNOWN;
			prev_cls = TK_A64_OTHER;
			svc_pending = 0;
			off = to;
			continue;
		}
		hist[tok]++;
		off += len;
		if (tok == TK_XT_TOK_TIME) {
			uint64_t tv = tk_le64(q + 1);
			if (s->time_first == TK_TIME_NONE)
				s->time_first = tv;
			s->time_last = tv;
			continue;
		}
		if (!full) {
			if ((tok & 7) == 1)
				n_switch += el_step(&el, tok >> 6, sm);
			continue;
		}
		if ((tok & 7) == 1) {
			/* PCINST carries the PC (bit 3 set, opcode at +9), INST follows on. */
			uint32_t op = tk_le32(q + 1 + (tok & 8));
			uint64_t npc = pc == TK_XTRACE_PC_UNKNOWN ? pc : pc + 4;
			if (tok & 8)
				npc = tk_le64(q + 1);
			/* Branch outcomes and EL switches without branches: they are data. */
			unsigned was_cond = prev_cls == TK_A64_BR_COND;
			n_cond += was_cond;
			n_taken += was_cond & (npc != pc + 4);
			n_switch += el_step(&el, tok >> 6, sm);
			unsigned cls = classify_cached(cc, op);
			ncls[cls]++;
			prev_cls = cls;
			svc_pending = cls == TK_A64_SVC;
			pc = npc;
			if (pc == TK_XTRACE_PC_UNKNOWN)
				s->pc_unknown++;
			else if (fc && pc >> 6 != last_code_line) {
				last_code_line = pc >> 6;
				lineset_note(fc, last_code_line);
			}
		} else if ((tok & 7) == 2) {
			if (fd) {
				uint64_t addr = tk_le64(q + 1);
				uint64_t a = addr >> 6, b = (addr + ((uint64_t)1 << (tok >> 4)) - 1) >> 6;
				for (uint64_t l = a; l <= b; l++)
					lineset_note(fd, l);
			}
		} else if (tok == TK_XT_TOK_VAL(TK_XT_SVCARG - TK_XT_STXR) && svc_pending) {
			uint64_t nr = tk_le64(q + 1);
			s->syscalls[nr < TK_XT_MAX_SYSCALL ? nr : TK_XT_MAX_SYSCALL]++;
			svc_pending = 0;
		}
	}
	if (prev_cls == TK_A64_BR_COND && pc != TK_XTRACE_PC_UNKNOWN) {
		uint64_t npc = pc_at(p, n, end);
		if (npc != TK_XTRACE_PC_UNKNOWN) {
			if (npc == pc + 4)
				s->cond_not_taken++;
			else
				s->cond_taken++;
		}
	}
	if (sm && el >= 0)
		sm->last_el = el;
	for (int k = 0; k < TK_A64__COUNT; k++)
		s->cls[k] += ncls[k];
	s->cond_taken += n_taken;
	s->cond_not_taken += n_cond - n_taken;
	s->el_switches += n_switch;
	fold_hist(s, hist);
	free(hist);
	free(cc);
	return 0;
}

/* ---- events ------------------------------------------------------------------------- */
int tk_xtrace_decode_chunk(const struct tk_xtrace *t, size_t ci, uint32_t track, int mem,
			   struct tk_sink sink, struct tk_gap_stats *gaps)
{
	size_t n, begin, end;
	const uint8_t *p = xt_data(t, &n);
	tk_xtrace_chunk(t, ci, &begin, &end);
	struct tk_event_batch *b = malloc(sizeof *b);
	if (!b)
		return -TK_E_NOMEM;
	tk_event_batch_init(b, sink);
	uint64_t count = 0; /* instruction number (time) */
	size_t si = tk_xtrace_chunk_snapshot(t, ci);
	int time_known = ci == 0;
	if (si != SIZE_MAX) {
		struct tk_xtrace_snapshot s;
		tk_xtrace_snapfile_get(tk_xtrace_snapfile(t), si, &s);
		count = s.total_insns;
		time_known = 1;
	}
	struct tk_xtrace_cursor c;
	struct tk_xtrace_item it;
	struct tk_event *ev;
	int rc = 0, el = -1;
	uint64_t bstart = TK_XTRACE_PC_UNKNOWN, bcount = 0, last_pc = TK_XTRACE_PC_UNKNOWN;
	uint64_t btime = 0;
	unsigned last_cls = TK_A64_OTHER;
	int svc_pending = 0;
	tk_xtrace_cursor_init(&c, p, begin, end);

#define EMIT(...) do { if (!(ev = tk_event_batch_next(b, &rc))) goto out; \
		*ev = (struct tk_event){ __VA_ARGS__ }; } while (0)
	for (;;) {
		int r = tk_xtrace_next(&c, &it);
		uint64_t next_pc = TK_XTRACE_PC_UNKNOWN;
		int have_next = 0;
		if (r < 0) {
			size_t to = end;
			if (tk_xtrace_nchunks(t) == 1)
				to = tk_xtrace_resync(p, end, c.off);
			tk_log(TK_LOG_ERROR, "offset 0x%zx: %s (token 0x%02x); skipped %zu bytes to "
			       "the next sync point at 0x%zx", c.off,
			       r == -TK_E_BAD_OPCODE ? "unknown token" :
			       "item runs past the end of the data", p[c.off], to - c.off, to);
			tk_gap_stats_add(gaps, c.off, to - c.off);
			/* Close the open block without a successor. */
			if (bcount)
				EMIT(.time = time_known ? btime : TK_TIME_NONE, .addr = bstart,
				     .addr2 = last_pc, .count = bcount, .kind = TK_EV_BLOCK,
				     .track = track);
			EMIT(.time = TK_TIME_NONE, .arg = c.off, .count = to - c.off,
			     .kind = TK_EV_GAP, .flags = r == -TK_E_BAD_OPCODE ?
			     TK_GAP_DECODE_ERROR : TK_GAP_TRUNCATED, .track = track);
			bcount = 0;
			last_cls = TK_A64_OTHER;
			time_known = 0;
			c.off = to;
			c.pc = TK_XTRACE_PC_UNKNOWN;
			last_pc = TK_XTRACE_PC_UNKNOWN;
			if (to >= end)
				break;
			continue;
		}
		if (r == 0) {
			next_pc = pc_at(p, n, end);
			have_next = 1;
		} else if (it.kind <= TK_XT_PCINST) {
			next_pc = it.pc;
			have_next = 1;
		}
		if (have_next && bcount) {
			/* Close the block when the previous instruction branched or the flow
			 * did not fall through. */
			int brk = tk_a64_is_branch(last_cls) || next_pc != last_pc + 4 || r == 0 ||
				  (r == 1 && (int)it.el != el);
			if (brk) {
				uint64_t tm = time_known ? btime : TK_TIME_NONE;
				EMIT(.time = tm, .addr = bstart, .addr2 = last_pc, .count = bcount,
				     .kind = TK_EV_BLOCK, .track = track);
				uint64_t at = time_known ? btime + bcount - 1 : TK_TIME_NONE;
				if (last_cls == TK_A64_CALL || last_cls == TK_A64_CALL_IND)
					EMIT(.time = at, .addr = last_pc, .addr2 = next_pc,
					     .arg = last_pc + 4, .kind = TK_EV_CALL, .track = track);
				else if (last_cls == TK_A64_RET)
					EMIT(.time = at, .addr = last_pc, .addr2 = next_pc,
					     .kind = TK_EV_RETURN, .track = track);
				bcount = 0;
			}
		}
		if (r == 0)
			break;
		switch (it.kind) {
		case TK_XT_INST:
		case TK_XT_PCINST:
			if (el >= 0 && it.el != el)
				EMIT(.time = time_known ? count : TK_TIME_NONE, .addr = it.pc,
				     .arg = it.el, .kind = TK_EV_MODE, .flags = TK_MODE_EL,
				     .track = track);
			el = it.el;
			if (!bcount) {
				bstart = it.pc;
				btime = count;
			}
			bcount++;
			last_pc = it.pc;
			last_cls = tk_a64_classify(it.opcode);
			svc_pending = last_cls == TK_A64_SVC;
			if (svc_pending && it.pc == TK_XTRACE_PC_UNKNOWN)
				svc_pending = 0;
			count++;
			break;
		case TK_XT_SVCARG:
			if (svc_pending) {
				EMIT(.time = time_known ? count - 1 : TK_TIME_NONE, .addr = last_pc,
				     .arg = it.value, .kind = TK_EV_SYSCALL, .track = track);
				svc_pending = 0;
			}
			break;
		case TK_XT_LOAD:
		case TK_XT_STORE:
			if (mem) {
				uint64_t v = 0;
				memcpy(&v, it.data, it.data_len < 8 ? it.data_len : 8);
				EMIT(.time = time_known ? count - 1 : TK_TIME_NONE, .addr = it.value,
				     .addr2 = last_pc, .count = it.data_len, .arg = v,
				     .kind = it.kind == TK_XT_LOAD ? TK_EV_MEM_READ : TK_EV_MEM_WRITE,
				     .track = track);
			}
			break;
		default:
			break;
		}
	}
#undef EMIT
out:
	if (rc == 0)
		rc = tk_event_batch_flush(b);
	free(b);
	return rc;
}
