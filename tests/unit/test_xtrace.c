/* xtrace: writer -> reader round trip, snapshot layout, chunking, classification, names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracekit/xtrace.h"

/* Write a trace into memory through a pipe-less temporary file pair. */
static uint8_t *slurp(FILE *f, size_t *n)
{
	fflush(f);
	long len = ftell(f);
	uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
	rewind(f);
	*n = fread(p, 1, (size_t)len, f);
	return p;
}

static void test_round_trip(void **state)
{
	(void)state;
	FILE *fi = tmpfile(), *fs = tmpfile();
	int err = 0;
	struct tk_xtrace_writer_opts wo = { .sz = sizeof wo, .vl_bits = 512 };
	wo.header.mem_order = 1;
	struct tk_xtrace_writer *w = tk_xtrace_writer_new(fileno(fi), fileno(fs), &wo, &err);
	assert_non_null(w);
	struct tk_xtrace_snapshot s = { .user_insns = 0, .total_insns = 0 };
	for (int r = 0; r < 32; r++)
		s.x[r] = 0x1000u + (unsigned)r;
	s.sys[TK_XT_TPIDR_EL0] = 0xabc;
	assert_int_equal(tk_xtrace_write_snapshot(w, &s), 0);
	uint8_t v16[16];
	for (int i = 0; i < 16; i++)
		v16[i] = (uint8_t)i;
	uint64_t pc = 0x400000, iov[4] = { 1, 2, 3, 4 };
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(tk_xtrace_write_insn(w, 0, pc, 0xd503201f, 0), 0);
		if (i % 7 == 0)
			tk_xtrace_write_mem(w, i & 1, 0x5000 + (uint64_t)i, v16, 3);
		if (i % 100 == 99) {
			s.user_insns = s.total_insns = (uint64_t)i + 1;
			tk_xtrace_write_snapshot(w, &s);
		}
		pc = i % 13 == 0 ? pc + 64 : pc + 4;
	}
	tk_xtrace_write_value(w, TK_XT_SVCARG, 64);
	tk_xtrace_write_value(w, TK_XT_TIME, 99);
	tk_xtrace_write_value(w, TK_XT_FLAGS, 0x60000000);
	tk_xtrace_write_allgpr(w, s.x);
	tk_xtrace_write_syscall_vec(w, iov, 2);
	tk_xtrace_write_mem(w, 1, 0x6000, v16, 4);
	assert_int_equal(tk_xtrace_write_value(w, TK_XT_INST, 1), -TK_E_INVAL);
	assert_int_equal(tk_xtrace_writer_close(w), 0);

	size_t n, sn;
	uint8_t *p = slurp(fi, &n), *sp = slurp(fs, &sn);
	struct tk_format_info info;
	assert_true(tk_xtrace_probe(p, n, &info) > 0);
	assert_int_equal(info.id, TK_FMT_XTRACE_INSN);
	assert_true(tk_xtrace_probe(sp, sn, &info) > 0);
	assert_int_equal(info.id, TK_FMT_XTRACE_SNAP);

	struct tk_xtrace *t = tk_xtrace_new(p, n, sp, sn, &err);
	assert_non_null(t);
	const struct tk_xtrace_snapfile *sf = tk_xtrace_snapfile(t);
	assert_int_equal(tk_xtrace_snapfile_count(sf), 11);
	assert_int_equal(tk_xtrace_snapfile_layout(sf)->vl_bits, 512);
	assert_int_equal(tk_xtrace_snapfile_header(sf)->mem_order, 1);
	/* The last snapshot is followed by no instruction: not a sync point. */
	assert_int_equal(tk_xtrace_nchunks(t), 10);
	struct tk_xtrace_snapshot g;
	assert_int_equal(tk_xtrace_snapfile_get(sf, 3, &g), 0);
	assert_int_equal(g.user_insns, 300);
	assert_int_equal(g.x[5], 0x1005);
	assert_int_equal(g.sys[TK_XT_TPIDR_EL0], 0xabc);
	assert_int_equal(g.vl_bits, 512);

	/* Every chunk, walked on its own, gives back the PCs that were written. */
	uint64_t want = 0x400000;
	int count = 0, kinds[TK_XT__COUNT] = { 0 };
	for (size_t ci = 0; ci < tk_xtrace_nchunks(t); ci++) {
		size_t b, e;
		struct tk_xtrace_cursor c;
		struct tk_xtrace_item it;
		tk_xtrace_chunk(t, ci, &b, &e);
		tk_xtrace_cursor_init(&c, p, b, e);
		int r;
		while ((r = tk_xtrace_next(&c, &it)) > 0) {
			kinds[it.kind]++;
			if (it.kind <= TK_XT_PCINST) {
				assert_int_equal(it.pc, want);
				want = count % 13 == 0 ? want + 64 : want + 4;
				count++;
			} else if (it.kind == TK_XT_LOAD || it.kind == TK_XT_STORE) {
				assert_memory_equal(it.data, v16, it.data_len);
			} else if (it.kind == TK_XT_SYSCALL_VEC) {
				assert_int_equal(it.value, 2);
				assert_int_equal(tk_le64(it.data + 24), 4);
			}
		}
		assert_int_equal(r, 0);
	}
	assert_int_equal(count, 1000);
	assert_int_equal(kinds[TK_XT_TIME], 1);
	assert_int_equal(kinds[TK_XT_ALLGPR], 1);
	assert_int_equal(kinds[TK_XT_FLAGS], 1);
	assert_int_equal(kinds[TK_XT_SVCARG], 1);

	/* Statistics merged over chunks equal one pass. */
	struct tk_xtrace_stats all, part;
	struct tk_gap_stats gaps = { 0 };
	tk_xtrace_stats_init(&all, 1);
	for (size_t ci = 0; ci < tk_xtrace_nchunks(t); ci++) {
		tk_xtrace_stats_init(&part, 1);
		tk_xtrace_stats_chunk(t, ci, &part, &gaps);
		tk_xtrace_stats_merge(&all, &part);
		tk_xtrace_stats_free(&part);
	}
	assert_int_equal(all.insns[0], 1000);
	assert_int_equal(all.cls[TK_A64_SYSTEM], 1000);
	assert_int_equal(gaps.count, 0);
	assert_int_equal(all.loads + all.stores, 144);
	tk_xtrace_stats_free(&all);
	tk_xtrace_free(t);
	free(p);
	free(sp);
	fclose(fi);
	fclose(fs);
}

