/* Statistics as text, JSON or CSV: Kanata pipeline statistics, the instruction-trace
 * statistics of Intel PT (and branch traces) and of xtrace. Text tables are aligned as
 * the xtrace sections are; JSON members and CSV lines carry the same numbers. */
#include <stdio.h>
#include <string.h>

#include "tracekit/ipt_flow.h"
#include "tracekit/kanata.h"
#include "tracekit/out.h"
#include "tracekit/xtrace.h"

#include "internal.h"

/* v / d with 3 decimals */
static void put_ratio(struct tk_buf *b, uint64_t v, uint64_t d)
{
	if (!d) {
		tk_buf_puts(b, "0.000");
		return;
	}
	tk_buf_fixed(b, (int64_t)((v * 1000 + d / 2) / d), 3);
}

static void put_mean(struct tk_buf *b, const struct tk_kanata_latency *l)
{
	put_ratio(b, l->sum, l->count);
}

static void put_pad(struct tk_buf *b, const char *s, size_t w)
{
	size_t n = strlen(s);
	tk_buf_puts(b, s);
	while (n++ < w)
		tk_buf_putc(b, ' ');
}

static void put_num_col(struct tk_buf *b, uint64_t v, size_t w)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
	for (int i = n; i < (int)w; i++)
		tk_buf_putc(b, ' ');
	tk_buf_puts(b, tmp);
}

static void kanata_text(struct tk_buf *b, const char *file, const struct tk_kanata_stats *st,
			uint64_t window)
{
	const struct tk_kanata_counts *c = &st->counts;
	uint64_t done = c->retired + c->flushed;

	if (st->converted_from)
		tk_buf_printf(b, "%s: %s log, read as Kanata\n", TK_TEXT(file), st->converted_from);
	else
		tk_buf_printf(b, "%s: Kanata pipeline log, version %u\n", TK_TEXT(file), c->version);
	tk_buf_printf(b, "instructions:  %llu (retired %llu, flushed %llu, in flight at end %llu)\n",
		      (unsigned long long)c->insns, (unsigned long long)c->retired,
		      (unsigned long long)c->flushed, (unsigned long long)c->in_flight);
	tk_buf_puts(b, "flush rate:    ");
	put_ratio(b, c->flushed * 100, done);
	tk_buf_puts(b, "% of finished instructions\n");
	tk_buf_printf(b, "cycles:        %llu (cycle %lld to %lld; C= honoured)\n",
		      (unsigned long long)st->cycles, (long long)c->first_cycle, (long long)c->last_cycle);
	tk_buf_puts(b, "IPC:           ");
	put_ratio(b, c->retired, st->cycles);
	tk_buf_puts(b, " (retired / cycles)\n");
	tk_buf_puts(b, "Konata IPC:    ");
	put_ratio(b, st->konata_last_rid, st->konata_last_cycle);
	tk_buf_printf(b, " (last retire id %llu / last cycle %llu, C= ignored)\n",
		      (unsigned long long)st->konata_last_rid, (unsigned long long)st->konata_last_cycle);
	tk_buf_puts(b, "latency I->R:  mean ");
	put_mean(b, &st->insn_lat);
	tk_buf_printf(b, ", p50 %llu, p99 %llu, max %llu cycles (retired instructions)\n",
		      (unsigned long long)st->insn_lat.p50, (unsigned long long)st->insn_lat.p99,
		      (unsigned long long)st->insn_lat.max);
	tk_buf_printf(b, "stall cycles:  %llu (lane 1, summed over instructions)\n",
		      (unsigned long long)st->stall_cycles);
	tk_buf_printf(b, "lines:         %llu (%llu skipped)\n", (unsigned long long)c->lines,
		      (unsigned long long)c->errors);

	tk_buf_puts(b, "\nthread      insns    retired    flushed\n");
	for (size_t i = 0; i < st->nthreads; i++) {
		const struct tk_kanata_thread_stats *t = &st->threads[i];
		char id[32];
		snprintf(id, sizeof id, "%lld", (long long)t->thread);
		put_pad(b, id, 6);
		put_num_col(b, t->insns, 11);
		put_num_col(b, t->retired, 11);
		put_num_col(b, t->flushed, 11);
		tk_buf_putc(b, '\n');
	}

	tk_buf_puts(b, "\nlane stage        count  occupancy       mean    p50    p99    max\n");
	for (size_t i = 0; i < st->nstages; i++) {
		const struct tk_kanata_stage_stats *s = &st->stages[i];
		put_pad(b, s->lane, 5);
		put_pad(b, s->stage, 8);
		put_num_col(b, s->lat.count, 10);
		tk_buf_puts(b, "      ");
		put_ratio(b, s->occupancy, st->cycles);
		tk_buf_puts(b, "  ");
		char tmp[32];
		struct tk_buf m;
		tk_buf_init(&m, -1, 32);
		put_mean(&m, &s->lat);
		snprintf(tmp, sizeof tmp, "%9.*s", (int)m.len, m.data);
		tk_buf_free(&m);
		tk_buf_puts(b, tmp);
		put_num_col(b, s->lat.p50, 7);
		put_num_col(b, s->lat.p99, 7);
		put_num_col(b, s->lat.max, 7);
		tk_buf_putc(b, '\n');
	}
	tk_buf_puts(b, "(occupancy: instructions in the stage per cycle; latencies in cycles)\n");

	if (window) {
		tk_buf_printf(b, "\nIPC per %llu cycles:\nstart_cycle,retired,ipc\n", (unsigned long long)window);
		for (size_t i = 0; i < st->nwindows; i++) {
			tk_buf_i64(b, c->first_cycle + (int64_t)(i * window));
			tk_buf_putc(b, ',');
			tk_buf_u64(b, st->window_retired[i]);
			tk_buf_putc(b, ',');
			put_ratio(b, st->window_retired[i], window);
			tk_buf_putc(b, '\n');
		}
	}
	if (st->nslow) {
		tk_buf_puts(b, "\nslowest retired instructions:\n      id  thread   begin     end  cycles  label\n");
		for (size_t i = 0; i < st->nslow; i++) {
			const struct tk_kanata_slow *s = &st->slow[i];
			tk_buf_printf(b, "%8lld %7lld %7lld %7lld %7lld  ", (long long)s->id,
				      (long long)s->thread, (long long)s->begin, (long long)s->end,
				      (long long)(s->end - s->begin));
			tk_buf_text(b, s->label, strlen(s->label));
			tk_buf_putc(b, '\n');
		}
	}
}

