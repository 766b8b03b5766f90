/* Kanata reader: memchr line splitting, hand-rolled numbers, lenient about what real
 * producers write (space-padded numbers, trailing tabs, C= -1, string lanes), and an optional
 * instruction tracker that reports id and ordering violations with line numbers. Memory is
 * bounded: lines longer than max_line are skipped, and only live instructions are kept. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/kanata/bytes.h"
#include "formats/kanata/internal.h"



#define KN_STAGE_CACHE 256

struct tk_kanata_reader {
	struct tk_kanata_reader_opts o;
	struct tk_kanata_counts n;
	struct kn_hooks hooks;
	int64_t cycle, delta_sum;
	int seen_header, seen_any_cmd, seen_cycle_cmd;
	int stopped;               /* callback asked to stop: its code */

	/* partial line carried between feeds */
	char *carry;
	size_t carry_len, carry_cap;
	int skipping;              /* inside an over-long line */
	uint64_t skip_line, skip_offset;

	/* interned names */
	struct kn_name lanes[KN_MAX_NAMES];
	unsigned nlanes;
	struct kn_name stages[KN_MAX_NAMES];
	unsigned nstages;
	uint16_t stage_cache[KN_STAGE_CACHE];   /* stage index + 1 by a hash of (lane, name) */

	/* live instructions: open-addressing hash id -> pool slot */
	struct kn_insn *pool;
	uint32_t pool_cap, pool_used;
	uint32_t *free_slots;
	uint32_t nfree;
	uint32_t *table;           /* slot + 1; 0 = empty */
	size_t table_cap;          /* power of two */
	size_t live;

	/* interned lane/stage of the S or E being tracked */
	unsigned cur_lane, cur_stage;
	uint64_t track_line;       /* line of the command being tracked (for hooks) */

	/* parallel chunk: commands for ids this chunk did not begin are kept as fragments */
	int chunk;
	/* cycles and lines counted from 0 at the chunk's start, which is not known yet: a C=
	 * (or a C near the limit) needs the absolute cycle, so resolve() waits for it and
	 * rebases (kn_reader_rebase) */
	int rel;
	int (*resolve)(void *ctx);
	void *resolve_ctx;
	struct kn_frag *frags;
	size_t nfrags, cap_frags;
	int64_t *ilist;            /* ids begun in this chunk, in order */
	size_t ni, cap_i;

	/* ids ever begun, from seen_low on (the lowest begun; none below it was): those in
	 * [seen_low, seen_base) all were (their words filled and slid away), the rest a
	 * bitset over [seen_base, seen_base + 64 * seen_words). A set that began at 0 zeroed a
	 * bitset as large as the ids below its first (in every chunk's reader, for a log
	 * numbered from 200,000,000: report -j 2 took 13 times as long as -j 1), and one whose
	 * first id was not 0 could never slide. */
	uint64_t *seen;
	size_t seen_words;
	int64_t seen_base, seen_low;
};

const char *tk_kanata_diag_name(enum tk_kanata_diag_code code)
{
	switch (code) {
	case TK_KANATA_D_NO_HEADER: return "missing header";
	case TK_KANATA_D_VERSION: return "unexpected version";
	case TK_KANATA_D_UNKNOWN_CMD: return "unknown command";
	case TK_KANATA_D_SYNTAX: return "syntax error";
	case TK_KANATA_D_LONG_LINE: return "line too long";
	case TK_KANATA_D_NEG_DELTA: return "negative cycle delta";
	case TK_KANATA_D_CYCLE_BACK: return "cycle goes back";
	case TK_KANATA_D_UNKNOWN_ID: return "id used before I";
	case TK_KANATA_D_ID_REUSED: return "id reused";
	case TK_KANATA_D_AFTER_RETIRE: return "command after R";
	case TK_KANATA_D_RETIRE_TWICE: return "R twice";
	case TK_KANATA_D_END_NO_BEGIN: return "E without S";
	case TK_KANATA_D_DEP_RETIRED: return "W on retired consumer";
	case TK_KANATA_D_DEP_PRODUCER: return "W with unknown producer";
	case TK_KANATA_D_BAD_TYPE: return "bad type";
	case TK_KANATA_D_IN_FLIGHT: return "in flight at end";
	}
	return "diagnostic";
}

static void diag(struct tk_kanata_reader *r, enum tk_log_level lvl, enum tk_kanata_diag_code code,
		 uint64_t line, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void diag(struct tk_kanata_reader *r, enum tk_log_level lvl, enum tk_kanata_diag_code code,
		 uint64_t line, uint64_t off, const char *fmt, ...)
{
	char raw[256], msg[1024];
	va_list ap;

	if (lvl == TK_LOG_ERROR)
		r->n.errors++;
	else if (lvl == TK_LOG_WARN)
		r->n.warnings++;
	if (!r->o.diag)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	tk_text_escape(msg, sizeof msg, raw);   /* excerpts of the line */
	struct tk_kanata_diag d = { .level = lvl, .code = code, .line = line, .offset = off, .msg = msg };
	r->o.diag(r->o.diag_ctx ? r->o.diag_ctx : r->o.ctx, &d);
}

int kn_diags_add(struct kn_diags *k, const struct tk_kanata_diag *d)
{
	size_t len = strlen(d->msg) + 1;
	if (k->n == k->cap) {
		size_t nc = k->cap ? 2 * k->cap : 256;
		struct kn_kept *nv = realloc(k->v, nc * sizeof *nv);
		if (!nv)
			return -TK_E_NOMEM;
		k->v = nv;
		k->cap = nc;
	}
	if (k->ntext + len > k->ctext) {
		size_t nc = k->ctext ? 2 * k->ctext : 16384;
		while (nc < k->ntext + len)
			nc *= 2;
		char *nt = realloc(k->text, nc);
		if (!nt)
			return -TK_E_NOMEM;
		k->text = nt;
		k->ctext = nc;
	}
	memcpy(k->text + k->ntext, d->msg, len);
	k->v[k->n++] = (struct kn_kept){ *d, k->ntext };
	k->ntext += len;
	return 0;
}

struct tk_kanata_diag kn_diags_at(const struct kn_diags *k, size_t i)
{
	struct tk_kanata_diag d = k->v[i].d;
	d.msg = k->text + k->v[i].at;
	return d;
}

void kn_diags_free(struct kn_diags *k)
{
	free(k->v);
	free(k->text);
	*k = (struct kn_diags){ 0 };
}

struct tk_kanata_reader *tk_kanata_reader_new(const struct tk_kanata_reader_opts *opts, int *err)
{
	struct tk_kanata_reader *r = calloc(1, sizeof *r);

	if (!r) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	if (opts) {
		size_t sz = opts->sz < sizeof r->o ? opts->sz : sizeof r->o;
		memcpy(&r->o, opts, sz);
	}
	if (!r->o.max_line)
		r->o.max_line = (size_t)16 << 20;
	r->n.first_cycle = 0;
	*err = 0;
	return r;
}

void tk_kanata_reader_free(struct tk_kanata_reader *r)
{
	if (!r)
		return;
	free(r->carry);
	free(r->pool);
	free(r->free_slots);
	free(r->table);
	free(r->seen);
	free(r->frags);
	free(r->ilist);
	free(r);
}

void kn_reader_set_hooks(struct tk_kanata_reader *r, const struct kn_hooks *h)
{
	r->hooks = *h;
}

size_t kn_reader_nstages(const struct tk_kanata_reader *r) { return r->nstages; }
size_t kn_reader_nlanes(const struct tk_kanata_reader *r) { return r->nlanes; }
const struct kn_name *kn_reader_stage(const struct tk_kanata_reader *r, unsigned i) { return &r->stages[i]; }
const struct kn_name *kn_reader_lane(const struct tk_kanata_reader *r, unsigned i) { return &r->lanes[i]; }
int64_t kn_reader_delta_sum(const struct tk_kanata_reader *r) { return r->delta_sum; }

const struct tk_kanata_counts *tk_kanata_reader_counts(const struct tk_kanata_reader *r)
{
	return &r->n;
}

/* ---- numbers and names ---------------------------------------------------------------- */
static inline int parse_num(const char *p, const char *e, int64_t *v)
{
	int neg = 0;
	uint64_t x = 0;
	const char *d;

	while (p < e && *p == ' ')
		p++;
	if (p < e && (*p == '-' || *p == '+'))
		neg = *p++ == '-';
	d = p;
	while (p < e && (unsigned)(*p - '0') < 10) {
		x = x * 10 + (uint64_t)(*p++ - '0');
		if (x > KN_NUM_MAX)
			return -1;  /* keeps cycle sums and differences inside int64 */
	}
	if (p == d)
		return -1;
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	if (p != e)
		return -1;
	*v = neg ? -(int64_t)x : (int64_t)x;
	return 0;
}

int kn_parse_i64(const char *p, const char *e, int64_t *v)
{
	return parse_num(p, e, v);
}

size_t kn_unescape(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o < cap; i++) {
		char c = s[i];
		if (c == '\\' && i + 1 < n) {
			char d = s[i + 1];
			if (d == 'n' || d == 't' || d == '\\') {
				c = d == 'n' ? '\n' : d == 't' ? '\t' : '\\';
				i++;
			}
		}
		out[o++] = c;
	}
	return o;
}

