/* Profile builder: call stacks per track, call-path tree, per-function durations, per-block
 * counts; exact merging of consecutive chunk profiles. See include/tracekit/prof.h. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analysis/prof_internal.h"
#include "tracekit/internal/util.h"

/* the per-event path: inlined into tk_prof_events (calls would cost a third of it) */
#define HOT PROF_HOT

/* ---- tracks and levels ------------------------------------------------------------------ */

static uint32_t new_level(struct tk_prof *p, struct track *t, int seam)
{
	uint32_t n = get_child(p, t->root, ++p->serial, TK_PROF_KEY_UNKNOWN, t->id);
	if (n != NONE32)
		p->nodes[n].seam = (uint8_t)seam;
	return n;
}

static struct track *get_track(struct tk_prof *p, uint32_t id)
{
	if (p->last_track < p->ntracks && p->tracks[p->last_track].id == id)
		return &p->tracks[p->last_track];
	/* another track: its process's function entries (the same for most traces) */
	if (p->ntsets)
		use_entry_set(p, track_entry_set(p, id));
	for (size_t i = 0; i < p->ntracks; i++)
		if (p->tracks[i].id == id) {
			p->last_track = (uint32_t)i;
			return &p->tracks[i];
		}
	if (prof_grow((void **)&p->tracks, &p->ctracks, p->ntracks + 1, sizeof *p->tracks) < 0)
		return NULL;
	struct track *t = &p->tracks[p->ntracks];
	memset(t, 0, sizeof *t);
	t->id = id;
	t->t_last = t->t_first = t->level_t_start = TK_TIME_NONE;
	t->untimed = 1;
	t->outside = (p->opts.flags & TK_PROF_WINDOW) && p->opts.window_begin;
	t->t_raw = t->t_obs = TK_TIME_NONE;
	t->t_min = UINT64_MAX;
	t->t_max = 0;
	t->hint_node = NONE32;
	t->root = get_child(p, NONE32, id, KIND_TRACK, id);
	if (t->root == NONE32)
		return NULL;
	t->base_node = new_level(p, t, 1);
	if (t->base_node == NONE32)
		return NULL;
	p->last_track = (uint32_t)p->ntracks++;
	p->sum.tracks = (uint32_t)p->ntracks;
	return t;
}

/* A block at the unknown level of T, whose hint may be unset (hint_node != base_node). */
static void set_hint(struct tk_prof *p, struct track *t, uint64_t addr)
{
	struct nlink *l = &p->links[t->base_node];
	if (!l->hint)
		l->hint = addr;
	if (l->hint)
		t->hint_node = t->base_node;
}

static inline uint32_t cur_node(const struct track *t)
{
	return t->depth ? t->st[t->depth - 1].node : t->base_node;
}

static inline void add_child_cost(struct track *t, uint64_t ticks, uint64_t insns)
{
	if (t->depth) {
		t->st[t->depth - 1].child_ticks += ticks;
		t->st[t->depth - 1].child_insns += insns;
	} else {
		t->base_child_ticks += ticks;
		t->base_child_insns += insns;
	}
}

/* Close the current unknown level at TIME: its node gets what ran at the base level. */
static void end_level(struct tk_prof *p, struct track *t, uint64_t time)
{
	struct node *n = &p->nodes[t->base_node];
	uint64_t incl = t->insns - t->level_i_start;
	n->incl_insns += incl;
	n->excl_insns += incl >= t->base_child_insns ? incl - t->base_child_insns : 0;
	if (time != TK_TIME_NONE && t->level_t_start != TK_TIME_NONE && time >= t->level_t_start) {
		uint64_t dt = time - t->level_t_start;
		n->incl_ticks += dt;
		n->excl_ticks += dt >= t->base_child_ticks ? dt - t->base_child_ticks : 0;
	}
}

static int start_level(struct tk_prof *p, struct track *t, uint64_t time)
{
	uint32_t n = new_level(p, t, !t->gapped);
	if (n == NONE32)
		return -TK_E_NOMEM;
	t->base_node = n;
	t->level_i_start = t->insns;
	t->level_t_start = time;
	t->untimed |= time == TK_TIME_NONE;
	t->base_child_ticks = t->base_child_insns = 0;
	return 0;
}

/* ---- the stack ------------------------------------------------------------------------- */

static inline struct tk_retset_stack track_stack(const struct track *t)
{
	return (struct tk_retset_stack){ t->st, sizeof *t->st, offsetof(struct frame, ret) };
}

static inline void clear_stack(struct track *t)
{
	t->depth = t->settled = 0;
	t->nfocus = t->nexcluded = 0;
	tk_retset_clear(&t->rets);
}

/* TK_PROF_FILTER: the enum tk_prof_match bits of a function, asked once. */
static int match_bits(struct tk_prof *p, uint64_t key, uint32_t kind)
{
	if (!p->opts.match)
		return 0;
	if ((p->nmatch + 1) * 2 > p->match_mask + 1 || !p->match) {
		size_t size = p->match ? (p->match_mask + 1) * 2 : 256;
		struct match_slot *m = calloc(size, sizeof *m);
		if (!m)
			return -TK_E_NOMEM;
		for (size_t i = 0; p->match && i <= p->match_mask; i++)
			if (p->match[i].bits) {
				size_t h = (size_t)(node_hash(0, p->match[i].key, p->match[i].kind) >> 32);
				while (m[h & (size - 1)].bits)
					h++;
				m[h & (size - 1)] = p->match[i];
			}
		free(p->match);
		p->match = m;
		p->match_mask = size - 1;
	}
	size_t h = (size_t)(node_hash(0, key, kind) >> 32);
	for (;; h++) {
		struct match_slot *m = &p->match[h & p->match_mask];
		if (!m->bits) {
			/* bit 8: asked (the answer may be 0) */
			*m = (struct match_slot){ key, kind, 0x100 | (uint32_t)p->opts.match(p->opts.match_ctx, key, kind) };
			p->nmatch++;
			return (int)(m->bits & 0xff);
		}
		if (m->key == key && m->kind == kind)
			return (int)(m->bits & 0xff);
	}
}

/* TK_PROF_FILTER: whether what runs on T now counts. */
static inline int counting(const struct tk_prof *p, const struct track *t)
{
	return (!(p->opts.flags & TK_PROF_FOCUS) || t->nfocus) && !t->nexcluded;
}

HOT int push(struct tk_prof *p, struct track *t, uint64_t key, uint32_t kind, uint64_t ret,
		uint64_t time)
{
	int outside = p->outside, bits = 0, hidden = 0;
	if (__builtin_expect(p->opts.flags & TK_PROF_FILTER, 0)) {
		if ((bits = match_bits(p, key, kind)) < 0)
			return bits;
		t->nfocus += (bits & TK_PROF_MATCH_FOCUS) != 0;
		t->nexcluded += (bits & TK_PROF_MATCH_EXCLUDE) != 0;
		/* the call itself counts as what runs in it */
		outside = p->win_outside || !counting(p, t);
		hidden = t->nexcluded || (p->opts.max_depth && t->depth >= p->opts.max_depth);
	}
	/* a hidden frame has its node (the stack searches name frames by it), left empty */
	uint32_t n = get_child(p, cur_node(t), key, kind, t->id);
	if (n == NONE32)
		return -TK_E_NOMEM;
	if (__builtin_expect(t->depth == t->cap, 0) &&
	    prof_grow((void **)&t->st, &t->cap, t->depth + 1, sizeof *t->st) < 0)
		return -TK_E_NOMEM;
	outside |= hidden;
	p->nodes[n].calls += !outside;
	struct frame *f = &t->st[t->depth++];
	f->node = n;
	f->timed = time != TK_TIME_NONE;
	f->tail = 0;
	f->outside = (uint8_t)outside;
	f->match = (uint8_t)bits;
	f->hidden = (uint8_t)hidden;
	f->announced = 0;
	f->ret = ret;
	f->t_enter = time;
	f->t_obs = t->t_obs;
	f->i_enter = t->insns;
	f->child_ticks = f->child_insns = 0;
	p->sum.calls += !outside;
	return 0;
}

/* ---- TK_PROF_FILTER: the calls that count, said as soon as they are sure to ------------- */

/* Whether frame F of T has run as long as MIN_TICKS and MIN_INSNS ask, by TIME. */
static int long_enough(const struct tk_prof *p, const struct track *t, const struct frame *f,
		       uint64_t time)
{
	return !(p->opts.min_insns && t->insns - f->i_enter < p->opts.min_insns) &&
	       !(p->opts.min_ticks && f->timed && time != TK_TIME_NONE &&
		 (time >= f->t_enter ? time - f->t_enter : 0) < p->opts.min_ticks);
}