static void json_lat(struct tk_buf *b, const struct tk_kanata_latency *l)
{
	tk_buf_printf(b, "{\"count\": %llu, \"mean\": ", (unsigned long long)l->count);
	put_mean(b, l);
	tk_buf_printf(b, ", \"p50\": %llu, \"p99\": %llu, \"max\": %llu}", (unsigned long long)l->p50,
		      (unsigned long long)l->p99, (unsigned long long)l->max);
}

static void kanata_json(struct tk_buf *b, const char *file, const struct tk_kanata_stats *st,
			uint64_t window)
{
	const struct tk_kanata_counts *c = &st->counts;

	tk_buf_puts(b, "{\"file\": ");
	tk_buf_json_str(b, file, strlen(file));
	if (st->converted_from)
		tk_buf_printf(b, ", \"format\": \"%s\", \"read_as\": \"kanata\",\n", st->converted_from);
	else
		tk_buf_printf(b, ", \"format\": \"kanata\", \"version\": %u,\n", c->version);
	tk_buf_printf(b, " \"instructions\": %llu, \"retired\": %llu, \"flushed\": %llu, "
		      "\"in_flight\": %llu,\n", (unsigned long long)c->insns,
		      (unsigned long long)c->retired, (unsigned long long)c->flushed,
		      (unsigned long long)c->in_flight);
	tk_buf_printf(b, " \"first_cycle\": %lld, \"last_cycle\": %lld, \"cycles\": %llu, \"ipc\": ",
		      (long long)c->first_cycle, (long long)c->last_cycle, (unsigned long long)st->cycles);
	put_ratio(b, c->retired, st->cycles);
	tk_buf_puts(b, ", \"ipc_convention\": \"retired / (last cycle - first cycle), C= honoured\",\n");
	tk_buf_printf(b, " \"konata\": {\"last_retire_id\": %llu, \"last_cycle\": %llu, \"ipc\": ",
		      (unsigned long long)st->konata_last_rid, (unsigned long long)st->konata_last_cycle);
	put_ratio(b, st->konata_last_rid, st->konata_last_cycle);
	tk_buf_puts(b, "},\n \"flush_rate\": ");
	put_ratio(b, c->flushed, c->retired + c->flushed);
	tk_buf_printf(b, ", \"stall_cycles\": %llu, \"lines\": %llu, \"skipped_lines\": %llu, "
		      "\"warnings\": %llu,\n \"latency\": ", (unsigned long long)st->stall_cycles,
		      (unsigned long long)c->lines, (unsigned long long)c->errors,
		      (unsigned long long)c->warnings);
	json_lat(b, &st->insn_lat);
	tk_buf_puts(b, ",\n \"threads\": [");
	for (size_t i = 0; i < st->nthreads; i++) {
		const struct tk_kanata_thread_stats *t = &st->threads[i];
		tk_buf_printf(b, "%s{\"thread\": %lld, \"instructions\": %llu, \"retired\": %llu, "
			      "\"flushed\": %llu}", i ? ", " : "", (long long)t->thread,
			      (unsigned long long)t->insns, (unsigned long long)t->retired,
			      (unsigned long long)t->flushed);
	}
	tk_buf_puts(b, "],\n \"stages\": [");
	for (size_t i = 0; i < st->nstages; i++) {
		const struct tk_kanata_stage_stats *s = &st->stages[i];
		tk_buf_puts(b, i ? ",\n  {\"lane\": " : "\n  {\"lane\": ");
		tk_buf_json_str(b, s->lane, strlen(s->lane));
		tk_buf_puts(b, ", \"stage\": ");
		tk_buf_json_str(b, s->stage, strlen(s->stage));
		tk_buf_printf(b, ", \"cycles\": %llu, \"occupancy\": ", (unsigned long long)s->occupancy);
		put_ratio(b, s->occupancy, st->cycles);
		tk_buf_puts(b, ", \"latency\": ");
		json_lat(b, &s->lat);
		tk_buf_putc(b, '}');
	}
	tk_buf_puts(b, "]");
	if (window) {
		tk_buf_printf(b, ",\n \"window\": %llu, \"windows\": [", (unsigned long long)window);
		for (size_t i = 0; i < st->nwindows; i++)
			tk_buf_printf(b, "%s%llu", i ? ", " : "", (unsigned long long)st->window_retired[i]);
		tk_buf_puts(b, "]");
	}
	if (st->nslow) {
		tk_buf_puts(b, ",\n \"slowest\": [");
		for (size_t i = 0; i < st->nslow; i++) {
			const struct tk_kanata_slow *s = &st->slow[i];
			tk_buf_printf(b, "%s\n  {\"id\": %lld, \"sim_id\": %lld, \"thread\": %lld, "
				      "\"begin\": %lld, \"end\": %lld, \"cycles\": %lld, \"label\": ",
				      i ? "," : "", (long long)s->id, (long long)s->sim_id,
				      (long long)s->thread, (long long)s->begin, (long long)s->end,
				      (long long)(s->end - s->begin));
			tk_buf_json_str(b, s->label, strlen(s->label));
			tk_buf_putc(b, '}');
		}
		tk_buf_puts(b, "]");
	}
	tk_buf_puts(b, "}\n");
}