/* Names are a few bytes: an inline loop beats a libc call. */
static inline int name_eq(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

static inline const char *find_tab(const char *p, const char *e)
{
	while (p < e && *p != '\t')
		p++;
	return p < e ? p : NULL;
}

static void trim_name(const char **p, size_t *n)
{
	while (*n && (**p == ' '))
		(*p)++, (*n)--;
	while (*n && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
		(*n)--;
}

/* Intern a lane name; returns its index (the last slot collects overflow). */
static unsigned intern_stage_scan(struct tk_kanata_reader *r, unsigned lane, const char *s, size_t n);

static unsigned intern_lane(struct tk_kanata_reader *r, const char *s, size_t n)
{
	if (n >= TK_KANATA_NAME_MAX)
		n = TK_KANATA_NAME_MAX - 1;
	for (unsigned i = 0; i < r->nlanes; i++)
		if (r->lanes[i].len == n && name_eq(r->lanes[i].name, s, n))
			return i;
	if (r->nlanes == KN_MAX_NAMES)
		return KN_MAX_NAMES - 1;
	struct kn_name *k = &r->lanes[r->nlanes];
	memcpy(k->name, s, n);
	k->name[n] = 0;
	k->len = (uint16_t)n;
	return r->nlanes++;
}

static inline unsigned stage_key(unsigned lane, const char *s, size_t n)
{
	unsigned h = lane * 31u + (unsigned)n * 7u;
	if (n)
		h += (unsigned char)s[0] * 131u + (unsigned char)s[n - 1] * 17u;
	return h & (KN_STAGE_CACHE - 1);
}

static unsigned intern_stage(struct tk_kanata_reader *r, unsigned lane, const char *s, size_t n)
{
	if (n >= TK_KANATA_NAME_MAX)
		n = TK_KANATA_NAME_MAX - 1;
	/* a direct-mapped cache in front of the scan: S lines are most of a log */
	unsigned key = stage_key(lane, s, n), hit = r->stage_cache[key];
	if (hit) {
		const struct kn_name *k = &r->stages[hit - 1];
		if (k->lane == lane && k->len == n && name_eq(k->name, s, n))
			return hit - 1;
	}
	unsigned idx = intern_stage_scan(r, lane, s, n);
	if (idx < KN_MAX_NAMES - 1 || r->nstages < KN_MAX_NAMES)
		r->stage_cache[key] = (uint16_t)(idx + 1);
	return idx;
}

static unsigned intern_stage_scan(struct tk_kanata_reader *r, unsigned lane, const char *s, size_t n)
{
	for (unsigned i = 0; i < r->nstages; i++) {
		const struct kn_name *k = &r->stages[i];
		if (k->lane == lane && k->len == n && name_eq(k->name, s, n))
			return i;
	}
	if (r->nstages == KN_MAX_NAMES)
		return KN_MAX_NAMES - 1;
	struct kn_name *k = &r->stages[r->nstages];
	memcpy(k->name, s, n);
	k->name[n] = 0;
	k->len = (uint16_t)n;
	k->lane = (uint16_t)lane;
	return r->nstages++;
}

/* ---- live instructions ---------------------------------------------------------------- */
/* Ids are mostly sequential: keep neighbours in neighbouring slots (cache friendly), but
 * fold high bits in so strided ids still spread. */
static inline size_t idhash(int64_t id)
{
	uint64_t x = (uint64_t)id;
	return (size_t)(x ^ (x >> 16) ^ (x >> 32));
}

static size_t hslot(const struct tk_kanata_reader *r, int64_t id)
{
	return idhash(id) & (r->table_cap - 1);
}

static struct kn_insn *find_live(const struct tk_kanata_reader *r, int64_t id)
{
	if (!r->table_cap)
		return NULL;
	for (size_t h = hslot(r, id);; h = (h + 1) & (r->table_cap - 1)) {
		uint32_t s = r->table[h];
		if (!s)
			return NULL;
		if (r->pool[s - 1].id == id)
			return &r->pool[s - 1];
	}
}

const struct kn_insn *kn_reader_find(const struct tk_kanata_reader *r, int64_t id)
{
	return find_live(r, id);
}

static int table_put(struct tk_kanata_reader *r, int64_t id, uint32_t slot)
{
	if ((r->live + 1) * 2 > r->table_cap) {
		size_t cap = r->table_cap ? r->table_cap * 2 : 1024;
		uint32_t *t = calloc(cap, sizeof *t);
		if (!t)
			return -TK_E_NOMEM;
		for (size_t i = 0; i < r->table_cap; i++) {
			uint32_t s = r->table[i];
			if (!s)
				continue;
			size_t h = idhash(r->pool[s - 1].id) & (cap - 1);
			while (t[h])
				h = (h + 1) & (cap - 1);
			t[h] = s;
		}
		free(r->table);
		r->table = t;
		r->table_cap = cap;
	}
	size_t h = hslot(r, id);
	while (r->table[h])
		h = (h + 1) & (r->table_cap - 1);
	r->table[h] = slot + 1;
	r->live++;
	return 0;
}

static void table_del(struct tk_kanata_reader *r, int64_t id)
{
	size_t mask = r->table_cap - 1, h = hslot(r, id);
	while (r->pool[r->table[h] - 1].id != id)
		h = (h + 1) & mask;
	/* backward-shift deletion keeps probe chains intact without tombstones */
	for (size_t j = (h + 1) & mask;; j = (j + 1) & mask) {
		uint32_t s = r->table[j];
		if (!s)
			break;
		size_t k = idhash(r->pool[s - 1].id) & mask;
		if ((j > h && (k <= h || k > j)) || (j < h && (k <= h && k > j))) {
			r->table[h] = s;
			h = j;
		}
	}
	r->table[h] = 0;
	r->live--;
}

static struct kn_insn *insn_new(struct tk_kanata_reader *r, int64_t id)
{
	uint32_t slot;

	if (r->nfree) {
		slot = r->free_slots[--r->nfree];
	} else {
		if (r->pool_used == r->pool_cap) {
			uint32_t cap = r->pool_cap ? r->pool_cap * 2 : 256;
			struct kn_insn *p = realloc(r->pool, cap * sizeof *p);
			uint32_t *f = realloc(r->free_slots, cap * sizeof *f);
			if (f)
				r->free_slots = f;
			if (!p || !f) {
				if (p)
					r->pool = p;
				return NULL;
			}
			r->pool = p;
			r->pool_cap = cap;
		}
		slot = r->pool_used++;
	}
	struct kn_insn *in = &r->pool[slot];
	memset(in, 0, offsetof(struct kn_insn, label));
	in->label[0] = 0;
	in->id = id;
	in->slot = slot;
	if (table_put(r, id, slot) < 0) {
		r->free_slots[r->nfree++] = slot;
		return NULL;
	}
	return in;
}

static void insn_del(struct tk_kanata_reader *r, struct kn_insn *in)
{
	table_del(r, in->id);
	r->free_slots[r->nfree++] = in->slot;
}

/* Bits [lo, hi) of word W's range: the mask. */
static uint64_t bits_in(size_t w, uint64_t lo, uint64_t hi)
{
	uint64_t a = lo > w * 64 ? lo - w * 64 : 0, b = hi < (w + 1) * 64 ? hi - w * 64 : 64;
	return (b == 64 ? ~UINT64_C(0) : (UINT64_C(1) << b) - 1) & ~((UINT64_C(1) << a) - 1);
}

/* The bits of ids [A, B) (inside the bitset) turned on, or off. */
static void seen_mark(struct tk_kanata_reader *r, int64_t a, int64_t b, int on)
{
	if (a >= b)
		return;
	uint64_t lo = (uint64_t)(a - r->seen_base), hi = (uint64_t)(b - r->seen_base);
	for (size_t w = lo / 64; w <= (hi - 1) / 64; w++) {
		uint64_t m = bits_in(w, lo, hi);
		r->seen[w] = on ? r->seen[w] | m : r->seen[w] & ~m;
	}
}

static int seen_get(const struct tk_kanata_reader *r, int64_t id)
{
	if (!r->seen_words || id < r->seen_low)
		return 0;
	if (id < r->seen_base)
		return 1;
	uint64_t bit = (uint64_t)(id - r->seen_base);
	if (bit / 64 >= r->seen_words)
		return 0;
	return (int)(r->seen[bit / 64] >> (bit % 64) & 1);
}

/* ID, below every id begun so far (or the first), made the set's lowest. The bits below
 * seen_low in the bitset are kept on (seen_get asks none of them), so that its first word
 * fills and slides away like the others. */
static int seen_lower(struct tk_kanata_reader *r, int64_t id)
{
	int empty = !r->seen_words;
	int64_t old_low = r->seen_low, old_base = r->seen_base, base = id & ~(int64_t)63;

	if (empty) {
		if (!(r->seen = calloc(64, 8)))
			return -TK_E_NOMEM;
		r->seen_words = 64;
		r->seen_base = base;
	} else if (base < old_base) {   /* the bitset reaches down to ID's word */
		size_t up = (size_t)((old_base - base) / 64), nw = r->seen_words;
		if (r->seen_words + up > KN_SEEN_WORDS_MAX)
			return -TK_E_LIMIT;
		while (nw < r->seen_words + up)
			nw *= 2;
		uint64_t *p = realloc(r->seen, nw * 8);
		if (!p)
			return -TK_E_NOMEM;
		memmove(p + up, p, r->seen_words * 8);
		memset(p, 0, up * 8);
		memset(p + up + r->seen_words, 0, (nw - up - r->seen_words) * 8);
		r->seen = p;
		r->seen_words = nw;
		r->seen_base = base;
	}
	/* below ID: on; from ID to the old lowest: off (none was begun); from the old lowest to
	 * the old base, where the set had slid past it: on (all were) */
	seen_mark(r, r->seen_base, id, 1);
	if (!empty) {
		seen_mark(r, id, old_low, 0);
		seen_mark(r, old_low, old_base, 1);
	}
	r->seen_low = id;
	return 0;
}

static int seen_set(struct tk_kanata_reader *r, int64_t id)
{
	if (!r->seen_words || id < r->seen_low) {
		int rc = seen_lower(r, id);
		if (rc < 0)
			return rc;
	}
	uint64_t bit = (uint64_t)(id - r->seen_base);
	size_t w = bit / 64;

	if (w >= r->seen_words) {
		/* drop leading words whose ids are all seen first, then grow */
		size_t full = 0;
		while (full < r->seen_words && r->seen[full] == UINT64_MAX)
			full++;
		if (full) {
			memmove(r->seen, r->seen + full, (r->seen_words - full) * 8);
			memset(r->seen + r->seen_words - full, 0, full * 8);
			r->seen_base += (int64_t)full * 64;
			bit -= full * 64;
			w -= full;
		}
		if (w >= r->seen_words) {
			if (w > KN_SEEN_WORDS_MAX)
				return -TK_E_LIMIT;
			size_t nw = r->seen_words;
			while (nw <= w)
				nw *= 2;
			uint64_t *s = realloc(r->seen, nw * 8);
			if (!s)
				return -TK_E_NOMEM;
			memset(s + r->seen_words, 0, (nw - r->seen_words) * 8);
			r->seen = s;
			r->seen_words = nw;
		}
	}
	r->seen[w] |= UINT64_C(1) << (bit % 64);
	return 0;
}

/* Whether any id of [a, a + n) was begun (ids are not negative), a word at a time. */
static int seen_any(const struct tk_kanata_reader *r, int64_t a, uint64_t n)
{
	if (!r->seen_words || (a < r->seen_low && (uint64_t)(r->seen_low - a) >= n))
		return 0;
	if (a < r->seen_low) {   /* (none below it) */
		n -= (uint64_t)(r->seen_low - a);
		a = r->seen_low;
	}
	if (a < r->seen_base)
		return 1;
	uint64_t lo = (uint64_t)(a - r->seen_base), hi = lo + n;
	if (hi > (uint64_t)r->seen_words * 64)
		hi = (uint64_t)r->seen_words * 64;
	for (size_t w = lo / 64; lo < hi && w <= (hi - 1) / 64; w++)
		if (r->seen[w] & bits_in(w, lo, hi))
			return 1;
	return 0;
}

/* Ids [a, a + n) begun: the first and last set alone (which reach down, grow or slide the
 * set), the rest a word at a time. */
static int seen_set_range(struct tk_kanata_reader *r, int64_t a, uint64_t n)
{
	int rc = seen_set(r, a);
	if (rc >= 0)
		rc = seen_set(r, a + (int64_t)n - 1);
	if (rc < 0)
		return rc;
	if (a < r->seen_base) {     /* slid past: those are set */
		n -= (uint64_t)(r->seen_base - a) < n ? (uint64_t)(r->seen_base - a) : n;
		a = r->seen_base;
	}
	uint64_t lo = (uint64_t)(a - r->seen_base), hi = lo + n;
	for (size_t w = lo / 64; lo < hi && w <= (hi - 1) / 64; w++)
		r->seen[w] |= bits_in(w, lo, hi);
	return 0;
}

static void close_stage(struct tk_kanata_reader *r, struct kn_insn *in, unsigned i)
{
	if (r->hooks.stage)
		r->hooks.stage(r->hooks.ctx, in, in->open[i].stage, in->open[i].start, r->cycle);
	in->open[i] = in->open[--in->nopen];
}

/* Chunk mode: keep a command about an instruction begun in an earlier chunk. */
static int frag_add(struct tk_kanata_reader *r, const struct tk_kanata_cmd *c, int check_only,
		    int prod_ok)
{
	if (r->nfrags == r->cap_frags) {
		size_t cap = r->cap_frags ? r->cap_frags * 2 : 256;
		void *p = realloc(r->frags, cap * sizeof *r->frags);
		if (!p)
			return -TK_E_NOMEM;
		r->frags = p;
		r->cap_frags = cap;
	}
	struct kn_frag *f = &r->frags[r->nfrags++];
	f->c = *c;
	f->c.lane = f->c.text = NULL;
	f->lane = (uint16_t)r->cur_lane;
	f->check_only = (uint8_t)check_only;
	f->prod_ok = (uint8_t)prod_ok;
	f->mark = r->hooks.mark ? r->hooks.mark(r->hooks.ctx) : 0;
	f->text_len = 0;
	if (c->kind == TK_KANATA_LABEL || c->kind == TK_KANATA_STAGE_BEGIN ||
	    c->kind == TK_KANATA_STAGE_END) {
		size_t n = c->text_len < sizeof f->text - 1 ? c->text_len : sizeof f->text - 1;
		if (c->kind == TK_KANATA_LABEL && c->a != 0)
			n = 0;  /* only type-0 text is kept by the tracker */
		memcpy(f->text, c->text, n);
		f->text_len = (uint16_t)n;
		f->full_len = c->text_len;
	}
	f->text[f->text_len] = 0;
	return 0;
}

static int foreign(const struct tk_kanata_reader *r, int64_t id)
{
	return r->chunk && !(id >= 0 && seen_get(r, id));
}

/* The instruction a command names, or NULL after reporting why it is skipped. */
static struct kn_insn *lookup(struct tk_kanata_reader *r, const struct tk_kanata_cmd *c,
			      const char *what, int after_retire_is_error)
{
	struct kn_insn *in = find_live(r, c->id);
	if (in)
		return in;
	if (foreign(r, c->id)) {
		if (frag_add(r, c, 0, 0) < 0)
			r->stopped = -TK_E_NOMEM;
		return NULL;
	}
	if (c->id >= 0 && seen_get(r, c->id)) {
		if (c->kind == TK_KANATA_RETIRE)
			diag(r, TK_LOG_ERROR, TK_KANATA_D_RETIRE_TWICE, c->line, c->offset,
			     "R for id %lld, already retired", (long long)c->id);
		else
			diag(r, after_retire_is_error ? TK_LOG_ERROR : TK_LOG_WARN,
			     TK_KANATA_D_AFTER_RETIRE, c->line, c->offset,
			     "%s for id %lld after its R%s", what, (long long)c->id,
			     c->kind == TK_KANATA_LABEL ? "" : " (ignored)");
	} else {
		diag(r, TK_LOG_ERROR, TK_KANATA_D_UNKNOWN_ID, c->line, c->offset,
		     "%s for id %lld before its I", what, (long long)c->id);
	}
	return NULL;
}

/* Semantic step; returns 1 if the command is valid and should be passed on. */
static int track(struct tk_kanata_reader *r, const struct tk_kanata_cmd *c)
{
	struct kn_insn *in;

	r->track_line = c->line;
	switch (c->kind) {
	case TK_KANATA_INSN:
		if (c->id < 0) {
			diag(r, TK_LOG_ERROR, TK_KANATA_D_SYNTAX, c->line, c->offset, "negative id %lld",
			     (long long)c->id);
			return 0;
		}
		if (find_live(r, c->id) || seen_get(r, c->id)) {
			diag(r, TK_LOG_ERROR, TK_KANATA_D_ID_REUSED, c->line, c->offset,
			     "I for id %lld, which was already used", (long long)c->id);
			return 0;
		}
		if (seen_set(r, c->id) < 0 || !(in = insn_new(r, c->id))) {
			diag(r, TK_LOG_ERROR, TK_KANATA_D_SYNTAX, c->line, c->offset,
			     "id %lld: out of memory or too far from the others", (long long)c->id);
			return 0;
		}
		in->sim_id = c->a;
		in->thread = c->b;
		in->begin = c->cycle;
		r->n.insns++;
		if (r->chunk) {
			if (r->ni == r->cap_i) {
				size_t cap = r->cap_i ? r->cap_i * 2 : 1024;
				int64_t *p = realloc(r->ilist, cap * sizeof *p);
				if (!p) {
					r->stopped = -TK_E_NOMEM;
					return 0;
				}
				r->ilist = p;
				r->cap_i = cap;
			}
			r->ilist[r->ni++] = c->id;
		}
		return 1;
	case TK_KANATA_LABEL:
		/* producers add detail after R (RSD does): warn, but keep the line */
		if (!(in = lookup(r, c, "L", 0)))
			return c->id >= 0 && seen_get(r, c->id);
		if (c->a == 0 && in->label_len < KN_LABEL_KEEP) {
			size_t room = KN_LABEL_KEEP - in->label_len;
			size_t k = kn_unescape(c->text, c->text_len, in->label + in->label_len, room);
			for (size_t i = 0; i < k; i++)
				if (in->label[in->label_len + i] == '\n' || in->label[in->label_len + i] == '\t')
					in->label[in->label_len + i] = ' ';
			in->label_len += (uint32_t)k;
			in->label[in->label_len] = 0;
		}
		return 1;
	case TK_KANATA_STAGE_BEGIN: {
		if (!(in = lookup(r, c, "S", 0)))
			return 0;
		unsigned lane = r->cur_lane, stage = r->cur_stage;
		for (unsigned i = 0; i < in->nopen; i++)
			if (in->open[i].lane == lane) {
				close_stage(r, in, i);  /* S closes the lane's previous stage */
				break;
			}
		if (in->nopen == KN_MAX_OPEN)
			close_stage(r, in, 0);
		in->open[in->nopen++] = (struct kn_open){ (uint16_t)lane, (uint16_t)stage, c->cycle };
		return 1;
	}
	case TK_KANATA_STAGE_END: {
		if (!(in = lookup(r, c, "E", 0)))
			return 0;
		unsigned lane = r->cur_lane;
		for (unsigned i = 0; i < in->nopen; i++) {
			if (in->open[i].lane != lane)
				continue;
			const struct kn_name *k = &r->stages[in->open[i].stage];
			size_t n = c->text_len < TK_KANATA_NAME_MAX ? c->text_len : TK_KANATA_NAME_MAX - 1;
			if (k->len == n && name_eq(k->name, c->text, n)) {
				close_stage(r, in, i);
				return 1;
			}
		}
		diag(r, TK_LOG_WARN, TK_KANATA_D_END_NO_BEGIN, c->line, c->offset,
		     "E for stage '%.*s' of id %lld lane '%.*s', which is not open",
		     (int)(c->text_len > 64 ? 64 : c->text_len), c->text, (long long)c->id,
		     (int)(c->lane_len > 64 ? 64 : c->lane_len), c->lane);
		return 1;
	}
	case TK_KANATA_RETIRE:
		if (c->b != 0 && c->b != 1) {
			diag(r, TK_LOG_ERROR, TK_KANATA_D_BAD_TYPE, c->line, c->offset,
			     "R type %lld (0 retire, 1 flush)", (long long)c->b);
			return 0;
		}
		if (!(in = lookup(r, c, "R", 1)))
			return 0;
		while (in->nopen)
			close_stage(r, in, in->nopen - 1);
		if (c->b)
			r->n.flushed++;
		else
			r->n.retired++;
		if (r->hooks.done)
			r->hooks.done(r->hooks.ctx, in, (int)c->b, c->a, c->cycle);
		insn_del(r, in);
		return 1;
	case TK_KANATA_DEP:
		if (!find_live(r, c->id)) {
			if (foreign(r, c->id)) {
				int ok = c->a >= 0 && (find_live(r, c->a) || seen_get(r, c->a));
				if (frag_add(r, c, 0, ok) < 0)
					r->stopped = -TK_E_NOMEM;
				return 0;
			}
			if (c->id >= 0 && seen_get(r, c->id))
				diag(r, TK_LOG_ERROR, TK_KANATA_D_DEP_RETIRED, c->line, c->offset,
				     "W with consumer %lld, which is already retired", (long long)c->id);
			else
				diag(r, TK_LOG_ERROR, TK_KANATA_D_UNKNOWN_ID, c->line, c->offset,
				     "W with consumer %lld before its I", (long long)c->id);
			return 0;
		}
		if (c->a < 0 || !(find_live(r, c->a) || seen_get(r, c->a))) {
			if (r->chunk && c->a >= 0) {
				/* the producer may come from an earlier chunk: decide at the merge */
				if (frag_add(r, c, 1, 0) < 0)
					r->stopped = -TK_E_NOMEM;
				return 1;
			}
			diag(r, TK_LOG_WARN, TK_KANATA_D_DEP_PRODUCER, c->line, c->offset,
			     "W with producer %lld, which never appeared", (long long)c->a);
		}
		return 1;
	default:
		return 1;
	}
}

/* ---- lines ------------------------------------------------------------------------------ */
/* A command the tracker accepted (or that needs none): counted and passed on. */
static int deliver_tracked(struct tk_kanata_reader *r, const struct tk_kanata_cmd *c)
{
	r->n.commands++;
	if (r->o.cmd) {
		int rc = r->o.cmd(r->o.ctx, c);
		if (rc < 0) {
			r->stopped = rc;
			return rc;
		}
	}
	return 0;
}

static int deliver(struct tk_kanata_reader *r, struct tk_kanata_cmd *c)
{
	if (r->o.semantic && !track(r, c))
		return 0;
	return deliver_tracked(r, c);
}

static int header_line(struct tk_kanata_reader *r, const char *p, const char *e, uint64_t line,
		       uint64_t off)
{
	const char *q = p;
	if (e - q >= 3 && (unsigned char)q[0] == 0xef && (unsigned char)q[1] == 0xbb &&
	    (unsigned char)q[2] == 0xbf)
		q += 3;
	r->seen_header = 1;
	if (e - q < 6 || memcmp(q, "Kanata", 6) != 0) {
		diag(r, TK_LOG_ERROR, TK_KANATA_D_NO_HEADER, line, off,
		     "first line is not a 'Kanata<TAB>0004' header; reading on");
		return 1;  /* not a header: parse the line as a command */
	}
	q += 6;
	while (q < e && (*q == '\t' || *q == ' '))
		q++;
	int64_t v = 0;
	if (kn_parse_i64(q, e, &v) < 0 || v < 0) {
		diag(r, TK_LOG_WARN, TK_KANATA_D_VERSION, line, off, "header without a version number");
		v = 0;
	} else if (v != 4) {
		diag(r, TK_LOG_WARN, TK_KANATA_D_VERSION, line, off,
		     "version %lld, expected 0004; reading it as version 4", (long long)v);
	}
	r->n.version = (unsigned)v;
	struct tk_kanata_cmd c = { .kind = TK_KANATA_HEADER, .a = v, .line = line, .offset = off,
				   .cycle = r->cycle };
	if (r->o.cmd) {
		int rc = r->o.cmd(r->o.ctx, &c);
		if (rc < 0)
			r->stopped = rc;
	}
	return 0;
}

/* Fields: split at tabs, as Konata does. Fields after the max-th start at *extra (NULL if
 * there are none). */
static int split(const char *p, const char *e, const char **f, const char **fe, int max,
		 const char **extra)
{
	int n = 0;
	*extra = NULL;
	while (n < max) {
		const char *t = find_tab(p, e);
		f[n] = p;
		fe[n] = t ? t : e;
		n++;
		if (!t)
			return n;
		p = t + 1;
	}
	*extra = p;
	return n;
}

/* Konata reads only the fields a command defines and drops the rest; do the same, but a
 * dropped field that holds more than blanks is data lost: say so. */
static void extra_fields(struct tk_kanata_reader *r, const char *cmd, const char *x, const char *e,
			 uint64_t line, uint64_t off)
{
	const char *p = x;
	if (!x)
		return;
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	if (p == e)
		return;
	diag(r, TK_LOG_ERROR, TK_KANATA_D_SYNTAX, line, off,
	     "%s: extra field '%.*s' ignored (Konata reads no further)", cmd,
	     (int)(e - x > 32 ? 32 : e - x), x);
}

static int bad(struct tk_kanata_reader *r, uint64_t line, uint64_t off, const char *cmd, const char *why)
{
	diag(r, TK_LOG_ERROR, TK_KANATA_D_SYNTAX, line, off, "%s: %s; line skipped", cmd, why);
	return 0;
}

/* A relative chunk meets a line that needs the absolute cycle: wait for its start. */
static int resolve(struct tk_kanata_reader *r)
{
	int rc = r->resolve(r->resolve_ctx);
	if (rc < 0)
		r->stopped = rc;
	return rc;
}

static int parse_line(struct tk_kanata_reader *r, const char *p, const char *e, uint64_t line,
		      uint64_t off)
{
	const char *f[4], *fe[4], *x;
	struct tk_kanata_cmd c;
	int nf;

	/* a CR before the newline is not part of the line (Konata reads lines the same way) */
	while (e > p && e[-1] == '\r')
		e--;
	const char *line_end = e;  /* label text keeps its trailing spaces */
	/* other trailing tabs and spaces are noise that producers leave */
	while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	if (!r->seen_header) {
		while (p < e && *p == ' ')
			p++;
		if (p == e)
			return 0;
		if (!header_line(r, p, e, line, off))
			return 0;
	}
	if (p == e)
		return 0;
	c.line = line;
	c.offset = off;
	c.lane = c.text = NULL;
	c.lane_len = c.text_len = 0;
	c.id = c.a = c.b = 0;

	const char *tab = find_tab(p, e);
	const char *ce = tab ? tab : e, *cp = p;
	while (ce > cp && ce[-1] == ' ')
		ce--;
	size_t clen = (size_t)(ce - cp);
	const char *rest = tab ? tab + 1 : e;
	char k = clen == 1 ? cp[0] : clen == 2 && cp[0] == 'C' && cp[1] == '=' ? '=' : 0;

	switch (k) {
	case '=': {
		int64_t v;
		if (parse_num(rest, e, &v) < 0)
			return bad(r, line, off, "C=", "expected a cycle number");
		if (r->rel) {
			if (resolve(r) < 0)
				return r->stopped;
			line = c.line = r->n.lines;   /* now absolute */
		}
		if ((r->seen_cycle_cmd || r->seen_any_cmd) && v < r->cycle) {
			diag(r, TK_LOG_ERROR, TK_KANATA_D_CYCLE_BACK, line, off,
			     "C= %lld goes back from cycle %lld; line skipped", (long long)v,
			     (long long)r->cycle);
			return 0;
		}
		if (!r->seen_cycle_cmd) {
			r->n.first_cycle = v;
			r->n.first_cycle_line = line;
		}
		r->seen_cycle_cmd = 1;
		r->cycle = v;
		c.kind = TK_KANATA_CYCLE_SET;
		c.a = v;
		break;
	}
	case 'C': {
		int64_t v;
		if (parse_num(rest, e, &v) < 0)
			return bad(r, line, off, "C", "expected a cycle count");
		if (v < 0) {
			diag(r, TK_LOG_ERROR, TK_KANATA_D_NEG_DELTA, line, off,
			     "C %lld: time only moves forward; line skipped", (long long)v);
			return 0;
		}
		if (r->rel && r->cycle > KN_NUM_MAX - v) {
			if (resolve(r) < 0)
				return r->stopped;
			line = c.line = r->n.lines;
		}
		if (r->cycle > KN_NUM_MAX - v || r->delta_sum > KN_NUM_MAX - v) {
			diag(r, TK_LOG_ERROR, TK_KANATA_D_SYNTAX, line, off,
			     "C %lld: cycle beyond %lld; line skipped", (long long)v, (long long)KN_NUM_MAX);
			return 0;
		}
		r->seen_cycle_cmd = 1;
		r->cycle += v;
		r->delta_sum += v;
		c.kind = TK_KANATA_CYCLE;
		c.a = v;
		break;
	}
	case 'I':
	case 'R':
	case 'W':
		nf = split(rest, e, f, fe, 3, &x);
		if (nf < 3)
			return bad(r, line, off, k == 'I' ? "I" : k == 'R' ? "R" : "W", "expected 3 fields");
		extra_fields(r, k == 'I' ? "I" : k == 'R' ? "R" : "W", x, e, line, off);
		if (parse_num(f[0], fe[0], &c.id) < 0 || parse_num(f[1], fe[1], &c.a) < 0 ||
		    parse_num(f[2], fe[2], &c.b) < 0)
			return bad(r, line, off, k == 'I' ? "I" : k == 'R' ? "R" : "W", "bad number");
		c.kind = k == 'I' ? TK_KANATA_INSN : k == 'R' ? TK_KANATA_RETIRE : TK_KANATA_DEP;
		break;
	case 'L':
		/* the text is the fourth field exactly as Konata shows it: trailing spaces kept */
		nf = split(rest, tab ? line_end : e, f, fe, 3, &x);
		if (nf < 2)
			return bad(r, line, off, "L", "expected id, type and text");
		extra_fields(r, "L", x, line_end, line, off);
		if (parse_num(f[0], fe[0], &c.id) < 0 || parse_num(f[1], fe[1], &c.a) < 0)
			return bad(r, line, off, "L", "bad number");
		if (c.a < 0) {
			diag(r, TK_LOG_ERROR, TK_KANATA_D_BAD_TYPE, line, off, "L type %lld; line skipped",
			     (long long)c.a);
			return 0;
		}
		if (nf == 3) {
			c.text = f[2];
			c.text_len = (size_t)(fe[2] - f[2]);
		} else {
			c.text = "";
		}
		c.kind = TK_KANATA_LABEL;
		break;
	case 'S':
	case 'E':
		nf = split(rest, e, f, fe, 3, &x);
		if (nf < 3)
			return bad(r, line, off, k == 'S' ? "S" : "E", "expected id, lane and stage");
		extra_fields(r, k == 'S' ? "S" : "E", x, e, line, off);
		if (parse_num(f[0], fe[0], &c.id) < 0)
			return bad(r, line, off, k == 'S' ? "S" : "E", "bad id");
		c.lane = f[1];
		c.lane_len = (size_t)(fe[1] - f[1]);
		trim_name(&c.lane, &c.lane_len);
		c.text = f[2];
		c.text_len = (size_t)(fe[2] - f[2]);
		trim_name(&c.text, &c.text_len);
		c.kind = k == 'S' ? TK_KANATA_STAGE_BEGIN : TK_KANATA_STAGE_END;
		if (r->o.semantic) {
			/* names are interned in line order whether or not the command is valid, so
			 * the order of first appearance does not depend on how the file is split */
			r->cur_lane = intern_lane(r, c.lane, c.lane_len);
			if (k == 'S')
				r->cur_stage = intern_stage(r, r->cur_lane, c.text, c.text_len);
		}
		break;
	default:
		diag(r, TK_LOG_ERROR, TK_KANATA_D_UNKNOWN_CMD, line, off,
		     "unknown command '%.*s'; line skipped", (int)(clen > 32 ? 32 : clen), cp);
		return 0;
	}
	r->seen_any_cmd = 1;
	c.cycle = r->cycle;
	return deliver(r, &c);
}

static int carry_append(struct tk_kanata_reader *r, const char *p, size_t n)
{
	if (r->skipping)
		return 0;
	if (r->carry_len + n > r->o.max_line) {
		r->skipping = 1;
		r->skip_line = r->n.lines + 1;
		r->skip_offset = r->n.bytes - r->carry_len;
		r->carry_len = 0;
		if (r->carry_cap > ((size_t)1 << 20)) {
			free(r->carry);
			r->carry = NULL;
			r->carry_cap = 0;
		}
		return 0;
	}
	if (r->carry_len + n > r->carry_cap) {
		size_t cap = r->carry_cap ? r->carry_cap : 4096;
		while (cap < r->carry_len + n)
			cap *= 2;
		char *c = realloc(r->carry, cap);
		if (!c)
			return -TK_E_NOMEM;
		r->carry = c;
		r->carry_cap = cap;
	}
	memcpy(r->carry + r->carry_len, p, n);
	r->carry_len += n;
	return 0;
}

/* A complete line ends (the newline itself excluded). */
static int end_carried_line(struct tk_kanata_reader *r, uint64_t next_off)
{
	int rc = 0;
	r->n.lines++;
	if (r->skipping) {
		diag(r, TK_LOG_ERROR, TK_KANATA_D_LONG_LINE, r->skip_line, r->skip_offset,
		     "line of %llu bytes is longer than the limit of %zu; skipped",
		     (unsigned long long)(next_off - r->skip_offset), r->o.max_line);
		r->skipping = 0;
	} else {
		const char *c = r->carry ? r->carry : "";
		rc = parse_line(r, c, c + r->carry_len, r->n.lines, next_off - r->carry_len);
	}
	r->carry_len = 0;
	return rc;
}

int tk_kanata_reader_feed(struct tk_kanata_reader *r, const char *p, size_t n, int final)
{
	const char *e;
	int rc;

	if (r->stopped)
		return r->stopped;
	if (!n)
		goto tail;
	e = p + n;
	if (r->carry_len || r->skipping) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;
		if ((rc = carry_append(r, p, k)) < 0)
			return rc;
		r->n.bytes += k;
		if (!nl)
			goto tail;
		if ((rc = end_carried_line(r, r->n.bytes)) < 0)
			return rc;
		r->n.bytes++;
		p = nl + 1;
	}
	while (p < e) {
		const char *nl = memchr(p, '\n', (size_t)(e - p));
		if (!nl) {
			size_t k = (size_t)(e - p);
			if ((rc = carry_append(r, p, k)) < 0)
				return rc;
			r->n.bytes += k;
			break;
		}
		r->n.lines++;
		if ((size_t)(nl - p) > r->o.max_line) {
			diag(r, TK_LOG_ERROR, TK_KANATA_D_LONG_LINE, r->n.lines, r->n.bytes,
			     "line of %llu bytes is longer than the limit of %zu; skipped",
			     (unsigned long long)(nl - p), r->o.max_line);
		} else if ((rc = parse_line(r, p, nl, r->n.lines, r->n.bytes)) < 0) {
			return rc;
		}
		r->n.bytes += (uint64_t)(nl - p) + 1;
		p = nl + 1;
	}
tail:
	if (final) {
		if (r->carry_len || r->skipping)
			if ((rc = end_carried_line(r, r->n.bytes)) < 0)
				return rc;
		r->n.last_cycle = r->cycle;
		r->n.in_flight = r->live;
		if (!r->seen_header && !r->chunk)
			diag(r, TK_LOG_ERROR, TK_KANATA_D_NO_HEADER, 1, 0, "empty input: no Kanata header");
	}
	return r->stopped;
}

void kn_reader_cut_short(struct tk_kanata_reader *r)
{
	if (!r->carry_len || r->skipping || r->stopped)
		return;
	/* the last line ends where the compressed data was cut: the rest of it is lost, and
	 * what is left would read as another command ("I 1477" of "I 14770 ...") */
	r->n.lines++;
	diag(r, TK_LOG_ERROR, TK_KANATA_D_SYNTAX, r->n.lines, r->n.bytes - r->carry_len,
	     "line cut short where the compressed data ends; skipped");
	r->carry_len = 0;
}

int tk_kanata_reader_run(struct tk_kanata_reader *r, struct tk_input *in)
{
	size_t cap = (size_t)1 << 20;
	const void *at = NULL;
	char *buf = NULL;
	long got;
	int rc = 0;

	/* a file's mapping parsed where it is (its copy was a fifth of `stats -j 1`), else
	 * the bytes read into a buffer */
	got = tk_input_read_in_place(in, &at, cap);
	if (at) {
		while (got > 0 && (rc = tk_kanata_reader_feed(r, at, (size_t)got, 0)) >= 0)
			got = tk_input_read_in_place(in, &at, cap);
	} else if (got == 0) {
		if (!(buf = malloc(cap)))
			return -TK_E_NOMEM;
		while ((got = tk_input_read(in, buf, cap)) > 0)
			if ((rc = tk_kanata_reader_feed(r, buf, (size_t)got, 0)) < 0)
				break;
	}
	if (got < 0)
		rc = (int)got;
	if (!got && tk_input_cut(in, NULL) == TK_INPUT_CUT)
		kn_reader_cut_short(r);
	if (rc >= 0)
		rc = tk_kanata_reader_feed(r, NULL, 0, 1);
	free(buf);
	return rc;
}

static int cmp_insn_id(const void *a, const void *b)
{
	const struct kn_insn *x = *(const struct kn_insn *const *)a, *y = *(const struct kn_insn *const *)b;
	return x->id < y->id ? -1 : x->id > y->id;
}

int kn_reader_live(const struct tk_kanata_reader *r,
		   void (*fn)(void *ctx, const struct kn_insn *in), void *ctx)
{
	const struct kn_insn **v;
	size_t n = 0;

	if (!r->live)
		return 0;
	v = malloc(r->live * sizeof *v);
	if (!v)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < r->table_cap; i++)
		if (r->table[i])
			v[n++] = &r->pool[r->table[i] - 1];
	qsort(v, n, sizeof *v, cmp_insn_id);
	for (size_t i = 0; i < n; i++)
		fn(ctx, v[i]);
	free(v);
	return 0;
}

