/* Kanata reader internals shared by the statistics, cut and timeline code. */
#ifndef TK_KANATA_INTERNAL_H
#define TK_KANATA_INTERNAL_H

#include "tracekit/kanata.h"

#define KN_MAX_OPEN 4          /* open stages tracked per instruction (one per lane) */
#define KN_LABEL_KEEP 159      /* bytes of the type-0 label kept per live instruction */

struct kn_open {
	uint16_t lane, stage;      /* interned lane index, stage index */
	int64_t start;
};

struct kn_insn {
	int64_t id, sim_id, thread, begin;
	uint32_t nopen;
	uint32_t label_len;
	uint32_t slot;             /* index in the pool */
	struct kn_open open[KN_MAX_OPEN];
	char label[KN_LABEL_KEEP + 1];
};

/* Callbacks of the instruction tracker (semantic mode). */
struct kn_hooks {
	void (*stage)(void *ctx, const struct kn_insn *in, unsigned stage, int64_t start, int64_t end);
	void (*done)(void *ctx, const struct kn_insn *in, int flushed, int64_t rid, int64_t end);
	void *ctx;
};

struct kn_name {
	char name[TK_KANATA_NAME_MAX];
	uint16_t len, lane;        /* stage: its lane index */
};

/* Set hooks before feeding (semantic mode only). */
void kn_reader_set_hooks(struct tk_kanata_reader *r, const struct kn_hooks *h);
/* Interned names: lanes and (lane, stage) pairs. */
size_t kn_reader_nstages(const struct tk_kanata_reader *r);
const struct kn_name *kn_reader_stage(const struct tk_kanata_reader *r, unsigned i);
const struct kn_name *kn_reader_lane(const struct tk_kanata_reader *r, unsigned i);
/* Konata's cycle count (sum of C deltas, C= ignored). */
int64_t kn_reader_delta_sum(const struct tk_kanata_reader *r);
/* Visit the instructions still in flight (semantic mode), in id order. */
int kn_reader_live(const struct tk_kanata_reader *r,
		   void (*fn)(void *ctx, const struct kn_insn *in), void *ctx);
/* Lookup of a live instruction (semantic mode); NULL if not live. */
const struct kn_insn *kn_reader_find(const struct tk_kanata_reader *r, int64_t id);

/* Hand-rolled integer parse of [p, e): optional spaces, '-', digits, spaces. */
int kn_parse_i64(const char *p, const char *e, int64_t *v);

/* Apply Kanata's escapes for display: "\n" -> newline, "\t" -> tab, "\\" -> backslash. */
size_t kn_unescape(const char *s, size_t n, char *out, size_t cap);

#endif