/* The frames of T below UPTO that count are sure to: said, outer first. */
static int announce(struct tk_prof *p, struct track *t, size_t upto)
{
	for (; t->settled < upto; t->settled++) {
		struct frame *f = &t->st[t->settled];
		if (f->outside || f->announced)
			continue;
		f->announced = 1;
		const struct node *n = &p->nodes[f->node];
		int rc = p->opts.calls.begin ?
			p->opts.calls.begin(p->opts.calls.ctx, t->id, n->key, n->kind, f->t_obs) : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* After an event at TIME: the frames that have run long enough (every counted one when no
 * minimum is asked) are sure to count. A younger frame has run less than an older one, so
 * the first that has not ends the search. */
static int settle(struct tk_prof *p, struct track *t, uint64_t time)
{
	while (t->settled < t->depth) {
		const struct frame *f = &t->st[t->settled];
		if (!f->outside && !long_enough(p, t, f, time))
			return 0;
		int rc = announce(p, t, t->settled + 1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A gap cuts T's calls: those counted (all of them, whatever they ran) end here. */
static int cut_calls(struct tk_prof *p, struct track *t)
{
	int rc = announce(p, t, t->depth);
	for (size_t i = t->depth; i > 0 && rc >= 0; i--)
		if (t->st[i - 1].announced && p->opts.calls.end)
			rc = p->opts.calls.end(p->opts.calls.ctx, t->id, t->t_obs);
	return rc;
}

/* Count a duration of function FUNC in its entry of druns (counting mode). */
static inline int count_duration(struct tk_prof *p, uint32_t func, uint64_t ticks)
{
	if (__builtin_expect(2 * (p->ndruns + 1) > p->dhash_mask + 1, 0) && prof_dhash_grow(p) < 0)
		return -TK_E_NOMEM;
	size_t h = tk_hash64(ticks ^ (uint64_t)func << 40) & p->dhash_mask;
	for (uint32_t i; (i = p->dhash[h]) != NONE32; h = (h + 1) & p->dhash_mask) {
		struct dval *v = &p->druns[i];
		if (v->ticks == ticks && v->func == func) {
			v->count++;
			return 0;
		}
	}
	if (prof_grow((void **)&p->druns, &p->cdruns, p->ndruns + 1, sizeof *p->druns) < 0)
		return -TK_E_NOMEM;
	p->dhash[h] = (uint32_t)p->ndruns;
	p->druns[p->ndruns++] = (struct dval){ ticks, 1, func };
	return 0;
}

/* Append a duration of function FUNC (index) to the log. */
HOT int dlog_add(struct tk_prof *p, uint32_t func, uint64_t ticks)
{
	if (!ticks) {   /* with sparse time stamps: not measured (no stamp inside the call) */
		if (!(p->opts.flags & TK_PROF_SPARSE_TIME))
			p->funcs[func].zeros++;
		return 0;
	}
	if (p->counting)
		return count_duration(p, func, ticks);
	if (__builtin_expect(p->dlog_n == p->dlog_cap, 0) && prof_dlog_more(p) < 0)
		return -TK_E_NOMEM;
	if (__builtin_expect(ticks >= DUR_BIG, 0)) {
		struct func *fn = &p->funcs[func];
		if (prof_grow((void **)&fn->big, &fn->cbig, fn->nbig + 1, sizeof *fn->big) < 0)
			return -TK_E_NOMEM;
		fn->big[fn->nbig++] = ticks;
		ticks = DUR_BIG;
	}
	p->dlog_cur[p->dlog_n++] = (uint64_t)func << 32 | ticks;
	return 0;
}

int prof_add_run(struct tk_prof *p, uint32_t func, uint64_t ticks, uint64_t n)
{
	struct dval *last = p->ndruns ? &p->druns[p->ndruns - 1] : NULL;
	if (last && last->func == func && last->ticks == ticks) {
		last->count += n;
		return 0;
	}
	if (prof_grow((void **)&p->druns, &p->cdruns, p->ndruns + 1, sizeof *p->druns) < 0)
		return -TK_E_NOMEM;
	p->druns[p->ndruns++] = (struct dval){ ticks, n, func };
	return 0;
}

/* TK_PROF_FILTER: 1 when the frame F just taken off T's stack is not reported (its costs
 * stay in the self cost of the frame below), 0 when pop goes on as usual. A call once
 * announced counts (tk_prof_opts.calls were told). */
static int filtered_pop(struct tk_prof *p, struct track *t, const struct frame *f, struct node *n,
			uint64_t time, int complete)
{
	int small = !f->announced && !long_enough(p, t, f, time);

	t->nfocus -= (f->match & TK_PROF_MATCH_FOCUS) != 0;
	t->nexcluded -= (f->match & TK_PROF_MATCH_EXCLUDE) != 0;
	if (!f->hidden && !small) {
		/* it counts: said with the calls it is in, if not yet, then ended */
		int rc = announce(p, t, t->depth + 1);
		if (t->settled > t->depth)
			t->settled = t->depth;
		if (rc >= 0 && !f->outside && p->opts.calls.end)
			rc = p->opts.calls.end(p->opts.calls.ctx, t->id, t->t_obs);
		return rc < 0 ? rc : 0;
	}
	if (t->settled > t->depth)
		t->settled = t->depth;
	if (!f->hidden && !f->outside) {   /* its call was counted */
		n->calls--;
		p->sum.calls--;
	}
	if (complete)
		p->sum.returns++;
	return 1;
}

/* End the top frame at TIME; COMPLETE: a real end (its duration counts). */
HOT int pop(struct tk_prof *p, struct track *t, uint64_t time, int complete)
{
	struct frame *f = &t->st[--t->depth];
	struct node *n = &p->nodes[f->node];
	tk_retset_popped(&t->rets, f->ret, t->depth);
	uint64_t incl_i = t->insns - f->i_enter, incl_t = 0;

	if (__builtin_expect(p->opts.flags & TK_PROF_FILTER, 0)) {
		int rc = filtered_pop(p, t, f, n, time, complete);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	n->incl_insns += incl_i;
	n->excl_insns += incl_i - f->child_insns;
	if (f->timed && time != TK_TIME_NONE) {
		incl_t = time >= f->t_enter ? time - f->t_enter : 0;
		n->incl_ticks += incl_t;
		n->excl_ticks += incl_t >= f->child_ticks ? incl_t - f->child_ticks : 0;
		if (complete && !f->outside && !(p->opts.flags & TK_PROF_NO_DURATIONS) &&
		    dlog_add(p, n->func, incl_t) < 0)
			return -TK_E_NOMEM;
	}
	add_child_cost(t, incl_t, incl_i);
	if (complete)
		p->sum.returns++;
	return 0;
}

static int orphan(struct tk_prof *p, struct track *t, uint32_t what, uint64_t key, uint32_t keykind,
		  uint64_t time)
{
	if (!t->gapped) {
		if (prof_grow((void **)&t->orph, &t->corph, t->norph + 1, sizeof *t->orph) < 0)
			return -TK_E_NOMEM;
		t->orph[t->norph++] = (struct orphan){
			.what = what, .keykind = keykind, .key = key, .time = time, .insns = t->insns,
			.child_ticks = t->base_child_ticks, .child_insns = t->base_child_insns,
			.level_node = t->base_node,
		};
	} else {
		p->final_orphans++;
	}
	end_level(p, t, time);
	return start_level(p, t, time);
}

static int do_exit_search(struct tk_prof *p, struct track *t, uint64_t key, uint32_t kind, uint64_t time)
{
	size_t i = t->depth;
	while (i > 0) {
		const struct node *n = &p->nodes[t->st[i - 1].node];
		if (n->key == key && n->kind == kind)
			break;
		i--;
	}
	if (i == 0) {
		/* not on the known stack: the frames above it lost their exits, and the call
		 * began before the trace (or chunk). Ending them keeps chunks mergeable. */
		p->sum.unmatched += t->depth;
		while (t->depth) {
			int rc = pop(p, t, time, 1);
			if (rc < 0)
				return rc;
		}
		return orphan(p, t, ORPH_EXIT, key, kind, time);
	}
	p->sum.unmatched += t->depth - i;
	while (t->depth >= i) {
		int rc = pop(p, t, time, 1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* An exit: almost always of the top frame. */
HOT int do_exit(struct tk_prof *p, struct track *t, uint64_t key, uint32_t kind, uint64_t time)
{
	if (t->depth) {
		const struct node *n = &p->nodes[t->st[t->depth - 1].node];
		if (n->key == key && n->kind == kind)
			return pop(p, t, time, 1);
	}
	return do_exit_search(p, t, key, kind, time);
}

static int is_entry(const struct tk_prof *p, uint64_t addr)
{
	if (!addr)
		return tk_sorted_has_u64(p->entries, p->nentries, addr);
	for (size_t s = entry_slot(addr);; s++) {
		uint64_t v = p->entry_slots[s & p->entry_slot_mask];
		if (v == addr)
			return 1;
		if (!v)
			return 0;
	}
}

/* is_entry behind a bit filter: most blocks start elsewhere (a load and a test) */
static inline int is_entry_fast(const struct tk_prof *p, uint64_t addr)
{
	size_t b = entry_bit(addr);
	return (p->entry_bits[b / 64] >> (b % 64) & 1) && is_entry(p, addr);
}

/* A jump to a function entry (no call): a frame for it, as callgrind counts it. It returns
 * where its caller would have (its return ends both frames). */
static int tail_call(struct tk_prof *p, struct track *t, uint64_t entry, uint64_t time)
{
	uint64_t ret = t->depth ? t->st[t->depth - 1].ret : 0;
	int rc = push(p, t, entry, TK_PROF_KEY_ADDR, ret, time);
	if (rc >= 0)
		t->st[t->depth - 1].tail = 1;
	return rc;
}

/* The lowest frame that ending frame I-1 (1-based I) ends too: tail calls go with the
 * frame that jumped. */
static inline size_t tail_chain(const struct track *t, size_t i)
{
	while (i > 1 && t->st[i - 1].tail)
		i--;
	return i;
}

static int do_return_search(struct tk_prof *p, struct track *t, uint64_t target, uint64_t time);

/* A return: almost always of the top frame, to its return address. */
HOT int do_return(struct tk_prof *p, struct track *t, uint64_t target, uint64_t time)
{
	if (t->depth) {
		const struct frame *f = &t->st[t->depth - 1];
		if (!f->tail && (f->ret == target || !target))
			return pop(p, t, time, 1);
	}
	return do_return_search(p, t, target, time);
}

static int do_return_search(struct tk_prof *p, struct track *t, uint64_t target, uint64_t time)
{
	if (t->depth == 0)
		return orphan(p, t, ORPH_RETURN, target, 0, time);
	size_t i = t->depth;
	/* frames without a return address (0) never match; an unknown target ends one */
	if (target && t->st[i - 1].ret != target) {
		if (tk_retset_sync(&t->rets, track_stack(t), t->depth) < 0)
			return -TK_E_NOMEM;
	}
	int unmatched = 0;

	if (target && t->st[i - 1].ret != target) {
		/* a return deeper into the stack (longjmp, exception); else just one frame */
		size_t j = tk_retset_has(&t->rets, target) ? i - 1 : 0;
		while (j > 0 && t->st[j - 1].ret != target)
			j--;
		if (j > 0)
			i = j;
		else
			unmatched = 1;
	}
	i = tail_chain(t, i);
	/* a tail call made at the unknown level: its return ends that level too (only frames
	 * without a return address reach down there) */
	int below = t->st[i - 1].tail;

	if (unmatched && !below) {
		/* maybe to a call of the chunks before (tk_prof_seam_exact); a return through
		 * the unknown level is an orphan, which the merge replays. Mostly the same few
		 * targets: the returns of callbacks into untraced code (qsort's comparator). */
		size_t u = 0;

		while (u < t->nunmatched && u < UNMATCHED_KEPT && t->unmatched[u] != target)
			u++;
		if (u == t->nunmatched) {
			if (u < UNMATCHED_KEPT)
				t->unmatched[u] = target;
			t->nunmatched++;
		}
	}
	while (t->depth >= i) {
		int rc = pop(p, t, time, 1);
		if (rc < 0)
			return rc;
	}
	if (below)
		return orphan(p, t, ORPH_RETURN, target, 0, time);
	return 0;
}

/* Tracing stopped at OFF_AT (0: it did not) and resumed at ADDR: it had left by a jump
 * when it resumes neither where it stopped (an interrupt) nor right after that
 * instruction (a syscall's return). A chunk's first resume cannot tell (JUMPED_UNKNOWN):
 * the merge decides it on the chunk before's state. */
#define JUMPED_UNKNOWN 2
static inline int jumped_out(uint64_t off_at, uint64_t addr)
{
	return off_at && (addr < off_at || addr - off_at > TK_MAX_INSN_BYTES);
}

/* The function holding ADDR: the last entry at or below it (0: none). */
static uint64_t entry_below(const struct tk_prof *p, uint64_t addr)
{
	size_t lo = 0, hi = p->nentries;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->entries[mid] <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? p->entries[lo - 1] : 0;
}

/* The innermost frame (1-based, 0: none) whose function holds ADDR: its key lies between
 * the last entry at or below ADDR and ADDR (a function without a symbol of its own
 * counts too). */
static size_t holding_frame(const struct tk_prof *p, const struct track *t, uint64_t addr)
{
	uint64_t f = entry_below(p, addr);

	for (size_t i = t->depth; f && i > 0; i--) {
		const struct node *n = &p->nodes[t->st[i - 1].node];
		if (n->kind == TK_PROF_KEY_ADDR && n->key >= f && n->key <= addr)
			return i;
	}
	return 0;
}

/* Tracing resumed at ADDR: a call from untraced code (ADDR is a function entry), the
 * return of a call into untraced code (ADDR is a frame's return address), a resume in a
 * function further down the stack after untraced code unwound the frames above it
 * (longjmp, a C++ exception caught frames up), or unknown.
 * JUMPED_OUT: tracing had stopped at a branch out of the traced code (not an interrupt
 * that resumes in place, nor a syscall that resumes after itself). PENDING: frames a
 * later chunk ended at this resume that count as unwound if it unwinds here. */
static int do_enable(struct tk_prof *p, struct track *t, uint64_t addr, uint64_t time,
		     int jumped_out, size_t pending)
{
	int unknown = jumped_out == JUMPED_UNKNOWN;

	if (unknown)
		jumped_out = 0;
	if (!addr)
		return 0;
	if (p->nentries && is_entry_fast(p, addr))
		return push(p, t, addr, TK_PROF_KEY_ADDR, 0, time);
	size_t i = t->depth;
	/* mostly a call into untraced code came back to the top frame: no search */
	if (!i || t->st[i - 1].ret != addr) {
		if (tk_retset_sync(&t->rets, track_stack(t), t->depth) < 0)
			return -TK_E_NOMEM;
		i = tk_retset_has(&t->rets, addr) ? t->depth : 0;
		while (i > 0 && t->st[i - 1].ret != addr)
			i--;
	}
	if (i > 0) {
		i = tail_chain(t, i);
		while (t->depth >= i) {
			int rc = pop(p, t, time, 1);
			if (rc < 0)
				return rc;
		}
		return 0;
	}
	/* Left by a jump and back in the middle of a function: untraced code unwound the
	 * frames above the innermost one of that function (longjmp, an exception caught
	 * frames up). (In-place resumes, after an interrupt, stay in the top frame.) */
	if (jumped_out && p->nentries && (i = holding_frame(p, t, addr)) > 0) {
		p->sum.unwound += t->depth - i + pending;
		while (t->depth > i) {
			int rc = pop(p, t, time, 1);
			if (rc < 0)
				return rc;
		}
		return 0;
	}
	/* Only tail calls made at the unknown level, and tracing left by a jump: their
	 * return address is their caller's, which only the chunk before knows, so this is
	 * most likely that caller's return (operator delete jumped to its PLT stub, libstdc++
	 * returned). They end here, and the merge replays the enable on the chunk before's
	 * stack, as one trace would have searched it; whether they were unwound, that
	 * replay says (PENDING). (Were it nobody's return, one trace would have kept them:
	 * the limit of exact merging.) */
	if (jumped_out && t->depth && t->st[0].tail && tail_chain(t, t->depth) == 1) {
		pending += t->depth;
		while (t->depth) {
			int rc = pop(p, t, time, 1);
			if (rc < 0)
				return rc;
		}
	}
	/* No frame of that function: it is below the whole stack, which was unwound; the
	 * merge replays the resume on the chunk before's stack, as one pass would have
	 * searched it. */
	if (jumped_out && p->nentries && t->depth) {
		p->sum.unwound += t->depth + pending;
		pending = 0;
		while (t->depth) {
			int rc = pop(p, t, time, 1);
			if (rc < 0)
				return rc;
		}
	}
	if (t->depth || t->gapped)
		return 0;
	/* maybe the return of a call that the previous chunk made: a merge replays it */
	if (prof_grow((void **)&t->orph, &t->corph, t->norph + 1, sizeof *t->orph) < 0)
		return -TK_E_NOMEM;
	t->orph[t->norph++] = (struct orphan){
		.what = ORPH_ENABLE, .keykind = (uint32_t)(unknown ? JUMPED_UNKNOWN : jumped_out) |
						(uint32_t)pending << 2, .key = addr,
		.time = time,
		.insns = t->insns,
		.child_ticks = t->base_child_ticks, .child_insns = t->base_child_insns,
		.level_node = t->base_node,
	};
	t->norph_enable++;
	end_level(p, t, time);
	return start_level(p, t, time);
}

static int do_gap(struct tk_prof *p, struct track *t, uint64_t time)
{
	if (!t->gapped) {
		t->gapped = 1;
		t->gap_level_node = t->base_node;
		t->gap_insns = t->insns;
		t->gap_time = time;
		t->gap_child_ticks = t->base_child_ticks;
		t->gap_child_insns = t->base_child_insns;
	}
	p->sum.truncated += t->depth;
	if (p->opts.flags & TK_PROF_FILTER) {
		int rc = cut_calls(p, t);
		if (rc < 0)
			return rc;
	}
	clear_stack(t);
	end_level(p, t, time);
	return start_level(p, t, time);
}

/* ---- public: building ------------------------------------------------------------------ */

/* TK_PROF_WINDOW: TIME clipped to the window, and whether T is outside it from now on. */
static uint64_t clip(const struct tk_prof *p, struct track *t, uint64_t time)
{
	uint64_t b = p->opts.window_begin, e = p->opts.window_end;

	t->outside = time < b || time >= e;
	return time < b ? b : time > e ? e : time;
}

/* ---- node-table slots loaded ahead ---------------------------------------------------- */

/* A profile making a new call path at nearly every call (a random walk's: tens of millions
 * of paths) waits at each call on one cache miss, its node-table slot, and cannot start
 * the next call's lookup before it (the parent's node number is in the key). A shadow of
 * the top of the stack runs over the next events, guessing that each call makes a new node
 * (numbered in turn, as new_node does), and loads their slots: while the guess holds the
 * misses overlap. A wrong guess costs useless loads only; what the profile records does
 * not depend on the shadow. It runs with a table larger than the caches, and stops for a
 * while when the calls found their nodes instead (a recorded program's hot paths). */
#define SLOTS_CALLS 12                  /* calls a window loads the slots of */
#define SLOTS_NEXT 8                    /* the next window starts at this one's 8th call */
#define SLOTS_FRAMES 32                 /* top frames of the real stack a window starts from */
#define SLOTS_JUDGE 64                  /* windows between judgements of the guesses */
#define SLOTS_PAUSE 65536               /* events without windows after wrong guesses */

struct shadow_frame {
	uint64_t ret;
	uint32_t node;
	uint8_t tail;
};

/* The shadow's frames after control went back to ADDR (a return's target, a resume):
 * do_return's and do_enable's search, to the frame whose return address it is, with the
 * tail calls above it; SIZE_MAX where the shadow cannot follow (the frame below a tail
 * chain it lacks, an end of the level). A target it has no frame for: guessed as one
 * frame's return (a return deeper than its frames is rare). */
static size_t shadow_return(const struct shadow_frame *st, size_t d, size_t floor, uint64_t addr)
{
	size_t j = d, k = d;
	while (addr && k > 0 && st[k - 1].ret != addr)
		k--;
	if (k > 0)
		j = k;
	while (j > 1 && st[j - 1].tail)
		j--;
	if (st[j - 1].tail || (j == 1 && floor))
		return SIZE_MAX;
	return j - 1;
}

/* Load the slots of the calls from event I on (track T, in its state before I) and return
 * where the next window begins; *CALLS: the calls guessed before that. It stops where the
 * stack's course is not plain (a level ends or begins, a gap, another track). */
static size_t load_slots_ahead(const struct tk_prof *p, const struct track *t,
			       const struct tk_event *ev, size_t i, size_t n, size_t *calls)
{
	struct shadow_frame st[SLOTS_FRAMES + SLOTS_CALLS];
	size_t d = t->depth < SLOTS_FRAMES ? t->depth : SLOTS_FRAMES, floor = t->depth - d;
	uint32_t next = (uint32_t)p->nnodes, made = 0;
	int flow = t->flow, off_known = t->off_known;
	uint64_t off_at = t->off_at;
	const int tails = p->nentries != 0;
	size_t from = i, restart = n;

	for (size_t k = 0; k < d; k++) {
		const struct frame *f = &t->st[floor + k];
		st[k] = (struct shadow_frame){ f->ret, f->node, f->tail };
	}
	for (; i < n && made < SLOTS_CALLS; i++) {
		const struct tk_event *e = &ev[i];
		uint64_t key, ret = 0;
		uint8_t tail = 0;
		if (e->track != t->id)
			break;
		if (e->kind == TK_EV_BLOCK) {
			if (!tails)
				continue;
			if (e->arg)
				flow = FLOW_BLOCK;
			int jumped = flow != FLOW_OTHER && is_entry_fast(p, e->addr);
			if (jumped && flow != FLOW_BLOCK)
				break;   /* the track's head: tk_prof_events decides */
			flow = FLOW_BLOCK;
			if (!jumped)
				continue;
			key = e->addr;
			ret = d ? st[d - 1].ret : 0;
			tail = 1;
		} else if (e->kind == TK_EV_CALL) {
			flow = FLOW_OTHER;
			key = e->addr2;
			ret = e->arg;
		} else if (e->kind == TK_EV_RETURN) {
			flow = FLOW_OTHER;
			if (!d)
				break;
			if (st[d - 1].tail || (e->addr2 && st[d - 1].ret != e->addr2)) {
				if ((d = shadow_return(st, d, floor, e->addr2)) == SIZE_MAX)
					break;
			} else {
				d--;
			}
			if (!d && floor)
				break;
			continue;
		} else if (e->kind == TK_EV_DISABLE) {
			flow = FLOW_OTHER;
			off_at = e->addr;
			off_known = 1;
			continue;
		} else if (e->kind == TK_EV_ENABLE) {
			/* do_enable's plain cases: a call from untraced code, the return of a call
			 * into it, a resume in place (after an interrupt) */
			int jumped = !off_known || jumped_out(off_at, e->addr);
			flow = FLOW_OTHER;
			off_at = 0;
			off_known = 1;
			if (!e->addr)
				continue;
			if (!tails || !is_entry_fast(p, e->addr)) {
				size_t k = d;
				while (k > 0 && st[k - 1].ret != e->addr)
					k--;
				if (k > 0) {
					if ((d = shadow_return(st, d, floor, e->addr)) == SIZE_MAX)
						break;
				} else if (jumped || (!d && !floor)) {
					break;
				}
				if (!d && floor)
					break;
				continue;
			}
			key = e->addr;
		} else if (e->kind == TK_EV_INSNS) {
			if (tails && e->count)
				flow = FLOW_BLOCK;
			continue;
		} else if (e->kind == TK_EV_CYCLES || e->kind == TK_EV_INTERRUPT) {
			if (e->kind == TK_EV_INTERRUPT)
				flow = FLOW_OTHER;
			continue;
		} else {
			break;
		}
		if (d == SLOTS_FRAMES + SLOTS_CALLS)
			break;
		uint32_t parent = d ? st[d - 1].node : (floor ? NONE32 : t->base_node);
		if (parent == NONE32)
			break;
		uint64_t h = node_hash(parent, key, TK_PROF_KEY_ADDR);
		__builtin_prefetch(&p->node_map[node_slot(p, h)], 1);
		st[d++] = (struct shadow_frame){ ret, next++, tail };
		if (++made == SLOTS_NEXT) {
			restart = i;
			*calls = made - 1;
		}
	}
	if (made < SLOTS_NEXT) {
		restart = i > from ? i : from + 1;
		*calls = made;
	}
	return restart;
}

/* The window of loads that begins at event I (of N), or the event where the next one does
 * (SIZE_MAX: none in this batch). Every SLOTS_JUDGE windows the guesses are judged: when
 * fewer than half the calls made nodes, windows pause. */
static size_t slots_window(struct tk_prof *p, const struct track *t, const struct tk_event *ev,
			   size_t i, size_t n)
{
	if (p->slots.nnodes != SIZE_MAX) {
		p->slots.made += p->nnodes - p->slots.nnodes;
		p->slots.guessed += p->slots.calls;
	}
	if (++p->slots.windows == SLOTS_JUDGE) {
		int wrong = 2 * p->slots.made < p->slots.guessed;
		p->slots.windows = 0;
		p->slots.made = p->slots.guessed = 0;
		if (wrong) {
			p->slots.nnodes = SIZE_MAX;
			if (n - i > SLOTS_PAUSE)
				return i + SLOTS_PAUSE;
			p->slots.off = SLOTS_PAUSE - (n - i);
			return SIZE_MAX;
		}
	}
	p->slots.nnodes = p->nnodes;
	return load_slots_ahead(p, t, ev, i, n, &p->slots.calls);
}

int tk_prof_events(struct tk_prof *p, const struct tk_event *ev, size_t n)
{
	if (p->finished)
		return -TK_E_BAD_STATE;
	if (p->nomem)
		return -TK_E_NOMEM;
	const int want_blocks = !(p->opts.flags & TK_PROF_NO_BLOCKS);
	int tails = p->nentries != 0;
	uint64_t nblocks = 0, ninsns = 0;   /* summed here: stores to p->sum would alias */
	uint64_t ninsns_ev = 0;             /* TK_EV_INSNS: bookkeeping, not events of the trace */
	int rc = 0;

	if (!n)
		return 0;
	struct track *t = get_track(p, ev[0].track);
	if (!t) {
		p->nomem = 1;
		return -TK_E_NOMEM;
	}
	tails = p->nentries != 0;   /* (the track's) */
	const int window = (p->opts.flags & TK_PROF_WINDOW) != 0;
	const int filter = (p->opts.flags & TK_PROF_FILTER) != 0;
	struct tk_event outside;            /* an event outside the window, its counts zero */
	size_t slots_at = SIZE_MAX;         /* where the next window of slot loads begins */
	if (!window && !filter && p->node_mask + 1 >= p->slots_min) {
		if (p->slots.off >= n) {
			p->slots.off -= n;
		} else {
			slots_at = p->slots.off;
			p->slots.off = 0;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct tk_event *e = &ev[i];
		if (__builtin_expect(t->id != e->track, 0)) {
			t = get_track(p, e->track);
			if (!t) {
				rc = -TK_E_NOMEM;
				break;
			}
			tails = p->nentries != 0;
		}
		if (__builtin_expect(i == slots_at, 0))
			slots_at = slots_window(p, t, ev, i, n);
		uint64_t time = e->time;
		if (__builtin_expect(window || filter, 0)) {
			if (time != TK_TIME_NONE && window)
				time = clip(p, t, time);
			p->outside = p->win_outside = window && t->outside;
			if (filter) {
				/* what ran since the last event ran in the stack's state then */
				int off = !counting(p, t);
				if (e->time != TK_TIME_NONE)
					t->t_obs = e->time;
				if (time != TK_TIME_NONE) {
					if (off && t->t_raw != TK_TIME_NONE && time > t->t_raw)
						t->t_cut += time - t->t_raw;
					t->t_raw = time;
					time = time >= t->t_cut ? time - t->t_cut : 0;
				}
				p->outside |= off;
			}
			if (p->outside && (e->kind == TK_EV_BLOCK || e->kind == TK_EV_CALL ||
					   e->kind == TK_EV_RETURN || e->kind == TK_EV_INSNS)) {
				outside = *e;
				outside.count = 0;
				if (e->kind == TK_EV_BLOCK)
					outside.arg = 0;
				e = &outside;
			}
		}
		if (time != TK_TIME_NONE) {
			if (__builtin_expect(t->untimed, 0)) {
				if (t->t_first == TK_TIME_NONE)
					t->t_first = t->t_min = time;
				if (t->level_t_start == TK_TIME_NONE)
					t->level_t_start = time;
				t->untimed = 0;
			}
			t->t_last = time;
			/* t_min <= t_max once a time was seen (t_first is set then) */
			if (time >= t->t_max)
				t->t_max = time;
			else if (time < t->t_min)
				t->t_min = time;
		} else {
			time = t->t_last;
		}
		if (e->kind == TK_EV_BLOCK) {
			if (e->arg) {
				/* blocks counted by the producer ran before it (as TK_EV_INSNS) */
				ninsns += e->arg;
				t->insns += e->arg;
				if (tails)
					t->flow = FLOW_BLOCK;
			}
			if (tails) {
				/* reached without a call: a jump (or fall-through) */
				if (t->flow != FLOW_OTHER && is_entry_fast(p, e->addr)) {
					if (t->flow == FLOW_BLOCK) {
						if ((rc = tail_call(p, t, e->addr, time)) < 0)
							break;
					} else if (!t->head_pending) {
						/* what came before is in the previous chunk */
						t->head_pending = 1;
						t->head_entry = e->addr;
						t->head_time = time;
						t->head_outside = (uint8_t)p->outside;
					}
				}
				t->flow = FLOW_BLOCK;
			}
			ninsns += e->count;
			t->insns += e->count;
			nblocks += !p->outside;
			/* the first address seen at the unknown level names it; hint_node saves
			   loading the level's (cold) link for every block */
			if (__builtin_expect(t->hint_node != t->base_node, 0) && !t->depth)
				set_hint(p, t, e->addr);
			if (want_blocks && !p->outside &&
			    (rc = count_block(p, e->addr, e->addr2, e->count)) < 0)
				break;
			if (filter && t->settled < t->depth && (rc = settle(p, t, time)) < 0)
				break;
			continue;
		}
		switch (e->kind) {
		case TK_EV_INSNS:
			/* blocks counted by the producer (tk_prof_add_block) ran here */
			ninsns += e->count;
			t->insns += e->count;
			if (tails && e->count)
				t->flow = FLOW_BLOCK;
			ninsns_ev++;
			break;
		case TK_EV_CALL:
			t->flow = FLOW_OTHER;
			ninsns += e->count;        /* blocks counted by the producer */
			t->insns += e->count;
			rc = push(p, t, e->addr2, TK_PROF_KEY_ADDR, e->arg, time);
			break;
		case TK_EV_RETURN:
			t->flow = FLOW_OTHER;
			ninsns += e->count;
			t->insns += e->count;
			rc = do_return(p, t, e->addr2, time);
			/* back at the unknown level: it begins where the return went (the block
			 * there, the first seen at that level, may not come as an event) */
			if (!t->depth && t->hint_node != t->base_node)
				set_hint(p, t, e->addr2);
			break;
		case TK_EV_FUNC_ENTER:
			rc = push(p, t, e->addr, e->flags & TK_FN_ADDR ? TK_PROF_KEY_ADDR : TK_PROF_KEY_ID, 0, time);
			break;
		case TK_EV_FUNC_EXIT:
		case TK_EV_FUNC_TAIL_EXIT:
			rc = do_exit(p, t, e->addr, e->flags & TK_FN_ADDR ? TK_PROF_KEY_ADDR : TK_PROF_KEY_ID, time);
			break;
		case TK_EV_ENABLE:
			t->flow = FLOW_OTHER;
			rc = do_enable(p, t, e->addr, time,
				       !t->off_known ? JUMPED_UNKNOWN : jumped_out(t->off_at, e->addr), 0);
			t->off_at = 0;
			t->off_known = 1;
			break;
		case TK_EV_GAP:
			t->flow = FLOW_OTHER;
			t->cyc_on = 0;   /* the next cycles began before the loss */
			t->off_at = 0;
			t->off_known = 1;
			p->sum.gaps++;
			rc = do_gap(p, t, time);
			break;
		case TK_EV_DISABLE:
			t->flow = FLOW_OTHER;
			t->off_at = e->addr;
			t->off_known = 1;
			break;
		case TK_EV_INTERRUPT:
			t->flow = FLOW_OTHER;
			break;
		case TK_EV_CYCLES:
			/* the instructions since the last one took them: the function running
			 * here gets both (with call filters, which hide frames, none) */
			ninsns_ev++;
			if (!(e->flags & TK_CYC_START) && t->cyc_on && !p->outside && !filter)
				rc = prof_add_cycles(p, cur_node(t), e->arg, t->insns - t->cyc_mark);
			t->cyc_on = 1;
			t->cyc_mark = t->insns;
			break;
		default:
			break;
		}
		if (filter && rc >= 0 && t->settled < t->depth)
			rc = settle(p, t, time);
		if (__builtin_expect(rc < 0, 0))
			break;
	}
	p->outside = p->win_outside = 0;
	p->sum.blocks += nblocks;
	p->sum.insns += ninsns;
	p->sum.events += n - ninsns_ev;
	if (rc == -TK_E_NOMEM)
		p->nomem = 1;
	return rc < 0 ? rc : 0;
}

int tk_prof_add_block(struct tk_prof *p, uint64_t start, uint64_t last, uint64_t execs,
		      uint64_t insns)
{
	struct tk_prof_block_count c = { start, last, execs, insns };

	return tk_prof_add_blocks(p, &c, 1);
}

int tk_prof_add_blocks(struct tk_prof *p, const struct tk_prof_block_count *v, size_t n)
{
	if (p->finished)
		return -TK_E_BAD_STATE;
	if (p->nomem)
		return -TK_E_NOMEM;
	/* as EXECS block events would count (their instructions came as TK_EV_INSNS) */
	for (size_t i = 0; i < n; i++) {
		p->sum.blocks += v[i].execs;
		p->sum.events += v[i].execs;
	}
	if ((p->opts.flags & TK_PROF_NO_BLOCKS) || !n)
		return 0;
	if (prof_add_blocks(p, v, n) < 0) {
		p->nomem = 1;
		return -TK_E_NOMEM;
	}
	return 0;
}

unsigned tk_prof_flags(const struct tk_prof *p)
{
	return p->opts.flags;
}

const uint64_t *tk_prof_entries(const struct tk_prof *p, size_t *n)
{
	*n = p->eset ? p->eset->n : 0;
	return p->eset ? p->eset->v : NULL;
}

static int prof_sink_fn(void *ctx, const struct tk_event *ev, size_t n)
{
	return tk_prof_events(ctx, ev, n);
}

struct tk_sink tk_prof_sink(struct tk_prof *p)
{
	return (struct tk_sink){ .events = prof_sink_fn, .ctx = p };
}

int tk_prof_finish(struct tk_prof *p)
{
	if (p->finished)
		return 0;
	int rc = 0;

	prof_block_cache_flush(p);
	for (size_t i = 0; i < p->ntracks; i++) {
		struct track *t = &p->tracks[i];
		p->sum.open_at_end += t->depth;
		while (t->depth) {
			int prc = pop(p, t, t->t_last, 0);   /* fails only telling tk_prof_opts.calls */
			rc = rc < 0 ? rc : prc;
		}
		end_level(p, t, t->t_last);
	}
	p->finished = 1;
	return rc < 0 ? rc : 0;
}

/* ---- merging ------------------------------------------------------------------------------ */

/* Add node stats of SRC into DST. */
static void add_stats(struct node *dst, const struct node *src)
{
	dst->calls += src->calls;
	dst->incl_ticks += src->incl_ticks;
	dst->excl_ticks += src->excl_ticks;
	dst->incl_insns += src->incl_insns;
	dst->excl_insns += src->excl_insns;
}

/* FROM's cycles of node SRC into INTO's node DST. */
static int add_cyc(struct tk_prof *into, uint32_t dst, const struct tk_prof *from, uint32_t src)
{
	if (src >= from->ncyc || (!from->cyc[src].cycles && !from->cyc[src].insns))
		return 0;
	return prof_add_cycles(into, dst, from->cyc[src].cycles, from->cyc[src].insns);
}

/* FROM's nodes as a merge grafts them: MAP, each node's node in INTO (NONE32: not yet);
 * OWNER, the node a graft copies it with (itself for a track's root and for a level
 * before the first gap, grafted on its own; else its parent's owner); NEXT, the next node
 * of the same owner (NONE32: none), so that a graft visits its own nodes only, not the
 * range up to its last one (with tracks interleaved that was tracks x nodes a merge);
 * LAST, while they are found, each owner's last node; DEPTH, below its owner. Found in one pass in node order (a
 * parent comes before its children), not by walking each subtree: the walk's random loads
 * of FROM's nodes were a fifth of the merge's time on libLLVM. ORDER and CNT: a graft's
 * room to sort its nodes by depth (then CNT marks, by node, those it makes). */
struct graft_maps {
	uint32_t *map, *owner, *last, *next, *depth, *order, *cnt;
	const uint32_t *fmap;     /* FROM's functions' indexes in INTO */
};

static void graft_owners(const struct tk_prof *from, struct graft_maps *g)
{
	for (uint32_t c = 0; c < from->nnodes; c++) {
		const struct node *cn = &from->nodes[c];
		int own = cn->parent == NONE32 || (cn->kind == TK_PROF_KEY_UNKNOWN && cn->seam);
		uint32_t o = own ? c : g->owner[cn->parent];
		g->owner[c] = o;
		g->depth[c] = own ? 0 : g->depth[cn->parent] + 1;
		if (!own)
			g->next[g->last[o]] = c;
		g->next[c] = NONE32;
		g->last[o] = c;
		g->map[c] = NONE32;
	}
}

#define MISSING32 (NONE32 - 1)   /* in a graft's map: not in INTO, to be made */
#define GRAFT_AHEAD_FROM 24       /* lookups ahead: FROM's node loaded, */
#define GRAFT_AHEAD 16            /* then INTO's table slot, */
#define GRAFT_AHEAD_NODE 8        /* then the node in it */

/* Where find_child will look for FROM's node C in INTO, loaded ahead (INTO's table and
 * nodes are megabytes: each lookup was two cache misses): the slot, or with NODE the node
 * the slot holds. Inlined early: GCC takes a function that only prefetches for one
 * without effects and drops its calls. */
HOT void graft_prefetch(const struct tk_prof *into, const struct tk_prof *from,
			const uint32_t *map, uint32_t c, int node)
{
	const struct node *cn = &from->nodes[c];
	uint32_t pm = map[cn->parent];
	if (pm >= MISSING32 || cn->kind == TK_PROF_KEY_UNKNOWN)
		return;
	uint64_t h = node_hash(pm, cn->key, cn->kind);
	const struct nslot *e = &into->node_map[node_slot(into, h)];
	if (!node)
		__builtin_prefetch(e);
	else if (e->tag == node_tag(h))
		__builtin_prefetch(&into->nodes[e->node]);
}

/* INTO's child of PARENT for (KEY, KIND), or MISSING32: get_child without making it. As
 * there, a node found past its first slot trades places with the one there (the next
 * chunk's graft will look it up again). */
static inline uint32_t find_child(struct tk_prof *p, uint32_t parent, uint64_t key, uint32_t kind)
{
	uint64_t h = node_hash(parent, key, kind);
	uint32_t tag = node_tag(h);
	size_t home = node_slot(p, h);
	for (size_t s = home; p->node_map[s].tag; s = (s + 1) & p->node_mask) {
		if (p->node_map[s].tag != tag)
			continue;
		struct nslot e = p->node_map[s];
		const struct node *n = &p->nodes[e.node];
		if (n->key == key && n->parent == parent && n->kind == kind) {
			p->node_map[s] = p->node_map[home];
			p->node_map[home] = e;
			return e.node;
		}
	}
	return MISSING32;
}

/* Copy the nodes FROM's node SRC owns under INTO's node DST, in the order FROM made them
 * (parents before children): the order in which its events, sent to INTO instead, would
 * have made them. Node order is pprof's sample order, so a chunk merged and a chunk whose
 * events go to the total (-j 1, a seam decoded again) give the same bytes. Those INTO
 * has are looked up first, by depth: then a node's parent is known GRAFT_AHEAD lookups
 * ahead, and its slot can be loaded while others are looked up (in FROM's order, the
 * parent was most often the node just before). */
static int graft(struct tk_prof *into, const struct tk_prof *from, uint32_t src, uint32_t dst,
		 struct graft_maps *g, uint32_t track)
{
	uint32_t *map = g->map, *order = g->order, *cnt = g->cnt;
	const uint32_t *owner = g->owner, *depth = g->depth;
	const uint32_t *chain = g->next;
	uint32_t maxd = 0, n;

	if (owner[src] != src)
		return -TK_E_INTERNAL;   /* only roots and levels before the first gap */
	if (add_cyc(into, dst, from, src) < 0)
		return -TK_E_NOMEM;
	map[src] = dst;
	/* its nodes by depth, in FROM's order at each (a counting sort) */
	for (uint32_t c = chain[src]; c != NONE32; c = chain[c])
		if (depth[c] > maxd)
			maxd = depth[c];
	memset(cnt, 0, ((size_t)maxd + 2) * sizeof *cnt);
	for (uint32_t c = chain[src]; c != NONE32; c = chain[c])
		cnt[depth[c] + 1]++;
	for (uint32_t d = 1; d <= maxd + 1; d++)
		cnt[d] += cnt[d - 1];
	n = cnt[maxd + 1];
	for (uint32_t c = chain[src]; c != NONE32; c = chain[c])
		order[cnt[depth[c]]++] = c;
	/* those INTO has (below a node it lacks, or a level, none) */
	for (uint32_t k = 0; k < n; k++) {
		if (k + GRAFT_AHEAD_FROM < n)
			__builtin_prefetch(&from->nodes[order[k + GRAFT_AHEAD_FROM]]);
		if (k + GRAFT_AHEAD < n)
			graft_prefetch(into, from, map, order[k + GRAFT_AHEAD], 0);
		if (k + GRAFT_AHEAD_NODE < n)
			graft_prefetch(into, from, map, order[k + GRAFT_AHEAD_NODE], 1);
		const struct node *cn = &from->nodes[order[k]];
		uint32_t pm = map[cn->parent];
		map[order[k]] = pm == MISSING32 || cn->kind == TK_PROF_KEY_UNKNOWN ? MISSING32 :
				find_child(into, pm, cn->key, cn->kind);
	}
	/* the others are made in FROM's order, each INTO's next node: their numbers are known
	 * before, and so where their children will be looked for (CNT: to make) */
	uint32_t next = (uint32_t)into->nnodes;
	for (uint32_t c = chain[src]; c != NONE32; c = chain[c]) {
		cnt[c] = map[c] == MISSING32;
		if (cnt[c])
			map[c] = next++;
	}
	uint32_t ahead = chain[src];   /* GRAFT_AHEAD nodes further along the chain */
	for (uint32_t k = 0; k < GRAFT_AHEAD && ahead != NONE32; k++)
		ahead = chain[ahead];
	for (uint32_t c = chain[src]; c != NONE32; c = chain[c]) {
		if (ahead != NONE32) {
			if (cnt[ahead])
				graft_prefetch(into, from, map, ahead, 0);
			ahead = chain[ahead];
		}
		const struct node *cn = &from->nodes[c];
		uint32_t m = map[c];
		if (cnt[c]) {
			uint32_t pm = map[cn->parent];
			if (cn->kind == TK_PROF_KEY_UNKNOWN) {
				m = get_child(into, pm, ++into->serial, TK_PROF_KEY_UNKNOWN, track);
				if (m != NONE32)
					into->links[m].hint = from->links[c].hint;
			} else {
				/* its function is INTO's already (merge made them first) */
				uint32_t f = PROF_FUNC_LOOKUP;
				if (cn->func < from->nfuncs) {
					const struct func *ff = &from->funcs[cn->func];
					if (ff->track == track && ff->key == cn->key && ff->kind == cn->kind)
						f = g->fmap[cn->func];
				}
				m = prof_make_child(into, pm, cn->key, cn->kind, track, f);
			}
			if (m == NONE32)
				return -TK_E_NOMEM;
			if (m != map[c])
				return -TK_E_INTERNAL;
		}
		if (add_cyc(into, m, from, c) < 0)
			return -TK_E_NOMEM;
		add_stats(&into->nodes[m], cn);
	}
	return 0;
}

static int graft_level(struct tk_prof *into, const struct tk_prof *from, struct track *tm,
		       uint32_t level, struct graft_maps *g)
{
	uint32_t dst = cur_node(tm);
	if (into->nodes[dst].kind == TK_PROF_KEY_UNKNOWN && !into->links[dst].hint)
		into->links[dst].hint = from->links[level].hint;
	return graft(into, from, level, dst, g, tm->id);
}

static int merge_track(struct tk_prof *into, const struct tk_prof *from, const struct track *tb,
		       struct graft_maps *g)
{
	struct track *tm = get_track(into, tb->id);
	if (!tm)
		return -TK_E_NOMEM;
	const uint64_t off = tm->insns;
	int rc;

	if (tm->level_t_start == TK_TIME_NONE)
		tm->level_t_start = tb->t_first;
	if (tm->t_first == TK_TIME_NONE)
		tm->t_first = tb->t_first;
	tm->untimed = tm->t_first == TK_TIME_NONE || tm->level_t_start == TK_TIME_NONE;
	/* B began with a block at a function entry: after a block, that was a tail call */
	into->outside = tb->head_time != TK_TIME_NONE ? tb->head_outside : tm->outside;
	if (tb->head_pending && tm->flow == FLOW_BLOCK &&
	    (rc = tail_call(into, tm, tb->head_entry,
			    tb->head_time != TK_TIME_NONE ? tb->head_time : tm->t_last)) < 0)
		return rc;
	into->outside = 0;
	if (tm->flow == FLOW_START) {
		tm->head_pending = tb->head_pending;
		tm->head_entry = tb->head_entry;
		tm->head_time = tb->head_time;
		tm->head_outside = tb->head_outside;
	}
	if (tb->flow != FLOW_START)
		tm->flow = tb->flow;
	for (size_t k = 0; k < tb->norph; k++) {
		const struct orphan *o = &tb->orph[k];
		if ((rc = graft_level(into, from, tm, o->level_node, g)) < 0)
			return rc;
		add_child_cost(tm, o->child_ticks, o->child_insns);
		tm->insns = off + o->insns;
		if (o->time != TK_TIME_NONE)
			tm->t_last = o->time;
		if (o->what == ORPH_EXIT)
			rc = do_exit(into, tm, o->key, o->keykind, o->time);
		else if (o->what == ORPH_ENABLE)
			rc = do_enable(into, tm, o->key, o->time, (o->keykind & 3) == JUMPED_UNKNOWN ?
				       jumped_out(tm->off_at, o->key) : (int)(o->keykind & 3),
				       o->keykind >> 2);
		else
			rc = do_return(into, tm, o->key, o->time);
		if (rc < 0)
			return rc;
	}
	if (tb->gapped) {
		if ((rc = graft_level(into, from, tm, tb->gap_level_node, g)) < 0)
			return rc;
		add_child_cost(tm, tb->gap_child_ticks, tb->gap_child_insns);
		tm->insns = off + tb->gap_insns;
		into->sum.truncated += tm->depth;
		clear_stack(tm);
		end_level(into, tm, tb->gap_time);
		/* the unknown levels after B's gaps, copied whole, after what ran before */
		if ((rc = graft(into, from, tb->root, tm->root, g, tm->id)) < 0)
			return rc;
		if (!tm->gapped) {
			tm->gapped = 1;
			tm->gap_level_node = tm->base_node;
			tm->gap_insns = tm->insns;
			tm->gap_time = tb->gap_time;
			tm->gap_child_ticks = tm->base_child_ticks;
			tm->gap_child_insns = tm->base_child_insns;
		}
		/* a level the graft did not reach (only a crafted partial's, whose base level
		 * is not under its track's root): refused, as a frame's node is below */
		if (g->map[tb->base_node] == NONE32)
			return -TK_E_INTERNAL;
		tm->base_node = g->map[tb->base_node];
		tm->level_i_start = off + tb->level_i_start;
		tm->level_t_start = tb->level_t_start;
		tm->untimed = tm->t_first == TK_TIME_NONE || tm->level_t_start == TK_TIME_NONE;
		tm->base_child_ticks = tb->base_child_ticks;
		tm->base_child_insns = tb->base_child_insns;
	} else {
		if ((rc = graft_level(into, from, tm, tb->base_node, g)) < 0)
			return rc;
		add_child_cost(tm, tb->base_child_ticks, tb->base_child_insns);
	}
	if (prof_grow((void **)&tm->st, &tm->cap, tm->depth + tb->depth, sizeof *tm->st) < 0)
		return -TK_E_NOMEM;
	for (size_t i = 0; i < tb->depth; i++) {
		struct frame f = tb->st[i];
		f.node = g->map[f.node];
		f.i_enter += off;
		if (f.node == NONE32)
			return -TK_E_INTERNAL;
		/* B's tail calls from its unknown level return where INTO's top frame does */
		if (f.tail && !f.ret && tm->depth)
			f.ret = tm->st[tm->depth - 1].ret;
		tm->st[tm->depth++] = f;
	}
	tm->insns = off + tb->insns;
	if (tb->off_known) {
		tm->off_at = tb->off_at;
		tm->off_known = 1;
	}
	if (tb->t_last != TK_TIME_NONE) {
		tm->t_last = tb->t_last;
		tm->outside = tb->outside;
	}
	if (tb->t_min < tm->t_min)
		tm->t_min = tb->t_min;
	if (tb->t_max > tm->t_max)
		tm->t_max = tb->t_max;
	return 0;
}

/* D, FROM's last chunk, on huge pages with room left: cut after its entries (at a cache
 * line) and the rest left to FROM for its next log (tk_prof_reset keeps it), both pieces
 * sharing the memory. 1 when cut. */
static int spare_cut(struct tk_prof *into, struct tk_prof *from, struct dchunk *d)
{
	size_t keep = (d->n + 7) & ~(size_t)7;

	if (!d->huge || keep >= d->cap || d->cap - keep < DLOG_SPARE_MIN ||
	    into->dlog_heap + keep * sizeof *d->v > prof_dlog_budget(into))
		return 0;
	if (!d->share) {
		if (!(d->share = malloc(sizeof *d->share)))
			return 0;
		*d->share = (struct dshare){ d->v, 1 };
	}
	__atomic_add_fetch(&d->share->refs, 1, __ATOMIC_RELAXED);
	if (from->dlog_spare.v)
		dchunk_free(&from->dlog_spare);
	from->dlog_spare = (struct dchunk){ .v = d->v + keep, .cap = d->cap - keep, .share = d->share, .huge = 1 };
	d->cap = keep;
	return 1;
}

/* FROM's durations after INTO's (per function, the order of completion), FMAP giving
 * INTO's index of each of FROM's functions. TAKE: FROM's chunks move to INTO (FROM is
 * then only freed or emptied for its next chunk, keeping the rest of its last chunk:
 * spare_cut), each with the map from its indexes to INTO's. Returns 1 when INTO keeps
 * FMAP. */
static int merge_dlog(struct tk_prof *into, struct tk_prof *from, uint32_t *fmap, int take)
{
	if (!take) {
		for (size_t c = 0; c < from->ndlog; c++) {
			size_t k = dlog_len(from, c);
			const uint64_t *v = from->dlog[c].v;
			const uint32_t *m = from->dlog[c].map;
			for (size_t j = 0; j < k; j++) {
				uint64_t e = v[j];
				uint32_t f = (uint32_t)(e >> 32);
				if (into->dlog_n == into->dlog_cap && prof_dlog_more(into) < 0)
					return -TK_E_NOMEM;
				into->dlog_cur[into->dlog_n++] =
					(uint64_t)fmap[m ? m[f] : f] << 32 | (e & 0xffffffffu);
			}
		}
		return 0;
	}
	if (!from->ndlog)
		return 0;
	/* FMAP itself, and the composition with each map that FROM's taken chunks carry */
	size_t need = into->nfmaps + 1 + from->nfmaps;
	if (prof_grow((void **)&into->fmaps, &into->cfmaps, need, sizeof *into->fmaps) < 0 ||
	    prof_grow((void **)&into->dlog, &into->cdlog, into->ndlog + from->ndlog, sizeof *into->dlog) < 0)
		return -TK_E_NOMEM;
	size_t base = into->nfmaps;
	for (size_t i = 0; i < from->nfmaps; i++) {
		const struct fmap *fm = &from->fmaps[i];
		uint32_t *v = malloc((fm->n + 1) * sizeof *v);
		if (!v) {
			while (into->nfmaps > base)
				free(into->fmaps[--into->nfmaps].v);
			return -TK_E_NOMEM;
		}
		for (size_t j = 0; j < fm->n; j++)
			v[j] = fmap[fm->v[j]];
		into->fmaps[into->nfmaps++] = (struct fmap){ v, fm->n };
	}
	into->fmaps[into->nfmaps++] = (struct fmap){ fmap, from->nfuncs };
	if (into->dlog_cur)
		into->dlog[into->ndlog - 1].n = into->dlog_n;
	for (size_t c = 0; c < from->ndlog; c++) {
		struct dchunk d = from->dlog[c];
		d.n = dlog_len(from, c);
		if (d.map) {
			size_t k = 0;
			while (from->fmaps[k].v != d.map)
				k++;
			d.map = into->fmaps[base + k].v;
		} else {
			d.map = fmap;
		}
		if (!d.spilled) {
			/* FROM's last chunk is mostly unused (a chunk of trace completes few
			 * calls with a duration): only what was made writable counts */
			int last = d.v == from->dlog_cur;
			size_t bytes = (last ? from->dlog_cap : d.cap) * sizeof *d.v;
			uint64_t *m;
			if (last && spare_cut(into, from, &d))
				bytes = d.cap * sizeof *d.v;
			if (into->dlog_heap + bytes > prof_dlog_budget(into) && (d.cap == DLOG_CHUNK || d.huge) &&
			    (m = prof_spill_chunk(into)) != NULL) {
				memcpy(m, d.v, d.n * sizeof *d.v);
				dchunk_free(&d);
				d = (struct dchunk){ .v = m, .n = d.n, .cap = DLOG_CHUNK, .map = d.map, .spilled = 1 };
				dlog_release(&d, d.n);
			} else {
				into->dlog_heap += bytes;
			}
		}
		into->dlog[into->ndlog++] = d;
	}
	/* later durations go to a chunk of their own (a taken chunk's indexes are FROM's) */
	into->dlog_cur = NULL;
	into->dlog_n = into->dlog_cap = into->dlog_end = 0;
	from->dlog_grew = from->ndlog > 1 || from->dlog[0].huge;   /* (a log begun in a spare) */
	from->ndlog = 0;
	from->dlog_cur = NULL;
	from->dlog_n = from->dlog_cap = from->dlog_end = 0;
	return 1;
}

/* Where prof_get_func will look for function F in INTO, loaded ahead as graft_prefetch
 * does: the table's slot (it holds the key). */
HOT void func_prefetch(const struct tk_prof *into, const struct func *f)
{
	if (into->func_map)
		__builtin_prefetch(&into->func_map[func_hash(f->track, f->key, f->kind) &
						   into->func_mask]);
}

static int merge(struct tk_prof *into, struct tk_prof *from, int take)
{
	int rc = 0;

	if (into == from)
		return -TK_E_INVAL;
	if (into->finished || from->finished)
		return -TK_E_BAD_STATE;
	if (into->nomem || from->nomem)
		return -TK_E_NOMEM;
	/* whole-profile counters; merge_track adds what the seams resolve */
	into->sum.events += from->sum.events;
	into->sum.blocks += from->sum.blocks;
	into->sum.insns += from->sum.insns;
	into->sum.calls += from->sum.calls;
	into->sum.returns += from->sum.returns;
	into->sum.unmatched += from->sum.unmatched;
	into->sum.unwound += from->sum.unwound;
	into->sum.truncated += from->sum.truncated;
	into->sum.gaps += from->sum.gaps;
	into->final_orphans += from->final_orphans;

	for (size_t i = 0; i < from->nblocks; i++) {
		const struct block *fb = &from->blocks[i];
		struct block *b = prof_get_block(into, fb->start, fb->end);
		if (!b)
			goto nomem;
		b->execs += fb->execs;
		b->insns += fb->insns;
	}
	/* and what FROM's block cache holds (FROM is only read) */
	for (size_t i = 0; prof_block_cache_used(from) && i < BLOCK_CACHE; i++) {
		const struct block_slot *c = &from->block_cache[i];
		if (!c->execs)
			continue;
		struct block *b = prof_get_block(into, from->blocks[c->index].start, from->blocks[c->index].end);
		if (!b)
			goto nomem;
		b->execs += c->execs;
		b->insns += c->insns;
	}
	uint32_t *fmap = malloc((from->nfuncs + 1) * sizeof *fmap);
	if (!fmap)
		goto nomem;
	for (size_t i = 0; i < from->nfuncs; i++) {
		const struct func *ff = &from->funcs[i];
		if (i + GRAFT_AHEAD < from->nfuncs)
			func_prefetch(into, &ff[GRAFT_AHEAD]);
		uint32_t fi = prof_get_func(into, ff->track, ff->key, ff->kind);
		if (fi == NONE32) {
			free(fmap);
			goto nomem;
		}
		fmap[i] = fi;
	}
	int owned = merge_dlog(into, from, fmap, take);
	if (owned < 0 || prof_grow((void **)&into->druns, &into->cdruns, into->ndruns + from->ndruns,
				   sizeof *into->druns) < 0) {
		if (owned <= 0)
			free(fmap);
		goto nomem;
	}
	for (size_t i = 0; i < from->ndruns; i++) {
		into->druns[into->ndruns] = from->druns[i];
		into->druns[into->ndruns++].func = fmap[from->druns[i].func];
	}
	for (size_t i = 0; i < from->nfuncs; i++) {
		const struct func *ff = &from->funcs[i];
		struct func *f = &into->funcs[fmap[i]];
		f->zeros += ff->zeros;
		if (ff->nbig) {
			if (prof_grow((void **)&f->big, &f->cbig, f->nbig + ff->nbig, sizeof *f->big) < 0) {
				if (!owned)
					free(fmap);
				goto nomem;
			}
			memcpy(f->big + f->nbig, ff->big, ff->nbig * sizeof *f->big);
			f->nbig += ff->nbig;
		}
	}
	struct graft_maps g;
	if (!(g.map = malloc(7 * (from->nnodes + 2) * sizeof *g.map))) {
		if (!owned)
			free(fmap);
		goto nomem;
	}
	g.fmap = fmap;
	g.owner = g.map + from->nnodes + 2;
	g.last = g.owner + from->nnodes + 2;
	g.next = g.last + from->nnodes + 2;
	g.depth = g.next + from->nnodes + 2;
	g.order = g.depth + from->nnodes + 2;
	g.cnt = g.order + from->nnodes + 2;
	/* FROM's nodes' memory made ready while they are looked up, and the next chunk's
	 * (most often about as many) while it is decoded */
	prof_nodes_expect(into, from->nnodes);
	graft_owners(from, &g);
	for (size_t i = 0; i < from->ntracks && rc >= 0; i++)
		rc = merge_track(into, from, &from->tracks[i], &g);
	free(g.map);
	if (!owned)
		free(fmap);
	if (rc >= 0)
		prof_nodes_expect(into, from->nnodes);
	if (rc == -TK_E_NOMEM)
		into->nomem = 1;
	return rc;
nomem:
	into->nomem = 1;
	return -TK_E_NOMEM;
}

int tk_prof_merge(struct tk_prof *into, const struct tk_prof *from)
{
	/* without taking, FROM is only read */
	return merge(into, (struct tk_prof *)from, 0);
}

int tk_prof_seam_exact(const struct tk_prof *into, const struct tk_prof *from)
{
	for (size_t k = 0; k < from->ntracks; k++) {
		const struct track *tb = &from->tracks[k], *tm = NULL;

		if (!tb->nunmatched)
			continue;
		for (size_t m = 0; m < into->ntracks && !tm; m++)
			if (into->tracks[m].id == tb->id)
				tm = &into->tracks[m];
		for (size_t i = 0; tm && i < tm->depth; i++) {
			uint64_t ret = tm->st[i].ret;

			if (!ret)
				continue;
			if (tb->nunmatched > UNMATCHED_KEPT)
				return 0;
			for (size_t u = 0; u < tb->nunmatched; u++)
				if (tb->unmatched[u] == ret) {
					return 0;
				}
		}
	}
	return 1;
}

int prof_seam_doubt(const struct tk_prof *from)
{
	int doubt = 0;

	for (size_t k = 0; k < from->ntracks; k++)
		if (from->tracks[k].nunmatched > UNMATCHED_KEPT)
			return 2;
		else if (from->tracks[k].nunmatched)
			doubt = 1;
	return doubt;
}

int tk_prof_merge_take(struct tk_prof *into, struct tk_prof *from)
{
	return merge(into, from, 1);
}
