/* Which format does what: each format's command operations (lib/commands/<f>.c). */
#include <string.h>

#include "internal.h"

static const tk_cmd_fn *const ops[TK_FMT__COUNT] = {
	[TK_FMT_IPT] = tk_cmd_ipt,
	[TK_FMT_PERF] = tk_cmd_ipt,
	[TK_FMT_XRAY] = tk_cmd_xray,
	[TK_FMT_KANATA] = tk_cmd_kanata,
	[TK_FMT_GEM5_O3] = tk_cmd_gem5,
	[TK_FMT_XTRACE_INSN] = tk_cmd_xtrace,
	[TK_FMT_XTRACE_SNAP] = tk_cmd_xtrace,
	[TK_FMT_TKBT] = tk_cmd_btrace,
};

tk_cmd_fn tk_cmd_op(enum tk_format_id id, enum tk_cmd_kind kind)
{
	if ((unsigned)id >= TK_FMT__COUNT || !ops[id] || (unsigned)kind >= TK_CMD__COUNT)
		return NULL;
	return ops[id][kind];
}

int tk_cmd_streamed(enum tk_format_id id)
{
	return id == TK_FMT_KANATA || id == TK_FMT_GEM5_O3;
}

int tk_cmd_stats_partial(enum tk_format_id id, int decode_stat)
{
	/* (decode --stat's counts: the same formats, but Kanata's statistics only) */
	return id == TK_FMT_IPT || id == TK_FMT_PERF || id == TK_FMT_TKBT ||
	       id == TK_FMT_XTRACE_INSN || id == TK_FMT_XTRACE_SNAP ||
	       (id == TK_FMT_KANATA && !decode_stat);
}

/* The formats' option tables, each under the title `tracekit help` lists it with. */
static const struct {
	const char *title;
	const struct tk_cmd_option *options;
} tables[] = {
	{ "Intel PT (raw stream or perf.data)", tk_cmd_ipt_options },
	{ "Branch traces (.tkbt)", tk_cmd_btrace_options },
	{ "LLVM XRay logs", tk_cmd_xray_options },
	{ "Kanata pipeline logs", tk_cmd_kanata_options },
	{ "gem5 O3PipeView", tk_cmd_gem5_options },
	{ "Kunpeng xtrace", tk_cmd_xtrace_options },
};

const struct tk_cmd_option *tk_cmd_option_table(size_t i, const char **title)
{
	if (i >= sizeof tables / sizeof tables[0])
		return NULL;
	*title = tables[i].title;
	return tables[i].options;
}

/* Whether TABLE (ended by a NULL name) has option NAME. */
static int table_has(const struct tk_cmd_option *t, const char *name, enum tk_cmd_kind kind)
{
	for (; t && t->name; t++)
		if (!strcmp(t->name, name) && (t->commands & TK_CMD_BIT(kind)))
			return 1;
	return 0;
}

int tk_cmd_format_takes(enum tk_format_id id, enum tk_cmd_kind kind, const char *name)
{
	switch (id) {
	case TK_FMT_IPT: case TK_FMT_PERF: return table_has(tk_cmd_ipt_options, name, kind);
	case TK_FMT_TKBT: return table_has(tk_cmd_btrace_options, name, kind);
	case TK_FMT_XRAY: return table_has(tk_cmd_xray_options, name, kind);
	case TK_FMT_KANATA: return table_has(tk_cmd_kanata_options, name, kind);
	case TK_FMT_GEM5_O3:   /* read as the Kanata log it converts to */
		return table_has(tk_cmd_gem5_options, name, kind) ||
		       table_has(tk_cmd_kanata_options, name, kind);
	case TK_FMT_XTRACE_INSN: case TK_FMT_XTRACE_SNAP:
		return table_has(tk_cmd_xtrace_options, name, kind);
	default: return 0;
	}
}

unsigned tk_cmd_format_has(enum tk_format_id id)
{
	switch (id) {
	case TK_FMT_IPT: case TK_FMT_PERF:
		return TK_CMD_HAS_CALLS | TK_CMD_HAS_TIME_COLUMNS | TK_CMD_HAS_PROCESSES;
	case TK_FMT_TKBT: return TK_CMD_HAS_CALLS | TK_CMD_HAS_TIME_COLUMNS;
	case TK_FMT_KANATA: case TK_FMT_GEM5_O3: return 0;
	default: return TK_CMD_HAS_CALLS;
	}
}
