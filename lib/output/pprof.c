/* pprof profile.proto (gzip-compressed), written by hand: one sample per call path with its
 * exclusive value, one location and function per name. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "output/internal.h"

static void pb_varint(struct tk_buf *b, uint64_t v)
{
	if (tk_buf_reserve(b, 10) < 0)
		return;
	while (v >= 0x80) {
		b->data[b->len++] = (char)(v | 0x80);
		v >>= 7;
	}
	b->data[b->len++] = (char)v;
}
static void pb_tag(struct tk_buf *b, unsigned field, unsigned wire)
{
	pb_varint(b, (uint64_t)field << 3 | wire);
}
static void pb_uint(struct tk_buf *b, unsigned field, uint64_t v)
{
	pb_tag(b, field, 0);
	pb_varint(b, v);
}
static void pb_msg(struct tk_buf *b, unsigned field, const struct tk_buf *m)
{
	pb_tag(b, field, 2);
	pb_varint(b, m->len);
	tk_buf_put(b, m->data, m->len);
}

static void value_type(struct tk_buf *out, struct tk_buf *tmp, unsigned field, uint32_t type, uint32_t unit)
{
	tmp->len = 0;
	pb_uint(tmp, 1, type);
	pb_uint(tmp, 2, unit);
	pb_msg(out, field, tmp);
}

/* Compress what RAW holds into B and empty RAW: the profile is written in pieces, so that
 * memory stays O(names), not O(paths x depth) for the samples. FLUSH is Z_NO_FLUSH, or
 * Z_FINISH for the last piece. */
static int gzip_drain(z_stream *z, struct tk_buf *b, struct tk_buf *raw, int flush)
{
	if (raw->err)
		return raw->err;
	z->next_in = (Bytef *)raw->data;
	z->avail_in = (uInt)raw->len;
	int zr;
	do {
		if (tk_buf_reserve(b, 65536) < 0)
			return b->err;
		size_t room = b->cap - b->len;
		if (room > 1u << 30)
			room = 1u << 30;          /* avail_out is an unsigned int */
		z->next_out = (Bytef *)b->data + b->len;
		z->avail_out = (uInt)room;
		zr = deflate(z, flush);
		b->len += room - z->avail_out;
	} while (flush == Z_FINISH ? zr == Z_OK || zr == Z_BUF_ERROR
				   : zr == Z_OK && (z->avail_in || z->avail_out == 0));
	raw->len = 0;
	if (flush == Z_FINISH ? zr != Z_STREAM_END : zr != Z_OK && zr != Z_BUF_ERROR)
		return b->err ? b->err : -TK_E_INTERNAL;
	return b->err;
}

