/* tracekit's TCG plugin for qemu-aarch64 (QEMU 7.2): writes an xtrace instruction stream
 * per guest thread, and for the first thread a list of snapshot points from which
 * `tracekit record --qemu` fills in the registers (the 7.2 plugin API cannot read them).
 *
 * Arguments (-plugin PATH,arg=value,...):
 *   dir=DIR       output directory
 *   ts=N          timestamp in the file names
 *   gate=0|1      1: collect only between executions of HINT #9 (the seed's trigger)
 *   interval=N    snapshot every N user instructions (default 1000000)
 *   time=0|1      TIME items before memory accesses (memory order across threads)
 *
 * Files: DIR/xtrace.TS.TID.hint9.xinsndata.bin, and for the first thread
 * DIR/xtrace.TS.TID.points with one line per snapshot point:
 * "user total offset pc occurrence executed", occurrence being how many times the
 * instruction at pc had started executing, this time included, and executed how many
 * instructions the thread had started (collected or not); and DIR/xtrace.TS.TID.fixups with
 * one line per register value the plugin cannot read:
 * "offset pc occurrence what reg executed sysreg". The item is already in the stream with
 * value 0 at byte OFFSET (UINT64_MAX: no item, only TPIDR_EL0 tracking); `tracekit record`
 * takes the value from the register run's dump before the OCCURRENCE-th execution of PC:
 * register REG (x: 64 bits, w: low 32 bits), f: NZCV from PSTATE, g: X1-X30 and SP (ALLGPR;
 * X0 is written here, the syscall's return value); and DIR/xtrace.TS.TID.runs, "pc count"
 * per executed PC of the first thread. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "qemu_plugin_api.h"
#include "tracekit/xtrace.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

#define MAX_VCPUS 256
#define HASH_BITS 16

/* One per guest instruction address (shared by every translation of it). */
struct insn {
	uint64_t pc;
	uint64_t runs;          /* executions by vcpu 0 */
	uint32_t op;
	uint8_t cls;
	uint8_t hint;           /* HINT #9 */
	uint8_t fix;            /* FIX_*: a value the plugin cannot read (no register access) */
	uint8_t reg;            /* its register */
	struct insn *next;
};

/* Register values of VAL and MISC items, taken from the register run: BEFORE the
 * instruction (operand registers: dump at its own pc) or AFTER it (results: dump at the
 * next executed instruction). */
enum {
	FIX_NONE,
	FIX_STXR,       /* after: Ws, the status */
	FIX_MRS,        /* after: Xt, the value read */
	FIX_RNDR,       /* after: Xt, then NZCV (MISC_FLAGS) */
	FIX_FLAGS,      /* after: NZCV of a conditional select */
	FIX_SVC,        /* after: ALLGPR on the return from the kernel (EL1 -> EL0) */
	FIX_MSR,        /* before: Xt, the value written */
	FIX_DC,         /* before: Xt, the DC ZVA / GZVA address */
};
#define MSR_TPIDR_EL0 0xd51bd040u

static void classify_fix(struct insn *i)
{
	uint32_t op = i->op, rt = op & 31;
	i->reg = (uint8_t)rt;
	if ((op >> 23 & 0x7f) == 0x10 && !(op >> 22 & 1) && (!(op >> 21 & 1) || op >> 31)) {
		/* STXR, STLXR (B/H/W/X), STXP, STLXP; bit 31 clear with o1 is CASP */
		i->reg = (uint8_t)(op >> 16 & 31);
		i->fix = i->reg == 31 ? FIX_NONE : FIX_STXR;
	} else if ((op & 0xffffffc0u) == 0xd53b2400u) {
		i->fix = rt == 31 ? FIX_FLAGS : FIX_RNDR;      /* MRS RNDR / RNDRRS */
	} else if ((op & 0xfff00000u) == 0xd5300000u) {
		i->fix = rt == 31 ? FIX_NONE : FIX_MRS;
	} else if ((op & 0xfff00000u) == 0xd5100000u) {
		i->fix = FIX_MSR;
	} else if ((op & 0xffffffe0u) == 0xd50b7420u || (op & 0xffffffe0u) == 0xd50b7480u) {
		i->fix = FIX_DC;
	} else if ((op & 0x3fe00800u) == 0x1a800000u) {
		i->fix = FIX_FLAGS;                             /* CSEL, CSINC, CSINV, CSNEG */
	} else if ((op & 0xffe0001fu) == 0xd4000001u) {
		i->fix = FIX_SVC;
	}
}

