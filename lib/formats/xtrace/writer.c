/* xtrace writer: instruction stream and snapshot file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats/xtrace/internal.h"

struct tk_xtrace_writer {
	struct tk_buf insn, snap;
	int has_snap;
	uint64_t off;            /* bytes written to the instruction stream */
	uint64_t next_pc;        /* PC an INST would imply */
	int force_pcinst;
	uint64_t user, total;    /* instructions so far */
	struct tk_xtrace_snap_layout lay;
	uint8_t *rec;            /* one snapshot being encoded */
};

struct tk_xtrace_writer *tk_xtrace_writer_new(int insn_fd, int snap_fd,
					      const struct tk_xtrace_writer_opts *opts, int *err)
{
	struct tk_xtrace_writer *w = calloc(1, sizeof *w);
	uint32_t vl = opts && opts->vl_bits ? opts->vl_bits : 128;
	int rc;
	if (!w) {
		*err = -TK_E_NOMEM;
		return NULL;
	}
	if ((rc = tk_xtrace_snap_layout(vl, &w->lay)) < 0) {
		free(w);
		*err = rc;
		return NULL;
	}
	w->force_pcinst = 1;
	if ((rc = tk_buf_init(&w->insn, insn_fd, 1 << 20)) < 0) {
		free(w);
		*err = rc;
		return NULL;
	}
	if (snap_fd >= 0) {
		w->has_snap = 1;
		w->rec = calloc(1, w->lay.size);
		rc = w->rec ? tk_buf_init(&w->snap, snap_fd, 1 << 16) : -TK_E_NOMEM;
		if (rc < 0) {
			tk_buf_free(&w->insn);
			free(w->rec);
			free(w);
			*err = rc;
			return NULL;
		}
		if (!opts || !opts->no_header) {
			uint8_t h[TK_XTRACE_HEADER_SIZE];
			struct tk_xtrace_header hd = { 0 };
			if (opts)
				hd = opts->header;
			tk_xtrace_header_encode(&hd, h);
			tk_buf_put(&w->snap, h, sizeof h);
		}
	}
	return w;
}

int tk_xtrace_writer_close(struct tk_xtrace_writer *w)
{
	int rc = tk_buf_flush(&w->insn), errnum = w->insn.errnum;
	if (rc >= 0 && w->insn.err)
		rc = w->insn.err;
	if (w->has_snap) {
		int r2 = tk_buf_flush(&w->snap);
		if (rc >= 0 && r2 < 0)
			rc = r2, errnum = w->snap.errnum;
		if (rc >= 0 && w->snap.err)
			rc = w->snap.err, errnum = w->snap.errnum;
		tk_buf_free(&w->snap);
	}
	tk_buf_free(&w->insn);
	free(w->rec);
	free(w);
	if (rc == -TK_E_IO)
		errno = errnum;
	return rc < 0 ? rc : 0;
}

uint64_t tk_xtrace_writer_offset(const struct tk_xtrace_writer *w)
{
	return w->off;
}

static inline void put(struct tk_xtrace_writer *w, const void *p, size_t n)
{
	tk_buf_put(&w->insn, p, n);
	w->off += n;
}

int tk_xtrace_write_insn(struct tk_xtrace_writer *w, unsigned el, uint64_t pc,
			 uint32_t opcode, int block_start)
{
	uint8_t b[13];
	if (el > 3)
		return -TK_E_INVAL;
	if (block_start || w->force_pcinst || pc != w->next_pc) {
		b[0] = (uint8_t)TK_XT_TOK_PCINST(el);
		memcpy(b + 1, &pc, 8);
		memcpy(b + 9, &opcode, 4);
		put(w, b, 13);
		w->force_pcinst = 0;
	} else {
		b[0] = (uint8_t)TK_XT_TOK_INST(el);
		memcpy(b + 1, &opcode, 4);
		put(w, b, 5);
	}
	w->next_pc = pc + 4;
	w->total++;
	if (el == 0)
		w->user++;
	return w->insn.err;
}

int tk_xtrace_write_mem(struct tk_xtrace_writer *w, int store, uint64_t addr,
			const void *value, unsigned size_log2)
{
	uint8_t b[9];
	if (size_log2 > 15)
		return -TK_E_INVAL;
	b[0] = (uint8_t)TK_XT_TOK_MEM(store != 0, size_log2);
	memcpy(b + 1, &addr, 8);
	put(w, b, 9);
	put(w, value, (size_t)1 << size_log2);
	return w->insn.err;
}

