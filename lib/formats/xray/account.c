/* The `llvm-xray account` table (text or CSV) from a shared-layer profile (tk_prof): per
 * function count, min, median, 90p, 99p, max and sum of call durations in seconds. The
 * statistics are tk_prof's, which take llvm-xray's percentile positions; this file only
 * lays them out the way llvm-xray users read them. */
#include <stdio.h>
#include <stdlib.h>

#include "formats/xray/internal.h"

int tk_xray_account_sort_key(const char *name)
{
	static const char *const keys[] = { "funcid", "count", "min", "med", "90p", "99p", "max",
					     "sum" };
	if (!name)
		return 0;
	for (int i = 0; i < 8; i++)
		if (!strcmp(name, keys[i]))
			return i;
	if (!strcmp(name, "median"))
		return 3;
	if (!strcmp(name, "calls"))
		return 1;
	return -1;
}

static int sort_key;   /* qsort has no context argument; set just before sorting */

static int cmp_row(const void *a, const void *b)
{
	const struct tk_prof_func *l = a, *r = b;
	uint64_t x = 0, y = 0;
	switch (sort_key) {
	case 1: x = l->ndur; y = r->ndur; break;
	case 2: x = l->dur_min; y = r->dur_min; break;
	case 3: x = l->dur_median; y = r->dur_median; break;
	case 4: x = l->dur_p90; y = r->dur_p90; break;
	case 5: x = l->dur_p99; y = r->dur_p99; break;
	case 6: x = l->dur_max; y = r->dur_max; break;
	case 7: x = l->dur_sum; y = r->dur_sum; break;
	}
	if (x != y)
		return x > y ? -1 : 1;   /* largest first */
	if (l->track != r->track)
		return l->track < r->track ? -1 : 1;
	return l->key < r->key ? -1 : l->key > r->key;
}

static void put_secs(struct tk_buf *b, uint64_t ticks, uint64_t freq, int csv)
{
	char tmp[48];
	double s = freq ? (double)ticks / (double)freq : (double)ticks;
	/* CSV in llvm-xray account's notation (%e), the table with fixed decimals */
	int n = csv ? snprintf(tmp, sizeof tmp, "%e", s) : snprintf(tmp, sizeof tmp, "%9.6f", s);
	tk_buf_put(b, tmp, (size_t)n);
}

static void put_name(struct tk_buf *b, const struct tk_xray_map *map, int32_t id)
{
	const char *nm = tk_xray_map_name(map, id);
	if (nm) {
		tk_buf_puts(b, nm);
	} else {
		tk_buf_putc(b, '#');
		tk_buf_i64(b, id);
	}
}

int tk_xray_account(struct tk_buf *out, const struct tk_prof *p, const struct tk_xray *x,
		    const struct tk_xray_map *map, const struct tk_xray_account_opts *o)
{
	struct tk_prof_func *f = NULL, *rows;
	size_t nf = 0, nr = 0;
	uint64_t freq = tk_xray_header(x)->cycle_frequency;
	int rc = tk_prof_funcs(p, o->per_thread, &f, &nf);

	if (rc < 0)
		return rc;
	rows = f;
	for (size_t i = 0; i < nf; i++)
		if (f[i].kind == TK_PROF_KEY_ID && f[i].ndur)
			rows[nr++] = f[i];
	sort_key = o->sort_key;
	if (nr)
		qsort(rows, nr, sizeof *rows, cmp_row);
	if (o->csv)
		tk_buf_puts(out, o->per_thread ?
			"thread,funcid,count,min,median,90%ile,99%ile,max,sum,function\n" :
			"funcid,count,min,median,90%ile,99%ile,max,sum,function\n");
	else
		tk_buf_printf(out, "Functions with latencies: %zu\n%s   funcid      count [      min,       med,       90p,       99p,       max]       sum  function\n",
			      nr, o->per_thread ? "   thread" : "");
	for (size_t i = 0; i < nr && (!o->top || i < o->top); i++) {
		const struct tk_prof_func *r = &rows[i];
		const struct tk_xray_thread_info *ti = tk_xray_thread(x, r->track);
		uint32_t tid = ti ? ti->tid : r->track;
		uint64_t v[6] = { r->dur_min, r->dur_median, r->dur_p90, r->dur_p99, r->dur_max,
				  r->dur_sum };
		if (o->csv) {
			if (o->per_thread)
				tk_buf_printf(out, "%u,", tid);
			tk_buf_printf(out, "%d,%llu", (int32_t)r->key, (unsigned long long)r->ndur);
			for (int k = 0; k < 6; k++) {
				tk_buf_putc(out, ',');
				put_secs(out, v[k], freq, 1);
			}
			tk_buf_putc(out, ',');
		} else {
			if (o->per_thread)
				tk_buf_printf(out, "%9u", tid);
			tk_buf_printf(out, "%9d %10llu [", (int32_t)r->key, (unsigned long long)r->ndur);
			for (int k = 0; k < 5; k++) {
				put_secs(out, v[k], freq, 0);
				if (k < 4)
					tk_buf_putc(out, ',');
			}
			tk_buf_puts(out, "] ");
			put_secs(out, v[5], freq, 0);
			tk_buf_puts(out, "  ");
		}
		put_name(out, map, (int32_t)r->key);
		tk_buf_putc(out, '\n');
	}
	free(f);
	return out->err;
}

int tk_xray_map_to_sym(const struct tk_xray_map *map, struct tk_sym *sym)
{
	for (int32_t id = 1; id <= tk_xray_map_max_id(map); id++) {
		const char *nm = tk_xray_map_name(map, id);
		uint64_t addr = tk_xray_map_addr(map, id);
		if (!nm && !addr)
			continue;
		int rc = tk_sym_set_func(sym, (uint64_t)id, nm, nm ? 0 : addr);
		if (rc < 0)
			return rc;
	}
	return 0;
}
