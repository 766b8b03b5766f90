/* xtrace snapshot files and the chunked view of a whole trace. */
#include <stdlib.h>

#include "formats/xtrace/internal.h"

static const char *const sysreg_names[TK_XTRACE_NSYSREG] = {
	"fpcr", "fpsr", "nzcv", "tpidr_el0", "tpidrro_el0", "ttbr0_el1", "elr_el1", "spsr_el1",
	"esr_el1", "tpidr_el1", "daif",
};

const char *tk_xtrace_sysreg_name(unsigned i)
{
	return i < TK_XTRACE_NSYSREG ? sysreg_names[i] : "?";
}

static uint32_t round16(uint32_t v)
{
	return (v + 15) & ~15u;
}

int tk_xtrace_snap_layout(uint32_t vl_bits, struct tk_xtrace_snap_layout *l)
{
	if (vl_bits < 128 || vl_bits > 2048 || vl_bits % 128)
		return -TK_E_INVAL;
	l->vl_bits = vl_bits;
	l->vl_bytes = vl_bits / 8;
	l->p_bytes = vl_bits / 64;     /* one predicate bit per vector byte */
	l->p_slot = round16(l->p_bytes);
	l->off_x = 32;
	l->off_z = l->off_x + 32 * 8;  /* 288: already 16-aligned */
	l->off_p = l->off_z + 32 * l->vl_bytes;
	l->off_ffr = l->off_p + 16 * l->p_slot;
	l->off_za = l->off_ffr + l->p_slot;
	l->off_sys = round16(l->off_za + l->vl_bytes * l->vl_bytes);
	l->off_vl = l->off_sys + TK_XTRACE_NSYSREG * 8;
	l->size = l->off_vl + 8;
	return 0;
}

struct tk_xtrace_snapfile {
	const uint8_t *p;
	size_t n, base, count, trailing;
	int has_header;
	struct tk_xtrace_header hdr;
	struct tk_xtrace_snap_layout lay;
};

struct tk_xtrace_snapfile *tk_xtrace_snapfile_new(const uint8_t *p, size_t n, int *err)
{
	struct tk_xtrace_snapfile *sf = calloc(1, sizeof *sf);
	if (!sf) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	sf->p = p;
	sf->n = n;
	if (n >= TK_XTRACE_HEADER_SIZE && tk_le32(p) == TK_XTRACE_SNAP_MAGIC) {
		sf->has_header = 1;
		sf->base = TK_XTRACE_HEADER_SIZE;
		sf->hdr.magic = tk_le32(p);
		sf->hdr.global_snapshot = tk_le32(p + 4);
		sf->hdr.version = tk_le64(p + 8);
		sf->hdr.split_type = p[16];
		sf->hdr.stream_type = p[17];
		sf->hdr.mem_order = p[18];
		if (sf->hdr.version != TK_XTRACE_SNAP_VERSION)
			tk_log(TK_LOG_WARN, "offset 0x8: snapshot format version %llu, tracekit "
			       "knows version %d; reading it as version %d",
			       (unsigned long long)sf->hdr.version, TK_XTRACE_SNAP_VERSION,
			       TK_XTRACE_SNAP_VERSION);
	}
	if (n == sf->base) {
		/* A header and no snapshots: valid, vector length unknown. */
		tk_xtrace_snap_layout(128, &sf->lay);
		return sf;
	}
	/* The vector length is the last field of each snapshot: take the length whose layout
	 * puts a matching value in the most snapshots, so that damage to one snapshot (even
	 * the first) does not lose the others. */
	size_t best = 0;
	for (uint32_t vl = 128; vl <= 2048; vl += 128) {
		struct tk_xtrace_snap_layout l;
		tk_xtrace_snap_layout(vl, &l);
		if (n - sf->base < l.size)
			break;
		size_t count = (n - sf->base) / l.size, hits = 0;
		for (size_t i = 0; i < count; i++)
			hits += tk_le64(p + sf->base + i * l.size + l.off_vl) == vl;
		if (hits > best) {
			best = hits;
			sf->lay = l;
			sf->count = count;
			sf->trailing = (n - sf->base) % l.size;
		}
	}
	if (best)
		return sf;
	free(sf);
	*err = -TK_E_BAD_FORMAT;
	return NULL;
}

