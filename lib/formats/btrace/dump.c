/* Text of the branch-trace container's header and records, for `tracekit dump`: one line
 * each, the file offset first. */
#include <stdio.h>
#include <string.h>

#include "tracekit/btrace.h"
#include "tracekit/common.h"

static void line_start(struct tk_buf *b, uint64_t off, const char *what, int no_offset)
{
	if (!no_offset)
		tk_buf_printf(b, "%016llx  ", (unsigned long long)off);
	tk_buf_printf(b, "%-12s", what);
}

/* " NAME VALUE" for each u64 of P (N bytes) that NAMES has a name for */
static void u64_fields(struct tk_buf *b, const uint8_t *p, uint32_t n, const char *const *names,
		       unsigned count)
{
	for (unsigned i = 0; i < count && 8 * (i + 1) <= n; i++)
		tk_buf_printf(b, "%s %s %llu", i ? "," : "", names[i],
			      (unsigned long long)tk_le64(p + 8 * i));
}

void tk_btrace_header_text(struct tk_buf *b, const uint8_t *data, size_t len, int no_offset)
{
	if (len < 40)
		return;
	line_start(b, 0, "header", no_offset);
	tk_buf_printf(b, " version %u, pid %u, parent %u, TSC %llu Hz, start TSC %llu",
		      tk_le32(data + 8), tk_le32(data + 16), tk_le32(data + 20),
		      (unsigned long long)tk_le64(data + 24), (unsigned long long)tk_le64(data + 32));
	if (len >= 48 && tk_le32(data + 12) >= 48)
		tk_buf_printf(b, " ns %llu", (unsigned long long)tk_le64(data + 40));
	if (len >= 56 && tk_le32(data + 12) >= 56 && tk_le64(data + 48))
		tk_buf_printf(b, " ring %llu", (unsigned long long)tk_le64(data + 48));
	if (len >= 72 && tk_le32(data + 12) >= 72 && tk_le64(data + 64))
		tk_buf_printf(b, ", recorder start TSC %llu ns %llu", (unsigned long long)tk_le64(data + 56),
			      (unsigned long long)tk_le64(data + 64));
	tk_buf_putc(b, '\n');
}

