/* xtrace instruction stream: items, the PC-tracking cursor, resynchronisation. */
#include "formats/xtrace/internal.h"

static const char *const kind_names[TK_XT__COUNT] = {
	[TK_XT_INST] = "INST", [TK_XT_PCINST] = "PCINST", [TK_XT_LOAD] = "LOAD",
	[TK_XT_STORE] = "STORE", [TK_XT_STXR] = "STXR", [TK_XT_MRS] = "MRS",
	[TK_XT_SVCARG] = "SVCARG", [TK_XT_SVCRET] = "SVCRET", [TK_XT_DC] = "DC",
	[TK_XT_TARGET_B] = "TARGET_B", [TK_XT_ALLGPR] = "ALLGPR", [TK_XT_FLAGS] = "MISC_FLAGS",
	[TK_XT_SYSCALL_VEC] = "SYSCALL_VEC", [TK_XT_TIME] = "TIME",
};

const char *tk_xtrace_kind_name(unsigned kind)
{
	return kind < TK_XT__COUNT ? kind_names[kind] : "?";
}

/* Kind of each token byte; 0xff: unknown. */
static uint8_t kind_of(unsigned t)
{
	unsigned hi = t >> 3;
	switch (t & 7) {
	case 1:
		if ((hi & 7) == 0)
			return TK_XT_INST;
		if ((hi & 7) == 1)
			return TK_XT_PCINST;
		return 0xff;
	case 2:
		return t & 8 ? TK_XT_STORE : TK_XT_LOAD;
	case 3:
		return hi <= 5 ? (uint8_t)(TK_XT_STXR + hi) : 0xff;
	case 4:
		return hi == 1 ? TK_XT_ALLGPR : hi == 3 ? TK_XT_FLAGS : hi == 4 ? TK_XT_SYSCALL_VEC : 0xff;
	case 7:
		return hi == 0 ? TK_XT_TIME : 0xff;
	}
	return 0xff;
}

void tk_xtrace_cursor_init(struct tk_xtrace_cursor *c, const uint8_t *p, size_t begin,
			   size_t end)
{
	c->p = p;
	c->off = begin;
	c->end = end;
	c->pc = TK_XTRACE_PC_UNKNOWN;
}

int tk_xtrace_next(struct tk_xtrace_cursor *c, struct tk_xtrace_item *it)
{
	size_t off = c->off, left = c->end - off;
	if (off >= c->end)
		return 0;
	const uint8_t *p = c->p + off;
	size_t len = xt_item_len(p, left);
	if (len == 0)
		return -TK_E_BAD_OPCODE;
	if (len == SIZE_MAX || len > left)
		return -TK_E_TRUNCATED;
	unsigned t = p[0];
	it->offset = off;
	it->token = (uint8_t)t;
	it->kind = kind_of(t);
	it->len = (uint32_t)len;
	it->data = NULL;
	it->data_len = 0;
	switch (it->kind) {
	case TK_XT_INST:
		c->pc = c->pc == TK_XTRACE_PC_UNKNOWN ? c->pc : c->pc + 4;
		it->pc = c->pc;
		it->opcode = tk_le32(p + 1);
		it->el = (uint8_t)(t >> 6);
		break;
	case TK_XT_PCINST:
		c->pc = it->pc = tk_le64(p + 1);
		it->opcode = tk_le32(p + 9);
		it->el = (uint8_t)(t >> 6);
		break;
	case TK_XT_LOAD:
	case TK_XT_STORE:
		it->value = tk_le64(p + 1);
		it->size_log2 = (uint8_t)(t >> 4);
		it->data = p + 9;
		it->data_len = (uint32_t)(len - 9);
		break;
	case TK_XT_ALLGPR:
		it->data = p + 1;
		it->data_len = 256;
		break;
	case TK_XT_SYSCALL_VEC:
		it->value = tk_le64(p + 1);
		it->data = p + 9;
		it->data_len = (uint32_t)(len - 9);
		break;
	default: /* VAL, FLAGS, TIME: one 8-byte value */
		it->value = tk_le64(p + 1);
		break;
	}
	c->off = off + len;
	return 1;
}

size_t tk_xtrace_resync(const uint8_t *p, size_t n, size_t off)
{
	for (size_t s = off + 1; s < n; s++) {
		if ((p[s] & 0x3f) != 0x09 || (p[s] >> 6) > 1)
			continue;
		/* A plausible PC: canonical user or kernel address, 4-byte aligned. */
		if (n - s < 13)
			break;
		uint64_t pc = tk_le64(p + s + 1);
		uint64_t top = pc >> 48;
		if ((pc & 3) || (top != 0 && top != 0xffff))
			continue;
		size_t q = s, items = 0;
		while (q < n && items < 32) {
			size_t len = tk_xtrace_item_len(p + q, n - q);
			if (len == 0 || len == SIZE_MAX || len > n - q)
				break;
			q += len;
			items++;
		}
		if (q == n || items == 32)
			return s;
	}
	return n;
}