int tk_xtrace_snapfile_intact(const struct tk_xtrace_snapfile *sf, size_t i)
{
	return i < sf->count &&
	       tk_le64(sf->p + sf->base + i * sf->lay.size + sf->lay.off_vl) == sf->lay.vl_bits;
}

uint64_t tk_xtrace_snapfile_interval(const struct tk_xtrace_snapfile *sf)
{
	int total = sf->has_header && sf->hdr.split_type;
	uint64_t prev = 0;
	int have = 0;
	for (size_t i = 0; i < sf->count; i++) {
		struct tk_xtrace_snapshot s;
		if (!tk_xtrace_snapfile_intact(sf, i))
			continue;
		tk_xtrace_snapfile_get(sf, i, &s);
		uint64_t v = total ? s.total_insns : s.user_insns;
		if (have)
			return v > prev ? v - prev : 0;
		prev = v;
		have = 1;
	}
	return 0;
}

void tk_xtrace_snapfile_free(struct tk_xtrace_snapfile *sf)
{
	free(sf);
}

int tk_xtrace_snapfile_has_header(const struct tk_xtrace_snapfile *sf)
{
	return sf->has_header;
}

const struct tk_xtrace_header *tk_xtrace_snapfile_header(const struct tk_xtrace_snapfile *sf)
{
	return sf->has_header ? &sf->hdr : NULL;
}

const struct tk_xtrace_snap_layout *tk_xtrace_snapfile_layout(const struct tk_xtrace_snapfile *sf)
{
	return &sf->lay;
}

size_t tk_xtrace_snapfile_count(const struct tk_xtrace_snapfile *sf)
{
	return sf->count;
}

size_t tk_xtrace_snapfile_trailing(const struct tk_xtrace_snapfile *sf)
{
	return sf->trailing;
}

int tk_xtrace_snapfile_get(const struct tk_xtrace_snapfile *sf, size_t i,
			   struct tk_xtrace_snapshot *s)
{
	if (i >= sf->count)
		return -TK_E_INVAL;
	const struct tk_xtrace_snap_layout *l = &sf->lay;
	size_t off = sf->base + i * l->size;
	const uint8_t *q = sf->p + off;
	s->offset = off;
	s->file_no = tk_le64(q);
	s->index = tk_le64(q + 8);
	s->user_insns = tk_le64(q + 16);
	s->total_insns = tk_le64(q + 24);
	for (int r = 0; r < 32; r++)
		s->x[r] = tk_le64(q + l->off_x + 8 * r);
	s->z = q + l->off_z;
	s->p = q + l->off_p;
	s->ffr = q + l->off_ffr;
	s->za = q + l->off_za;
	for (int r = 0; r < TK_XTRACE_NSYSREG; r++)
		s->sys[r] = tk_le64(q + l->off_sys + 8 * r);
	s->vl_bits = tk_le64(q + l->off_vl);
	return 0;
}

/* ---- the whole trace ----------------------------------------------------------------- */
struct xt_chunk {
	size_t begin, snap;
};

struct tk_xtrace {
	const uint8_t *p;
	size_t n;
	struct tk_xtrace_snapfile *sf;
	struct xt_chunk *chunks;
	size_t nchunks;
	struct tk_gap_stats gaps;
};