/* ---- parallel chunks ---------------------------------------------------------------------- */
void kn_reader_chunk_begin(struct tk_kanata_reader *r, int first, int64_t cycle, uint64_t line_base,
			   uint64_t byte_base)
{
	r->chunk = 1;
	r->n.lines = line_base;
	r->n.bytes = byte_base;
	if (!first) {
		r->cycle = cycle;
		r->seen_header = r->seen_cycle_cmd = r->seen_any_cmd = 1;
	}
}

void kn_reader_swap_ids(struct tk_kanata_reader *r, struct kn_ids *ids)
{
	struct kn_ids mine = { r->ilist, r->cap_i };
	r->ilist = ids->v;
	r->cap_i = ids->cap;
	r->ni = 0;
	*ids = mine;
}

void kn_reader_chunk_delta_sum(struct tk_kanata_reader *r, int64_t sum)
{
	r->delta_sum = sum;
}

void kn_reader_set_relative(struct tk_kanata_reader *r, int (*resolve_fn)(void *ctx), void *ctx)
{
	r->rel = 1;
	r->resolve = resolve_fn;
	r->resolve_ctx = ctx;
}

void kn_reader_rebase(struct tk_kanata_reader *r, int64_t cycle, uint64_t line)
{
	r->rel = 0;
	r->cycle += cycle;
	r->n.lines += line;
	r->track_line += line;
	for (size_t i = 0; i < r->table_cap; i++) {
		if (!r->table[i])
			continue;
		struct kn_insn *in = &r->pool[r->table[i] - 1];
		in->begin += cycle;
		for (unsigned k = 0; k < in->nopen; k++)
			in->open[k].start += cycle;
	}
	for (size_t i = 0; i < r->nfrags; i++) {
		r->frags[i].c.cycle += cycle;
		r->frags[i].c.line += line;
	}
}