static void test_layout(void **state)
{
	(void)state;
	struct tk_xtrace_snap_layout l;
	assert_int_equal(tk_xtrace_snap_layout(100, &l), -TK_E_INVAL);
	assert_int_equal(tk_xtrace_snap_layout(128, &l), 0);
	assert_int_equal(l.off_z, 288);
	assert_int_equal(l.p_slot, 16);
	assert_int_equal(l.size, 288 + 32 * 16 + 16 * 16 + 16 + 256 + 88 + 8);
	for (uint32_t vl = 128; vl <= 2048; vl += 128) {
		assert_int_equal(tk_xtrace_snap_layout(vl, &l), 0);
		assert_int_equal(l.off_z % 16, 0);
		assert_int_equal(l.off_p % 16, 0);
		assert_int_equal(l.off_ffr % 16, 0);
		assert_int_equal(l.off_za % 16, 0);
		assert_int_equal(l.off_sys % 16, 0);
		assert_int_equal(l.size % 16, 0);
	}
}

static void test_item_len(void **state)
{
	(void)state;
	uint8_t b[64] = { 0 };
	b[0] = 0x01;
	assert_int_equal(tk_xtrace_item_len(b, 64), 5);
	b[0] = 0x49; /* PCINST, EL1 */
	assert_int_equal(tk_xtrace_item_len(b, 64), 13);
	b[0] = 0x11; /* INST class, subclass 2: unknown */
	assert_int_equal(tk_xtrace_item_len(b, 64), 0);
	b[0] = TK_XT_TOK_MEM(1, 5);
	assert_int_equal(tk_xtrace_item_len(b, 64), 1 + 8 + 32);
	b[0] = TK_XT_TOK_VAL(5);
	assert_int_equal(tk_xtrace_item_len(b, 64), 9);
	b[0] = TK_XT_TOK_VAL(6);
	assert_int_equal(tk_xtrace_item_len(b, 64), 0);
	b[0] = TK_XT_TOK_MISC(1);
	assert_int_equal(tk_xtrace_item_len(b, 64), 257);
	b[0] = TK_XT_TOK_MISC(2);
	assert_int_equal(tk_xtrace_item_len(b, 64), 0);
	b[0] = TK_XT_TOK_MISC(4);
	b[1] = 3;
	assert_int_equal(tk_xtrace_item_len(b, 64), 9 + 48);
	assert_int_equal(tk_xtrace_item_len(b, 5), SIZE_MAX);
	b[0] = TK_XT_TOK_TIME;
	assert_int_equal(tk_xtrace_item_len(b, 64), 9);
	b[0] = 0x0f;
	assert_int_equal(tk_xtrace_item_len(b, 64), 0);
	for (unsigned t = 0; t < 256; t++) {
		b[0] = (uint8_t)t;
		unsigned cls = t & 7;
		if (cls == 0 || cls == 5 || cls == 6)
			assert_int_equal(tk_xtrace_item_len(b, 64), 0);
	}
}