int out_pprof(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o)
{
	struct names nm;
	struct agg a;
	struct tk_buf raw, tmp, ids;
	struct tk_prof_summary s;
	enum tk_out_metric m = out_metric(p, o->metric);
	int rc = names_init(&nm, o->sym);
	if (rc < 0)
		return rc;
	tk_prof_summary(p, &s);
	if ((rc = agg_build(&a, p, &nm, out_track_label(o))) < 0)
		goto out_names;
	tk_buf_init(&raw, -1, 1 << 16);
	tk_buf_init(&tmp, -1, 4096);
	tk_buf_init(&ids, -1, 4096);
	z_stream z;
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		rc = -TK_E_NOMEM;
		goto out_z;
	}

	const char *type = m == TK_OUT_M_INSNS ? "instructions" : m == TK_OUT_M_TICKS ? "time" : "calls";
	const char *unit = m == TK_OUT_M_TICKS ? (s.clock.ticks_per_second ? "nanoseconds" : "ticks") : "count";
	uint32_t t_id = names_intern(&nm, type, strlen(type));
	uint32_t u_id = names_intern(&nm, unit, strlen(unit));
	if (t_id == UINT32_MAX || u_id == UINT32_MAX) {
		rc = -TK_E_NOMEM;
		goto out;
	}
	value_type(&raw, &tmp, 1, t_id, u_id);                 /* sample_type */

	/* samples: the path of each node with a self value, leaf first */
	for (size_t i = 1; i < a.nn; i++) {
		uint64_t v = agg_self(&a.n[i], m);
		if (!v)
			continue;
		if (m == TK_OUT_M_TICKS && s.clock.ticks_per_second)
			v = (uint64_t)((unsigned __int128)v * 1000000000u / s.clock.ticks_per_second);
		ids.len = 0;
		for (uint32_t x = (uint32_t)i; x != 0; x = a.n[x].parent) {
			/* a track's base level is left off the stacks above it (as in folded;
			 * with --threads it is under the thread's node) */
			uint32_t up = a.n[x].parent;
			if (x != i && (up == 0 || (a.tracks && a.n[up].parent == 0)) &&
			    !strcmp(names_str(&nm, a.n[x].name), "[unknown]"))
				continue;
			pb_varint(&ids, a.n[x].name);                 /* location id = name id */
		}
		tmp.len = 0;
		pb_msg(&tmp, 1, &ids);                                /* location_id (packed) */
		ids.len = 0;
		pb_varint(&ids, v);
		pb_msg(&tmp, 2, &ids);                                /* value (packed) */
		pb_msg(&raw, 2, &tmp);
		if (raw.len >= 1 << 20 && (rc = gzip_drain(&z, b, &raw, Z_NO_FLUSH)) < 0)
			goto out;
	}
	/* one location and one function per name that occurs in the tree; where the name is
	 * a function's code address, the location has it, its module (a mapping) and its
	 * source line, so that pprof can list and disassemble it */
	size_t nnames = nm.n;
	uint8_t *used = calloc(nnames + 1, 1);
	uint64_t *addr = calloc(nnames + 1, sizeof *addr);
	int nmods = nm.sym ? tk_sym_module_count(nm.sym) : 0;
	uint8_t *mod_used = calloc((size_t)nmods + 1, 1);
	if (!used || !addr || !mod_used) {
		free(used);
		free(addr);
		free(mod_used);
		rc = -TK_E_NOMEM;
		goto out;
	}
	for (size_t i = 1; i < a.nn; i++)
		used[a.n[i].name] = 1;
	for (size_t k = 0; nm.keys && k <= nm.keys_mask; k++)
		if (nm.keys[k].id != UINT32_MAX && nm.keys[k].kind == TK_PROF_KEY_ADDR &&
		    nm.keys[k].id < nnames && !addr[nm.keys[k].id])
			addr[nm.keys[k].id] = nm.keys[k].key;
	for (size_t id = 1; id < nnames; id++) {
		if (!used[id])
			continue;
		struct tk_sym_info si = { 0 };
		int mod = -1;
		if (addr[id] && nm.sym) {
			tk_sym_lookup(nm.sym, addr[id], &si);
			for (int i = 0; i < nmods; i++) {
				uint64_t lo, hi;
				if (tk_sym_module(nm.sym, i, NULL, NULL, &lo, &hi) == 0 &&
				    addr[id] >= lo && addr[id] < hi)
					mod = i;
			}
		}
		uint32_t file = si.file ? names_intern(&nm, si.file, strlen(si.file)) : 0;
		if (file == UINT32_MAX)
			file = 0;
		struct tk_buf line;
		tk_buf_init(&line, -1, 64);
		pb_uint(&line, 1, id);                                /* function_id */
		if (si.line)
			pb_uint(&line, 2, si.line);                   /* line */
		tmp.len = 0;
		pb_uint(&tmp, 1, id);                                 /* id */
		if (mod >= 0) {
			pb_uint(&tmp, 2, (uint64_t)mod + 1);          /* mapping_id */
			mod_used[mod] = 1;
		}
		if (addr[id])
			pb_uint(&tmp, 3, addr[id]);                   /* address */
		pb_msg(&tmp, 4, &line);                               /* line */
		pb_msg(&raw, 4, &tmp);                                /* location */
		tk_buf_free(&line);
		tmp.len = 0;
		pb_uint(&tmp, 1, id);                                 /* id */
		pb_uint(&tmp, 2, id);                                 /* name */
		pb_uint(&tmp, 3, id);                                 /* system_name */
		if (file)
			pb_uint(&tmp, 4, file);                       /* filename */
		if (si.line)
			pb_uint(&tmp, 5, si.line);                    /* start_line */
		pb_msg(&raw, 5, &tmp);                                /* function */
	}
	/* the modules the locations are in: path, build-id, run-time range */
	for (int i = 0; i < nmods; i++) {
		const char *path;
		uint64_t lo, hi;
		char bid[256];
		if (!mod_used[i] || tk_sym_module(nm.sym, i, &path, NULL, &lo, &hi) < 0)
			continue;
		tk_sym_build_id(nm.sym, i, bid, sizeof bid);
		uint32_t fn = names_intern(&nm, path, strlen(path));
		uint32_t bi = bid[0] ? names_intern(&nm, bid, strlen(bid)) : 0;
		if (fn == UINT32_MAX || bi == UINT32_MAX) {
			rc = -TK_E_NOMEM;
			break;
		}
		tmp.len = 0;
		pb_uint(&tmp, 1, (uint64_t)i + 1);                    /* id */
		pb_uint(&tmp, 2, lo);                                 /* memory_start */
		pb_uint(&tmp, 3, hi);                                 /* memory_limit */
		/* file_offset 0: a module's range starts at its first segment, at offset 0 */
		pb_uint(&tmp, 5, fn);                                 /* filename */
		if (bi)
			pb_uint(&tmp, 6, bi);                         /* build_id */
		pb_uint(&tmp, 7, 1);                                  /* has_functions */
		pb_msg(&raw, 3, &tmp);                                /* mapping */
	}
	free(used);
	free(addr);
	free(mod_used);
	if (rc < 0)
		goto out;
	for (size_t id = 0; id < nm.n; id++) {                        /* string_table */
		const char *str = names_str(&nm, (uint32_t)id);
		size_t len = strlen(str);
		pb_tag(&raw, 6, 2);
		pb_varint(&raw, len);
		tk_buf_put(&raw, str, len);
	}
	if (m == TK_OUT_M_TICKS && s.clock.ticks_per_second && s.time_first != TK_TIME_NONE)
		pb_uint(&raw, 10, (uint64_t)((unsigned __int128)(s.time_last - s.time_first) * 1000000000u /
					     s.clock.ticks_per_second)); /* duration_nanos */
	value_type(&raw, &tmp, 11, t_id, u_id);                /* period_type */
	pb_uint(&raw, 12, 1);                                  /* period */
	rc = raw.err ? raw.err : tmp.err ? tmp.err : ids.err;
	if (rc >= 0)
		rc = gzip_drain(&z, b, &raw, Z_FINISH);
out:
	deflateEnd(&z);
out_z:
	tk_buf_free(&raw);
	tk_buf_free(&tmp);
	tk_buf_free(&ids);
	agg_free(&a);
out_names:
	names_free(&nm);
	return rc;
}
