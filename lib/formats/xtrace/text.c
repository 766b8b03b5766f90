/* dump's and decode's text of xtrace items and snapshots. */
#include <stdio.h>
#include <string.h>

#include "tracekit/xtrace.h"

void tk_xtrace_item_text(struct tk_buf *b, const struct tk_xtrace_item *it)
{
	tk_buf_puts(b, tk_xtrace_kind_name(it->kind));
	switch (it->kind) {
	case TK_XT_INST:
	case TK_XT_PCINST:
		tk_buf_puts(b, " el");
		tk_buf_u64(b, it->el);
		tk_buf_puts(b, " pc ");
		if (it->pc == TK_XTRACE_PC_UNKNOWN)
			tk_buf_puts(b, "????????????????");
		else
			tk_buf_hex(b, it->pc, 16);
		tk_buf_puts(b, " opcode ");
		tk_buf_hex(b, it->opcode, 8);
		break;
	case TK_XT_LOAD:
	case TK_XT_STORE:
		tk_buf_puts(b, " addr ");
		tk_buf_hex(b, it->value, 16);
		tk_buf_puts(b, " size ");
		tk_buf_u64(b, it->data_len);
		if (it->data_len <= 8) {
			uint64_t v = 0;
			memcpy(&v, it->data, it->data_len);
			tk_buf_puts(b, " value 0x");
			tk_buf_hex(b, v, (int)it->data_len * 2);
		} else {
			tk_buf_puts(b, " bytes ");
			tk_buf_hex_bytes(b, it->data, it->data_len, ' ');
		}
		break;
	case TK_XT_ALLGPR:
		for (int r = 0; r < 32; r++) {
			tk_buf_puts(b, r == 31 ? " sp=" : " x");
			if (r < 31) {
				tk_buf_u64(b, (uint64_t)r);
				tk_buf_putc(b, '=');
			}
			tk_buf_hex(b, tk_le64(it->data + 8 * r), 0);
		}
		break;
	case TK_XT_FLAGS:
		tk_buf_puts(b, " nzcv 0x");
		tk_buf_hex(b, it->value, 8);
		tk_buf_putc(b, ' ');
		tk_buf_putc(b, it->value >> 31 & 1 ? 'N' : 'n');
		tk_buf_putc(b, it->value >> 30 & 1 ? 'Z' : 'z');
		tk_buf_putc(b, it->value >> 29 & 1 ? 'C' : 'c');
		tk_buf_putc(b, it->value >> 28 & 1 ? 'V' : 'v');
		break;
	case TK_XT_SYSCALL_VEC:
		tk_buf_puts(b, " count ");
		tk_buf_u64(b, it->value);
		for (uint64_t i = 0; i < it->value; i++) {
			tk_buf_puts(b, " {base 0x");
			tk_buf_hex(b, tk_le64(it->data + 16 * i), 0);
			tk_buf_puts(b, " len ");
			tk_buf_u64(b, tk_le64(it->data + 16 * i + 8));
			tk_buf_putc(b, '}');
		}
		break;
	case TK_XT_TIME:
		tk_buf_putc(b, ' ');
		tk_buf_u64(b, it->value);
		break;
	default:
		tk_buf_puts(b, " 0x");
		tk_buf_hex(b, it->value, 0);
		break;
	}
}

/* xtrace snapshot file: header, then every snapshot's fields and registers. */
void tk_xtrace_snapfile_text(struct tk_buf *b, const struct tk_xtrace_snapfile *sf, int no_offset,
			     int no_registers)
{
	const struct tk_xtrace_header *h = tk_xtrace_snapfile_header(sf);
	const struct tk_xtrace_snap_layout *l = tk_xtrace_snapfile_layout(sf);
	if (h) {
		if (!no_offset)
			tk_buf_puts(b, "0000000000000000  ");
		tk_buf_printf(b, "HEADER magic 0x%08x global_snapshot %u version %llu split %u "
			      "stream %u mem_order %u\n", h->magic, h->global_snapshot,
			      (unsigned long long)h->version, h->split_type, h->stream_type,
			      h->mem_order);
	} else {
		tk_buf_puts(b, "# no header (old trace)\n");
	}
	for (size_t i = 0; i < tk_xtrace_snapfile_count(sf); i++) {
		struct tk_xtrace_snapshot s;
		tk_xtrace_snapfile_get(sf, i, &s);
		if (!no_offset) {
			tk_buf_hex(b, s.offset, 16);
			tk_buf_puts(b, "  ");
		}
		tk_buf_printf(b, "SNAPSHOT %zu file %llu index 0x%llx user %llu total %llu vl %llu\n",
			      i, (unsigned long long)s.file_no, (unsigned long long)s.index,
			      (unsigned long long)s.user_insns, (unsigned long long)s.total_insns,
			      (unsigned long long)s.vl_bits);
		if (no_registers)
			continue;
		for (int r = 0; r < 32; r++) {
			char name[8];
			snprintf(name, sizeof name, r == 31 ? "sp" : "x%d", r);
			tk_buf_printf(b, "%s%-3s %016llx", r % 4 ? "  " : "    ", name,
				      (unsigned long long)s.x[r]);
			if (r % 4 == 3)
				tk_buf_putc(b, '\n');
		}
		for (int r = 0; r < 32; r++) {
			tk_buf_printf(b, "    z%-2d ", r);
			tk_buf_hex_bytes(b, s.z + (size_t)r * l->vl_bytes, l->vl_bytes, 0);
			tk_buf_putc(b, '\n');
		}
		for (int r = 0; r < 16; r++) {
			tk_buf_printf(b, "    p%-2d ", r);
			tk_buf_hex_bytes(b, s.p + (size_t)r * l->p_slot, l->p_bytes, 0);
			tk_buf_putc(b, '\n');
		}
		tk_buf_puts(b, "    ffr ");
		tk_buf_hex_bytes(b, s.ffr, l->p_bytes, 0);
		tk_buf_putc(b, '\n');
		size_t za = (size_t)l->vl_bytes * l->vl_bytes, nz = 0;
		for (size_t k = 0; k < za; k++)
			nz += s.za[k] != 0;
		if (!nz) {
			tk_buf_puts(b, "    za  all zero\n");
		} else {
			for (size_t row = 0; row < l->vl_bytes; row++) {
				tk_buf_printf(b, "    za[%zu] ", row);
				tk_buf_hex_bytes(b, s.za + row * l->vl_bytes, l->vl_bytes, 0);
				tk_buf_putc(b, '\n');
			}
		}
		for (int r = 0; r < TK_XTRACE_NSYSREG; r++)
			tk_buf_printf(b, "    %-11s %016llx\n", tk_xtrace_sysreg_name((unsigned)r),
				      (unsigned long long)s.sys[r]);
	}
}

