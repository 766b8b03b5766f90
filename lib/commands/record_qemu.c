/* tracekit record --qemu: an AArch64 program under qemu-aarch64, written as xtrace files
 * (the instruction stream from tracekit's TCG plugin, the registers from further runs). */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tracekit/internal/qemu_regs.h"

/* ---- --qemu ------------------------------------------------------------------------
 * tracekit record --qemu: run an AArch64 program under qemu-aarch64 with tracekit's TCG
 * plugin (instruction stream), then once more, deterministically, with
 * `-singlestep -d cpu,fpu,nochain -dfilter` at the snapshot points to take the registers
 * that QEMU 7.2's plugin API cannot read. */

#define QEMU "qemu-aarch64"
#define SEED "1"  /* same guest random bytes (AT_RANDOM, getrandom) in both runs */

struct point {
	uint64_t user, total, offset, pc, occurrence, executed;
	uint64_t seen;
	int done;
	struct tk_xtrace_snapshot s;
	uint8_t z[32 * 256], p[16 * 32], ffr[32];
	uint32_t vl_bits;
	uint64_t tpidr;
};

static int find_plugin(char *buf, size_t len)
{
	const char *env = getenv("TK_QEMU_PLUGIN");
	if (env) {
		snprintf(buf, len, "%s", env);
		return access(buf, R_OK) == 0 ? 0 : -1;
	}
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	const char *rel[] = { "recorder/qemu/libtracekit-qemu.so", "../lib/tracekit/libtracekit-qemu.so",
			      "../lib/x86_64-linux-gnu/tracekit/libtracekit-qemu.so" };
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		if ((size_t)snprintf(buf, len, "%.3000s/%s", exe, rel[i]) >= len)
			continue;
		if (access(buf, R_OK) == 0)
			return 0;
	}
	return -1;
}

/* Does PROG contain HINT #9 (4-byte aligned)? Then collection is gated by it. */
static int has_hint9(const char *prog)
{
	FILE *f = fopen(prog, "rb");
	uint32_t w[4096];
	size_t n;
	int found = 0;
	if (!f)
		return 0;
	while (!found && (n = fread(w, 4, 4096, f)) > 0)
		for (size_t i = 0; i < n; i++)
			if (w[i] == 0xd503213fu)
				found = 1;
	fclose(f);
	return found;
}

static pid_t spawn(const struct tk_cmd *c, char **argv, int out_fd, int log_fd)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (out_fd >= 0) {
			dup2(out_fd, 1);
			dup2(out_fd, 2);
		}
		if (log_fd >= 0 && log_fd != 3) {
			dup2(log_fd, 3);
			close(log_fd);
		}
		execvp(argv[0], argv);
		CMD_NOTE(c, NULL, "cannot run %s: %s", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* One -d cpu,fpu dump (LEN bytes at BUF) into P. */
static void parse_dump(const char *buf, size_t len, struct point *pt)
{
	struct tk_qemu_regs r;
	tk_qemu_regs_parse(buf, len, 0, &r);
	memset(&pt->s, 0, sizeof pt->s);
	memcpy(pt->s.x, r.x, sizeof pt->s.x);
	pt->s.sys[TK_XT_NZCV] = r.nzcv;
	pt->s.sys[TK_XT_FPCR] = r.fpcr;
	pt->s.sys[TK_XT_FPSR] = r.fpsr;
	pt->vl_bits = r.vl_bits;
	memcpy(pt->z, r.z, sizeof pt->z);
	memcpy(pt->p, r.p, sizeof pt->p);
	memcpy(pt->ffr, r.ffr, sizeof pt->ffr);
	pt->done = 1;
}

/* A register value the plugin could not read (see recorder/qemu/xtrace_plugin.c): the
 * item at OFFSET of the instruction file gets it from the dump before the OCCURRENCE-th
 * execution of PC. */
struct fixup {
	uint64_t offset, pc, occurrence, executed, value;
	uint32_t sysreg;       /* MSR: the system register (opcode without Rt) */
	char what;             /* x: Xreg, w: Wreg, f: NZCV, g: X1-X30 and SP (ALLGPR) */
	uint8_t reg;
	uint8_t done;
};

#define MSR_TPIDR_EL0 0xd51bd040u

/* One PC the register run dumps at, with how often it has been dumped so far. */
struct dump_pc {
	uint64_t pc, seen;
	size_t fix_next, fix_end;   /* its fixups (sorted by occurrence) still to fill */
	int has_point;
};

static int cmp_fixup(const void *a, const void *b)
{
	const struct fixup *x = a, *y = b;
	if (x->pc != y->pc)
		return x->pc < y->pc ? -1 : 1;
	if (x->occurrence != y->occurrence)
		return x->occurrence < y->occurrence ? -1 : 1;
	return x->executed < y->executed ? -1 : x->executed > y->executed;
}

static struct dump_pc *find_pc(struct dump_pc *t, size_t n, uint64_t pc)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t[mid].pc < pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && t[lo].pc == pc ? &t[lo] : NULL;
}

