/* Partial results: what a process computed over some chunks of the inputs, saved as bytes
 * that another process (or machine) reads back and merges, in input order, into the same
 * result as one process over everything (docs/formats/partial.md).
 *
 *   tk_prof_save / tk_prof_load   a profile that is not finished (tk_prof_finish): its
 *                                 tables, the stacks open at its chunks' ends, the returns
 *                                 it could not match, its call durations
 *   tk_partial_*                  a partial file: a versioned header (command, options,
 *                                 the inputs by name, size and hash, the chunk ranges)
 *                                 and one profile section per input
 *
 * Reading is safe on any bytes: every count and index is checked, and an error says what
 * is wrong at which offset (struct tk_partial_error). */
#ifndef TRACEKIT_PARTIAL_H
#define TRACEKIT_PARTIAL_H

#include <stddef.h>
#include <stdint.h>

#include "tracekit/common.h"
#include "tracekit/prof.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_PARTIAL_VERSION 5

/* Why bytes could not be read: CODE (-TK_E_*), the byte OFFSET (from the start of what
 * was given) and what was wrong there. */
struct tk_partial_error {
	int code;
	uint64_t offset;
	char msg[160];
};

/* P (not finished) as bytes into *DATA (malloc'd, *LEN of them). */
TK_API int tk_prof_save(const struct tk_prof *p, uint8_t **data, size_t *len);
/* A profile from tk_prof_save's bytes, with LIKE's options and function entries (as
 * tk_prof_new_like; the bytes record a hash of the entries and must match). NULL, with E
 * filled in, when the bytes are not such a profile. */
TK_API struct tk_prof *tk_prof_load(const struct tk_prof *like, const uint8_t *data, size_t len,
				    struct tk_partial_error *e);

/* Execution statistics of Intel PT (raw, perf.data) and branch traces before
 * tk_ipt_exec_finish (tracekit/ipt_flow.h), as bytes: the decoding counts, the event
 * counts and the distinct blocks with their executions (sorted by address, so the same
 * statistics are the same bytes). Loading ADDS them to INTO, all or nothing: merging the
 * parts of other processes this way and finishing gives the statistics of one process
 * that decoded it all (counts add; the footprint is counted at finish, over the union of
 * the blocks). */
struct tk_ipt_exec;
TK_API int tk_partial_exec_save(const struct tk_ipt_exec *x, uint8_t **data, size_t *len);
TK_API int tk_partial_exec_load(struct tk_ipt_exec *into, const uint8_t *data, size_t len,
				struct tk_partial_error *e);

/* xtrace statistics before they are written (tracekit/xtrace.h), as bytes: every count,
 * the exception levels at the part's ends and the footprint's lines (ascending). Loading
 * fills S (tk_xtrace_stats_init'ed with TK_XT_STATS_FOOTPRINT, nothing added yet); merge
 * the parts in trace order with tk_xtrace_stats_merge. */
struct tk_xtrace_stats;
TK_API int tk_partial_xtrace_stats_save(const struct tk_xtrace_stats *s, uint8_t **data,
					size_t *len);
TK_API int tk_partial_xtrace_stats_load(struct tk_xtrace_stats *s, const uint8_t *data,
					size_t len, struct tk_partial_error *e);

/* A vector of N counts (a branch trace's decode --stat: thread, instructions, errors for
 * each thread a shard decoded); the loader's *V is malloc'd. */
TK_API int tk_partial_counts_save(const uint64_t *v, size_t n, uint8_t **data, size_t *len);
TK_API int tk_partial_counts_load(uint64_t **v, size_t *n, const uint8_t *data, size_t len,
				  struct tk_partial_error *e);

/* ---- partial files ------------------------------------------------------------------- */

enum tk_partial_command {
	TK_PARTIAL_PROFILE = 1,       /* profile --shard: tk_prof_save's bytes per chunk */
	TK_PARTIAL_STATS = 2,         /* stats --shard: one result per input (exec, xtrace) */
	TK_PARTIAL_DECODE_STAT = 3,   /* decode --stat --shard: the same results, for its counts */
};

/* The shard (1..N) a chunk of SIZE bytes, AT bytes into a plan of TOTAL bytes, belongs
 * to: the one its middle falls in, so that shards are contiguous, balanced runs. */
TK_API uint32_t tk_partial_shard_of(uint64_t at, uint64_t size, uint64_t total, uint32_t n);
/* Of chunks SIZES[0..N), those of shard SHARD of NSHARDS: [*FIRST, *FIRST + *COUNT). */
TK_API void tk_partial_shard_range(const uint64_t *sizes, size_t n, uint32_t shard,
				   uint32_t nshards, uint32_t *first, uint32_t *count);

/* A result in a partial: of chunk CHUNK of the input's plan, or (TK_PARTIAL_REST) what
 * is not any one chunk's: block counts gathered over all, or the whole result of a format
 * that decodes its chunks in order into one (tk_source_info.sequential). */
#define TK_PARTIAL_REST UINT32_MAX
struct tk_partial_part {
	uint32_t chunk;
	const uint8_t *data;          /* tk_prof_save's bytes */
	size_t len;
};

/* An input as the partial records it, and the chunks of its plan the partial covers. */
struct tk_partial_input {
	const char *name;             /* as given on the command line */
	uint64_t size;                /* bytes */
	uint64_t hash;                /* tk_partial_hash of its first and last MiB */
	uint32_t nchunks;             /* chunks of its plan */
	uint32_t first, count;        /* the chunks [first, first + count) this partial holds */
	size_t nparts;                /* their results: the chunks' in order, then the rest */
	struct tk_partial_part *parts;
	struct tk_losses lost;        /* what decoding those chunks lost (the merge reports
					 the shards' sum) */
};

/* A message about damaged data the shard printed (tracekit/source.h's msg), for the merge
 * to repeat as one process prints it: of input INPUT (an index), at byte OFFSET
 * (UINT64_MAX: none), LEVEL an enum tk_log_level. */
struct tk_partial_message {
	uint32_t input;
	uint32_t level;
	uint64_t offset;
	const char *text;
};

struct tk_partial {
	uint32_t version;             /* TK_PARTIAL_VERSION */
	uint32_t command;             /* enum tk_partial_command */
	const char *options;          /* the options that affect the result, as one string */
	uint32_t shard, nshards;      /* this is shard SHARD (1-based) of NSHARDS */
	size_t ninputs;
	struct tk_partial_input *inputs;
	uint32_t status;              /* the shard's exit status: 1 when it skipped data */
	size_t nmessages;             /* what it reported about its inputs, in order */
	struct tk_partial_message *messages;
};

/* 1 when DATA (LEN bytes: at least the first 8 of a file) begins as a partial file does. */
TK_API int tk_partial_is(const uint8_t *data, size_t len);
/* The hash of a file's first and last MiB (all of it when smaller) and its size. */
TK_API int tk_partial_hash(const char *path, uint64_t *hash, uint64_t *size);
/* P as bytes into *DATA (malloc'd). */
TK_API int tk_partial_write(const struct tk_partial *p, uint8_t **data, size_t *len);
/* Bytes DATA as a partial into P (its results point into DATA; the strings and arrays are
 * malloc'd: tk_partial_clear). Returns 0 or -TK_E_* with E filled in. */
TK_API int tk_partial_read(struct tk_partial *p, const uint8_t *data, size_t len,
			   struct tk_partial_error *e);
TK_API void tk_partial_clear(struct tk_partial *p);

#ifdef __cplusplus
}
#endif
#endif