uint64_t kn_reader_lines(const struct tk_kanata_reader *r)
{
	return r->n.lines;
}

void kn_reader_state(const struct tk_kanata_reader *r, struct kn_state *st)
{
	st->cycle = r->cycle;
	st->seen_header = r->seen_header;
	st->seen_cycle = r->seen_cycle_cmd;
	st->seen_any = r->seen_any_cmd;
	st->first_cycle_set = r->seen_cycle_cmd && r->n.first_cycle_line;
}

const struct kn_frag *kn_reader_frags(const struct tk_kanata_reader *r, size_t *n)
{
	*n = r->nfrags;
	return r->frags;
}

int kn_reader_seen(const struct tk_kanata_reader *r, int64_t id)
{
	return (id >= 0 && seen_get(r, id)) || find_live(r, id);
}

size_t kn_reader_seen_words(const struct tk_kanata_reader *r)
{
	return r->seen_words;
}

int kn_reader_seen_any(const struct tk_kanata_reader *g, const struct tk_kanata_reader *c)
{
	/* a live instruction's id is always in the set too: one lookup per run of ids */
	for (size_t i = 0, j; i < c->ni; i = j) {
		for (j = i + 1; j < c->ni && c->ilist[j] == c->ilist[j - 1] + 1; j++)
			;
		if (seen_any(g, c->ilist[i], j - i))
			return 1;
	}
	return 0;
}