/* CSV is one table: windows if --window, else slowest if --slowest, else stages. */
static void kanata_csv(struct tk_buf *b, const struct tk_kanata_stats *st, uint64_t window)
{
	if (window) {
		tk_buf_puts(b, "start_cycle,end_cycle,retired,ipc\n");
		for (size_t i = 0; i < st->nwindows; i++) {
			int64_t s = st->counts.first_cycle + (int64_t)(i * window);
			tk_buf_printf(b, "%lld,%lld,%llu,", (long long)s, (long long)(s + (int64_t)window),
				      (unsigned long long)st->window_retired[i]);
			put_ratio(b, st->window_retired[i], window);
			tk_buf_putc(b, '\n');
		}
	} else if (st->nslow) {
		tk_buf_puts(b, "id,sim_id,thread,begin,end,cycles,label\n");
		for (size_t i = 0; i < st->nslow; i++) {
			const struct tk_kanata_slow *s = &st->slow[i];
			tk_buf_printf(b, "%lld,%lld,%lld,%lld,%lld,%lld,", (long long)s->id,
				      (long long)s->sim_id, (long long)s->thread, (long long)s->begin,
				      (long long)s->end, (long long)(s->end - s->begin));
			out_csv_quoted(b, s->label);
			tk_buf_putc(b, '\n');
		}
	} else {
		tk_buf_puts(b, "lane,stage,count,cycles,occupancy,mean,p50,p99,max\n");
		for (size_t i = 0; i < st->nstages; i++) {
			const struct tk_kanata_stage_stats *s = &st->stages[i];
			out_csv_quoted(b, s->lane);
			tk_buf_putc(b, ',');
			out_csv_quoted(b, s->stage);
			tk_buf_printf(b, ",%llu,%llu,", (unsigned long long)s->lat.count,
				      (unsigned long long)s->occupancy);
			put_ratio(b, s->occupancy, st->cycles);
			tk_buf_putc(b, ',');
			put_mean(b, &s->lat);
			tk_buf_printf(b, ",%llu,%llu,%llu\n", (unsigned long long)s->lat.p50,
				      (unsigned long long)s->lat.p99, (unsigned long long)s->lat.max);
		}
	}
}

