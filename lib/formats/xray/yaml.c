/* The llvm-xray YAML trace (what `llvm-xray convert --output-format=yaml` prints), and the
 * record dump (what `llvm-xray fdr-dump` prints, with file offsets). Field order, key
 * spelling, omitted defaults and scalar quoting follow LLVM's YAML writer. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "formats/xray/internal.h"

/* ---- YAML scalar quoting (the rules of LLVM's needsQuotes) -------------------------------- */

static int all_in(const char *s, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(set, s[i]))
			return 0;
	return n > 0;
}

static size_t digits(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	return i;
}

static int is_numeric(const char *s, size_t n)
{
	if (!n)
		return 0;
#define EQ(lit) (n == sizeof(lit) - 1 && !memcmp(s, lit, n))
	if (EQ(".inf") || EQ(".Inf") || EQ(".INF") || EQ(".nan") || EQ(".NaN") || EQ(".NAN"))
		return 1;
	if (n > 2 && s[0] == '0' && s[1] == 'o')
		return all_in(s + 2, n - 2, "01234567");
	if (n > 2 && s[0] == '0' && s[1] == 'x')
		return all_in(s + 2, n - 2, "0123456789abcdefABCDEF");
	if (s[0] == '+' || s[0] == '-') {
		s++, n--;
		if (EQ(".inf") || EQ(".Inf") || EQ(".INF"))
			return 1;
	}
#undef EQ
	size_t i = 0;
	if (i < n && s[i] == '.') {
		i++;
		size_t d = digits(s + i, n - i);
		if (!d)
			return 0;
		i += d;
	} else {
		size_t d = digits(s, n);
		if (!d)
			return 0;
		i = d;
		if (i < n && s[i] == '.') {
			i++;
			i += digits(s + i, n - i);
		}
	}
	if (i == n)
		return 1;
	if (s[i] != 'e' && s[i] != 'E')
		return 0;
	i++;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		i++;
	size_t d = digits(s + i, n - i);
	return d && i + d == n;
}

enum { Q_NONE, Q_SINGLE, Q_DOUBLE };

static int needs_quotes(const char *s, size_t n)
{
	static const char indicators[] = "-?:\\,[]{}#&*!|>'\"%@`";
	int q = Q_NONE;

	if (!n)
		return Q_SINGLE;
	if (strchr(" \t\r\n\v\f", s[0]) || strchr(" \t\r\n\v\f", s[n - 1]))
		q = Q_SINGLE;
#define EQ(lit) (n == sizeof(lit) - 1 && !memcmp(s, lit, n))
	if (EQ("null") || EQ("Null") || EQ("NULL") || EQ("~") || EQ("true") || EQ("True") ||
	    EQ("TRUE") || EQ("false") || EQ("False") || EQ("FALSE") || is_numeric(s, n))
		q = Q_SINGLE;
#undef EQ
	if (s[0] && strchr(indicators, s[0]))
		q = Q_SINGLE;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
			continue;
		switch (c) {
		case '_': case '-': case '^': case '.': case ',': case ' ': case '\t':
			continue;
		case '\n': case '\r':
			q = Q_SINGLE;
			continue;
		case 0x7f:
			return Q_DOUBLE;
		default:
			if (c <= 0x1f || (c & 0x80))
				return Q_DOUBLE;
			q = Q_SINGLE;
		}
	}
	return q;
}

static void yaml_scalar(struct tk_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	switch (needs_quotes(s, n)) {
	case Q_NONE:
		tk_buf_put(b, s, n);
		return;
	case Q_SINGLE:
		tk_buf_putc(b, '\'');
		for (size_t i = 0; i < n; i++) {
			if (s[i] == '\'')
				tk_buf_putc(b, '\'');
			tk_buf_putc(b, s[i]);
		}
		tk_buf_putc(b, '\'');
		return;
	}
	tk_buf_putc(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;
		switch (c) {
		case '\\': esc = "\\\\"; break;
		case '"': esc = "\\\""; break;
		case 0: esc = "\\0"; break;
		case 7: esc = "\\a"; break;
		case 8: esc = "\\b"; break;
		case 9: esc = "\\t"; break;
		case 10: esc = "\\n"; break;
		case 11: esc = "\\v"; break;
		case 12: esc = "\\f"; break;
		case 13: esc = "\\r"; break;
		case 27: esc = "\\e"; break;
		}
		if (esc) {
			tk_buf_puts(b, esc);
		} else if (c >= 0x20 && c < 0x7f) {
			tk_buf_putc(b, (char)c);
		} else {
			char x[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };
			tk_buf_put(b, x, 4);
		}
	}
	tk_buf_putc(b, '"');
}

/* ---- YAML trace --------------------------------------------------------------------------- */

