/* dump's text of Kanata commands. */
#include "tracekit/kanata.h"

void tk_kanata_cmd_text(struct tk_buf *b, const struct tk_kanata_cmd *c, int no_offset)
{
	static const char *const names[] = { "", "Kanata", "C=", "C", "I", "L", "S", "E", "R", "W" };

	tk_buf_u64(b, c->line);
	tk_buf_putc(b, '\t');
	if (!no_offset) {
		tk_buf_puts(b, "0x");
		tk_buf_hex(b, c->offset, 8);
		tk_buf_putc(b, '\t');
	}
	tk_buf_i64(b, c->cycle);
	tk_buf_putc(b, '\t');
	tk_buf_puts(b, c->kind <= TK_KANATA_DEP ? names[c->kind] : "?");
	switch (c->kind) {
	case TK_KANATA_HEADER:
	case TK_KANATA_CYCLE_SET:
	case TK_KANATA_CYCLE:
		tk_buf_putc(b, '\t');
		tk_buf_i64(b, c->a);
		break;
	case TK_KANATA_LABEL:
		tk_buf_printf(b, "\t%lld\t%lld\t", (long long)c->id, (long long)c->a);
		tk_buf_text(b, c->text, c->text_len);
		break;
	case TK_KANATA_STAGE_BEGIN:
	case TK_KANATA_STAGE_END:
		tk_buf_printf(b, "\t%lld\t", (long long)c->id);
		tk_buf_put(b, c->lane, c->lane_len);
		tk_buf_putc(b, '\t');
		tk_buf_text(b, c->text, c->text_len);
		break;
	default:
		tk_buf_printf(b, "\t%lld\t%lld\t%lld", (long long)c->id, (long long)c->a, (long long)c->b);
		break;
	}
	tk_buf_putc(b, '\n');
}