static void test_classify(void **state)
{
	(void)state;
	assert_int_equal(tk_a64_classify(0x94000001), TK_A64_CALL);        /* bl */
	assert_int_equal(tk_a64_classify(0x14000001), TK_A64_BR);          /* b */
	assert_int_equal(tk_a64_classify(0x54000040), TK_A64_BR_COND);     /* b.eq */
	assert_int_equal(tk_a64_classify(0xb4000040), TK_A64_BR_COND);     /* cbz */
	assert_int_equal(tk_a64_classify(0x36000040), TK_A64_BR_COND);     /* tbz */
	assert_int_equal(tk_a64_classify(0xd65f03c0), TK_A64_RET);
	assert_int_equal(tk_a64_classify(0xd63f0020), TK_A64_CALL_IND);    /* blr x1 */
	assert_int_equal(tk_a64_classify(0xd61f0020), TK_A64_BR_IND);      /* br x1 */
	assert_int_equal(tk_a64_classify(0xd69f03e0), TK_A64_ERET);
	assert_int_equal(tk_a64_classify(0xd4000001), TK_A64_SVC);
	assert_int_equal(tk_a64_classify(0xd503201f), TK_A64_SYSTEM);      /* nop */
	assert_int_equal(tk_a64_classify(0xf9400020), TK_A64_LOAD);        /* ldr x0, [x1] */
	assert_int_equal(tk_a64_classify(0xb9000020), TK_A64_STORE);       /* str w0, [x1] */
	assert_int_equal(tk_a64_classify(0xa9bf7bfd), TK_A64_STORE);       /* stp x29, x30 */
	assert_int_equal(tk_a64_classify(0xa8c17bfd), TK_A64_LOAD);        /* ldp */
	assert_int_equal(tk_a64_classify(0x58000040), TK_A64_LOAD);        /* ldr literal */
	assert_int_equal(tk_a64_classify(0xf8200020), TK_A64_ATOMIC);      /* ldadd */
	assert_int_equal(tk_a64_classify(0x25f90fe1), TK_A64_SVE);         /* whilelo */
	assert_int_equal(tk_a64_classify(0xa540a020), TK_A64_SVE_MEM);     /* ld1w */
	assert_int_equal(tk_a64_classify(0x8b020020), TK_A64_OTHER);       /* add */
	assert_int_equal(tk_a64_classify(0x1e602820), TK_A64_FP_SIMD);     /* fadd d0 */
	assert_int_equal(tk_a64_classify(0x00000000), TK_A64_UNDEF);
	assert_int_equal(tk_a64_hint(0xd503213f), 9);
	assert_int_equal(tk_a64_hint(0xd50321bf), 13);
	assert_int_equal(tk_a64_hint(0xd503201f), 0);

	int err = 0;
	struct tk_a64_disasm *d = tk_a64_disasm_new(&err);
	assert_non_null(d);
	char buf[128];
	tk_a64_disasm(d, 0x400000, 0xa540a020, buf, sizeof buf);
	assert_string_equal(buf, "ld1w { z0.s }, p0/z, [x1]");
	tk_a64_disasm(d, 0x400000, 0xd503477f, buf, sizeof buf);
	assert_string_equal(buf, "smstart");
	tk_a64_disasm(d, 0x400000, 0x00000000, buf, sizeof buf);
	assert_string_equal(buf, "udf #0x0");
	tk_a64_disasm_free(d);
}