int tk_xtrace_write_value(struct tk_xtrace_writer *w, enum tk_xtrace_kind kind, uint64_t v)
{
	uint8_t b[9];
	if (kind >= TK_XT_STXR && kind <= TK_XT_TARGET_B)
		b[0] = (uint8_t)TK_XT_TOK_VAL(kind - TK_XT_STXR);
	else if (kind == TK_XT_FLAGS)
		b[0] = (uint8_t)TK_XT_TOK_MISC(3);
	else if (kind == TK_XT_TIME)
		b[0] = TK_XT_TOK_TIME;
	else
		return -TK_E_INVAL;
	memcpy(b + 1, &v, 8);
	put(w, b, 9);
	return w->insn.err;
}

int tk_xtrace_write_allgpr(struct tk_xtrace_writer *w, const uint64_t x[32])
{
	uint8_t t = (uint8_t)TK_XT_TOK_MISC(1);
	put(w, &t, 1);
	for (int i = 0; i < 32; i++) {
		uint64_t v = x[i];
		put(w, &v, 8);
	}
	return w->insn.err;
}

int tk_xtrace_write_syscall_vec(struct tk_xtrace_writer *w, const uint64_t *base_len,
				uint64_t n)
{
	uint8_t t = (uint8_t)TK_XT_TOK_MISC(4);
	if (n > 1024)
		return -TK_E_LIMIT;
	put(w, &t, 1);
	put(w, &n, 8);
	for (uint64_t i = 0; i < 2 * n; i++) {
		uint64_t v = base_len[i];
		put(w, &v, 8);
	}
	return w->insn.err;
}

int tk_xtrace_write_raw(struct tk_xtrace_writer *w, const void *p, size_t n)
{
	put(w, p, n);
	/* The PC an INST after raw bytes implies is unknown to the writer. */
	w->force_pcinst = 1;
	return w->insn.err;
}

int tk_xtrace_write_snapshot(struct tk_xtrace_writer *w, const struct tk_xtrace_snapshot *s)
{
	const struct tk_xtrace_snap_layout *l = &w->lay;
	uint8_t *r = w->rec;
	if (!w->has_snap)
		return -TK_E_BAD_STATE;
	struct tk_xtrace_snapshot c = *s;
	c.index = w->off;
	tk_xtrace_snap_encode(l, &c, r);
	tk_buf_put(&w->snap, r, l->size);
	w->force_pcinst = 1;
	return w->snap.err;
}

void tk_xtrace_header_encode(const struct tk_xtrace_header *hd, uint8_t *h)
{
	uint32_t magic = hd->magic ? hd->magic : TK_XTRACE_SNAP_MAGIC;
	uint64_t ver = hd->version ? hd->version : TK_XTRACE_SNAP_VERSION;
	memset(h, 0, TK_XTRACE_HEADER_SIZE);
	memcpy(h, &magic, 4);
	memcpy(h + 4, &hd->global_snapshot, 4);
	memcpy(h + 8, &ver, 8);
	h[16] = hd->split_type;
	h[17] = hd->stream_type;
	h[18] = hd->mem_order;
}

void tk_xtrace_snap_encode(const struct tk_xtrace_snap_layout *l,
			   const struct tk_xtrace_snapshot *s, uint8_t *r)
{
	memset(r, 0, l->size);
	uint64_t hdr[4] = { s->file_no, s->index, s->user_insns, s->total_insns };
	memcpy(r, hdr, sizeof hdr);
	memcpy(r + l->off_x, s->x, 256);
	if (s->z)
		memcpy(r + l->off_z, s->z, 32 * l->vl_bytes);
	if (s->p)
		memcpy(r + l->off_p, s->p, 16 * l->p_slot);
	if (s->ffr)
		memcpy(r + l->off_ffr, s->ffr, l->p_bytes);
	if (s->za)
		memcpy(r + l->off_za, s->za, (size_t)l->vl_bytes * l->vl_bytes);
	memcpy(r + l->off_sys, s->sys, sizeof s->sys);
	uint64_t vl = l->vl_bits;
	memcpy(r + l->off_vl, &vl, 8);
}
