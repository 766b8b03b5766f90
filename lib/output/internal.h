/* Shared pieces of the writers: interned names and a call tree aggregated by name. */
#ifndef TK_OUTPUT_INTERNAL_H
#define TK_OUTPUT_INTERNAL_H

#include "tracekit/out.h"

/* (key, kind) -> id, open addressing; an id UINT32_MAX marks an empty slot. */
struct keymap {
	struct keyname { uint64_t key; uint32_t kind, id; } *slot;
	size_t mask, n;
};
/* The slot of (KEY, KIND): its id, or UINT32_MAX for a new one, which the caller fills in
 * (all three fields) and counts (n++) before the next call. NULL: no memory. */
struct keyname *keymap_slot(struct keymap *m, uint64_t key, uint32_t kind);
/* The id of (KEY, KIND) in M, or UINT32_MAX (inline: a pass asks per call). */
static inline uint32_t keymap_find(const struct keymap *m, uint64_t key, uint32_t kind)
{
	if (!m->slot)
		return UINT32_MAX;
	for (size_t k = tk_hash64(key ^ kind) & m->mask; m->slot[k].id != UINT32_MAX; k = (k + 1) & m->mask)
		if (m->slot[k].key == key && m->slot[k].kind == kind)
			return m->slot[k].id;
	return UINT32_MAX;
}

/* Interned strings; id 0 is "". */
struct names {
	char **str;
	uint32_t *len;            /* of each string */
	size_t n, cap;
	uint64_t *map;            /* hash -> (hash's low 32 bits << 32 | id + 1), 0 empty */
	size_t mask;
	char *arena;              /* the strings' current block (its first word: the block
				     before), where the next string goes, the bytes left */
	char *arena_next;
	size_t arena_left, arena_size;   /* (the current block's room) */
	struct keymap keys;       /* (kind, key) -> id cache */
	struct tk_sym *sym;
	struct tk_sym **spaces;   /* other symbols names came from (a process's own) */
	size_t nspaces;
	int may_help;             /* names_may_help: a helper may prepare memory ahead */
	struct tk_ahead *ahead;   /* ... started once the map is large (NULL: not yet) */
	char *spare;              /* the next strings' block, populated by the helper */
};
int names_init(struct names *nm, struct tk_sym *sym);
void names_free(struct names *nm);
/* With threads to spare: a helper thread makes the map's next table and faults in the
 * strings' next block ahead of the thread interning (a million labels' timeline). */
void names_may_help(struct names *nm);
/* Returns the id, or UINT32_MAX when out of memory. */
uint32_t names_intern(struct names *nm, const char *s, size_t len);
/* The same with the string's names_hash known; names_prefetch asks for its slot early (a
 * table of a million names misses the cache at each new one). */
uint64_t names_hash(const char *s, size_t len);
uint32_t names_intern_hashed(struct names *nm, const char *s, size_t len, uint64_t h);
static inline void names_prefetch(const struct names *nm, uint64_t h)
{
	if (nm->map)
		__builtin_prefetch(&nm->map[h & nm->mask]);
}
uint32_t names_frame_new(struct names *nm, uint64_t key, uint32_t kind);
/* The id of (KEY, KIND) named before, or UINT32_MAX. */
static inline uint32_t names_key_find(const struct names *nm, uint64_t key, uint32_t kind)
{
	return keymap_find(&nm->keys, key, kind);
}
/* The name of a call path's frame, interned (looked up here: the timeline's pass asks per
 * call). */
static inline uint32_t names_frame(struct names *nm, uint64_t key, uint32_t kind)
{
	uint32_t id = names_key_find(nm, key, kind);
	return id != UINT32_MAX ? id : names_frame_new(nm, key, kind);
}
/* The same named from SYM (a process's own symbols). */
uint32_t names_frame_in(struct names *nm, struct tk_sym *sym, uint64_t key, uint32_t kind);
static inline const char *names_str(const struct names *nm, uint32_t id) { return nm->str[id]; }

/* A call tree keyed by names (threads merged, or one root per thread). */
struct agg_node {
	uint32_t name;
	uint32_t parent, first_child, next_sibling;
	uint64_t calls, incl_ticks, excl_ticks, incl_insns, excl_insns;
};
struct agg {
	struct agg_node *n;
	size_t nn, cap;
	uint32_t *map;
	size_t mask;
	struct names *names;
	const char *tracks;
	const struct tk_out_opts *o;
	int by_proc;              /* frames named by their track's process (threads, or a
				     session's processes: tk_prof_grouped) */
	int proc_known;           /* proc_sym names proc_track's frames */
	uint32_t proc_track;
	struct tk_sym *proc_sym;
	int sparse;               /* the profile's TK_PROF_SPARSE_TIME: 0 ticks is unmeasured */
};
/* Build from the profile's call paths; node 0 is the root. Tracks merged, unless O (may be
 * NULL) asks for threads: then each gets a level of its own above the root, named by its
 * label and id. */
int agg_build(struct agg *a, const struct tk_prof *p, struct names *nm,
	      const struct tk_out_opts *o);
/* What a track is called in O's output ("thread" unless it says), NULL when merged. */
const char *out_track_label(const struct tk_out_opts *o);
/* The id TRACK is shown by in O's output. */
uint32_t out_track_id(const struct tk_out_opts *o, uint32_t track);
/* The process TRACK ran in (its pid, name into COMM[N], the symbols naming
 * its code, NULL: O's), as O's track_process says; 0, or -1 if none. */
int out_track_process(const struct tk_out_opts *o, uint32_t track, uint32_t *pid, char *comm,
		      size_t n, struct tk_sym **sym);
void agg_free(struct agg *a);
/* Children of node V sorted by descending VALUE (per metric); *out malloc'd. */
int agg_children(const struct agg *a, uint32_t v, enum tk_out_metric m, uint32_t **out, size_t *n);

/* S as a quoted CSV field (names are quoted: C++ names contain commas). */
void out_csv_quoted(struct tk_buf *b, const char *s);
enum tk_out_metric out_metric(const struct tk_prof *p, enum tk_out_metric m);
uint64_t agg_self(const struct agg_node *n, enum tk_out_metric m);
uint64_t agg_total(const struct agg_node *n, enum tk_out_metric m);

/* Per function (the name of the symbol that holds the code) and source line, the
 * instructions the profile's blocks ran there and the lowest address of the line they ran;
 * sorted by function, file (by content), line. *out is malloc'd; none without symbols. */
struct func_line {
	uint32_t func;
	const char *file;
	unsigned line;
	uint64_t addr, insns;
};
int out_func_lines(const struct tk_prof *p, struct names *nm, struct func_line **out, size_t *n);

int out_pprof(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o);
int out_callgrind(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o,
		  struct names *nm);
/* --sort for per-line and per-block tables (source.c): by instructions (default), executions, or
 * place (file:line, address). Returns 0, or -TK_E_INVAL for a key that does not apply. */
enum count_sort { CS_INSNS, CS_EXECS, CS_PLACE };
int out_count_sort(const char *s, enum count_sort *k);
/* The same without a message. */
int out_count_sort_quiet(const char *s, enum count_sort *k);
#define COUNT_SORT_KEYS "insns, execs, name"

int out_source(struct tk_buf *b, const struct tk_prof *p, const struct tk_out_opts *o, int lines_table);

#endif
