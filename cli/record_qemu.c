/* tracekit record --qemu: run an AArch64 program under qemu-aarch64 with tracekit's TCG
 * plugin (instruction stream), then once more, deterministically, with
 * `-singlestep -d cpu,fpu,nochain -dfilter` at the snapshot points to take the registers
 * that QEMU 7.2's plugin API cannot read. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define QEMU "qemu-aarch64"
#define SEED "1"  /* same guest random bytes (AT_RANDOM, getrandom) in both runs */

struct point {
	uint64_t user, total, offset, pc, occurrence;
	uint64_t seen;
	int done;
	struct tk_xtrace_snapshot s;
	uint8_t z[32 * 256], p[16 * 32], ffr[32];
	uint32_t vl_bits;
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

static pid_t spawn(char **argv, int out_fd, int log_fd)
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
		fprintf(stderr, "tracekit: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* Words of a "Xnn=hex" or "Z00[3-2]=h:h:h:h" value, high first, into W (at most MAX). */
static int hex_words(const char *v, uint64_t *w, int max)
{
	int n = 0;
	while (*v && n < max) {
		char *end;
		w[n++] = strtoull(v, &end, 16);
		if (*end != ':')
			break;
		v = end + 1;
	}
	return n;
}

/* Put words (high first) into little-endian bytes. */
static void words_le(const uint64_t *w, int n, uint8_t *out)
{
	for (int i = 0; i < n; i++)
		memcpy(out + 8 * (size_t)(n - 1 - i), &w[i], 8);
}

/* Parse one -d cpu,fpu dump (lines in BUF) into P. */
static void parse_dump(char *buf, struct point *pt)
{
	uint64_t zw[32][40];
	int zn[32] = { 0 }, cur_z = -1;
	memset(&pt->s, 0, sizeof pt->s);
	for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n")) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq = 0;
		const char *v = eq + 1;
		uint64_t w[40];
		if (tok[0] == 'X' && tok[1] >= '0' && tok[1] <= '9') {
			int r = atoi(tok + 1);
			if (r >= 0 && r < 31)
				pt->s.x[r] = strtoull(v, NULL, 16);
		} else if (strcmp(tok, "SP") == 0) {
			pt->s.x[31] = strtoull(v, NULL, 16);
		} else if (strcmp(tok, "PSTATE") == 0) {
			pt->s.sys[TK_XT_NZCV] = strtoull(v, NULL, 16) & 0xf0000000u;
		} else if (strcmp(tok, "FPCR") == 0) {
			pt->s.sys[TK_XT_FPCR] = strtoull(v, NULL, 16);
		} else if (strcmp(tok, "FPSR") == 0) {
			pt->s.sys[TK_XT_FPSR] = strtoull(v, NULL, 16);
		} else if (tok[0] == 'P' && tok[1] >= '0' && tok[1] <= '9') {
			int r = atoi(tok + 1), n = hex_words(v, w, 4);
			if (r >= 0 && r < 16)
				words_le(w, n, pt->p + 32 * r);
		} else if (strcmp(tok, "FFR") == 0) {
			words_le(w, hex_words(v, w, 4), pt->ffr);
		} else if (tok[0] == 'Z' && tok[1] >= '0' && tok[1] <= '9') {
			cur_z = atoi(tok + 1);
			if (cur_z >= 0 && cur_z < 32)
				zn[cur_z] += hex_words(v, zw[cur_z] + zn[cur_z], 40 - zn[cur_z]);
		} else if (tok[0] == '[' && cur_z >= 0 && cur_z < 32) {
			zn[cur_z] += hex_words(v, zw[cur_z] + zn[cur_z], 40 - zn[cur_z]);
		}
	}
	pt->vl_bits = (uint32_t)zn[0] * 64;
	for (int r = 0; r < 32; r++)
		words_le(zw[r], zn[r], pt->z + (size_t)r * (pt->vl_bits / 8));
	pt->done = 1;
}

/* Second run: read the -d cpu log from FD and fill the points. */
static void read_dumps(int fd, struct point *pts, size_t npts)
{
	FILE *f = fdopen(fd, "r");
	char line[1024];
	char *dump = NULL;
	size_t dlen = 0, dcap = 0;
	struct point *cur = NULL;
	if (!f)
		return;
	for (;;) {
		int eof = !fgets(line, sizeof line, f);
		int starts = !eof && strncmp(line, " PC=", 4) == 0;
		if ((eof || starts) && cur) {
			parse_dump(dump, cur);
			cur = NULL;
		}
		if (eof)
			break;
		if (starts) {
			uint64_t pc = strtoull(line + 4, NULL, 16);
			/* Each snapshot point is the occurrence-th execution of its pc. */
			for (size_t i = 0; i < npts; i++) {
				if (pts[i].pc != pc)
					continue;
				pts[i].seen++;
				if (pts[i].seen == pts[i].occurrence && !pts[i].done)
					cur = &pts[i];
			}
			/* Points sharing a pc count the same executions: keep them in step. */
			dlen = 0;
		}
		if (cur) {
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

int cli_record_qemu(struct cli_opts *o)
{
	const char *dir = o->output ? o->output : ".";
	char plugin[8192], arg[12288];
	struct stat st;
	if (find_plugin(plugin, sizeof plugin) < 0) {
		cli_error(NULL, UINT64_MAX, "record: cannot find libtracekit-qemu.so (set TK_QEMU_PLUGIN)");
		return EXIT_INPUT;
	}
	if (stat(dir, &st) < 0 && mkdir(dir, 0755) < 0) {
		cli_error(dir, UINT64_MAX, "cannot create the output directory: %s", strerror(errno));
		return EXIT_INPUT;
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
		fprintf(stderr, "tracekit: recording %s under %s%s\n", o->args[0], QEMU,
			gate ? " (collection between HINT #9 instructions)" : "");
	uint64_t t0 = tk_now_ns();
	pid_t pid = spawn(argv, -1, -1);
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		cli_error(NULL, UINT64_MAX, "record: cannot run %s", QEMU);
		free(argv);
		return EXIT_INPUT;
	}
	uint64_t t1 = tk_now_ns();
	int prog_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

	/* Snapshot points of the main thread (its tid is qemu's pid). */
	char path[8192];
	snprintf(path, sizeof path, "%s/xtrace.%llu.%d.points", dir, ts, (int)pid);
	FILE *pf = fopen(path, "r");
	struct point *pts = NULL;
	size_t npts = 0, cap = 0;
	unsigned long long a, b, c, d, e;
	while (pf && fscanf(pf, "%llu %llu %llu %llu %llu", &a, &b, &c, &d, &e) == 5) {
		if (npts == cap) {
			cap = cap ? 2 * cap : 16;
			struct point *np = realloc(pts, cap * sizeof *pts);
			if (!np)
				break;
			pts = np;
		}
		memset(&pts[npts], 0, sizeof pts[npts]);
		pts[npts++] = (struct point){ .user = a, .total = b, .offset = c, .pc = d, .occurrence = e };
	}
	if (pf) {
		fclose(pf);
		unlink(path);
	}
	int rc = EXIT_CLEAN;
	if (npts) {
		/* Second run: register dumps at the snapshot pcs only. */
		size_t flen = 0;
		char *filter = malloc(npts * 40 + 1);
		filter[0] = 0;
		for (size_t i = 0; i < npts; i++)
			flen += (size_t)sprintf(filter + flen, "%s0x%" PRIx64 "+4", i ? "," : "", pts[i].pc);
		int pfd[2];
		if (pipe(pfd) < 0) {
			free(filter);
			free(pts);
			free(argv);
			return EXIT_INPUT;
		}
		k = 0;
		argv[k++] = (char *)QEMU;
		argv[k++] = (char *)"-seed";
		argv[k++] = (char *)SEED;
		argv[k++] = (char *)"-singlestep";
		argv[k++] = (char *)"-d";
		argv[k++] = (char *)"cpu,fpu,nochain";
		argv[k++] = (char *)"-dfilter";
		argv[k++] = filter;
		argv[k++] = (char *)"-D";
		argv[k++] = (char *)"/dev/fd/3";
		for (int i = 0; i < o->nargs; i++)
			argv[k++] = o->args[i];
		argv[k] = NULL;
		int devnull = open("/dev/null", O_WRONLY);
		pid_t p2 = spawn(argv, devnull, pfd[1]);
		close(pfd[1]);
		if (devnull >= 0)
			close(devnull);
		read_dumps(pfd[0], pts, npts);
		waitpid(p2, &status, 0);
		free(filter);

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
			tk_xtrace_snap_encode(&lay, &pt->s, rec);
			fwrite(rec, 1, lay.size, sf);
		}
		if (!sf || fclose(sf) != 0) {
			cli_error(path, UINT64_MAX, "cannot write the snapshot file");
			rc = EXIT_INPUT;
		}
		free(rec);
		if (missing) {
			cli_warn(path, UINT64_MAX, "%zu of %zu snapshots have no registers: the "
				 "second run did not reach them (is the program deterministic?)",
				 missing, npts);
			rc = EXIT_SKIPPED;
		}
	}
	uint64_t t2 = tk_now_ns();
	if (!o->quiet)
		fprintf(stderr, "tracekit: wrote %s/xtrace.%llu.*.hint9.{xinsndata,xsnapshot}.bin: "
			"%zu snapshots; program exited with status %d; trace run %.2f s, register "
			"run %.2f s\n", dir, ts, npts, prog_status, (double)(t1 - t0) / 1e9,
			(double)(t2 - t1) / 1e9);
	free(pts);
	free(argv);
	return rc;
}