static const char *a64_syscall_name(unsigned nr)
{
	switch (nr) {
	case 17: return "getcwd";
	case 29: return "ioctl";
	case 48: return "faccessat";
	case 56: return "openat";
	case 57: return "close";
	case 62: return "lseek";
	case 63: return "read";
	case 64: return "write";
	case 65: return "readv";
	case 66: return "writev";
	case 67: return "pread64";
	case 68: return "pwrite64";
	case 78: return "readlinkat";
	case 79: return "newfstatat";
	case 80: return "fstat";
	case 93: return "exit";
	case 94: return "exit_group";
	case 96: return "set_tid_address";
	case 98: return "futex";
	case 99: return "set_robust_list";
	case 101: return "nanosleep";
	case 113: return "clock_gettime";
	case 124: return "sched_yield";
	case 129: return "kill";
	case 134: return "rt_sigaction";
	case 135: return "rt_sigprocmask";
	case 160: return "uname";
	case 172: return "getpid";
	case 178: return "gettid";
	case 214: return "brk";
	case 215: return "munmap";
	case 220: return "clone";
	case 221: return "execve";
	case 222: return "mmap";
	case 226: return "mprotect";
	case 261: return "prlimit64";
	case 278: return "getrandom";
	case 293: return "rseq";
	default: return "";
	}
}

/* PART / WHOLE in percent, rounded to two decimals (as the Kanata ratios) */
static void pct(struct tk_buf *b, uint64_t part, uint64_t whole)
{
	unsigned __int128 h = whole ? ((unsigned __int128)part * 10000 + whole / 2) / whole : 0;

	tk_buf_puts(b, "  ");
	tk_buf_fixed(b, (int64_t)h, 2);
	tk_buf_putc(b, '%');
}

static void row(struct tk_buf *b, const char *name, uint64_t v, uint64_t whole)
{
	tk_buf_printf(b, "  %-26s %14llu", name, (unsigned long long)v);
	if (whole != UINT64_MAX)
		pct(b, v, whole);
	tk_buf_putc(b, '\n');
}