/* Fill the fixups of one dump: values into the instruction file at their offsets. */
static void fill_fixups(const char *dump, size_t len, struct fixup *f, size_t n, int fd)
{
	struct tk_qemu_regs regs;
	const uint64_t *r = regs.x;
	tk_qemu_regs_parse(dump, len, TK_QEMU_REGS_GPRS, &regs);
	for (size_t i = 0; i < n; i++) {
		uint64_t v = f[i].what == 'f' ? regs.nzcv : r[f[i].reg < 32 ? f[i].reg : 31];
		if (f[i].what == 'w')
			v &= 0xffffffffu;
		f[i].value = v;
		f[i].done = 1;
		if (f[i].offset == UINT64_MAX || fd < 0)
			continue;
		if (f[i].what == 'g') {
			/* X1-X30, SP: X0 is the syscall result the plugin saw in the trace run */
			uint8_t b[248];
			for (int k = 1; k < 32; k++)
				memcpy(b + 8 * (k - 1), &r[k], 8);
			if (pwrite(fd, b, sizeof b, (off_t)f[i].offset + 8) != (ssize_t)sizeof b)
				f[i].done = 0;
		} else if (pwrite(fd, &v, 8, (off_t)f[i].offset) != 8) {
			f[i].done = 0;
		}
	}
}

/* Second run: read the -d cpu log from FD; fill the points' registers and the fixups. */
static void read_dumps(int fd, struct point *pts, size_t npts, struct dump_pc *pcs, size_t npcs,
		       struct fixup *fix, int insn_fd)
{
	FILE *f = fdopen(fd, "r");
	char line[1024];
	char *dump = NULL;
	size_t dlen = 0, dcap = 0, fix_from = 0, fix_to = 0;
	struct point *cur = NULL;
	int collect = 0;
	if (!f)
		return;
	for (;;) {
		int eof = !fgets(line, sizeof line, f);
		int starts = !eof && strncmp(line, " PC=", 4) == 0;
		if ((eof || starts) && collect) {
			if (fix_to > fix_from)
				fill_fixups(dump, dlen, fix + fix_from, fix_to - fix_from, insn_fd);
			if (cur)
				parse_dump(dump, dlen, cur);
			cur = NULL;
			collect = 0;
			fix_from = fix_to = 0;
		}
		if (eof)
			break;
		if (starts) {
			uint64_t pc = strtoull(line + 4, NULL, 16);
			struct dump_pc *e = find_pc(pcs, npcs, pc);
			dlen = 0;
			if (!e)
				continue; /* dumped as part of a merged -dfilter range */
			e->seen++;
			/* Each snapshot point is the occurrence-th execution of its pc. */
			for (size_t i = 0; e->has_point && i < npts; i++)
				if (pts[i].pc == pc && e->seen == pts[i].occurrence && !pts[i].done)
					cur = &pts[i];
			fix_from = fix_to = e->fix_next;
			while (fix_to < e->fix_end && fix[fix_to].occurrence == e->seen)
				fix_to++;
			e->fix_next = fix_to;
			collect = cur || fix_to > fix_from;
		}
		if (collect) {
			size_t l = strlen(line);
			if (dlen + l + 1 > dcap) {
				dcap = (dlen + l + 1) * 2;
				char *nd = realloc(dump, dcap);
				if (!nd)
					break;
				dump = nd;
			}
			memcpy(dump + dlen, line, l + 1);
			dlen += l;
		}
	}
	free(dump);
	fclose(f);
}

