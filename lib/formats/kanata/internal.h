/* Kanata reader internals shared by the statistics, cut and timeline code. */
#ifndef TK_KANATA_INTERNAL_H
#define TK_KANATA_INTERNAL_H

#include "tracekit/kanata.h"

#define KN_MAX_OPEN 4          /* open stages tracked per instruction (one per lane) */
#define KN_LABEL_KEEP 159
#define KN_NUM_MAX (INT64_C(1) << 60)     /* largest number (cycle, id) accepted */
#define KN_SEEN_WORDS_MAX ((size_t)1 << 22) /* ids may spread over 2^28 above the oldest */      /* bytes of the type-0 label kept per live instruction */

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
	/* optional, chunk mode: where the consumer's output stands, kept with each command
	 * about an earlier chunk's instruction (kn_frag.mark): its replay goes there */
	size_t (*mark)(void *ctx);
};

struct kn_name {
	char name[TK_KANATA_NAME_MAX];
	uint16_t len, lane;        /* stage: its lane index */
};

/* Set hooks before feeding (semantic mode only). */
void kn_reader_set_hooks(struct tk_kanata_reader *r, const struct kn_hooks *h);
/* Interned names: lanes and (lane, stage) pairs. */
size_t kn_reader_nstages(const struct tk_kanata_reader *r);
size_t kn_reader_nlanes(const struct tk_kanata_reader *r);
const struct kn_name *kn_reader_stage(const struct tk_kanata_reader *r, unsigned i);
const struct kn_name *kn_reader_lane(const struct tk_kanata_reader *r, unsigned i);
/* Konata's cycle count (sum of C deltas, C= ignored). */
int64_t kn_reader_delta_sum(const struct tk_kanata_reader *r);
/* Visit the instructions still in flight (semantic mode), in id order. */
int kn_reader_live(const struct tk_kanata_reader *r,
		   void (*fn)(void *ctx, const struct kn_insn *in), void *ctx);
/* Lookup of a live instruction (semantic mode); NULL if not live. */
const struct kn_insn *kn_reader_find(const struct tk_kanata_reader *r, int64_t id);

/* ---- parallel chunks ---- */
/* A command about an instruction begun in an earlier chunk, replayed at the merge. */
struct kn_frag {
	struct tk_kanata_cmd c;    /* lane/text pointers cleared; see below */
	uint16_t lane;             /* chunk-local lane index (S/E) */
	uint16_t text_len;
	uint8_t check_only;        /* W whose consumer is local: only check the producer */
	uint8_t prod_ok;           /* W: producer was begun earlier in the chunk */
	size_t full_len;
	size_t mark;               /* kn_hooks.mark when it was kept */
	char text[2 * KN_LABEL_KEEP + 2];  /* enough raw text for KN_LABEL_KEEP unescaped */
};

struct kn_state {
	int64_t cycle;
	int seen_header, seen_cycle, seen_any, first_cycle_set;
};

struct kn_adopt {
	struct tk_kanata_reader *g;
	const uint16_t *lane_map, *stage_map;
	int err;
};

void kn_reader_chunk_begin(struct tk_kanata_reader *r, int first, int64_t cycle, uint64_t line_base,
			   uint64_t byte_base);
/* Memory for a chunk's list of begun ids. */
struct kn_ids {
	int64_t *v;
	size_t cap;
};
/* R's list of begun ids (emptied) exchanged with *IDS: a merged chunk's memory used again
 * by the next (a fresh list for each chunk faulted its pages in anew: 40 % of the page
 * faults of `stats -j 2`). */
void kn_reader_swap_ids(struct tk_kanata_reader *r, struct kn_ids *ids);
/* A chunk whose start is not known yet: cycles and lines count from 0. A line that needs
 * the absolute cycle (C=, or a C near the limit) calls RESOLVE, which must rebase the
 * reader (or fail: the reader stops with its code). */
void kn_reader_set_relative(struct tk_kanata_reader *r, int (*resolve)(void *ctx), void *ctx);
/* The chunk starts at CYCLE and after LINE lines: make its cycles and lines absolute. */
void kn_reader_rebase(struct tk_kanata_reader *r, int64_t cycle, uint64_t line);
uint64_t kn_reader_lines(const struct tk_kanata_reader *r);
void kn_reader_state(const struct tk_kanata_reader *r, struct kn_state *st);
const struct kn_frag *kn_reader_frags(const struct tk_kanata_reader *r, size_t *n);
int kn_reader_seen(const struct tk_kanata_reader *r, int64_t id);
/* The words R's set of begun ids holds (what it costs in memory: 8 bytes each). */
size_t kn_reader_seen_words(const struct tk_kanata_reader *r);
/* Whether G has seen any id that chunk C began. */
int kn_reader_seen_any(const struct tk_kanata_reader *g, const struct tk_kanata_reader *c);
int kn_reader_merge_names(struct tk_kanata_reader *g, const struct tk_kanata_reader *c,
			  uint16_t *lane_map, uint16_t *stage_map);
