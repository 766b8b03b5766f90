/* The `llvm-xray account` table (text or CSV) of a profile (tk_prof): per function count,
 * min, median, 90p, 99p, max and sum of call durations in seconds. The statistics are
 * tk_prof's, which take llvm-xray's percentile positions; this file only lays them out the
 * way llvm-xray users read them. What the table names (functions, threads) and the clock
 * come from the caller, so it knows no trace format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/internal.h"

int tk_out_account_sort_key(const char *name)
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

static int cmp_row(const void *a, const void *b, void *ctx)
{
	const struct tk_prof_func *l = a, *r = b;
	uint64_t x = 0, y = 0;
	switch (*(const int *)ctx) {
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

static void put_name(struct tk_buf *b, const struct tk_out_account_opts *o, int32_t id)
{
	const char *nm = o->func_name ? o->func_name(o->ctx, id) : NULL;
	if (nm) {
		tk_buf_puts(b, nm);
	} else {
		tk_buf_putc(b, '#');
		tk_buf_i64(b, id);
	}
}

int tk_out_account(struct tk_buf *out, const struct tk_prof *p,
		   const struct tk_out_account_opts *opts)
{
	struct tk_out_account_opts oo = { .sz = sizeof oo }, *o = &oo;
	struct tk_prof_func *f = NULL, *rows;
	size_t nf = 0, nr = 0;
	int rc;

	if (opts)
		memcpy(&oo, opts, opts->sz < sizeof oo ? opts->sz : sizeof oo);
	uint64_t freq = o->ticks_per_sec;
	if ((rc = tk_prof_funcs(p, o->per_thread, &f, &nf)) < 0)
		return rc;
	rows = f;
	for (size_t i = 0; i < nf; i++)
		if (f[i].kind == TK_PROF_KEY_ID && f[i].ndur)
			rows[nr++] = f[i];
	if (nr)
		qsort_r(rows, nr, sizeof *rows, cmp_row, &o->sort_key);
	if (o->csv)
		tk_buf_puts(out, o->per_thread ?
			"thread,funcid,count,min,median,90%ile,99%ile,max,sum,function\n" :
			"funcid,count,min,median,90%ile,99%ile,max,sum,function\n");
	else
		tk_buf_printf(out, "Functions with latencies: %zu\n%s   funcid      count [      min,       med,       90p,       99p,       max]       sum  function\n",
			      nr, o->per_thread ? "   thread" : "");
	for (size_t i = 0; i < nr && (!o->top || i < o->top); i++) {
		const struct tk_prof_func *r = &rows[i];
		uint32_t tid = o->thread_id ? o->thread_id(o->ctx, r->track) : r->track;
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
		put_name(out, o, (int32_t)r->key);
		tk_buf_putc(out, '\n');
	}
	free(f);
	return out->err;
}
