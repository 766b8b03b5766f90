/* dump's text of Kanata commands. */
#include "tracekit/kanata.h"

/* (not printf: its parsing of the format was 40 % of a dump) */
static void tab_i64(struct tk_buf *b, int64_t v)
{
	tk_buf_putc(b, '\t');
	tk_buf_i64(b, v);
}

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
		tab_i64(b, c->id);
		tab_i64(b, c->a);
		tk_buf_putc(b, '\t');
		tk_buf_text(b, c->text, c->text_len);
		break;
	case TK_KANATA_STAGE_BEGIN:
	case TK_KANATA_STAGE_END:
		tab_i64(b, c->id);
		tk_buf_putc(b, '\t');
		tk_buf_put(b, c->lane, c->lane_len);
		tk_buf_putc(b, '\t');
		tk_buf_text(b, c->text, c->text_len);
		break;
	default:
		tab_i64(b, c->id);
		tab_i64(b, c->a);
		tab_i64(b, c->b);
		break;
	}
	tk_buf_putc(b, '\n');
}