/* -dfilter for the dump PCs. QEMU 7.2 tests every executed instruction against each range
 * in turn (singlestep: every instruction is a block), about 2.8 ns per range and
 * instruction here, while a register dump (-d cpu,fpu with SVE) costs about 85 us. So
 * neighbouring target PCs become one range when the instructions between them ran fewer
 * than total / 30000 times (RUNS: the plugin's count per PC; the extra dumps are skipped
 * when read), and more are joined, cheapest first, while the list passes the kernel's
 * 128 KiB limit for one argument. */
struct pc_runs {
	uint64_t pc, runs;
};

static int cmp_pc_runs(const void *a, const void *b)
{
	const struct pc_runs *x = a, *y = b;
	return x->pc < y->pc ? -1 : x->pc > y->pc;
}

struct gap {
	uint64_t extra;
	size_t i;
};

static int cmp_gap(const void *a, const void *b)
{
	const struct gap *x = a, *y = b;
	return x->extra < y->extra ? -1 : x->extra > y->extra;
}

static size_t filter_text(const struct dump_pc *pcs, size_t n, const uint8_t *join, char *s)
{
	size_t len = 0;
	s[0] = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j + 1 < n && join[j])
			j++;
		if (j == i)
			len += (size_t)sprintf(s + len, "%s0x%" PRIx64 "+4", i ? "," : "", pcs[i].pc);
		else
			len += (size_t)sprintf(s + len, "%s0x%" PRIx64 "..0x%" PRIx64, i ? "," : "",
					       pcs[i].pc, pcs[j].pc + 3);
		i = j + 1;
	}
	return len;
}

static char *dump_filter(const struct dump_pc *pcs, size_t n, struct pc_runs *runs, size_t nruns)
{
	char *s = malloc(n * 48 + 1);
	uint8_t *join = calloc(n + 1, 1);
	struct gap *gaps = calloc(n + 1, sizeof *gaps);
	if (!s || !join || !gaps) {
		free(join);
		free(gaps);
		free(s);
		return NULL;
	}
	uint64_t total = 0;
	for (size_t k = 0; k < nruns; k++)
		total += runs[k].runs;
	/* Executions strictly between neighbouring targets (unknown without RUNS: never). */
	size_t r = 0, ngaps = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		uint64_t extra = nruns ? 0 : UINT64_MAX / 2;
		while (r < nruns && runs[r].pc <= pcs[i].pc)
			r++;
		for (size_t k = r; k < nruns && runs[k].pc < pcs[i + 1].pc; k++)
			extra += runs[k].runs;
		gaps[ngaps++] = (struct gap){ extra, i };
		if (extra < total / 30000)
			join[i] = 1;
	}
	qsort(gaps, ngaps, sizeof *gaps, cmp_gap);
	for (size_t g = 0; filter_text(pcs, n, join, s) >= 120000 && g < ngaps; g++)
		join[gaps[g].i] = 1;
	free(join);
	free(gaps);
	return s;
}

/* Standard output for the register run, of the same kind as ours (the trace run's): the C
 * library takes other paths for a terminal (line buffering), a character device (an
 * isatty check) and a file or pipe, and the second run must execute the same
 * instructions. A file or pipe: a deleted temporary file in DIR; a terminal: a
 * pseudo-terminal drained by a child process; anything else: /dev/null. */