int kn_reader_merge_names(struct tk_kanata_reader *g, const struct tk_kanata_reader *c,
			  uint16_t *lane_map, uint16_t *stage_map)
{
	for (unsigned i = 0; i < c->nlanes; i++)
		lane_map[i] = (uint16_t)intern_lane(g, c->lanes[i].name, c->lanes[i].len);
	for (unsigned i = 0; i < c->nstages; i++)
		stage_map[i] = (uint16_t)intern_stage(g, lane_map[c->stages[i].lane], c->stages[i].name,
						      c->stages[i].len);
	return 0;
}

void kn_reader_seed_names(struct tk_kanata_reader *r, const struct kn_name *lanes, unsigned nlanes,
			  const struct kn_name *stages, unsigned nstages)
{
	memcpy(r->lanes, lanes, nlanes * sizeof *lanes);
	memcpy(r->stages, stages, nstages * sizeof *stages);
	r->nlanes = nlanes;
	r->nstages = nstages;
}

int kn_reader_replay(struct tk_kanata_reader *g, const struct kn_frag *f, const uint16_t *lane_map,
		     const struct tk_kanata_reader *c)
{
	struct tk_kanata_cmd cmd = f->c;
	int64_t saved = g->cycle;

	g->cycle = cmd.cycle;
	cmd.text = f->text;
	cmd.text_len = f->text_len;
	if (cmd.kind == TK_KANATA_STAGE_BEGIN || cmd.kind == TK_KANATA_STAGE_END) {
		const struct kn_name *ln = &c->lanes[f->lane];
		cmd.lane = ln->name;
		cmd.lane_len = ln->len;
		g->cur_lane = lane_map[f->lane];
		if (cmd.kind == TK_KANATA_STAGE_BEGIN)
			g->cur_stage = intern_stage(g, g->cur_lane, f->text, f->text_len);
	} else if (cmd.kind == TK_KANATA_LABEL) {
		cmd.text_len = f->text_len;
	}
	if (f->check_only) {
		if (!kn_reader_seen(g, cmd.a))
			diag(g, TK_LOG_WARN, TK_KANATA_D_DEP_PRODUCER, cmd.line, cmd.offset,
			     "W with producer %lld, which never appeared", (long long)cmd.a);
	} else if (cmd.kind == TK_KANATA_DEP && f->prod_ok) {
		/* the producer was begun earlier in the same chunk: only the consumer is news */
		if (!find_live(g, cmd.id)) {
			if (cmd.id >= 0 && seen_get(g, cmd.id))
				diag(g, TK_LOG_ERROR, TK_KANATA_D_DEP_RETIRED, cmd.line, cmd.offset,
				     "W with consumer %lld, which is already retired", (long long)cmd.id);
			else
				diag(g, TK_LOG_ERROR, TK_KANATA_D_UNKNOWN_ID, cmd.line, cmd.offset,
				     "W with consumer %lld before its I", (long long)cmd.id);
		} else {
			deliver_tracked(g, &cmd);
		}
	} else if (track(g, &cmd)) {
		deliver_tracked(g, &cmd);
	}
	g->cycle = saved;
	return g->stopped;
}