static void test_names(void **state)
{
	(void)state;
	struct tk_xtrace_name nm;
	char buf[256];
	assert_int_equal(tk_xtrace_parse_name("/a/xtrace.17.4242.hint13.xsnapshot.bin", &nm), 1);
	assert_int_equal(nm.timestamp, 17);
	assert_int_equal(nm.id, 4242);
	assert_int_equal(nm.hint, 13);
	assert_int_equal(nm.is_snapshot, 1);
	assert_int_equal(tk_xtrace_parse_name("trace.bin", &nm), 0);
	assert_int_equal(tk_xtrace_companion("d/x.xinsndata.bin", buf, sizeof buf), 0);
	assert_string_equal(buf, "d/x.xsnapshot.bin");
	assert_int_equal(tk_xtrace_companion("d/x.xsnapshot.bin", buf, sizeof buf), 0);
	assert_string_equal(buf, "d/x.xinsndata.bin");
	assert_int_equal(tk_xtrace_companion("x.bin", buf, sizeof buf), -TK_E_NOT_FOUND);
}

static void test_damage(void **state)
{
	(void)state;
	/* PCINST, INST, unknown token, PCINST: the cursor stops at the bad token; resync
	 * finds the next PCINST. */
	uint8_t b[64];
	size_t n = 0;
	uint64_t pc = 0x400000;
	uint32_t op = 0xd503201f;
	b[n++] = 0x09; memcpy(b + n, &pc, 8); n += 8; memcpy(b + n, &op, 4); n += 4;
	b[n++] = 0x01; memcpy(b + n, &op, 4); n += 4;
	size_t bad = n;
	b[n++] = 0x00;
	size_t next = n;
	pc = 0x400100;
	b[n++] = 0x09; memcpy(b + n, &pc, 8); n += 8; memcpy(b + n, &op, 4); n += 4;
	struct tk_xtrace_cursor c;
	struct tk_xtrace_item it;
	tk_xtrace_cursor_init(&c, b, 0, n);
	assert_int_equal(tk_xtrace_next(&c, &it), 1);
	assert_int_equal(tk_xtrace_next(&c, &it), 1);
	assert_int_equal(it.pc, 0x400004);
	assert_int_equal(tk_xtrace_next(&c, &it), -TK_E_BAD_OPCODE);
	assert_int_equal(c.off, bad);
	assert_int_equal(tk_xtrace_resync(b, n, bad), next);
	tk_xtrace_cursor_init(&c, b, next, n - 1);
	assert_int_equal(tk_xtrace_next(&c, &it), -TK_E_TRUNCATED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip), cmocka_unit_test(test_layout),
		cmocka_unit_test(test_item_len), cmocka_unit_test(test_classify),
		cmocka_unit_test(test_names), cmocka_unit_test(test_damage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