/* "function" scalars of small ids, formatted once */
#define NAME_CACHE 4096
struct yaml_ctx {
	struct tk_buf *out;
	const struct tk_xray_map *map;
	int any;
	char *names[NAME_CACHE];
	uint8_t name_len[NAME_CACHE];
};

#define PUT_LIT(b, lit) tk_buf_put(b, lit, sizeof(lit) - 1)

static const char *const kind_names[] = {
	"function-enter", "function-exit", "function-tail-exit", "function-enter-arg",
	"custom-event", "typed-event",
};

static void function_name(struct tk_buf *b, const struct tk_xray_map *map, int32_t id)
{
	char tmp[40];
	int n;
	if (!map) {
		n = snprintf(tmp, sizeof tmp, "%d", id);
		yaml_scalar(b, tmp, (size_t)n);
		return;
	}
	const char *name = tk_xray_map_name(map, id);
	if (name) {
		yaml_scalar(b, name, strlen(name));
		return;
	}
	uint64_t addr = tk_xray_map_addr(map, id);
	if (addr)
		n = snprintf(tmp, sizeof tmp, "@(%llx)", (unsigned long long)addr);
	else
		n = snprintf(tmp, sizeof tmp, "#%d", id);
	yaml_scalar(b, tmp, (size_t)n);
}

static int yaml_rec(void *ctx, const struct tk_xray_rec *r)
{
	struct yaml_ctx *y = ctx;
	struct tk_buf *b = y->out;

	if (!y->any) {
		y->any = 1;
		tk_buf_putc(b, '\n');
	}
	PUT_LIT(b, "  - { type: ");
	tk_buf_u64(b, r->rec_type);
	PUT_LIT(b, ", func-id: ");
	tk_buf_i64(b, r->func_id);
	PUT_LIT(b, ", function: ");
	if (r->func_id > 0 && r->func_id < NAME_CACHE) {
		char *nm = y->names[r->func_id];
		if (!nm) {
			struct tk_buf t;
			if (tk_buf_init(&t, -1, 64) == 0) {
				function_name(&t, y->map, r->func_id);
				if (!t.err && t.len < 256 && (nm = malloc(t.len + 1))) {
					memcpy(nm, t.data, t.len);
					y->names[r->func_id] = nm;
					y->name_len[r->func_id] = (uint8_t)t.len;
				}
				tk_buf_free(&t);
			}
		}
		if (nm)
			tk_buf_put(b, nm, y->name_len[r->func_id]);
		else
			function_name(b, y->map, r->func_id);
	} else {
		function_name(b, y->map, r->func_id);
	}
	if (r->nargs) {
		tk_buf_puts(b, ", args: [ ");
		for (unsigned i = 0; i < r->nargs; i++) {
			if (i)
				tk_buf_puts(b, ", ");
			tk_buf_u64(b, r->args[i]);
		}
		tk_buf_puts(b, " ]");
	}
	PUT_LIT(b, ", cpu: ");
	tk_buf_u64(b, r->cpu);
	if (r->tid) {
		PUT_LIT(b, ", thread: ");
		tk_buf_u64(b, r->tid);
	}
	if (r->pid) {
		PUT_LIT(b, ", process: ");
		tk_buf_u64(b, r->pid);
	}
	PUT_LIT(b, ", kind: ");
	tk_buf_puts(b, kind_names[r->type]);
	PUT_LIT(b, ", tsc: ");
	tk_buf_u64(b, r->tsc);
	if (!r->data_len) {
		PUT_LIT(b, ", data: '' }\n");
	} else {
		PUT_LIT(b, ", data: ");
		yaml_scalar(b, (const char *)r->data, r->data_len);
		PUT_LIT(b, " }\n");
	}
	if (b->fd >= 0 && b->len > (1u << 20))
		tk_buf_flush(b);
	return b->err;
}

int tk_xray_yaml(struct tk_xray *x, const struct tk_xray_map *map, struct tk_buf *out)
{
	const struct tk_xray_header *h = tk_xray_header(x);
	struct yaml_ctx *yp = calloc(1, sizeof *yp);
	if (!yp)
		return -TK_E_NOMEM;
	yp->out = out;
	yp->map = map;

	tk_buf_puts(out, "---\nheader:\n  version:         ");
	tk_buf_u64(out, h->version);
	tk_buf_puts(out, "\n  type:            ");
	tk_buf_u64(out, h->type);
	tk_buf_puts(out, h->constant_tsc ? "\n  constant-tsc:    true" : "\n  constant-tsc:    false");
	tk_buf_puts(out, h->nonstop_tsc ? "\n  nonstop-tsc:     true" : "\n  nonstop-tsc:     false");
	tk_buf_puts(out, "\n  cycle-frequency: ");
	tk_buf_u64(out, h->cycle_frequency);
	tk_buf_puts(out, "\nrecords:");
	int rc = tk_xray_walk_sorted(x, yaml_rec, yp);
	int any = yp->any;
	for (size_t i = 0; i < NAME_CACHE; i++)
		free(yp->names[i]);
	free(yp);
	if (rc < 0)
		return rc;
	/* an empty sequence is written inline */
	tk_buf_puts(out, any ? "...\n" : "         []\n...\n");
	return out->err;
}

