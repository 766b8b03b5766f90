/* tracekit stats: statistics of a trace. Each format's handler is one case below; the work is in the library. */
#include <stdio.h>

#include "cli.h"

static const char usage[] =
	"usage: tracekit stats [OPTIONS] FILE...\n"
	"\n"
	"Statistics of a trace.\n"
	"\n"
	"  --to FMT        text, json, csv\n"
	"  -j N            threads (default: all cores)\n";

/* ---- xtrace ------------------------------------------------------------------------ */
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

static void pct(struct tk_buf *b, uint64_t part, uint64_t whole)
{
	tk_buf_puts(b, "  ");
	tk_buf_fixed(b, whole ? (int64_t)(part * 10000 / whole) : 0, 2);
	tk_buf_putc(b, '%');
}

static void row(struct tk_buf *b, const char *name, uint64_t v, uint64_t whole)
{
	tk_buf_printf(b, "  %-26s %14llu", name, (unsigned long long)v);
	if (whole != UINT64_MAX)
		pct(b, v, whole);
	tk_buf_putc(b, '\n');
}

static int xtrace_stats(struct cli_opts *o, const char *file, struct tk_input *in,
			const struct tk_format_info *fi)
{
	struct cli_xtrace x;
	struct tk_xtrace_stats s;
	struct tk_gap_stats gaps = { 0 };
	struct tk_buf b;
	int rc = cli_xtrace_open(o, file, in, fi, &x);
	if (rc)
		return rc;
	if (!x.insn) {
		cli_error(file, UINT64_MAX, "no instruction file beside this snapshot file");
		cli_xtrace_close(&x);
		return EXIT_INPUT;
	}
	if ((rc = cli_out_open(o, &b))) {
		cli_xtrace_close(&x);
		return rc;
	}
	tk_xtrace_stats_init(&s, 1);
	rc = cli_xtrace_stats(o, &x, &s, &gaps, 1);
	uint64_t n = s.insns[0] + s.insns[1] + s.insns[2] + s.insns[3];
	tk_buf_printf(&b, "%s: %zu bytes, %zu chunks\n", x.insn_path, x.n, tk_xtrace_nchunks(x.t));
	tk_buf_puts(&b, "instructions\n");
	row(&b, "total", n, UINT64_MAX);
	for (int el = 0; el < 4; el++)
		if (s.insns[el] || el < 2) {
			char nm[16];
			snprintf(nm, sizeof nm, "EL%d", el);
			row(&b, nm, s.insns[el], n);
		}
	row(&b, "exception-level switches", s.el_switches, UINT64_MAX);
	if (s.pc_unknown)
		row(&b, "before the first PCINST", s.pc_unknown, n);
	tk_buf_puts(&b, "instruction mix\n");
	for (unsigned c = 0; c < TK_A64__COUNT; c++)
		if (s.cls[c])
			row(&b, tk_a64_class_name(c), s.cls[c], n);
	uint64_t br = 0;
	for (unsigned c = TK_A64_BR_COND; c <= TK_A64_ERET; c++)
		br += s.cls[c];
	tk_buf_puts(&b, "branches\n");
	row(&b, "all", br, n);
	row(&b, "conditional taken", s.cond_taken, s.cls[TK_A64_BR_COND]);
	row(&b, "conditional not taken", s.cond_not_taken, s.cls[TK_A64_BR_COND]);
	row(&b, "calls (BL + BLR)", s.cls[TK_A64_CALL] + s.cls[TK_A64_CALL_IND], br);
	row(&b, "returns", s.cls[TK_A64_RET], br);
	row(&b, "indirect (BR + BLR + RET)", s.cls[TK_A64_BR_IND] + s.cls[TK_A64_CALL_IND] +
	    s.cls[TK_A64_RET], br);
	row(&b, "TARGET_B items", s.items[TK_XT_TARGET_B], UINT64_MAX);
	tk_buf_puts(&b, "memory\n");
	row(&b, "loads", s.loads, UINT64_MAX);
	row(&b, "load bytes", s.load_bytes, UINT64_MAX);
	row(&b, "stores", s.stores, UINT64_MAX);
	row(&b, "store bytes", s.store_bytes, UINT64_MAX);
	for (int k = 0; k < 16; k++)
		if (s.mem_size[k]) {
			char nm[32];
			snprintf(nm, sizeof nm, "%u-byte accesses", 1u << k);
			row(&b, nm, s.mem_size[k], s.loads + s.stores);
		}
	row(&b, "STXR results", s.items[TK_XT_STXR], UINT64_MAX);
	row(&b, "DC addresses", s.items[TK_XT_DC], UINT64_MAX);
	tk_buf_puts(&b, "footprint (64-byte lines)\n");
	row(&b, "code lines", tk_xtrace_stats_code_lines(&s), UINT64_MAX);
	row(&b, "data lines", tk_xtrace_stats_data_lines(&s), UINT64_MAX);
	tk_buf_puts(&b, "syscalls\n");
	row(&b, "SVC instructions", s.cls[TK_A64_SVC], UINT64_MAX);
	for (unsigned k = 0; k <= TK_XT_MAX_SYSCALL; k++)
		if (s.syscalls[k]) {
			char nm[48];
			if (k == TK_XT_MAX_SYSCALL)
				snprintf(nm, sizeof nm, ">= %d", TK_XT_MAX_SYSCALL);
			else
				snprintf(nm, sizeof nm, "%u %s", k, a64_syscall_name(k));
			row(&b, nm, s.syscalls[k], UINT64_MAX);
		}
	row(&b, "SYSCALL_VEC items", s.items[TK_XT_SYSCALL_VEC], UINT64_MAX);
	tk_buf_puts(&b, "items\n");
	for (unsigned k = 0; k < TK_XT__COUNT; k++)
		row(&b, tk_xtrace_kind_name(k), s.items[k], UINT64_MAX);
	if (s.time_first != TK_TIME_NONE)
		tk_buf_printf(&b, "time span\n  %llu .. %llu\n", (unsigned long long)s.time_first,
			      (unsigned long long)s.time_last);
	tk_xtrace_stats_free(&s);
	int st = cli_out_close(&b);
	int g = cli_xtrace_report(&x, file, &gaps);
	cli_xtrace_close(&x);
	if (rc < 0) {
		cli_error(file, UINT64_MAX, "%s", tk_strerror(rc));
		return EXIT_INPUT;
	}
	return st > g ? st : g;
}

static int run_file(struct cli_opts *o, const char *file, struct tk_input *in,
		    const struct tk_format_info *fi)
{
	switch (fi->id) {
	case TK_FMT_XTRACE_INSN:
	case TK_FMT_XTRACE_SNAP:
		return xtrace_stats(o, file, in, fi);
	default:
		return cli_unsupported("stats", file, fi);
	}
}

static int run(struct cli_opts *o)
{
	int status = EXIT_CLEAN, rc;

	if ((rc = cli_need_files(o, "stats")))
		return rc;
	for (int i = 0; i < o->nargs; i++) {
		struct tk_input *in;
		struct tk_format_info fi;

		if ((rc = cli_open(o, o->args[i], &in, &fi)) == 0) {
			rc = run_file(o, o->args[i], in, &fi);
			tk_input_free(in);
		}
		if (rc > status)
			status = rc;
	}
	return status;
}

const struct cli_command cli_cmd_stats = {
	.name = "stats",
	.summary = "statistics of a trace",
	.usage = usage,
	.run = run,
};
