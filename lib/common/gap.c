#include <stdio.h>

#include "tracekit/common.h"
#include "tracekit/event.h"
#include "tracekit/internal/util.h"

/* OFFSET into S's lowest offsets (N of them so far), in order: the same list whatever
 * order a decoder meets its gaps in (XRay's buffers thread by thread, its chunks or one
 * walk: -j 1 and -j 2 listed different offsets of one log) or merges its chunks in (a
 * perf.data file's queues one after the other). */
static void keep_lowest(struct tk_gap_stats *s, size_t n, uint64_t offset)
{
	if (n == TK_GAP_FIRST_OFFSETS && offset >= s->first_offsets[n - 1])
		return;
	size_t i = n < TK_GAP_FIRST_OFFSETS ? n : n - 1;   /* (the highest dropped) */
	for (; i && s->first_offsets[i - 1] > offset; i--)
		s->first_offsets[i] = s->first_offsets[i - 1];
	s->first_offsets[i] = offset;
}

void tk_gap_stats_add(struct tk_gap_stats *s, uint64_t offset, uint64_t bytes_skipped)
{
	keep_lowest(s, s->count < TK_GAP_FIRST_OFFSETS ? (size_t)s->count : TK_GAP_FIRST_OFFSETS,
		    offset);
	s->count++;
	s->bytes_skipped += bytes_skipped;
}

void tk_gap_stats_merge(struct tk_gap_stats *into, const struct tk_gap_stats *from)
{
	for (uint64_t i = 0; i < from->count && i < TK_GAP_FIRST_OFFSETS; i++)
		keep_lowest(into, into->count + i < TK_GAP_FIRST_OFFSETS ? (size_t)(into->count + i) :
				  TK_GAP_FIRST_OFFSETS, from->first_offsets[i]);
	into->count += from->count;
	into->bytes_skipped += from->bytes_skipped;
}

void tk_losses_add(struct tk_losses *into, const struct tk_losses *from)
{
	tk_gap_stats_merge(&into->gaps, &from->gaps);
	into->insns += from->insns;
	into->unmatched += from->unmatched;
}

size_t tk_uleb128(const uint8_t *p, size_t n, uint64_t *v)
{
	uint64_t r = 0;
	for (size_t i = 0; i < n && i < 10; i++) {
		r |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*v = r;
			return i + 1;
		}
	}
	return 0;
}

static const char *const kind_names[TK_EV__COUNT] = {
	[TK_EV_BLOCK] = "block", [TK_EV_CALL] = "call", [TK_EV_RETURN] = "return",
	[TK_EV_BRANCH] = "branch", [TK_EV_MODE] = "mode", [TK_EV_ENABLE] = "enable",
	[TK_EV_DISABLE] = "disable", [TK_EV_SYSCALL] = "syscall", [TK_EV_INTERRUPT] = "interrupt",
	[TK_EV_FUNC_ENTER] = "enter", [TK_EV_FUNC_EXIT] = "exit",
	[TK_EV_FUNC_TAIL_EXIT] = "tail-exit", [TK_EV_FUNC_ARG] = "arg",
	[TK_EV_CUSTOM] = "custom", [TK_EV_TYPED] = "typed", [TK_EV_MEM_READ] = "read",
	[TK_EV_MEM_WRITE] = "write", [TK_EV_PTWRITE] = "ptwrite", [TK_EV_POWER] = "power",
	[TK_EV_TIME] = "time", [TK_EV_INSN_BEGIN] = "insn", [TK_EV_STAGE_BEGIN] = "stage-begin",
	[TK_EV_STAGE_END] = "stage-end", [TK_EV_RETIRE] = "retire", [TK_EV_FLUSH] = "flush",
	[TK_EV_DEPENDENCY] = "dependency", [TK_EV_GAP] = "gap",
	[TK_EV_INSNS] = "insns",
};

const char *tk_event_kind_name(unsigned kind)
{
	return kind < TK_EV__COUNT && kind_names[kind] ? kind_names[kind] : "unknown";
}

static const char *const gap_names[TK_GAP__COUNT] = {
	[TK_GAP_UNKNOWN] = "lost data", [TK_GAP_OVERFLOW] = "overflow",
	[TK_GAP_DECODE_ERROR] = "decode error", [TK_GAP_WRAP] = "ring buffer wrap",
	[TK_GAP_NO_IMAGE] = "no code image", [TK_GAP_TRUNCATED] = "truncated",
	[TK_GAP_ORPHAN] = "orphan end", [TK_GAP_BAD_CONTEXT] = "unexpected packet context",
};

const char *tk_gap_reason_name(unsigned reason)
{
	return reason < TK_GAP__COUNT ? gap_names[reason] : "lost data";
}

int tk_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int tk_sorted_has_u64(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo] == x;
}

int tk_gap_report(const struct tk_gap_stats *g, const char *what, const char *file, tk_msg_fn msg,
		  void *ctx)
{
	char offs[128] = "";
	int n = 0;

	if (!g->count)
		return 0;
	for (uint64_t i = 0; i < g->count && i < TK_GAP_FIRST_OFFSETS; i++)
		n += snprintf(offs + n, sizeof offs - (size_t)n, "%s0x%llx", i ? ", " : "",
			      (unsigned long long)g->first_offsets[i]);
	tk_msg(msg, ctx, TK_LOG_WARN, file, UINT64_MAX,
	       "%llu %s%s, %llu bytes skipped (first at offset %s%s)", (unsigned long long)g->count,
	       what ? what : "gap", g->count == 1 ? "" : "s", (unsigned long long)g->bytes_skipped,
	       offs, g->count > TK_GAP_FIRST_OFFSETS ? ", ..." : "");
	return 1;
}