/* Rows of text (as the xtrace sections), JSON members ({"section": {"row": n, ...}}) or CSV
 * lines (section,name,count) */
struct statout {
	struct tk_buf *b;
	enum tk_stats_format to;
	int rows;
	const char *key;   /* CSV: the section's key */
};

static void st_section(struct statout *s, const char *title, const char *key)
{
	s->key = key;
	if (s->to != TK_STATS_JSON) {
		if (s->to == TK_STATS_TEXT)
			tk_buf_printf(s->b, "%s\n", title);
		return;
	}
	tk_buf_printf(s->b, "%s\n  \"%s\": {", s->rows >= 0 ? "\n  }," : "", key);
	s->rows = 0;
}

static void st_row(struct statout *s, const char *name, uint64_t v, uint64_t whole)
{
	if (s->to == TK_STATS_TEXT) {
		row(s->b, name, v, whole);
		return;
	}
	if (s->to == TK_STATS_CSV) {
		tk_buf_printf(s->b, "%s,", s->key);
		out_csv_quoted(s->b, name);
		tk_buf_printf(s->b, ",%llu\n", (unsigned long long)v);
		return;
	}
	tk_buf_puts(s->b, s->rows++ ? ",\n    " : "\n    ");
	tk_buf_json_str(s->b, name, strlen(name));
	tk_buf_printf(s->b, ": %llu", (unsigned long long)v);
}

/* What comes before the first section (text: the caller's title line) and after the last */
static void st_begin(struct statout *s, const char *file, const char *format)
{
	if (s->to == TK_STATS_CSV) {
		tk_buf_puts(s->b, "section,name,count\n");
	} else if (s->to == TK_STATS_JSON) {
		tk_buf_puts(s->b, "{\n  \"file\": ");
		tk_buf_json_str(s->b, file, strlen(file));
		tk_buf_printf(s->b, ",\n  \"format\": \"%s\",", format);
	}
}

static void st_end(struct statout *s)
{
	if (s->to == TK_STATS_JSON)
		tk_buf_puts(s->b, "\n  }\n}\n");
}

