/* ptrace-step: run a program under ptrace single-stepping and print every instruction it
 * executes, so tests know a program's true instruction stream without any trace decoder.
 *
 *   ptrace-step [-o FILE] PROGRAM [ARGS...]
 *
 * Output, one line per executed instruction:  ADDR LEN KIND   (hex address, length, and
 * KIND: c call, r return, j jump or conditional branch, s syscall, n other), then at exit
 * one line per executable mapping:  map START END OFFSET PATH, and finally  exit STATUS.
 * x86-64 only (instruction lengths and kinds from Zydis). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <Zydis/Zydis.h>

struct cached {
	uint64_t addr;
	uint8_t len;
	char kind;
};

#define CACHE_BITS 16
static struct cached cache[1 << CACHE_BITS];

static char classify(const ZydisDecodedInstruction *insn)
{
	switch (insn->mnemonic) {
	case ZYDIS_MNEMONIC_CALL:
		return 'c';
	case ZYDIS_MNEMONIC_RET:
		return 'r';
	case ZYDIS_MNEMONIC_SYSCALL:
	case ZYDIS_MNEMONIC_SYSENTER:
		return 's';
	default:
		break;
	}
	if (insn->meta.category == ZYDIS_CATEGORY_COND_BR || insn->meta.category == ZYDIS_CATEGORY_UNCOND_BR)
		return 'j';
	return 'n';
}

static int decode_at(pid_t pid, uint64_t addr, ZydisDecoder *dec, struct cached *out)
{
	uint8_t buf[16];
	for (int i = 0; i < 2; i++) {
		errno = 0;
		long w = ptrace(PTRACE_PEEKTEXT, pid, (void *)(addr + 8 * (uint64_t)i), NULL);
		if (errno)
			return -1;
		memcpy(buf + 8 * i, &w, 8);
	}
	ZydisDecodedInstruction insn;
	if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(dec, NULL, buf, sizeof buf, &insn)))
		return -1;
	out->addr = addr;
	out->len = insn.length;
	out->kind = classify(&insn);
	return 0;
}

static void print_maps(pid_t pid, FILE *out)
{
	char path[64], line[4096];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		unsigned long long start, end, off;
		char perms[8], file[4096];
		file[0] = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &start, &end, perms, &off, file) < 4)
			continue;
		if (perms[2] != 'x' || file[0] != '/')
			continue;
		fprintf(out, "map %llx %llx %llx %s\n", start, end, off, file);
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	FILE *out = stdout;
	int argi = 1;
	if (argc > 2 && !strcmp(argv[1], "-o")) {
		out = fopen(argv[2], "w");
		if (!out) {
			perror(argv[2]);
			return 2;
		}
		argi = 3;
	}
	if (argi >= argc) {
		fprintf(stderr, "usage: ptrace-step [-o FILE] PROGRAM [ARGS...]\n");
		return 2;
	}
	static char obuf[1 << 20];
	setvbuf(out, obuf, _IOFBF, sizeof obuf);

	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 2;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", 1);
		if (devnull >= 0)
			dup2(devnull, 1); /* the traced program's output must not mix with ours */
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		execvp(argv[argi], argv + argi);
		_exit(127);
	}
	int status;
	if (waitpid(pid, &status, 0) < 0 || !WIFSTOPPED(status)) {
		fprintf(stderr, "ptrace-step: %s did not start\n", argv[argi]);
		return 2;
	}
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)(PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL));

	ZydisDecoder dec;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	int sig = 0;
	for (;;) {
		struct user_regs_struct regs;
		if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) < 0)
			break;
		uint64_t ip = regs.rip;
		struct cached *c = &cache[(ip ^ (ip >> CACHE_BITS)) & ((1 << CACHE_BITS) - 1)];
		if (c->addr != ip || !c->len) {
			if (decode_at(pid, ip, &dec, c) < 0) {
				c->addr = ip;
				c->len = 1;
				c->kind = '?';
			}
		}
		fprintf(out, "%llx %u %c\n", (unsigned long long)ip, c->len, c->kind);
		if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig) < 0)
			break;
		sig = 0;
		for (;;) {
			if (waitpid(pid, &status, 0) < 0)
				goto done;
			if (WIFEXITED(status) || WIFSIGNALED(status))
				goto done;
			if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_EXIT << 8))) {
				print_maps(pid, out);
				ptrace(PTRACE_CONT, pid, NULL, NULL);
				continue;
			}
			break;
		}
		/* deliver real signals to the program with the next step */
		if (WIFSTOPPED(status) && WSTOPSIG(status) != SIGTRAP)
			sig = WSTOPSIG(status);
	}
done:
	if (WIFEXITED(status))
		fprintf(out, "exit %d\n", WEXITSTATUS(status));
	else
		fprintf(out, "exit signal %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
	fclose(out);
	return 0;
}