/* ---- dump ---------------------------------------------------------------------------------- */

static void dump_data(struct tk_buf *b, const uint8_t *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
			tk_buf_putc(b, (char)p[i]);
		} else {
			char x[4] = { '\\', 'x', hex[p[i] >> 4], hex[p[i] & 15] };
			tk_buf_put(b, x, 4);
		}
	}
}

static void dump_record(struct tk_buf *b, const struct tk_xray_header *h,
			const struct tk_xray_record *r)
{
	static const char *const fn_names[] = {
		"Function Enter", "Function Exit", "Function Tail Exit", "Function Enter With Arg",
	};
	static const char *const basic_types[] = { "enter", "exit", "tail-exit", "enter-args" };
	char tmp[64];

	switch (r->kind) {
	case TK_XRAY_BUFFER_EXTENTS:
		tk_buf_puts(b, "<Buffer: size = ");
		tk_buf_u64(b, r->value);
		tk_buf_puts(b, " bytes>");
		break;
	case TK_XRAY_NEW_BUFFER:
		tk_buf_puts(b, "<Thread ID: ");
		tk_buf_i64(b, r->tid);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_END_OF_BUFFER:
		tk_buf_puts(b, "<End of Buffer>");
		break;
	case TK_XRAY_WALLTIME:
		snprintf(tmp, sizeof tmp, "%06u", r->nanos);
		tk_buf_puts(b, "<Wall Time: seconds = ");
		tk_buf_u64(b, r->seconds);
		tk_buf_putc(b, '.');
		tk_buf_puts(b, tmp);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_PID:
		tk_buf_puts(b, "<PID: ");
		tk_buf_i64(b, r->pid);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_NEW_CPU:
		tk_buf_puts(b, "<CPU: id = ");
		tk_buf_u64(b, r->cpu);
		tk_buf_puts(b, ", tsc = ");
		tk_buf_u64(b, r->tsc);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_TSC_WRAP:
		tk_buf_puts(b, "<TSC Wrap: base = ");
		tk_buf_u64(b, r->tsc);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_CALL_ARG:
		tk_buf_puts(b, "<Call Argument: data = ");
		tk_buf_u64(b, r->value);
		tk_buf_puts(b, " (hex = 0x");
		tk_buf_hex(b, r->value, 0);
		tk_buf_puts(b, ")>");
		break;
	case TK_XRAY_CUSTOM:
		if (h->version >= 5) {
			tk_buf_puts(b, "<Custom Event: delta = +");
			tk_buf_i64(b, r->sdelta);
		} else {
			tk_buf_puts(b, "<Custom Event: tsc = ");
			tk_buf_u64(b, r->tsc);
			tk_buf_puts(b, ", cpu = ");
			tk_buf_u64(b, r->cpu);
		}
		tk_buf_puts(b, ", size = ");
		tk_buf_i64(b, r->data_size);
		tk_buf_puts(b, ", data = '");
		dump_data(b, r->data, (size_t)r->data_size);
		tk_buf_puts(b, "'>");
		break;
	case TK_XRAY_TYPED:
		tk_buf_puts(b, "<Typed Event: delta = +");
		tk_buf_i64(b, r->sdelta);
		tk_buf_puts(b, ", type = ");
		tk_buf_u64(b, r->event_type);
		tk_buf_puts(b, ", size = ");
		tk_buf_i64(b, r->data_size);
		tk_buf_puts(b, ", data = '");
		dump_data(b, r->data, (size_t)r->data_size);
		tk_buf_puts(b, "'>");
		break;
	case TK_XRAY_FUNCTION:
		tk_buf_putc(b, '<');
		tk_buf_puts(b, fn_names[r->fn & 3]);
		tk_buf_puts(b, ": #");
		tk_buf_i64(b, r->func_id);
		tk_buf_puts(b, " delta = +");
		tk_buf_u64(b, r->delta);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_BASIC_FUNCTION:
		tk_buf_puts(b, "<Function: ");
		tk_buf_puts(b, basic_types[r->fn & 3]);
		tk_buf_puts(b, " #");
		tk_buf_i64(b, r->func_id);
		tk_buf_puts(b, ", cpu = ");
		tk_buf_u64(b, r->cpu);
		tk_buf_puts(b, ", tsc = ");
		tk_buf_u64(b, r->tsc);
		tk_buf_puts(b, ", thread = ");
		tk_buf_u64(b, (uint32_t)r->tid);
		tk_buf_puts(b, ", process = ");
		tk_buf_u64(b, (uint32_t)r->pid);
		tk_buf_putc(b, '>');
		break;
	case TK_XRAY_BASIC_ARG:
		tk_buf_puts(b, "<Argument: #");
		tk_buf_i64(b, r->func_id);
		tk_buf_puts(b, ", thread = ");
		tk_buf_u64(b, (uint32_t)r->tid);
		tk_buf_puts(b, ", data = ");
		tk_buf_u64(b, r->value);
		tk_buf_puts(b, " (hex = 0x");
		tk_buf_hex(b, r->value, 0);
		tk_buf_puts(b, ")>");
		break;
	}
}

