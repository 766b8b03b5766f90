/* Arbitrary event streams into the profile builder (whole, and as two merged chunks), every
 * profile writer, and both timeline writers: nothing may crash, leak or misbehave. Each
 * 8 input bytes make one event: kind, track, function, address and time steps; with
 * function entries (tail calls) or without. When the last byte is odd the events are a
 * pipeline's instead (instructions, stages, retires, flushes, labels of any length, some
 * without text), as a Kanata log's decoder would send them and worse. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tracekit/tracekit.h"

static const uint16_t kinds[] = {
	TK_EV_BLOCK, TK_EV_CALL, TK_EV_RETURN, TK_EV_FUNC_ENTER, TK_EV_FUNC_EXIT,
	TK_EV_FUNC_TAIL_EXIT, TK_EV_GAP, TK_EV_BLOCK,
};

static const uint16_t pipeline_kinds[] = {
	TK_EV_INSN_BEGIN, TK_EV_STAGE_BEGIN, TK_EV_STAGE_END, TK_EV_RETIRE,
	TK_EV_FLUSH, TK_EV_TYPED, TK_EV_INSN_BEGIN, TK_EV_TYPED,
};

/* Pipeline event E from the 8 bytes at P: ids and stages from small ranges, so that most
 * name an instruction in flight; labels from TEXT (NULs in it), or none. */
static void pipeline_event(struct tk_event *e, const uint8_t *p)
{
	static char text[64 + 256];
	if (!text[0])
		for (size_t i = 0; i < sizeof text; i++)
			text[i] = i % 37 == 36 ? 0 : (char)('a' + i % 26);
	e->kind = pipeline_kinds[p[0] & 7];
	e->track = p[0] >> 6;
	e->addr = p[1] & 31;
	e->addr2 = p[2];
	e->arg = p[3] & 7;
	e->flags = p[2] & 3;
	if (e->kind == TK_EV_TYPED) {
		e->flags = p[3] & 0x80 ? 0 : TK_TYPED_INSN_LABEL;
		e->data = p[4] == 0xff ? NULL : text + (p[2] & 63);
		e->count = p[4];
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const int pipeline = size && data[size - 1] & 1;
	size_t n = size / 8;
	if (n > 4096)
		n = 4096;
	struct tk_event *ev = calloc(n + 1, sizeof *ev);
	if (!ev)
		return 0;
	uint64_t t = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = data + 8 * i;
		struct tk_event *e = &ev[i];
		e->kind = kinds[p[0] & 7];
		e->track = p[0] >> 6;
		e->flags = (p[0] >> 3) & 1 ? TK_FN_ADDR : 0;
		e->addr = 0x1000 + (uint64_t)p[1] * 16;
		e->addr2 = 0x1000 + (uint64_t)p[2] * 16;
		e->arg = 0x1000 + (uint64_t)p[3] * 16;
		e->count = p[4] & 15;
		t += p[5] & 7;
		e->time = p[6] == 0xff ? TK_TIME_NONE : t;
		if (pipeline)
			pipeline_event(e, p);
	}
	size_t cut = n ? (size_t)data[size - 1] * n / 256 : 0;
	/* function entries (every 4th address): blocks there after blocks are tail calls */
	uint64_t entries[64];
	for (size_t i = 0; i < 64; i++)
		entries[i] = 0x1000 + i * 64;
	struct tk_prof_opts po = { .sz = sizeof po, .entries = entries, .nentries = 64 };
	const struct tk_prof_opts *opts = size && (data[0] & 0x20) ? &po : NULL;
	struct tk_prof *whole = tk_prof_new(opts, NULL), *a = tk_prof_new(opts, NULL),
		       *b = tk_prof_new(opts, NULL);
	if (whole && a && b) {
		tk_prof_events(whole, ev, n);
		tk_prof_events(a, ev, cut);
		tk_prof_events(b, ev + cut, n - cut);
		if (tk_prof_seam_exact(a, b))
			tk_prof_merge(a, b);
		else   /* as tracekit profile does: the second part's events again, into A */
			tk_prof_events(a, ev + cut, n - cut);
		tk_prof_finish(whole);
		tk_prof_finish(a);
		static const enum tk_out_kind outs[] = { TK_OUT_TEXT, TK_OUT_JSON, TK_OUT_CSV,
			TK_OUT_FOLDED, TK_OUT_PPROF, TK_OUT_CALLTREE, TK_OUT_BLOCKS };
		for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) {
			struct tk_buf buf;
			struct tk_out_opts o = { .sz = sizeof o, .threads = (int)(k & 1), .top = k };
			if (tk_buf_init(&buf, -1, 4096) < 0)
				break;
			tk_out_profile(&buf, k & 2 ? a : whole, outs[k], &o);
			tk_buf_free(&buf);
		}
	}
	tk_prof_free(whole);
	tk_prof_free(a);
	tk_prof_free(b);
	for (int kind = TK_TIMELINE_PERFETTO; kind <= TK_TIMELINE_CHROME; kind++) {
		struct tk_buf buf;
		struct tk_timeline_opts o = { .sz = sizeof o, .kind = kind, .max_events = 64,
					      .time_begin = size > 0 ? data[0] : 0,
					      .time_end = size > 1 ? data[0] + (uint64_t)data[1] * 4 : 0 };
		if (tk_buf_init(&buf, -1, 4096) < 0)
			break;
		struct tk_timeline *tl = tk_timeline_new(&buf, &o, NULL);
		if (tl) {
			tk_timeline_events(tl, ev, n);
			tk_timeline_finish(tl);
			tk_timeline_free(tl);
		}
		tk_buf_free(&buf);
	}
	free(ev);
	return 0;
}