struct vcpu {
	struct tk_xtrace_writer *w;
	FILE *points, *fixups, *runs_out;
	int fd;
	struct insn *pending_fix;       /* its value comes from the next instruction's dump */
	uint64_t executed;              /* instructions started, collected or not */
	uint64_t last_ret;              /* the last syscall's return value */
	int collecting, stopped;
	int pending_target;     /* the last instruction was BR/BLR/RET/ERET */
	uint64_t user, total;
	uint64_t next_snap;
};

static struct insn *table[1 << HASH_BITS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct vcpu vcpus[MAX_VCPUS];
static char out_dir[1024] = ".";
static unsigned long long ts;
static int gate, with_time;
static uint64_t interval = 1000000;
static uint64_t time_counter;
static int base_checked, base_ok;

/* Guest memory must be at the same host address (qemu-user's guest_base 0) for the values
 * of memory accesses; check once, on the first instruction, without risking a fault. */
static int check_guest_base(uint64_t pc, uint32_t op)
{
	uint32_t got = 0;
	struct iovec local = { &got, 4 }, remote = { (void *)(uintptr_t)pc, 4 };
	base_ok = process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 4 && got == op;
	if (!base_ok)
		fprintf(stderr, "tracekit-qemu: guest memory is not at its guest address "
			"(guest_base != 0): memory values cannot be read; not recording\n");
	base_checked = 1;
	return base_ok;
}

static struct insn *insn_for(uint64_t pc, uint32_t op)
{
	size_t h = (size_t)(tk_hash64(pc) & ((1u << HASH_BITS) - 1));
	pthread_mutex_lock(&lock);
	struct insn *i;
	for (i = table[h]; i; i = i->next)
		if (i->pc == pc && i->op == op)
			break;
	if (!i && (i = calloc(1, sizeof *i))) {
		i->pc = pc;
		i->op = op;
		i->cls = (uint8_t)tk_a64_classify(op);
		i->hint = tk_a64_hint(op) == 9;
		classify_fix(i);
		i->next = table[h];
		table[h] = i;
	}
	pthread_mutex_unlock(&lock);
	return i;
}

static struct vcpu *vcpu_get(unsigned idx)
{
	if (idx >= MAX_VCPUS)
		return NULL;
	struct vcpu *v = &vcpus[idx];
	if (v->w || v->stopped)
		return v->w ? v : NULL;
	char path[1200];
	long tid = syscall(SYS_gettid);
	snprintf(path, sizeof path, "%s/xtrace.%llu.%ld.hint9.xinsndata.bin", out_dir, ts, tid);
	v->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int err = 0;
	if (v->fd < 0 || !(v->w = tk_xtrace_writer_new(v->fd, -1, NULL, &err))) {
		fprintf(stderr, "tracekit-qemu: cannot write %s\n", path);
		v->stopped = 1;
		return NULL;
	}
	if (idx == 0) {
		snprintf(path, sizeof path, "%s/xtrace.%llu.%ld.points", out_dir, ts, tid);
		v->points = fopen(path, "w");
		snprintf(path, sizeof path, "%s/xtrace.%llu.%ld.fixups", out_dir, ts, tid);
		v->fixups = fopen(path, "w");
		snprintf(path, sizeof path, "%s/xtrace.%llu.%ld.runs", out_dir, ts, tid);
		v->runs_out = fopen(path, "w");
	}
	v->collecting = !gate;
	return v;
}

/* A VAL or MISC item with value 0 now, and the line that tells `tracekit record` where its
 * value is in the register run. */
static void fix_item(struct vcpu *v, const struct insn *at, unsigned kind, char what,
		     unsigned reg, uint32_t sysreg)
{
	uint64_t off = tk_xtrace_writer_offset(v->w) + 1;
	if (kind == TK_XT_ALLGPR) {
		/* X0 is the syscall's result from this run (the register run's may differ:
		 * getpid); `tracekit record` fills X1-X30 and SP. */
		uint64_t x[32] = { v->last_ret };
		tk_xtrace_write_allgpr(v->w, x);
	} else {
		tk_xtrace_write_value(v->w, kind, 0);
	}
	fprintf(v->fixups, "%llu %llu %llu %c %u %llu %u\n", (unsigned long long)off,
		(unsigned long long)at->pc, (unsigned long long)at->runs, what, reg,
		(unsigned long long)v->executed, sysreg);
}

/* Items whose value is the state after instruction P, now that the next one (AT) runs. */
static void fix_after(struct vcpu *v, const struct insn *p, const struct insn *at)
{
	switch (p->fix) {
	case FIX_STXR: fix_item(v, at, TK_XT_STXR, 'w', p->reg, 0); break;
	case FIX_MRS: fix_item(v, at, TK_XT_MRS, 'x', p->reg, 0); break;
	case FIX_RNDR:
		fix_item(v, at, TK_XT_MRS, 'x', p->reg, 0);
		fix_item(v, at, TK_XT_FLAGS, 'f', 0, 0);
		break;
	case FIX_FLAGS: fix_item(v, at, TK_XT_FLAGS, 'f', 0, 0); break;
	case FIX_SVC: fix_item(v, at, TK_XT_ALLGPR, 'g', 0, 0); break;
	}
}

/* Items whose value is an operand of I (its own dump); XZR is known. */
static void fix_before(struct vcpu *v, const struct insn *i)
{
	unsigned kind = i->fix == FIX_DC ? TK_XT_DC : TK_XT_MRS;
	if (i->reg == 31)
		tk_xtrace_write_value(v->w, kind, 0);
	else
		fix_item(v, i, kind, 'x', i->reg, i->fix == FIX_MSR ? i->op & ~31u : 0);
}

static void on_exec(unsigned idx, void *ud)
{
	struct insn *i = ud;
	if (idx == 0)
		i->runs++;
	if (!base_checked)
		check_guest_base(i->pc, i->op);
	if (!base_ok)
		return;
	struct vcpu *v = vcpu_get(idx);
	if (!v)
		return;
	v->executed++;
	if (gate && i->hint) {
		v->collecting = !v->collecting;
		v->pending_target = 0;
		v->pending_fix = NULL;
		return;
	}
	if (!v->collecting) {
		/* TPIDR_EL0 set before collection (the C library's start-up) still counts for
		 * the snapshots' TPIDR_EL0. */
		if (v->fixups && (i->op & ~31u) == MSR_TPIDR_EL0 && i->reg != 31)
			fprintf(v->fixups, "%llu %llu %llu x %u %llu %u\n", (unsigned long long)UINT64_MAX,
				(unsigned long long)i->pc, (unsigned long long)i->runs, i->reg,
				(unsigned long long)v->executed, MSR_TPIDR_EL0);
		return;
	}
	if (v->pending_target) {
		tk_xtrace_write_value(v->w, TK_XT_TARGET_B, i->pc);
		v->pending_target = 0;
	}
	if (v->pending_fix) {
		fix_after(v, v->pending_fix, i);
		v->pending_fix = NULL;
	}
	int block_start = 0;
	if (v->points && v->user == v->next_snap) {
		fprintf(v->points, "%llu %llu %llu %llu %llu %llu\n", (unsigned long long)v->user,
			(unsigned long long)v->total,
			(unsigned long long)tk_xtrace_writer_offset(v->w),
			(unsigned long long)i->pc, (unsigned long long)i->runs,
			(unsigned long long)v->executed);
		v->next_snap += interval;
		block_start = 1;
	}
	tk_xtrace_write_insn(v->w, 0, i->pc, i->op, block_start);
	v->user++;
	v->total++;
	v->pending_target = i->cls == TK_A64_BR_IND || i->cls == TK_A64_CALL_IND ||
			    i->cls == TK_A64_RET || i->cls == TK_A64_ERET;
	/* Register values only for the thread the register run follows (the first). */
	if (v->fixups && i->fix) {
		if (i->fix >= FIX_MSR)
			fix_before(v, i);
		else
			v->pending_fix = i;
	}
}

static void on_mem(unsigned idx, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
	struct vcpu *v = idx < MAX_VCPUS ? &vcpus[idx] : NULL;
	if (!v || !v->w || !v->collecting)
		return;
	unsigned shift = qemu_plugin_mem_size_shift(info);
	uint8_t val[16] = { 0 };
	/* qemu-user maps guest memory at the same host address here (guest_base 0, checked
	 * in `tracekit record`); the callback runs after the access, so this is the value
	 * loaded or stored. */
	memcpy(val, (const void *)(uintptr_t)vaddr, (size_t)1 << (shift > 4 ? 4 : shift));
	if (with_time)
		tk_xtrace_write_value(v->w, TK_XT_TIME,
				      __atomic_fetch_add(&time_counter, 1, __ATOMIC_RELAXED));
	tk_xtrace_write_mem(v->w, qemu_plugin_mem_is_store(info), vaddr, val,
			    shift > 4 ? 4 : shift);
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	for (size_t k = 0; k < n; k++) {
		struct qemu_plugin_insn *qi = qemu_plugin_tb_get_insn(tb, k);
		uint32_t op = 0;
		memcpy(&op, qemu_plugin_insn_data(qi), 4);
		struct insn *i = insn_for(qemu_plugin_insn_vaddr(qi), op);
		if (!i)
			continue;
		qemu_plugin_register_vcpu_insn_exec_cb(qi, on_exec, QEMU_PLUGIN_CB_NO_REGS, i);
		qemu_plugin_register_vcpu_mem_cb(qi, on_mem, QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW, i);
	}
}

static void on_syscall(qemu_plugin_id_t id, unsigned idx, int64_t num, uint64_t a1,
		       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
		       uint64_t a7, uint64_t a8)
{
	struct vcpu *v = idx < MAX_VCPUS ? &vcpus[idx] : NULL;
	if (!v || !v->w || !v->collecting)
		return;
	uint64_t args[7] = { (uint64_t)num, a1, a2, a3, a4, a5, a6 };
	for (int k = 0; k < 7; k++)
		tk_xtrace_write_value(v->w, TK_XT_SVCARG, args[k]);
	/* readv, writev, preadv, pwritev: the iovecs. */
	if ((num == 65 || num == 66 || num == 69 || num == 70) && a3 <= 1024)
		tk_xtrace_write_syscall_vec(v->w, (const uint64_t *)(uintptr_t)a2, a3);
}

static void on_syscall_ret(qemu_plugin_id_t id, unsigned idx, int64_t num, int64_t ret)
{
	struct vcpu *v = idx < MAX_VCPUS ? &vcpus[idx] : NULL;
	if (!v || !v->w || !v->collecting)
		return;
	v->last_ret = (uint64_t)ret;
	tk_xtrace_write_value(v->w, TK_XT_SVCRET, (uint64_t)ret);
}

/* How often the first thread ran each PC: `tracekit record` keeps the register run's
 * -dfilter short by merging target PCs with little executed code between them. */
static void write_runs(FILE *f)
{
	for (size_t h = 0; h < (size_t)1 << HASH_BITS; h++)
		for (struct insn *i = table[h]; i; i = i->next)
			if (i->runs)
				fprintf(f, "%llu %llu\n", (unsigned long long)i->pc,
					(unsigned long long)i->runs);
}

static void on_atexit(qemu_plugin_id_t id, void *ud)
{
	for (int k = 0; k < MAX_VCPUS; k++) {
		struct vcpu *v = &vcpus[k];
		if (!v->w)
			continue;
		if (tk_xtrace_writer_close(v->w) < 0)
			fprintf(stderr, "tracekit-qemu: write error on the trace of vcpu %d\n", k);
		v->w = NULL;
		v->stopped = 1;
		close(v->fd);
		if (v->points)
			fclose(v->points);
		if (v->fixups)
			fclose(v->fixups);
		if (v->runs_out) {
			write_runs(v->runs_out);
			fclose(v->runs_out);
		}
		v->points = v->fixups = v->runs_out = NULL;
	}
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	if (info->system_emulation || strcmp(info->target_name, "aarch64") != 0) {
		fprintf(stderr, "tracekit-qemu: needs qemu-aarch64 (user mode)\n");
		return -1;
	}
	for (int k = 0; k < argc; k++) {
		const char *a = argv[k];
		if (strncmp(a, "dir=", 4) == 0)
			snprintf(out_dir, sizeof out_dir, "%s", a + 4);
		else if (strncmp(a, "ts=", 3) == 0)
			ts = strtoull(a + 3, NULL, 0);
		else if (strncmp(a, "gate=", 5) == 0)
			gate = atoi(a + 5);
		else if (strncmp(a, "time=", 5) == 0)
			with_time = atoi(a + 5);
		else if (strncmp(a, "interval=", 9) == 0)
			interval = strtoull(a + 9, NULL, 0);
		else {
			fprintf(stderr, "tracekit-qemu: unknown argument '%s'\n", a);
			return -1;
		}
	}
	if (!interval)
		interval = 1000000;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
	qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
	qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_ret);
	qemu_plugin_register_atexit_cb(id, on_atexit, NULL);
	return 0;
}