long tk_xray_dump(const uint8_t *data, size_t len, int no_offset, int release_input,
		  struct tk_buf *out, struct tk_gap_stats *gaps)
{
	return tk_xray_dump_progress(data, len, no_offset, release_input, out, gaps, NULL);
}

long tk_xray_dump_progress(const uint8_t *data, size_t len, int no_offset, int release_input,
			   struct tk_buf *out, struct tk_gap_stats *gaps,
			   struct tk_progress *progress)
{
	size_t released = 0;
	uint64_t n = 0;
	long page = sysconf(_SC_PAGESIZE);
	struct tk_xray_cursor c;
	struct tk_xray_record r;
	const char *msg;
	uint64_t skipped;
	long bad = 0;
	int rc;

	if ((rc = tk_xray_cursor_init(&c, data, len)) < 0)
		return rc;
	const struct tk_xray_header *h = &c.h;
	tk_buf_puts(out, "<Header: version = ");
	tk_buf_u64(out, h->version);
	tk_buf_puts(out, h->type == TK_XRAY_FDR ? ", type = 1 (FDR)" : ", type = 0 (basic)");
	tk_buf_puts(out, ", constant-tsc = ");
	tk_buf_u64(out, (uint64_t)h->constant_tsc);
	tk_buf_puts(out, ", nonstop-tsc = ");
	tk_buf_u64(out, (uint64_t)h->nonstop_tsc);
	tk_buf_puts(out, ", cycle-frequency = ");
	tk_buf_u64(out, h->cycle_frequency);
	if (h->type == TK_XRAY_FDR && h->version == 1) {
		tk_buf_puts(out, ", buffer-size = ");
		tk_buf_u64(out, h->v1_buffer_size);
	}
	tk_buf_puts(out, h->big_endian ? ", big-endian>\n" : ">\n");
	while ((rc = tk_xray_next(&c, &r, &msg, &skipped)) != 0) {
		if (!no_offset) {
			tk_buf_puts(out, "0x");
			tk_buf_hex(out, r.offset, 8);
			tk_buf_puts(out, "  ");
		}
		if (rc < 0) {
			bad++;
			tk_buf_puts(out, "<Error: ");
			tk_buf_puts(out, msg);
			tk_buf_puts(out, "; skipped ");
			tk_buf_u64(out, skipped);
			tk_buf_puts(out, " bytes>\n");
			tk_log(TK_LOG_WARN, "offset 0x%llx: %s; skipped %llu bytes",
			       (unsigned long long)r.offset, msg, (unsigned long long)skipped);
			if (gaps)
				tk_gap_stats_add(gaps, r.offset, skipped);
			continue;
		}
		dump_record(out, h, &r);
		tk_buf_putc(out, '\n');
		if (msg && !strcmp(msg, XR_MSG_TYPED_SHORT)) {
			tk_log(TK_LOG_WARN, "offset 0x%llx: %s", (unsigned long long)r.offset, msg);
		} else if (msg) {
			bad++;
			if (skipped)
				tk_log(TK_LOG_WARN, "offset 0x%llx: %s (%llu bytes missing)",
				       (unsigned long long)r.offset, msg, (unsigned long long)skipped);
			else
				tk_log(TK_LOG_WARN, "offset 0x%llx: %s", (unsigned long long)r.offset, msg);
			if (gaps)
				tk_gap_stats_add(gaps, r.offset, skipped);
		}
		if (out->fd >= 0 && out->len > (1u << 20))
			tk_buf_flush(out);
		if (progress && !(++n & 4095))   /* (the clock is read at most every 4096 records) */
			tk_progress_set(progress, c.off);
		if (release_input && c.off - released >= (8u << 20)) {
			/* a read-only file mapping: the pages behind us can go */
			uintptr_t a = ((uintptr_t)data + released + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
			uintptr_t e = ((uintptr_t)data + c.off) & ~((uintptr_t)page - 1);
			if (e > a)
				madvise((void *)a, e - a, MADV_DONTNEED);
			released = c.off;
		}
	}
	return bad;
}