/* A new chunk reader R given the names known so far (in their order), so that its numbers
 * are theirs: its names usually merge as they are. */
void kn_reader_seed_names(struct tk_kanata_reader *r, const struct kn_name *lanes, unsigned nlanes,
			  const struct kn_name *stages, unsigned nstages);
/* F (a command of chunk C about an instruction begun before it) as G would have read it
 * in order: tracked, then passed to G's command callback. */
int kn_reader_replay(struct tk_kanata_reader *g, const struct kn_frag *f, const uint16_t *lane_map,
		     const struct tk_kanata_reader *c);
int kn_reader_adopt(struct tk_kanata_reader *g, const struct tk_kanata_reader *c,
		    const uint16_t *lane_map, const uint16_t *stage_map);
/* C's counts into G: C began at LINE_BASE, BYTE_BASE and, when begun with a sum of C deltas
 * (kn_reader_chunk_delta_sum), DELTA_BASE (else 0). */
void kn_reader_add_counts(struct tk_kanata_reader *g, const struct tk_kanata_reader *c,
			  uint64_t line_base, uint64_t byte_base, int64_t delta_base);
void kn_reader_finish(struct tk_kanata_reader *g);
/* The input ended in a cut: the line it holds unfinished is reported and dropped (before
 * the final feed). */
void kn_reader_cut_short(struct tk_kanata_reader *r);
uint64_t kn_reader_cur_line(const struct tk_kanata_reader *r);
/* A chunk reader's state as bytes (formats/kanata/bytes.h), and again in a new chunk reader
 * (at most MAX_IDS ids begun); for the statistics partial of a shard. */
struct kn_in;
int kn_reader_chunk_save(const struct tk_kanata_reader *r, struct tk_buf *w);
int kn_reader_chunk_load(struct tk_kanata_reader *r, struct kn_in *b, uint64_t max_ids);
#define KN_MAX_NAMES 1024

/* Diagnostics kept with their texts, in order (a parallel chunk's, until its merge). */
struct kn_diags {
	struct kn_kept { struct tk_kanata_diag d; size_t at; } *v;   /* at: in TEXT */
	size_t n, cap;
	char *text;
	size_t ntext, ctext;
};
int kn_diags_add(struct kn_diags *k, const struct tk_kanata_diag *d);
/* The Ith, its msg in K. */
struct tk_kanata_diag kn_diags_at(const struct kn_diags *k, size_t i);
void kn_diags_free(struct kn_diags *k);

/* A chunk's lines and its effect on the cycle, from a scan of its C and C= lines at memory
 * speed (the parse needs each chunk's start): after it, the cycle is end0 (abs_end: the
 * file's first chunk), else max(cycle + add, floor) (floor: has_floor); add is also the sum
 * of its C deltas. first_op: its first cycle line, 0 none, 1 C, 2 C=. */
struct kn_prefix {
	uint64_t lines;
	int64_t add, floor, end0;
	int has_floor, abs_end, first_op;
};
void kn_prefix_scan(const char *b, size_t n, int first, struct kn_prefix *pf);
int64_t kn_prefix_after(const struct kn_prefix *pf, int64_t cur);
/* A chunk begun with kn_reader_chunk_begin: the sum of C deltas before it (the reader
 * skips a C that takes the sum beyond KN_NUM_MAX, as Konata's cycle count). */
void kn_reader_chunk_delta_sum(struct tk_kanata_reader *r, int64_t sum);

/* Hand-rolled integer parse of [p, e): optional spaces, '-', digits, spaces. */
/* The source's chunks: where the chunk at POS ends (a line seam), and decoding by pieces
 * (FINAL: the last; every event of the piece is delivered before it returns). */
size_t kn_line_seam(const char *data, size_t len, size_t pos);
size_t kn_line_seam_by(const char *data, size_t len, size_t pos, size_t bytes);
size_t kn_line_seam_in(const struct tk_input *in, const char *data, size_t len, size_t pos,
		       size_t bytes);