void tk_btrace_record_text(struct tk_buf *b, const struct tk_btrace_record *r, int no_offset)
{
	static const char *const names[] = { "?", "module", "stream", "thread-end", "process-end",
					     "exec", "refused", "limit" };
	static const char *const thread_end[] = { "traps", "re-entries", "unresolved",
						  "traps at long CTIs", "trampoline hits" };
	static const char *const process_end[] = { "traps", "patched CTIs", "threads", "reason",
						   "TSC", "ns" };
	const uint8_t *p = r->payload;
	uint32_t n = r->size;

	line_start(b, r->offset, names[r->type <= TK_BTRACE_REC_LIMIT ? r->type : 0], no_offset);
	switch (r->type) {
	case TK_BTRACE_REC_MODULE:
		/* the layout of docs/formats/tkbt.md; the reader reports one that breaks it */
		if (n < 28 || 28u + p[26] + tk_le16(p + 24) > n) {
			tk_buf_printf(b, " malformed, %u bytes", n);
			break;
		}
		tk_buf_printf(b, " bias 0x%llx code 0x%llx-0x%llx build-id ",
			      (unsigned long long)tk_le64(p), (unsigned long long)tk_le64(p + 8),
			      (unsigned long long)tk_le64(p + 16));
		for (unsigned i = 0; i < p[26]; i++)
			tk_buf_printf(b, "%02x", p[28 + i]);
		if (!p[26])
			tk_buf_puts(b, "none");
		tk_buf_putc(b, ' ');
		tk_buf_put(b, (const char *)p + 28 + p[26], tk_le16(p + 24));
		break;
	case TK_BTRACE_REC_STREAM:
		tk_buf_printf(b, " thread %u seq %u: %u bytes of PT", r->tid, r->seq, n);
		break;
	case TK_BTRACE_REC_THREAD_END:
		tk_buf_printf(b, " thread %u seq %u:", r->tid, r->seq);
		u64_fields(b, p, n, thread_end, 5);
		break;
	case TK_BTRACE_REC_PROCESS_END:
		u64_fields(b, p, n, process_end, 6);
		break;
	case TK_BTRACE_REC_EXEC:
		u64_fields(b, p, n, process_end + 4, 2);
		break;
	case TK_BTRACE_REC_LIMIT:
		if (n >= 8)
			tk_buf_printf(b, " max-size %llu: no stream after this", (unsigned long long)tk_le64(p));
		break;
	case TK_BTRACE_REC_REFUSED:
		tk_buf_putc(b, ' ');
		for (uint32_t i = 0; i < n && p[i]; i++)   /* text from the recorder: printable only */
			tk_buf_putc(b, p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?');
		break;
	}
	tk_buf_putc(b, '\n');
}

void tk_btrace_info_text(struct tk_buf *out, const struct tk_btrace *bt)
{
	const struct tk_btrace_info *bi = tk_btrace_info(bt);

	tk_buf_printf(out, "  process %u", bi->pid);
	if (bi->ppid)
		tk_buf_printf(out, " (forked from %u)", bi->ppid);
	if (bi->signal)
		tk_buf_printf(out, ", complete: ends at signal %d (%s), its trace kept\n", bi->signal,
			      strsignal(bi->signal));
	else if (bi->snapshot_signal)
		tk_buf_printf(out, ", complete: a snapshot at signal %d (%s); the program went on "
			      "untraced\n", bi->snapshot_signal, strsignal(bi->snapshot_signal));
	else if (bi->trigger_call)
		tk_buf_printf(out, ", complete: a snapshot at call %llu of %s (--trigger); the program "
			      "went on untraced\n", (unsigned long long)bi->trigger_call,
			      TK_TEXT(bi->trigger_fn));
	else
		tk_buf_printf(out, ", %s\n", bi->refused ? "recording refused" : bi->exec ? "ends at exec" :
			      bi->complete ? "complete" : "INCOMPLETE (no end record)");
	if (bi->fd_reopened)
		tk_buf_printf(out, "  the program closed or replaced the trace's file descriptor; the "
			      "recorder reopened the trace file (%llu times)\n",
			      (unsigned long long)bi->fd_reopened);
	if (bi->refused)
		tk_buf_printf(out, "  refused: %s\n", TK_TEXT(bi->refused_msg));
	if (bi->complete && !bi->exec) {
		tk_buf_printf(out, "  %llu CTIs patched, %llu traps", (unsigned long long)bi->patched,
			      (unsigned long long)bi->traps);
		/* the share of executed CTIs that trapped, over the threads' own counts; after
		 * warm-up: leaving out each CTI's first trap */
		uint64_t traps = 0, hits = 0, first = 0;
		int has_first = 1;
		for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
			const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
			traps += t->traps;
			hits += t->tramp_hits;
			first += t->traps_first;
			has_first &= t->has_traps_first;
		}
		if (hits)
			tk_buf_printf(out, "; of the recorded CTIs %llu trapped and %llu went through "
				      "trampolines: %.3f%% trapped", (unsigned long long)traps,
				      (unsigned long long)hits, 100.0 * (double)traps / (double)(traps + hits));
		if (hits && has_first && first <= traps)
			tk_buf_printf(out, ", %.3f%% after warm-up (%llu traps were their CTI's first)",
				      100.0 * (double)(traps - first) / (double)(traps + hits),
				      (unsigned long long)first);
		else if (has_first && traps)
			tk_buf_printf(out, "; %llu of the recorded CTIs' traps were their CTI's first "
				      "(warm-up)", (unsigned long long)first);
		tk_buf_putc(out, '\n');
	}
	if (bi->tsc_hz)
		tk_buf_printf(out, "  TSC %llu ticks/s%s\n", (unsigned long long)bi->tsc_hz,
			      bi->tsc_hz_measured ? " (measured over the run)" : "");
	else
		tk_buf_puts(out, "  TSC rate unknown: times are in ticks\n");
	if (bi->ring)
		tk_buf_printf(out, "  a flight recorder's snapshot (record --ring %llu): each thread's "
			      "last pieces of stream, its start a gap\n", (unsigned long long)bi->ring);
	if (bi->size_limit)
		tk_buf_printf(out, "  recording stopped at record --max-size %llu: the trace ends early\n",
			      (unsigned long long)bi->size_limit);
	if (bi->version < TK_BTRACE_VERSION_PER_CALL)
		tk_buf_puts(out, "  times only where tracing starts again and every 4 KiB of stream "
			    "(version 1): calls in between show no time (-)\n");
	for (size_t i = 0; i < tk_btrace_module_count(bt); i++) {
		const struct tk_btrace_module *m = tk_btrace_module(bt, i);
		tk_buf_printf(out, "  module %s code 0x%llx-0x%llx bias 0x%llx build-id ", TK_TEXT(m->path),
			      (unsigned long long)m->start, (unsigned long long)m->end,
			      (unsigned long long)m->bias);
		if (m->build_id_len)
			tk_buf_hex_bytes(out, m->build_id, m->build_id_len, 0);
		else
			tk_buf_puts(out, "none");
		tk_buf_putc(out, '\n');
	}
	for (size_t i = 0; i < tk_btrace_thread_count(bt); i++) {
		const struct tk_btrace_thread *t = tk_btrace_thread(bt, i);
		tk_buf_printf(out, "  thread %u: %llu bytes of PT in %llu pieces, %llu traps, "
			      "%llu re-entries (%llu unresolved)%s", t->tid,
			      (unsigned long long)t->stream_bytes, (unsigned long long)t->pieces,
			      (unsigned long long)t->traps, (unsigned long long)t->reentries,
			      (unsigned long long)t->unresolved, !t->ended ? ", no end record" :
			      t->end_reason == TK_BTRACE_THREAD_CUT ? ", cut: running when the process ended" :
			      t->end_reason == TK_BTRACE_THREAD_SIGNAL ? ", ends at the fatal signal" : "");
		if (t->traps)
			tk_buf_printf(out, ", %.1f%% at CTIs >= 5 bytes",
				      100.0 * (double)t->traps_long / (double)t->traps);
		if (t->tramp_hits)
			tk_buf_printf(out, ", %llu by trampolines (%.1f%% of recorded CTIs still trapped)",
				      (unsigned long long)t->tramp_hits,
				      100.0 * (double)t->traps / (double)(t->traps + t->tramp_hits));
		if (t->lost_pieces)
			tk_buf_printf(out, ", %llu pieces LOST", (unsigned long long)t->lost_pieces);
		if (t->not_kept)
			tk_buf_printf(out, ", %llu earlier pieces not kept (ring)", (unsigned long long)t->not_kept);
		if (t->size_cut)
			tk_buf_puts(out, ", stopped at --max-size");
		tk_buf_putc(out, '\n');
	}
}