static int regrun_output(const char *dir, pid_t *drain)
{
	struct stat st;
	*drain = -1;
	if (fstat(1, &st) == 0 && (S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) ||
				   S_ISSOCK(st.st_mode))) {
		char tmp[4200];
		snprintf(tmp, sizeof tmp, "%.4000s/.tracekit-regrun-XXXXXX", dir);
		int fd = mkstemp(tmp);
		if (fd >= 0) {
			unlink(tmp);
			return fd;
		}
	} else if (isatty(1)) {
		int m = posix_openpt(O_RDWR | O_NOCTTY);
		char *name = m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0 ? ptsname(m) : NULL;
		int sl = name ? open(name, O_WRONLY | O_NOCTTY) : -1;
		if (sl >= 0) {
			pid_t c = fork();
			if (c == 0) {
				char b[4096];
				close(sl);
				while (read(m, b, sizeof b) > 0)
					;
				_exit(0);
			}
			close(m);
			if (c > 0) {
				*drain = c;
				return sl;
			}
			close(sl);
		} else if (m >= 0) {
			close(m);
		}
	}
	return open("/dev/null", O_WRONLY);
}

/* The PCs to dump at: the points' (PTS) or the fixups' (FIX), sorted, each with its range
 * of fixups. */
static struct dump_pc *make_pcs(const struct point *pts, size_t npts, const struct fixup *fix,
				size_t nfix, size_t *npcs)
{
	uint64_t *allpc = malloc((npts + nfix + 1) * sizeof *allpc);
	struct dump_pc *pcs = calloc(npts + nfix + 1, sizeof *pcs);
	size_t nall = 0, n = 0;
	*npcs = 0;
	if (!allpc || !pcs) {
		free(allpc);
		free(pcs);
		return NULL;
	}
	for (size_t i = 0; i < npts; i++)
		allpc[nall++] = pts[i].pc;
	for (size_t i = 0; i < nfix; i++)
		allpc[nall++] = fix[i].pc;
	qsort(allpc, nall, sizeof *allpc, tk_cmp_u64);
	for (size_t i = 0, k = 0; i < nall; i++) {
		if (n && pcs[n - 1].pc == allpc[i])
			continue;
		struct dump_pc *e = &pcs[n++];
		e->pc = allpc[i];
		e->has_point = npts > 0;
		while (k < nfix && fix[k].pc < e->pc)
			k++;
		e->fix_next = k;
		while (k < nfix && fix[k].pc == e->pc)
			k++;
		e->fix_end = k;
	}
	free(allpc);
	*npcs = n;
	return pcs;
}

/* One register run: PROGRAM under qemu, single-stepped, with -d FLAGS at FILTER; the dumps
 * fill PTS or FIX (values written into INSN_FD). */
static void register_run(const struct tk_cmd *c, char **argv, const char *dir,
			 const char *flags, const char *filter, struct point *pts, size_t npts,
			 struct dump_pc *pcs, size_t npcs, struct fixup *fix, int insn_fd)
{
	const struct tk_cmd_opts *o = c->o;
	int pfd[2], k = 0, status;
	if (!filter || pipe(pfd) < 0)
		return;
	argv[k++] = (char *)QEMU;
	argv[k++] = (char *)"-seed";
	argv[k++] = (char *)SEED;
	argv[k++] = (char *)"-singlestep";
	argv[k++] = (char *)"-d";
	argv[k++] = (char *)flags;
	argv[k++] = (char *)"-dfilter";
	argv[k++] = (char *)filter;
	argv[k++] = (char *)"-D";
	argv[k++] = (char *)"/dev/fd/3";
	for (int i = 0; i < o->nargs; i++)
		argv[k++] = o->args[i];
	argv[k] = NULL;
	pid_t drain = -1;
	int out2 = regrun_output(dir, &drain);
	pid_t p2 = spawn(c, argv, out2, pfd[1]);
	close(pfd[1]);
	if (out2 >= 0)
		close(out2);
	read_dumps(pfd[0], pts, npts, pcs, npcs, fix, insn_fd);
	waitpid(p2, &status, 0);
	if (drain > 0)
		waitpid(drain, NULL, 0);
}

