/* pprof profile.proto (gzip-compressed), written by hand: one sample per call path with its
 * exclusive value, one location and function per name; with instructions counted in code
 * that has DWARF lines, a call path's own instructions are split over its function's
 * source lines, one location per line (its address and inlined calls), so that
 * `pprof -list`, `-lines` and `-disasm` point at code. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "output/internal.h"
#include "image/sym_frames.h"

/* Stacks deeper than PPROF_OUTER + PPROF_INNER frames (in tree levels, a --threads
 * thread's level included) keep that many at each end. */
enum { PPROF_OUTER = 64, PPROF_INNER = 960 };
#define PPROF_CUT_NAME "[frames left out]"

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

/* Location ids beyond the names' (a name's location has the name's id): a source line's,
 * and the rest of a split function's instructions (no line). */
#define PP_LINE_LOC (1ull << 32)
#define PP_REST_LOC (2ull << 32)
enum { PP_FRAMES = 16 };  /* inlined calls kept per location */

/* Part of a frame's own instructions that ran on one line (LINE: an index of the lines;
 * UINT32_MAX: on none). */
struct pp_cell {
	uint32_t node, line;
	uint64_t v;
};
struct pp_cells {
	struct pp_cell *v;
	size_t n, cap;
};

static int cell_add(struct pp_cells *c, uint32_t node, uint32_t line, uint64_t v)
{
	if (!v)
		return 0;
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 1024;
		struct pp_cell *nv = realloc(c->v, nc * sizeof *nv);
		if (!nv)
			return -TK_E_NOMEM;
		c->v = nv;
		c->cap = nc;
	}
	c->v[c->n++] = (struct pp_cell){ node, line, v };
	return 0;
}