struct tk_xtrace *tk_xtrace_new(const uint8_t *insn, size_t n, const uint8_t *snap,
				size_t sn, int *err)
{
	struct tk_xtrace *t = calloc(1, sizeof *t);
	if (!t) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	t->p = insn;
	t->n = insn ? n : 0;
	if (snap) {
		t->sf = tk_xtrace_snapfile_new(snap, sn, err);
		if (!t->sf) {
			free(t);
			return NULL;
		}
		if (t->sf->trailing) {
			uint64_t at = t->sf->base + t->sf->count * t->sf->lay.size;
			tk_log(TK_LOG_ERROR, "snapshot file: offset 0x%llx: %zu trailing bytes "
			       "do not make a whole snapshot (%u bytes at vector length %u)",
			       (unsigned long long)at, t->sf->trailing, t->sf->lay.size,
			       t->sf->lay.vl_bits);
			tk_gap_stats_add(&t->gaps, at, t->sf->trailing);
		}
	}
	size_t ns = t->sf ? t->sf->count : 0;
	t->chunks = malloc((ns + 1) * sizeof *t->chunks);
	if (!t->chunks) {
		tk_xtrace_free(t);
		*err = -TK_E_NOMEM;
		return NULL;
	}
	t->chunks[0] = (struct xt_chunk){ 0, SIZE_MAX };
	t->nchunks = 1;
	uint64_t prev_user = 0, prev_total = 0;
	for (size_t i = 0; i < ns; i++) {
		struct tk_xtrace_snapshot s;
		tk_xtrace_snapfile_get(t->sf, i, &s);
		if (s.vl_bits != t->sf->lay.vl_bits) {
			/* the instruction stream needs no snapshot: decode on without it */
			tk_log(TK_LOG_ERROR, "snapshot file: offset 0x%llx: snapshot %zu is damaged "
			       "(vector length field %llu, the others have %u); dropped",
			       (unsigned long long)(s.offset + t->sf->lay.off_vl), i,
			       (unsigned long long)s.vl_bits, t->sf->lay.vl_bits);
			tk_gap_stats_add(&t->gaps, s.offset, t->sf->lay.size);
			continue;
		}
		if (s.user_insns < prev_user || s.total_insns < prev_total ||
		    s.user_insns > s.total_insns)
			tk_log(TK_LOG_WARN, "snapshot file: offset 0x%llx: snapshot %zu: "
			       "instruction counts %llu user / %llu total do not follow the "
			       "previous snapshot", (unsigned long long)(s.offset + 16), i,
			       (unsigned long long)s.user_insns, (unsigned long long)s.total_insns);
		prev_user = s.user_insns;
		prev_total = s.total_insns;
		if (!insn)
			continue;
		if (s.file_no != 0) {
			tk_log(TK_LOG_WARN, "snapshot file: offset 0x%llx: snapshot %zu refers to "
			       "instruction file %llu; only file 0 is open, not used as a sync point",
			       (unsigned long long)s.offset, i, (unsigned long long)s.file_no);
			continue;
		}
		if (s.index >= n) {
			/* The seed puts a snapshot before its first instruction, so a position
			 * at (or past) the end means the instruction file was cut. */
			tk_log(TK_LOG_ERROR, "snapshot file: offset 0x%llx: snapshot %zu points "
			       "to offset 0x%llx, past the end of the instruction file (0x%zx)",
			       (unsigned long long)(s.offset + 8), i, (unsigned long long)s.index, n);
			tk_gap_stats_add(&t->gaps, s.offset + 8, 0);
			continue;
		}
		if (s.index <= t->chunks[t->nchunks - 1].begin && t->nchunks > 1) {
			tk_log(TK_LOG_WARN, "snapshot file: offset 0x%llx: snapshot %zu position "
			       "0x%llx is not after the previous one; not used as a sync point",
			       (unsigned long long)(s.offset + 8), i, (unsigned long long)s.index);
			continue;
		}
		if ((insn[s.index] & 0x3f) != 0x09) {
			tk_log(TK_LOG_WARN, "snapshot file: offset 0x%llx: snapshot %zu position "
			       "0x%llx does not hold a PCINST (token 0x%02x); not used as a sync point",
			       (unsigned long long)(s.offset + 8), i, (unsigned long long)s.index,
			       insn[s.index]);
			continue;
		}
		if (s.index == 0) {
			t->chunks[0].snap = i;
			continue;
		}
		t->chunks[t->nchunks++] = (struct xt_chunk){ (size_t)s.index, i };
	}
	return t;
}

void tk_xtrace_free(struct tk_xtrace *t)
{
	if (!t)
		return;
	tk_xtrace_snapfile_free(t->sf);
	free(t->chunks);
	free(t);
}

const struct tk_xtrace_snapfile *tk_xtrace_snapfile(const struct tk_xtrace *t)
{
	return t->sf;
}

const struct tk_gap_stats *tk_xtrace_open_gaps(const struct tk_xtrace *t)
{
	return &t->gaps;
}

size_t tk_xtrace_nchunks(const struct tk_xtrace *t)
{
	return t->nchunks;
}

void tk_xtrace_chunk(const struct tk_xtrace *t, size_t i, size_t *begin, size_t *end)
{
	*begin = t->chunks[i].begin;
	*end = i + 1 < t->nchunks ? t->chunks[i + 1].begin : t->n;
}

size_t tk_xtrace_chunk_snapshot(const struct tk_xtrace *t, size_t i)
{
	return t->chunks[i].snap;
}

const uint8_t *xt_data(const struct tk_xtrace *t, size_t *n)
{
	*n = t->n;
	return t->p;
}