void tk_out_xtrace_stats(struct tk_buf *b, enum tk_stats_format to, const char *path,
			 size_t bytes, size_t nchunks, const struct tk_xtrace_stats *s)
{
	uint64_t n = s->insns[0] + s->insns[1] + s->insns[2] + s->insns[3];
	struct statout so = { b, to, -1, NULL };
	if (to == TK_STATS_TEXT)
		tk_buf_printf(b, "%s: %zu bytes, %zu chunks\n", TK_TEXT(path), bytes, nchunks);
	st_begin(&so, path, "xtrace");
	st_section(&so, "instructions", "instructions");
	st_row(&so, "total", n, UINT64_MAX);
	for (int el = 0; el < 4; el++)
		if (s->insns[el] || el < 2) {
			char nm[16];
			snprintf(nm, sizeof nm, "EL%d", el);
			st_row(&so, nm, s->insns[el], n);
		}
	st_row(&so, "exception-level switches", s->el_switches, UINT64_MAX);
	if (s->pc_unknown)
		st_row(&so, "before the first PCINST", s->pc_unknown, n);
	st_section(&so, "instruction mix", "mix");
	for (unsigned c = 0; c < TK_A64__COUNT; c++)
		if (s->cls[c])
			st_row(&so, tk_a64_class_name(c), s->cls[c], n);
	uint64_t br = 0;
	for (unsigned c = TK_A64_BR_COND; c <= TK_A64_ERET; c++)
		br += s->cls[c];
	st_section(&so, "branches", "branches");
	st_row(&so, "all", br, n);
	st_row(&so, "conditional taken", s->cond_taken, s->cls[TK_A64_BR_COND]);
	st_row(&so, "conditional not taken", s->cond_not_taken, s->cls[TK_A64_BR_COND]);
	st_row(&so, "calls (BL + BLR)", s->cls[TK_A64_CALL] + s->cls[TK_A64_CALL_IND], br);
	st_row(&so, "returns", s->cls[TK_A64_RET], br);
	st_row(&so, "indirect (BR + BLR + RET)", s->cls[TK_A64_BR_IND] + s->cls[TK_A64_CALL_IND] +
	    s->cls[TK_A64_RET], br);
	st_row(&so, "TARGET_B items", s->items[TK_XT_TARGET_B], UINT64_MAX);
	st_section(&so, "memory", "memory");
	st_row(&so, "loads", s->loads, UINT64_MAX);
	st_row(&so, "load bytes", s->load_bytes, UINT64_MAX);
	st_row(&so, "stores", s->stores, UINT64_MAX);
	st_row(&so, "store bytes", s->store_bytes, UINT64_MAX);
	for (int k = 0; k < 16; k++)
		if (s->mem_size[k]) {
			char nm[32];
			snprintf(nm, sizeof nm, "%u-byte accesses", 1u << k);
			st_row(&so, nm, s->mem_size[k], s->loads + s->stores);
		}
	st_row(&so, "STXR results", s->items[TK_XT_STXR], UINT64_MAX);
	st_row(&so, "DC addresses", s->items[TK_XT_DC], UINT64_MAX);
	st_section(&so, "footprint (64-byte lines)", "footprint");
	st_row(&so, "code lines", tk_xtrace_stats_code_lines(s), UINT64_MAX);
	st_row(&so, "data lines", tk_xtrace_stats_data_lines(s), UINT64_MAX);
	st_section(&so, "syscalls", "syscalls");
	st_row(&so, "SVC instructions", s->cls[TK_A64_SVC], UINT64_MAX);
	for (unsigned k = 0; k <= TK_XT_MAX_SYSCALL; k++)
		if (s->syscalls[k]) {
			char nm[48];
			if (k == TK_XT_MAX_SYSCALL)
				snprintf(nm, sizeof nm, ">= %d", TK_XT_MAX_SYSCALL);
			else
				snprintf(nm, sizeof nm, "%u %s", k, a64_syscall_name(k));
			st_row(&so, nm, s->syscalls[k], UINT64_MAX);
		}
	st_row(&so, "SYSCALL_VEC items", s->items[TK_XT_SYSCALL_VEC], UINT64_MAX);
	st_section(&so, "items", "items");
	for (unsigned k = 0; k < TK_XT__COUNT; k++)
		st_row(&so, tk_xtrace_kind_name(k), s->items[k], UINT64_MAX);
	if (s->time_first != TK_TIME_NONE && to == TK_STATS_TEXT) {
		tk_buf_printf(b, "time span\n  %llu .. %llu\n", (unsigned long long)s->time_first,
			      (unsigned long long)s->time_last);
	} else if (s->time_first != TK_TIME_NONE) {
		st_section(&so, "time span", "time");
		st_row(&so, "first", s->time_first, UINT64_MAX);
		st_row(&so, "last", s->time_last, UINT64_MAX);
	}
	st_end(&so);
}

/* The non-zero entries of V (N of them at most), largest first, named by NAME. */
static void ranked_rows(struct statout *b, const uint64_t *v, unsigned n, uint64_t whole,
			const char *(*name)(unsigned))
{
	unsigned idx[256], k = 0;

	for (unsigned i = 0; i < n && i < 256; i++) {
		if (!v[i])
			continue;
		unsigned j = k++;   /* insertion, largest first (ties: index order) */
		for (; j && v[idx[j - 1]] < v[i]; j--)
			idx[j] = idx[j - 1];
		idx[j] = i;
	}
	for (unsigned i = 0; i < k; i++) {
		char nm[40];

		/* Zydis's names, lower case as the other sections */
		snprintf(nm, sizeof nm, "%s", name(idx[i]) ? name(idx[i]) : "?");
		for (char *c = nm; *c; c++)
			*c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
		st_row(b, nm, v[idx[i]], whole);
	}
}

/* The statistics of an Intel PT flow (S, from NSTREAMS streams of WHAT, each a UNIT) to B
 * as --to asks */