static void adopt_one(void *ctx, const struct kn_insn *in)
{
	struct kn_adopt *a = ctx;
	struct kn_insn *n;
	if (a->err)
		return;
	/* (its id is in the chunk's list too, unless a damaged partial says otherwise: the set
	 * must hold every live id, kn_reader_seen_any looks there only) */
	if ((a->err = seen_set(a->g, in->id)) < 0)
		return;
	if (!(n = insn_new(a->g, in->id))) {
		a->err = -TK_E_NOMEM;
		return;
	}
	uint32_t slot = n->slot;
	memcpy(n, in, sizeof *n);
	n->slot = slot;
	for (unsigned i = 0; i < n->nopen; i++) {
		n->open[i].lane = a->lane_map[n->open[i].lane];
		n->open[i].stage = a->stage_map[n->open[i].stage];
	}
}

int kn_reader_adopt(struct tk_kanata_reader *g, const struct tk_kanata_reader *c,
		    const uint16_t *lane_map, const uint16_t *stage_map)
{
	struct kn_adopt a = { g, lane_map, stage_map, 0 };
	int rc;
	for (size_t i = 0, j; i < c->ni; i = j) {
		for (j = i + 1; j < c->ni && c->ilist[j] == c->ilist[j - 1] + 1; j++)
			;
		if ((rc = seen_set_range(g, c->ilist[i], j - i)) < 0)
			return rc;
	}
	if ((rc = kn_reader_live(c, adopt_one, &a)) < 0)
		return rc;
	return a.err;
}