int kn_decoder_feed(struct tk_kanata_decoder *d, const char *p, size_t n, int final);
/* IN decoded in order (tk_kanata_decode at -j 1). */
int kn_decoder_read(struct tk_kanata_decoder *d, struct tk_input *in);
/* tk_kanata_decoder_set_jobs's: the threads, the chunks' size (its default applied). */
unsigned kn_decoder_jobs(const struct tk_kanata_decoder *d, size_t *chunk_bytes,
			 struct tk_progress **progress);

/* ---- the decoder in parallel chunks (stats.c's parse, decode.c's events; tk_kanata_decode
 * is in stats.c, which calls decode.c, not the other way round) ---- */
/* tk_kanata_decode (in stats.c) decodes a plain file at -j N as the statistics parse it:
 * each chunk by a decoder of its own (these), merged in order into the caller's, the
 * events, gaps and counts of a decoding in order; a log that breaks the split's
 * assumptions from some chunk on is read in order from that chunk. Its chunks are smaller
 * than the statistics': their events (about 3 MB a MiB of log) are still in the cache
 * when the merge hands them on. */
#define KN_DECODE_CHUNK ((size_t)1 << 20)
/* A chunk's decoder: its events made with their times and held until the merge (or let
 * go once prepared, where the sink reads none of them: kn_decoder_chunk_begin). */
struct tk_kanata_decoder *kn_decoder_chunk_new(int *err);
struct tk_kanata_reader *kn_decoder_reader(struct tk_kanata_decoder *d);
/* D's held events exchanged with V (an empty vector's memory, used again: a fresh one for
 * each chunk faults its pages in anew). */
struct tk_event_vec;
void kn_decoder_swap_held(struct tk_kanata_decoder *d, struct tk_event_vec *v);
/* Room for N events held by chunk D of G's decode, at least (a block, where G's sink
 * reads none past their prepare, tk_sink.need_from, and not KEEP). */
int kn_decoder_reserve(struct tk_kanata_decoder *d, const struct tk_kanata_decoder *g, size_t n, int keep);
/* D's error (a failed allocation while it made the chunk's events), if any. */
int kn_decoder_error(const struct tk_kanata_decoder *d);
/* Chunk C about to be parsed from its known start (absolute cycles), the log's first cycle
 * FIRST: its events made with their times, and G's sink's prepare (tk_sink.prepare, for a
 * sink that takes them in parts between the commands kn_decoder_merge replays) run on
 * them in blocks while they are in the cache; where the sink reads none of them past
 * that (tk_sink.need_from), they are not kept. KEEP: all kept, none prepared (the chunk
 * parsed again: kn_decoder_take_begin). */
void kn_decoder_chunk_begin(const struct tk_kanata_decoder *g, struct tk_kanata_decoder *c, int64_t first,
			    int keep);
/* Chunk C's parse ended on this thread: its events' stores done before another thread
 * may read them. */
void kn_decoder_chunk_parsed(struct tk_kanata_decoder *c);
/* Chunk C parsed: its last events prepared (on its worker; else kn_decoder_merge does it;
 * a second call does nothing). */
void kn_decoder_chunk_done(struct tk_kanata_decoder *c);
/* Before chunk C's merge into G (its last events prepared: kn_decoder_chunk_done), where
 * it kept none of its events: the sink's take begun. 1: the merge needs the events after
 * all (the sink refused the chunk or gave up on its prepare, or C's names would not keep
 * their numbers in G): the chunk must be parsed again keeping them; 0, or < 0 an error. */
int kn_decoder_take_begin(struct tk_kanata_decoder *g, struct tk_kanata_decoder *c);
/* Chunk C (its names merged into G's reader: the maps) into G's sink, its commands about
 * earlier chunks' instructions replayed on G's reader where they were. */
int kn_decoder_merge(struct tk_kanata_decoder *g, struct tk_kanata_decoder *c,
		     const uint16_t *lane_map, const uint16_t *stage_map);
/* After the last chunk: the labels of the instructions still in flight, every event out. */
int kn_decoder_finish(struct tk_kanata_decoder *g);

int kn_parse_i64(const char *p, const char *e, int64_t *v);

/* Apply Kanata's escapes for display: "\n" -> newline, "\t" -> tab, "\\" -> backslash. */
size_t kn_unescape(const char *s, size_t n, char *out, size_t cap);

#endif