void tk_out_exec_stats(struct tk_buf *b, enum tk_stats_format to, const char *file,
		       const char *what, const char *format, const char *unit, size_t nstreams,
		       const struct tk_ipt_exec_stats *s)
{
	uint64_t n = s->insns, cond = s->kind[1];
	uint64_t br = 0;
	struct statout so = { b, to, -1, NULL };

	for (unsigned k = 1; k < TK_IPT_EXEC_NKIND; k++)
		br += s->kind[k];
	if (to == TK_STATS_TEXT)
		tk_buf_printf(b, "%s: %s, %zu %s%s\n", TK_TEXT(file), what, nstreams, unit, nstreams == 1 ? "" : "s");
	st_begin(&so, file, format);
	if (to == TK_STATS_JSON)
		tk_buf_printf(b, "\n  \"%ss\": %zu,", unit, nstreams);
	st_section(&so, "instructions", "instructions");
	st_row(&so, "total", n, UINT64_MAX);
	st_row(&so, "blocks executed", s->block_execs, UINT64_MAX);
	if (s->undecoded || so.to != TK_STATS_TEXT)
		st_row(&so, "not decodable now", s->undecoded, n);
	st_section(&so, "instruction mix (Zydis categories)", "mix");
	ranked_rows(&so, s->category, TK_IPT_EXEC_NCAT, n, tk_ipt_exec_category_name);
	st_section(&so, "ISA extensions", "isa_extensions");
	ranked_rows(&so, s->isa_ext, TK_IPT_EXEC_NEXT, n, tk_ipt_exec_isa_ext_name);
	st_section(&so, "branches", "branches");
	st_row(&so, "all", br, n);
	st_row(&so, "conditional", cond, br);
	st_row(&so, "conditional taken", s->cond_taken, cond);
	st_row(&so, "conditional not taken", s->cond_not_taken, cond);
	st_row(&so, "direct jumps", s->kind[2], br);
	st_row(&so, "direct calls", s->kind[3], br);
	st_row(&so, "returns", s->kind[4], br);
	st_row(&so, "indirect jumps", s->kind[5], br);
	st_row(&so, "indirect calls", s->kind[6], br);
	st_row(&so, "far transfers", s->kind[7], br);
	st_section(&so, "memory", "memory");
	st_row(&so, "instructions reading memory", s->mem_read, n);
	st_row(&so, "instructions writing memory", s->mem_write, n);
	st_section(&so, "footprint", "footprint");
	st_row(&so, "distinct blocks", s->distinct_blocks, UINT64_MAX);
	st_row(&so, "distinct instructions", s->distinct_insns, UINT64_MAX);
	st_row(&so, "code lines (64 bytes)", s->code_lines, UINT64_MAX);
	st_section(&so, "trace", "trace");
	st_row(&so, "tracing enabled", s->enables, UINT64_MAX);
	st_row(&so, "tracing disabled", s->disables, UINT64_MAX);
	st_row(&so, "asynchronous disables", s->async_disables, UINT64_MAX);
	st_row(&so, "asynchronous branches", s->interrupts, UINT64_MAX);
	st_row(&so, "overflows", s->flow.overflows, UINT64_MAX);
	st_row(&so, "decode errors", s->flow.errors, UINT64_MAX);
	st_end(&so);
}

void tk_out_kanata_stats(struct tk_buf *b, enum tk_stats_format to, const char *file,
			 const struct tk_kanata_stats *st, uint64_t window)
{
	if (to == TK_STATS_JSON)
		kanata_json(b, file, st, window);
	else if (to == TK_STATS_CSV)
		kanata_csv(b, st, window);
	else
		kanata_text(b, file, st, window);
}

enum tk_stats_format tk_stats_format_by_name(const char *name)
{
	if (!name || !strcmp(name, "text"))
		return TK_STATS_TEXT;
	if (!strcmp(name, "json"))
		return TK_STATS_JSON;
	if (!strcmp(name, "csv"))
		return TK_STATS_CSV;
	return 0;
}