int tk_cmd_record_qemu(const struct tk_cmd *c, const char *file, struct tk_input *in,
		       const struct tk_format_info *fi, struct tk_buf *out)
{
	const struct tk_cmd_opts *o = c->o;

	(void)file, (void)in, (void)fi, (void)out;
	const char *dir = o->output ? o->output : ".";
	char plugin[8192], arg[12288];
	struct stat st;
	if (find_plugin(plugin, sizeof plugin) < 0) {
		CMD_ERROR(c, NULL, UINT64_MAX, "record: cannot find libtracekit-qemu.so (set TK_QEMU_PLUGIN)");
		return TK_EXIT_INPUT;
	}
	if (stat(dir, &st) < 0 && mkdir(dir, 0755) < 0) {
		CMD_ERROR(c, dir, UINT64_MAX, "cannot create the output directory: %s", strerror(errno));
		return TK_EXIT_INPUT;
	}
	unsigned long long ts = (unsigned long long)time(NULL);
	int gate = has_hint9(o->args[0]);
	/* TK_XTRACE_TIME=1: TIME items before memory accesses (memory order across threads);
	 * TK_XTRACE_INTERVAL=N: snapshot every N user instructions (tests use small N). */
	const char *env_time = getenv("TK_XTRACE_TIME");
	int with_time = env_time && atoi(env_time) > 0;
	snprintf(arg, sizeof arg, "%s,dir=%s,ts=%llu,gate=%d,time=%d%s%s", plugin, dir, ts, gate,
		 with_time, getenv("TK_XTRACE_INTERVAL") ? ",interval=" : "",
		 getenv("TK_XTRACE_INTERVAL") ? getenv("TK_XTRACE_INTERVAL") : "");
	char **argv = calloc((size_t)o->nargs + 16, sizeof *argv);
	int k = 0;
	argv[k++] = (char *)QEMU;
	argv[k++] = (char *)"-seed";
	argv[k++] = (char *)SEED;
	argv[k++] = (char *)"-plugin";
	argv[k++] = arg;
	for (int i = 0; i < o->nargs; i++)
		argv[k++] = o->args[i];
	argv[k] = NULL;
	if (!o->quiet)
		CMD_NOTE(c, NULL, "recording %s under %s%s", o->args[0], QEMU,
			gate ? " (collection between HINT #9 instructions)" : "");
	uint64_t t0 = tk_now_ns();
	pid_t pid = spawn(c, argv, -1, -1);
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		CMD_ERROR(c, NULL, UINT64_MAX, "record: cannot run %s", QEMU);
		free(argv);
		return TK_EXIT_INPUT;
	}
	uint64_t t1 = tk_now_ns();
	int prog_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

	/* Snapshot points of the main thread (its tid is qemu's pid). */
	char path[8192];
	snprintf(path, sizeof path, "%s/xtrace.%llu.%d.points", dir, ts, (int)pid);
	FILE *pf = fopen(path, "r");
	struct point *pts = NULL;
	size_t npts = 0, cap = 0;
	unsigned long long a, b, n3, d, e, g;
	while (pf && fscanf(pf, "%llu %llu %llu %llu %llu %llu", &a, &b, &n3, &d, &e, &g) == 6) {
		if (npts == cap) {
			cap = cap ? 2 * cap : 16;
			struct point *np = realloc(pts, cap * sizeof *pts);
			if (!np)
				break;
			pts = np;
		}
		memset(&pts[npts], 0, sizeof pts[npts]);
		pts[npts++] = (struct point){ .user = a, .total = b, .offset = n3, .pc = d,
					      .occurrence = e, .executed = g };
	}
	if (pf) {
		fclose(pf);
		unlink(path);
	}
	/* Register values for VAL / MISC items of the main thread. */
	snprintf(path, sizeof path, "%s/xtrace.%llu.%d.fixups", dir, ts, (int)pid);
	pf = fopen(path, "r");
	struct fixup *fix = NULL;
	size_t nfix = 0, fcap = 0;
	char what;
	unsigned reg, sysreg;
	while (pf && fscanf(pf, "%llu %llu %llu %c %u %llu %u", &a, &b, &n3, &what, &reg, &g,
			    &sysreg) == 7) {
		if (nfix == fcap) {
			fcap = fcap ? 2 * fcap : 64;
			struct fixup *nf = realloc(fix, fcap * sizeof *fix);
			if (!nf)
				break;
			fix = nf;
		}
		fix[nfix++] = (struct fixup){ .offset = a, .pc = b, .occurrence = n3, .executed = g,
					      .sysreg = sysreg, .what = what, .reg = (uint8_t)reg };
	}
	if (pf) {
		fclose(pf);
		unlink(path);
	}
	qsort(fix, nfix, sizeof *fix, cmp_fixup);
	int rc = TK_EXIT_CLEAN;
	if (npts) {
		/* Register runs. Snapshots need the vector registers (-d fpu: a dump costs about
		 * 85 us with SVE), the stream's values only the general ones (about 15 us), so
		 * two runs: the second only when there are values to fill. */
		size_t npcs = 0;
		struct dump_pc *pcs = make_pcs(pts, npts, NULL, 0, &npcs);
		char *filter = pcs ? dump_filter(pcs, npcs, NULL, 0) : NULL;
		register_run(c, argv, dir, "cpu,fpu,nochain", filter, pts, npts, pcs, npcs, NULL, -1);
		free(filter);
		free(pcs);
		/* Execution counts per PC, to keep the second run's -dfilter short. */
		snprintf(path, sizeof path, "%s/xtrace.%llu.%d.runs", dir, ts, (int)pid);
		FILE *rf = fopen(path, "r");
		struct pc_runs *runs = NULL;
		size_t nruns = 0, rcap = 0;
		while (rf && fscanf(rf, "%llu %llu", &a, &b) == 2) {
			if (nruns == rcap) {
				rcap = rcap ? 2 * rcap : 1024;
				struct pc_runs *nr = realloc(runs, rcap * sizeof *runs);
				if (!nr)
					break;
				runs = nr;
			}
			runs[nruns++] = (struct pc_runs){ a, b };
		}
		if (rf)
			fclose(rf);
		qsort(runs, nruns, sizeof *runs, cmp_pc_runs);
		snprintf(path, sizeof path, "%s/xtrace.%llu.%d.hint9.xinsndata.bin", dir, ts, (int)pid);
		int insn_fd = -1;
		if (nfix && (insn_fd = open(path, O_WRONLY | O_CLOEXEC)) >= 0 &&
		    (pcs = make_pcs(NULL, 0, fix, nfix, &npcs))) {
			filter = dump_filter(pcs, npcs, runs, nruns);
			register_run(c, argv, dir, "cpu,nochain", filter, NULL, 0, pcs, npcs, fix,
				     insn_fd);
			free(filter);
			free(pcs);
		}
		free(runs);
		size_t fix_missing = 0;
		for (size_t i = 0; i < nfix; i++)
			fix_missing += fix[i].offset != UINT64_MAX && !fix[i].done;
		if (insn_fd >= 0 && close(insn_fd) != 0)
			fix_missing = nfix;
		if (fix_missing) {
			CMD_WARN(c, path, UINT64_MAX, "%zu of %zu register values (STXR, MRS, DC, "
				 "MISC_FLAGS, ALLGPR items) were not found in the value run; "
				 "they read 0 (is the program deterministic?)", fix_missing, nfix);
			rc = TK_EXIT_SKIPPED;
		}
		/* TPIDR_EL0 at each snapshot: the last MSR TPIDR_EL0 before it (0 at start,
		 * as Linux starts a process). */
		size_t ntp = 0;
		for (size_t k2 = 0; k2 < nfix; k2++)
			if (fix[k2].sysreg == MSR_TPIDR_EL0 && fix[k2].done)
				fix[ntp++] = fix[k2];   /* fix[] is not needed after this */
		for (size_t i = 0; i < npts; i++) {
			uint64_t best = 0, tp = 0;
			for (size_t k2 = 0; k2 < ntp; k2++)
				if (fix[k2].executed < pts[i].executed && fix[k2].executed >= best) {
					best = fix[k2].executed;
					tp = fix[k2].value;
				}
			pts[i].tpidr = tp;
		}

		snprintf(path, sizeof path, "%s/xtrace.%llu.%d.hint9.xsnapshot.bin", dir, ts, (int)pid);
		FILE *sf = fopen(path, "wb");
		uint32_t vl = 128;
		for (size_t i = 0; i < npts; i++)
			if (pts[i].done && pts[i].vl_bits) {
				vl = pts[i].vl_bits;
				break;
			}
		struct tk_xtrace_snap_layout lay;
		if (tk_xtrace_snap_layout(vl, &lay) < 0)
			tk_xtrace_snap_layout(vl = 128, &lay);
		uint8_t *rec = malloc(lay.size);
		uint8_t hdr[TK_XTRACE_HEADER_SIZE];
		struct tk_xtrace_header h = { .mem_order = (uint8_t)with_time };
		tk_xtrace_header_encode(&h, hdr);
		if (sf && rec)
			fwrite(hdr, 1, sizeof hdr, sf);
		size_t missing = 0;
		for (size_t i = 0; sf && rec && i < npts; i++) {
			struct point *pt = &pts[i];
			uint8_t pslots[16 * 32] = { 0 };
			if (!pt->done)
				missing++;
			for (int r = 0; r < 16; r++)
				memcpy(pslots + (size_t)r * lay.p_slot, pt->p + 32 * r, lay.p_bytes);
			pt->s.file_no = 0;
			pt->s.index = pt->offset;
			pt->s.user_insns = pt->user;
			pt->s.total_insns = pt->total;
			pt->s.z = pt->z;
			pt->s.p = pslots;
			pt->s.ffr = pt->ffr;
			pt->s.za = NULL;
			pt->s.sys[TK_XT_TPIDR_EL0] = pt->tpidr;
			tk_xtrace_snap_encode(&lay, &pt->s, rec);
			fwrite(rec, 1, lay.size, sf);
		}
		if (!sf || fclose(sf) != 0) {
			CMD_ERROR(c, path, UINT64_MAX, "cannot write the snapshot file");
			rc = TK_EXIT_INPUT;
		}
		free(rec);
		if (missing) {
			CMD_WARN(c, path, UINT64_MAX, "%zu of %zu snapshots have no registers: the "
				 "second run did not reach them (is the program deterministic?)",
				 missing, npts);
			rc = TK_EXIT_SKIPPED;
		}
	}
	/* The plugin's count file, if the block above did not read it (no snapshot point). */
	snprintf(path, sizeof path, "%s/xtrace.%llu.%d.runs", dir, ts, (int)pid);
	unlink(path);
	uint64_t t2 = tk_now_ns();
	if (!o->quiet)
		CMD_NOTE(c, NULL, "wrote %s/xtrace.%llu.*.hint9.{xinsndata,xsnapshot}.bin: "
			"%zu snapshots; program exited with status %d; trace run %.2f s, register "
			"run %.2f s", dir, ts, npts, prog_status, (double)(t1 - t0) / 1e9,
			(double)(t2 - t1) / 1e9);
	free(pts);
	free(fix);
	free(argv);
	return rc;
}