void kn_reader_add_counts(struct tk_kanata_reader *g, const struct tk_kanata_reader *c,
			  uint64_t line_base, uint64_t byte_base, int64_t delta_base)
{
	g->n.lines += c->n.lines - line_base;
	g->n.bytes += c->n.bytes - byte_base;
	g->n.commands += c->n.commands;
	g->n.errors += c->n.errors;
	g->n.warnings += c->n.warnings;
	g->n.insns += c->n.insns;
	g->n.retired += c->n.retired;
	g->n.flushed += c->n.flushed;
	g->delta_sum += c->delta_sum - delta_base;
	if (!g->n.version)
		g->n.version = c->n.version;
	if (c->n.first_cycle_line && !g->n.first_cycle_line) {
		g->n.first_cycle = c->n.first_cycle;
		g->n.first_cycle_line = c->n.first_cycle_line;
	}
	g->cycle = c->cycle;
	g->seen_header |= c->seen_header;
	g->seen_cycle_cmd |= c->seen_cycle_cmd;
	g->seen_any_cmd |= c->seen_any_cmd;
}

void kn_reader_finish(struct tk_kanata_reader *g)
{
	g->n.last_cycle = g->cycle;
	g->n.in_flight = g->live;
}

uint64_t kn_reader_cur_line(const struct tk_kanata_reader *r)
{
	return r->track_line;
}

/* ---- a chunk's state as bytes (a shard's, merged in another process) ------------------- */
static void save_live(void *ctx, const struct kn_insn *in)
{
	struct tk_buf *w = ctx;
	kn_putz(w, in->id);
	kn_putz(w, in->sim_id);
	kn_putz(w, in->thread);
	kn_putz(w, in->begin);
	kn_putv(w, in->nopen);
	for (unsigned i = 0; i < in->nopen; i++) {
		kn_putv(w, in->open[i].lane);
		kn_putv(w, in->open[i].stage);
		kn_putz(w, in->open[i].start);
	}
	kn_put_str(w, in->label, in->label_len);
}