static int cmp_cell(const void *a, const void *b)
{
	const struct pp_cell *x = a, *y = b;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* Which call path ran which of a function's lines is not traced (blocks are counted per
 * function's code, not per path), so its frames NODES[0..K) get the function's mix of
 * lines: line by line, each frame a share proportional to what it has left, rounded so
 * that every line's sum (INSNS[0..M), then REST on no line) and every frame's own
 * instructions stay exact. A function with many frames and lines (deep recursion) would
 * make K x M samples: its lines then fill the frames in order (K + M samples). */
static int split_lines(const struct agg *a, const uint32_t *nodes, size_t k,
		       const struct func_line *lines, uint32_t first, size_t m, uint64_t rest,
		       struct pp_cells *out)
{
	uint64_t *left = malloc(k * sizeof *left), total = 0;
	if (!left)
		return -TK_E_NOMEM;
	for (size_t j = 0; j < k; j++)
		total += left[j] = a->n[nodes[j]].excl_insns;
	int in_order = (uint64_t)k * (m + 1) > k + m + 4096;
	size_t next = 0;          /* in order: the first frame with some left */
	int rc = 0;
	for (size_t i = 0; i <= m && rc >= 0; i++) {
		uint64_t want = i < m ? lines[i].insns : rest, given = 0;
		uint32_t line = i < m ? first + (uint32_t)i : UINT32_MAX;
		if (!want)
			continue;
		if (in_order) {
			for (; given < want && rc >= 0; next += !left[next]) {
				uint64_t v = left[next] < want - given ? left[next] : want - given;
				left[next] -= v;
				given += v;
				rc = cell_add(out, nodes[next], line, v);
			}
		} else {
			/* floor shares first, then one more each, in order, where a share was
			 * rounded down (never past what a frame has: WANT <= TOTAL) */
			uint64_t *share = malloc(k * sizeof *share);
			if (!share) {
				rc = -TK_E_NOMEM;
				break;
			}
			for (size_t j = 0; j < k; j++) {
				share[j] = (uint64_t)((unsigned __int128)want * left[j] / total);
				given += share[j];
			}
			for (size_t j = 0; j < k && given < want; j++)
				if ((unsigned __int128)share[j] * total != (unsigned __int128)want * left[j]) {
					share[j]++;
					given++;
				}
			for (size_t j = 0; j < k && rc >= 0; j++) {
				left[j] -= share[j];
				rc = cell_add(out, nodes[j], line, share[j]);
			}
			free(share);
		}
		total -= want;
	}
	free(left);
	return rc;
}

static int cmp_by_name(const void *x, const void *y)
{
	const uint32_t *a = x, *b = y;   /* (name, node) pairs */
	if (a[0] != b[0])
		return a[0] < b[0] ? -1 : 1;
	return a[1] < b[1] ? -1 : a[1] > b[1];
}

/* Split the own instructions of the frames of each function with lines over its lines
 * (see split_lines) into *CELLS, sorted by node; SPLIT[name] says which functions. A
 * function whose lines count more than its frames (its code also ran in other frames)
 * keeps its frames whole. */
static int split_functions(const struct agg *a, const struct func_line *lines, size_t nlines,
			   uint8_t *split, struct pp_cells *cells)
{
	uint32_t (*byname)[2] = malloc((a->nn ? a->nn : 1) * sizeof *byname);
	size_t nb = 0;
	int rc = 0;
	if (!byname)
		return -TK_E_NOMEM;
	for (size_t i = 1; i < a->nn; i++)
		if (a->n[i].excl_insns) {
			byname[nb][0] = a->n[i].name;
			byname[nb++][1] = (uint32_t)i;
		}
	if (nb)
		qsort(byname, nb, sizeof *byname, cmp_by_name);
	uint32_t *nodes = malloc((nb ? nb : 1) * sizeof *nodes);
	if (!nodes) {
		free(byname);
		return -TK_E_NOMEM;
	}
	size_t b = 0;
	for (size_t i = 0, j; i < nlines && rc >= 0; i = j) {
		uint32_t f = lines[i].func;
		uint64_t on_lines = 0, own = 0;
		for (j = i; j < nlines && lines[j].func == f; j++)
			on_lines += lines[j].insns;
		while (b < nb && byname[b][0] < f)
			b++;
		size_t k = 0;
		for (; b < nb && byname[b][0] == f; b++) {
			nodes[k++] = byname[b][1];
			own += a->n[byname[b][1]].excl_insns;
		}
		if (!on_lines || on_lines > own)
			continue;
		split[f] = 1;
		rc = split_lines(a, nodes, k, lines + i, (uint32_t)i, j - i, own - on_lines, cells);
	}
	free(nodes);
	free(byname);
	if (rc >= 0 && cells->n)
		qsort(cells->v, cells->n, sizeof *cells->v, cmp_cell);
	return rc;
}

/* The module of ADDR, or -1. */
static int module_of(struct tk_sym *sym, int nmods, uint64_t addr)
{
	int mod = -1;
	for (int i = 0; i < nmods; i++) {
		uint64_t lo, hi;
		if (tk_sym_module(sym, i, NULL, NULL, &lo, &hi) == 0 && addr >= lo && addr < hi)
			mod = i;
	}
	return mod;
}

/* Write the sample of node I with value V (its own frame at location LEAF, then the path
 * up, as out_pprof says) into RAW. */
struct pp_stack {
	const struct agg *a;
	const uint32_t *depth, *outer;
	uint32_t cut;
	uint64_t ncut, deepest;
};

static int put_sample(struct tk_buf *raw, struct tk_buf *tmp, struct tk_buf *ids,
		      struct pp_stack *st, struct names *nm, uint32_t i, uint64_t leaf, uint64_t v)
{
	const struct agg *a = st->a;
	ids->len = 0;
	uint32_t x = i;
	if (st->depth[i] > PPROF_INNER + PPROF_OUTER) {
		if (st->cut == UINT32_MAX &&   /* its name, interned when first needed */
		    (st->cut = names_intern(nm, PPROF_CUT_NAME, strlen(PPROF_CUT_NAME))) == UINT32_MAX)
			return -TK_E_NOMEM;
		for (int k = 0; k < PPROF_INNER; k++, x = a->n[x].parent)
			pb_varint(ids, x == i ? leaf : a->n[x].name);
		pb_varint(ids, st->cut);
		x = st->outer[i];
		st->ncut++;
		if (st->depth[i] > st->deepest)
			st->deepest = st->depth[i];
	}
	for (; x != 0; x = a->n[x].parent) {
		/* a track's base level is left off the stacks above it (as in folded;
		 * with --threads it is under the thread's node) */
		uint32_t up = a->n[x].parent;
		if (x != i && (up == 0 || (a->tracks && a->n[up].parent == 0)) &&
		    !strcmp(names_str(nm, a->n[x].name), "[unknown]"))
			continue;
		pb_varint(ids, x == i ? leaf : a->n[x].name);  /* location id = name id */
	}
	tmp->len = 0;
	pb_msg(tmp, 1, ids);                                   /* location_id (packed) */
	ids->len = 0;
	pb_varint(ids, v);
	pb_msg(tmp, 2, ids);                                   /* value (packed) */
	pb_msg(raw, 2, tmp);
	return 0;
}

/* A location: ID, its mapping (module MOD, -1: none), ADDR (0: none), and its line
 * entries (FUNCS[k], LINES[k]; innermost first). */
static void put_location(struct tk_buf *raw, struct tk_buf *tmp, struct tk_buf *line,
			 uint64_t id, int mod, uint64_t addr, const uint32_t *funcs,
			 const unsigned *lines, int n)
{
	tmp->len = 0;
	pb_uint(tmp, 1, id);                                   /* id */
	if (mod >= 0)
		pb_uint(tmp, 2, (uint64_t)mod + 1);            /* mapping_id */
	if (addr)
		pb_uint(tmp, 3, addr);                         /* address */
	for (int k = 0; k < n; k++) {
		line->len = 0;
		pb_uint(line, 1, funcs[k]);                    /* function_id */
		if (lines[k])
			pb_uint(line, 2, lines[k]);            /* line */
		pb_msg(tmp, 4, line);                          /* line */
	}
	pb_msg(raw, 4, tmp);                                   /* location */
}

int out_pprof(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o)
{
	struct names nm;
	struct agg a;
	struct tk_buf raw, tmp, ids, line;
	struct tk_prof_summary s;
	struct func_line *lines = NULL;
	size_t nlines = 0;
	struct pp_cells cells = { 0 };
	uint8_t *split = NULL;
	enum tk_out_metric m = out_metric(p, o->metric);
	int rc = names_init(&nm, o->sym);
	if (rc < 0)
		return rc;
	tk_prof_summary(p, &s);
	if ((rc = agg_build(&a, p, &nm, o)) < 0)
		goto out_names;
	tk_buf_init(&raw, -1, 1 << 16);
	tk_buf_init(&tmp, -1, 4096);
	tk_buf_init(&ids, -1, 4096);
	tk_buf_init(&line, -1, 64);
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

	/* instructions per source line: a frame's own are split over its function's lines
	 * (a trace times calls, not lines: times and calls stay whole) */
	if (m == TK_OUT_M_INSNS && (rc = out_func_lines(p, &nm, &lines, &nlines)) < 0)
		goto out;
	size_t nsplit = nm.n;     /* the tree's names */
	if (!(split = calloc(nsplit, 1))) {
		rc = -TK_E_NOMEM;
		goto out;
	}
	if (nlines && (rc = split_functions(&a, lines, nlines, split, &cells)) < 0)
		goto out;

	/* samples: the path of each node with a self value, leaf first. A sample lists its
	 * whole stack, so stacks deeper than the cap keep their outermost and innermost
	 * frames with one frame for the rest between them: the output stays linear in the
	 * nodes, where 10^5 nested calls would write 5 * 10^9 frames. */
	uint32_t *depth = malloc(a.nn * sizeof *depth), *outer = malloc(a.nn * sizeof *outer);
	struct pp_stack st = { &a, depth, outer, UINT32_MAX, 0, 0 };
	if (!depth || !outer) {
		free(depth);
		free(outer);
		rc = -TK_E_NOMEM;
		goto out;
	}
	depth[0] = 0;
	outer[0] = 0;
	for (size_t i = 1; i < a.nn; i++) {   /* parents come before their children */
		depth[i] = depth[a.n[i].parent] + 1;
		outer[i] = depth[i] == PPROF_OUTER ? (uint32_t)i : outer[a.n[i].parent];
	}
	size_t ci = 0;
	for (size_t i = 1; i < a.nn; i++) {
		uint32_t name = a.n[i].name;
		uint64_t v = agg_self(&a.n[i], m);
		if (!v)
			continue;
		if (m == TK_OUT_M_TICKS && s.clock.ticks_per_second)
			v = (uint64_t)((unsigned __int128)v * 1000000000u / s.clock.ticks_per_second);
		if (!split[name]) {
			rc = put_sample(&raw, &tmp, &ids, &st, &nm, (uint32_t)i, name, v);
		} else {
			for (; rc >= 0 && ci < cells.n && cells.v[ci].node == i; ci++) {
				uint32_t l = cells.v[ci].line;
				rc = put_sample(&raw, &tmp, &ids, &st, &nm, (uint32_t)i,
						l == UINT32_MAX ? PP_REST_LOC + name : PP_LINE_LOC + l,
						cells.v[ci].v);
			}
		}
		if (rc >= 0 && raw.len >= 1 << 20 && (rc = gzip_drain(&z, b, &raw, Z_NO_FLUSH)) < 0)
			break;
	}
	free(depth);
	free(outer);
	if (rc < 0)
		goto out;
	if (st.ncut)
		tk_log(TK_LOG_WARN, "pprof: %llu stacks deeper than %d frames (the deepest %llu) keep "
		       "their outer %d and inner %d frames, the rest as one '%s' frame",
		       (unsigned long long)st.ncut, PPROF_INNER + PPROF_OUTER,
		       (unsigned long long)st.deepest, PPROF_OUTER, PPROF_INNER, PPROF_CUT_NAME);

	/* the lines' locations: the line's first address and the calls inlined there
	 * (innermost first), each naming its function (interned here, before the tables
	 * per name are made) */
	uint8_t *line_used = calloc(nlines + 1, 1);
	uint32_t *lfunc = malloc((nlines * PP_FRAMES + 1) * sizeof *lfunc);
	unsigned *lline = malloc((nlines * PP_FRAMES + 1) * sizeof *lline);
	const char **lfile = malloc((nlines * PP_FRAMES + 1) * sizeof *lfile);
	int *lnum = calloc(nlines + 1, sizeof *lnum);
	if (!line_used || !lfunc || !lline || !lfile || !lnum)
		rc = -TK_E_NOMEM;
	for (size_t k = 0; rc >= 0 && k < cells.n; k++)
		if (cells.v[k].line != UINT32_MAX)
			line_used[cells.v[k].line] = 1;
	for (size_t k = 0; rc >= 0 && k < nlines; k++) {
		struct tk_sym_frame fr[PP_FRAMES];
		if (!line_used[k])
			continue;
		int n = tk_sym_frames(nm.sym, lines[k].addr, fr, PP_FRAMES);
		if (n < 1) {              /* as the line table said */
			fr[0] = (struct tk_sym_frame){ NULL, lines[k].file, lines[k].line };
			n = 1;
		}
		for (int j = 0; j < n; j++) {
			uint32_t f = fr[j].func ? names_intern(&nm, fr[j].func, strlen(fr[j].func))
						: lines[k].func;
			if (f == UINT32_MAX)
				rc = -TK_E_NOMEM;
			lfunc[k * PP_FRAMES + j] = f;
			lline[k * PP_FRAMES + j] = fr[j].line;
			lfile[k * PP_FRAMES + j] = fr[j].file;
		}
		lnum[k] = n;
	}

	/* one location and one function per name that occurs in the tree; where the name is
	 * a function's code address, the location has it, its module (a mapping) and its
	 * source line, so that pprof can list and disassemble it; functions inlined into the
	 * lines' code have a function each */
	size_t nnames = nm.n;
	uint8_t *used = calloc(nnames + 1, 1);
	uint64_t *addr = calloc(nnames + 1, sizeof *addr);
	const char **ffile = calloc(nnames + 1, sizeof *ffile);
	int nmods = nm.sym ? tk_sym_module_count(nm.sym) : 0;
	uint8_t *mod_used = calloc((size_t)nmods + 1, 1);
	if (!used || !addr || !ffile || !mod_used)
		rc = -TK_E_NOMEM;
	if (rc < 0)
		goto out_tables;
	for (size_t i = 1; i < a.nn; i++)
		used[a.n[i].name] = 1;
	if (st.ncut)
		used[st.cut] = 1;
	for (size_t k = 0; nm.keys.slot && k <= nm.keys.mask; k++) {
		const struct keyname *kn = &nm.keys.slot[k];
		if (kn->id != UINT32_MAX && kn->kind == TK_PROF_KEY_ADDR && kn->id < nnames && !addr[kn->id])
			addr[kn->id] = kn->key;
	}
	for (size_t k = 0; k < nlines; k++) {
		int mod = lnum[k] ? module_of(nm.sym, nmods, lines[k].addr) : -1;
		if (!lnum[k])
			continue;
		for (int j = 0; j < lnum[k]; j++)
			if (!ffile[lfunc[k * PP_FRAMES + j]])
				ffile[lfunc[k * PP_FRAMES + j]] = lfile[k * PP_FRAMES + j];
		if (mod >= 0)
			mod_used[mod] = 1;
		put_location(&raw, &tmp, &line, PP_LINE_LOC + k, mod, lines[k].addr,
			     lfunc + k * PP_FRAMES, lline + k * PP_FRAMES, lnum[k]);
	}
	for (size_t id = 1; id < nnames; id++) {
		if (!used[id] && !ffile[id])
			continue;
		struct tk_sym_info si = { 0 };
		int mod = -1;
		if (addr[id] && nm.sym) {
			tk_sym_lookup(nm.sym, addr[id], &si);
			mod = module_of(nm.sym, nmods, addr[id]);
		}
		if (mod >= 0)
			mod_used[mod] = 1;
		if (used[id]) {
			unsigned ln = si.line;
			uint32_t fid = (uint32_t)id;
			put_location(&raw, &tmp, &line, id, mod, addr[id], &fid, &ln, 1);
			if (id < nsplit && split[id]) {  /* its instructions on no line */
				ln = 0;
				put_location(&raw, &tmp, &line, PP_REST_LOC + id, mod, addr[id],
					     &fid, &ln, 1);
			}
		}
		const char *fname = si.file ? si.file : ffile[id];
		uint32_t file = fname ? names_intern(&nm, fname, strlen(fname)) : 0;
		if (file == UINT32_MAX)
			file = 0;
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
out_tables:
	free(used);
	free(addr);
	free(ffile);
	free(mod_used);
	free(line_used);
	free(lfunc);
	free(lline);
	free(lfile);
	free(lnum);
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
	rc = raw.err ? raw.err : tmp.err ? tmp.err : ids.err ? ids.err : line.err;
	if (rc >= 0)
		rc = gzip_drain(&z, b, &raw, Z_FINISH);
out:
	deflateEnd(&z);
out_z:
	free(lines);
	free(cells.v);
	free(split);
	tk_buf_free(&line);
	tk_buf_free(&raw);
	tk_buf_free(&tmp);
	tk_buf_free(&ids);
	agg_free(&a);
out_names:
	names_free(&nm);
	return rc;
}