int kn_reader_chunk_save(const struct tk_kanata_reader *r, struct tk_buf *w)
{
	const struct tk_kanata_counts *n = &r->n;
	const uint64_t v[] = { n->lines, n->commands, n->bytes, n->errors, n->warnings, n->insns,
			       n->retired, n->flushed, n->first_cycle_line, n->version };

	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		kn_putv(w, v[i]);
	kn_putz(w, n->first_cycle);
	kn_putz(w, r->delta_sum);
	kn_putz(w, r->cycle);
	kn_putv(w, (uint64_t)((r->seen_header != 0) | (r->seen_cycle_cmd != 0) << 1 | (r->seen_any_cmd != 0) << 2));
	kn_putv(w, r->nlanes);
	for (unsigned i = 0; i < r->nlanes; i++)
		kn_put_str(w, r->lanes[i].name, r->lanes[i].len);
	kn_putv(w, r->nstages);
	for (unsigned i = 0; i < r->nstages; i++) {
		kn_putv(w, r->stages[i].lane);
		kn_put_str(w, r->stages[i].name, r->stages[i].len);
	}
	kn_putv(w, r->live);
	if (kn_reader_live(r, save_live, w) < 0)
		w->err = -TK_E_NOMEM;
	kn_putv(w, r->nfrags);
	for (size_t i = 0; i < r->nfrags; i++) {
		const struct kn_frag *f = &r->frags[i];
		kn_putv(w, (uint64_t)f->c.kind);
		kn_putz(w, f->c.id);
		kn_putz(w, f->c.a);
		kn_putz(w, f->c.b);
		kn_putz(w, f->c.cycle);
		kn_putv(w, f->c.line);
		kn_putv(w, f->c.offset);
		kn_putv(w, f->lane);
		kn_putv(w, (uint64_t)(f->check_only | f->prod_ok << 1));
		kn_put_str(w, f->text, f->text_len);
	}
	/* the ids begun, in order: runs of consecutive ids */
	size_t runs = 0;
	for (size_t i = 0; i < r->ni; i++)
		runs += !i || r->ilist[i] != r->ilist[i - 1] + 1;
	kn_putv(w, runs);
	int64_t prev = 0;
	for (size_t i = 0, j; i < r->ni; i = j) {
		for (j = i + 1; j < r->ni && r->ilist[j] == r->ilist[j - 1] + 1; j++)
			;
		kn_putz(w, r->ilist[i] - prev);
		kn_putv(w, j - i);
		prev = r->ilist[j - 1] + 1;
	}
	return w->err;
}

static int load_name(struct kn_in *b, struct kn_name *k, const char *what)
{
	k->len = (uint16_t)kn_get_str(b, k->name, sizeof k->name, what);
	return b->err;
}

/* A chunk reader R (new, in chunk mode) given the state kn_reader_chunk_save wrote; at most
 * MAX_IDS ids begun (the chunk's lines). */
int kn_reader_chunk_load(struct tk_kanata_reader *r, struct kn_in *b, uint64_t max_ids)
{
	struct tk_kanata_counts *n = &r->n;
	uint64_t *v[] = { &n->lines, &n->commands, &n->bytes, &n->errors, &n->warnings, &n->insns,
			  &n->retired, &n->flushed, &n->first_cycle_line };

	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		*v[i] = kn_getv(b, "counts");
	n->version = (unsigned)kn_getv(b, "counts");
	n->first_cycle = kn_getz(b, "counts");
	r->delta_sum = kn_getz(b, "cycle");
	r->cycle = kn_getz(b, "cycle");
	uint64_t flags = kn_getv(b, "flags");
	r->seen_header = flags & 1;
	r->seen_cycle_cmd = flags >> 1 & 1;
	r->seen_any_cmd = flags >> 2 & 1;
	r->nlanes = (unsigned)kn_get_count(b, 1, KN_MAX_NAMES, "lane count");
	for (unsigned i = 0; i < r->nlanes && !b->err; i++)
		load_name(b, &r->lanes[i], "lane name");
	r->nstages = (unsigned)kn_get_count(b, 2, KN_MAX_NAMES, "stage count");
	for (unsigned i = 0; i < r->nstages && !b->err; i++) {
		uint64_t lane = kn_getv(b, "stage lane");
		if (lane >= r->nlanes)
			kn_bad(b, "stage of no lane");
		r->stages[i].lane = (uint16_t)lane;
		load_name(b, &r->stages[i], "stage name");
	}
	size_t live = kn_get_count(b, 6, max_ids, "instructions in flight");
	for (size_t i = 0; i < live && !b->err; i++) {
		int64_t id = kn_getz(b, "instruction");
		struct kn_insn *in;
		if (id < 0 || find_live(r, id)) {
			kn_bad(b, "instruction id negative or given twice");
			break;
		}
		if (!(in = insn_new(r, id)))
			return -TK_E_NOMEM;
		in->sim_id = kn_getz(b, "instruction");
		in->thread = kn_getz(b, "instruction");
		in->begin = kn_getz(b, "instruction");
		in->nopen = (uint32_t)kn_get_count(b, 3, KN_MAX_OPEN, "open stages");
		for (unsigned k = 0; k < in->nopen && !b->err; k++) {
			uint64_t lane = kn_getv(b, "open stage"), stage = kn_getv(b, "open stage");
			if (lane >= r->nlanes || stage >= r->nstages)
				kn_bad(b, "open stage of no lane or stage");
			in->open[k] = (struct kn_open){ (uint16_t)lane, (uint16_t)stage,
							 kn_getz(b, "open stage") };
		}
		in->label_len = (uint32_t)kn_get_str(b, in->label, sizeof in->label, "label");
	}
	r->nfrags = r->cap_frags = kn_get_count(b, 10, SIZE_MAX / sizeof *r->frags, "commands");
	if (r->nfrags && !b->err && !(r->frags = calloc(r->nfrags, sizeof *r->frags)))
		return -TK_E_NOMEM;
	for (size_t i = 0; i < r->nfrags && !b->err; i++) {
		struct kn_frag *f = &r->frags[i];
		uint64_t kind = kn_getv(b, "command");
		if (kind < TK_KANATA_LABEL || kind > TK_KANATA_DEP)
			kn_bad(b, "command of no kind");
		f->c.kind = (enum tk_kanata_kind)kind;
		f->c.id = kn_getz(b, "command");
		f->c.a = kn_getz(b, "command");
		f->c.b = kn_getz(b, "command");
		f->c.cycle = kn_getz(b, "command");
		f->c.line = kn_getv(b, "command");
		f->c.offset = kn_getv(b, "command");
		uint64_t lane = kn_getv(b, "command"), bits = kn_getv(b, "command");
		if ((lane >= r->nlanes && (kind == TK_KANATA_STAGE_BEGIN || kind == TK_KANATA_STAGE_END)) ||
		    lane > UINT16_MAX || bits > 3)
			kn_bad(b, "command of no lane");
		f->lane = (uint16_t)lane;
		f->check_only = bits & 1;
		f->prod_ok = bits >> 1 & 1;
		f->text_len = (uint16_t)kn_get_str(b, f->text, sizeof f->text, "command text");
		f->full_len = f->text_len;
	}
	size_t runs = kn_get_count(b, 2, max_ids, "ids");
	int64_t prev = 0;
	for (size_t i = 0; i < runs && !b->err; i++) {
		int64_t d = kn_getz(b, "ids");
		uint64_t len = kn_getv(b, "ids");
		if (d < -2 * KN_NUM_MAX || d > 2 * KN_NUM_MAX || prev + d < 0 || prev + d > KN_NUM_MAX ||
		    !len || len > max_ids - r->ni) {
			kn_bad(b, "ids out of range or more than the chunk's lines");
			break;
		}
		if (r->ni + len > r->cap_i) {
			int64_t *p = realloc(r->ilist, (r->ni + len) * sizeof *p);
			if (!p)
				return -TK_E_NOMEM;
			r->ilist = p;
			r->cap_i = r->ni + len;
		}
		for (uint64_t k = 0; k < len; k++)
			r->ilist[r->ni++] = prev + d + (int64_t)k;
		prev += d + (int64_t)len;
	}
	return b->err;
}
