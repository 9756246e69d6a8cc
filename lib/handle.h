/* SPDX-License-Identifier: MIT */
/*
 * The process's side of a segment: a handle (struct shmcfg), its snapshots,
 * the pointers into its mapping and the schema's accessors. Included by
 * lib/internal.h.
 */
#ifndef SHMCFG_HANDLE_H
#define SHMCFG_HANDLE_H

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "layout.h"

/* The process's view of one pinned generation: the snapshot of a read-write
 * handle, one per pin of its reader entry (h->views), rewritten only while
 * that pin holds no snapshot (reclaim.c); or a copy (is_copy). */
struct shmcfg_snapshot {
	struct shmcfg_snapshot_view view; /* first: the inline getters read it (snap_of) */
	shmcfg *h; const shmcfg *origin; /* acquired on: its options are mapped to h's; NULL: h's own */
	uint64_t gen;
	const char *slot;   /* slot memory: in the segment, or a private copy */
	const char *heap;   /* the value heap: the segment's, or the copy's */
	uint64_t heap_size;
	bool is_copy;       /* read-only handles and pin overflow: freed on release */
	int pin;            /* index in our reader entry's pins, -1 if none */
};

/* An array of every option's id, made once from the whole schema, or why it
 * could not be (validate_all.c: shmcfg__schema_topo, shmcfg__schema_by_name) */
struct ids_once {
	char why[512]; /* "": ids holds the array; else the error's detail */
	uint32_t ids[];
};

struct shmcfg {
	struct shmcfg_view view; /* first: the inline getters read it */
	char *name;
	int fd;
	int lock_fd;             /* the lock object, read-write handles only; -1 otherwise */
	int build_fd[2];         /* while it is made: the build locks' descriptions (unfinished.c), -1 */
	struct lock_file *lock_map; /* its page, read-write handles only (the writer lock word) */
	bool rdonly;
	shmcfg_attach_opts opts; /* as attached, for shmcfg_reattach() */
	uint8_t expect_hash[16]; /* opts.expect_schema_hash points here */
	uid_t owner;             /* the object's owner at attach */
	struct shmcfg *next_open;  /* in segment.c's list of open handles (fork) */
	pid_t pid;               /* the attaching process (fork detection) */
	uint64_t serial;         /* unique among the process's handles, ever: what patch frames
				  * name it by (patch.c: another handle may get a closed one's address) */
	size_t map_bytes;        /* the handle's own mapping: the struct and the copy's (segment.c) */
	char *base;              /* mapping of the whole object */
	size_t size;
	struct seg_header *hdr;  /* shared: `ready`, the hot words, the writer state; the rest from lay */
	struct seg_header lay;   /* private copy of the header, validated at attach */
	/*
	 * The schema (validate.c, doc/design.md "Creation and attach"): its
	 * header copied and checked at attach; the region mapped privately
	 * (MAP_PRIVATE), each page copied by the kernel the first time it is
	 * used (shmcfg__schema_pin) and never read from the shared object
	 * again; each option validated on that copy the first time it is used
	 * (opt_d, shmcfg__opt_use). The pointers below point into the private
	 * copy; only validated parts may be read.
	 */
	struct schema_hdr sch_copy;
	const struct schema_hdr *sch;      /* &sch_copy */
	char *priv;                        /* private mapping of [0, schema end), or the validated copy */
	size_t priv_size;
	bool vcopy;                        /* priv is this uid's validated copy (vcopy.c): read only, all checked */
	unsigned page_shift;
	unsigned char *opt_ok;             /* per option: OPT_OK once validated (opt_d), | OPT_PLAIN */
	uint64_t checked_bytes;            /* what the validations that passed read (validate.c: E70's budget) */
	uint64_t *lk;                      /* per name-index slot: 0, or its option's LK_ entry once validated (lookup) */
	unsigned char *page_ok;            /* per page of priv: 1 once copied */
	unsigned char *whole_ok;           /* WHOLE_*: checked whole once; all three: __atomic_* only */
	const struct opt_desc *desc;       /* raw: read only through opt_d() */
	const struct implies_ent *implies; /* entries of validated options only */
	const uint32_t *rdeps;             /* runs of validated options only */
	const uint32_t *index_raw;         /* raw: through validate.c */
	struct ids_once *topo;             /* implication order, from the ranks: shmcfg__schema_topo */
	struct ids_once *by_name;          /* ids sorted by name, for long probes: shmcfg__schema_by_name */
	const char *strings;               /* what validated references name */
	uint64_t strings_size;
	/* reader table */
	int reader;              /* our entry, -1 if none (not claimed yet, read-only, table full) */
	bool agent_claim;        /* this handle holds the cluster agent's claim (shmcfg_sync_claim) */
	/* Following a replacement (follow.c): the successor (set once); a successor's program handle
	 * and map of its options (NULL: same schema); how to attach, when to retry, why it failed */
	struct shmcfg *next; const struct shmcfg *root; uint32_t *root_map;
	int (*attach_next)(struct shmcfg *h, struct shmcfg **ret);
	uint64_t follow_after_ns;
	int follow_err;
	char follow_detail[256]; /* the last failed attach's detail, the name cut off (under view_lock) */
	uint64_t poison_cur; char *poison_slot; /* the view of a handle that cannot follow */
	uint64_t claim_after_ns; /* table found full: no new claim before this (reclaim.c) */
	bool counted_fallback;   /* counted in the header's copy_fallbacks */
	pthread_mutex_t view_lock; /* serialises view replacement */
	pthread_mutex_t commit_lock, entry_lock; /* threads share the OFD locks: commits, claims/reaping */
	/* the pinned views, one per pin of our reader entry, and the newest
	 * (-1: none; atomic): reclaim.c */
	struct shmcfg_snapshot views[SEG_PINS];
	int cur_pin;
	uint64_t *pins;          /* our entry's pin words: set at the claim, before any view */
	unsigned close_pending; void (*close_deferred)(shmcfg *h); /* a close that waits for releases */
	uint32_t tp_entry[64];   /* the thread entries it claimed (readers.c, under entry_lock) */
	unsigned n_tp_entry;
	bool warned_membarrier;  /* a revocation's membarrier failed: said once (tpin.c) */
	/* copied snapshots of the handle not yet released (they read its schema;
	 * one acquired through it into another schema, its map too), with
	 * COPIES_CLOSED once it is closing: reclaim.c */
	unsigned copies;
	bool forked_holding;     /* the process held snapshots of it at a fork() (fork.c) */
	int commit_timeout_ms;
	uint32_t wlock_mine;      /* the writer lock word's owner while we hold it (wlock.c) */
	uint32_t slot_hint;      /* the slot current before our last commit's: the next one's choice, if free (reclaim.c) */
	bool no_growth;          /* shmcfg_set_heap_growth(false): a full heap fails the commit */
	_Atomic(unsigned char) *warned; /* per option: deprecation warned */
	uid_t uid;               /* getuid() at attach: for the commit log */
	char *hist_buf; size_t hist_cap; /* a commit's history record, built here (history.c) */
	char self_user[SHMCFG_USER_MAX], self_comm[SHMCFG_PROCESS_MAX]; /* the committer, as the history */
	uint8_t self_user_len; bool self_known;                        /* names it (history.c, once) */
	/* the terms of the sums a commit gave an option whose value is in its
	 * cell, by option modulo TERMS_CACHED (resolve.c, under commit_lock):
	 * 12 KiB, room for the options a process keeps changing */
	struct opt_terms { uint64_t val, meta, d[2], mix; uint32_t opt1, lref; } terms[256];
	uint32_t *waiters;       /* the header's count of waiters (read-write handles; watch.c) */
	bool wake_always; uint64_t mode_ns; /* readers may not count themselves (as of mode_ns: wake()) */
	shmcfg_env_use *env_used; size_t n_env_used; /* the creator's: the variables that filled the env layers (env.c) */
};

/*
 * A handle is mapped, not allocated (segment.c): its first HANDLE_BYTES are
 * the struct, and the segment's first pages follow them, read-only, so that
 * the accessors' copy (SEG_COPY_OFF into a segment) is at SHMCFG__COPY_AT
 * from the handle and a generated accessor finds its block without a load
 * (shmcfg/proven.h). HANDLE_BYTES is a multiple of every page size Linux
 * has (4, 16, 64 KiB).
 */
#define HANDLE_BYTES ((size_t)SHMCFG__COPY_AT - SEG_COPY_OFF)
_Static_assert(HANDLE_BYTES == 65536, "the handle's own pages: 64 KiB");
_Static_assert(sizeof(struct shmcfg) <= HANDLE_BYTES, "a handle fits before its copy");

/* What the copy's mapping covers: the segment from its start to the end of
 * the copy, in whole pages */
static inline size_t copy_map_bytes(uint32_t nopts)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	return (SEG_COPY_OFF + SEG_COPY_BYTES(nopts) + ps - 1) / ps * ps;
}

/* The handle's mutexes, unlocked: at its making, and in a forked child (a
 * thread of the parent that held one, as a follow holds view_lock through
 * a whole attach, does not exist there: fork.c). */
static inline void handle_mutexes_init(shmcfg *h)
{
	pthread_mutex_init(&h->view_lock, NULL);
	pthread_mutex_init(&h->commit_lock, NULL);
	pthread_mutex_init(&h->entry_lock, NULL);
}

/* Pointers into the mapping. */
/* Option o's block of the accessors' copy (layout.h): [0] its seqlock,
 * [1 + o % SHMCFG__COPY_PER_BLOCK] o's word. */
static inline uint64_t *copy_block(const shmcfg *h, uint32_t o)
{
	return (uint64_t *)(h->base + SEG_COPY_OFF) + (uint64_t)(o / SHMCFG__COPY_PER_BLOCK) * 8;
}
#define COPY_WORD(o) (1 + (o) % SHMCFG__COPY_PER_BLOCK)

static inline struct slot_hdr *slot_at(const shmcfg *h, uint32_t s)
{
	return (struct slot_hdr *)(h->base + h->lay.slots_off + (uint64_t)s * h->lay.slot_size);
}
static inline struct shmcfg__cell *slot_cells(const shmcfg *h, const void *slot)
{
	return (struct shmcfg__cell *)((char *)slot + h->lay.cells_off);
}
/* A snapshot of generation gen, held in slot and heap[0, heap_size), with
 * the view its inline getters read. */
static inline struct shmcfg_snapshot snap_of(shmcfg *h, uint64_t gen, const char *slot, const char *heap,
					     uint64_t heap_size, bool is_copy, int pin)
{
	return (struct shmcfg_snapshot){.view = {SHMCFG_SNAPSHOT_VIEW_ABI, h->lay.nopts, slot_cells(h, slot), NULL},
					.h = h, .gen = gen, .slot = slot, .heap = heap, .heap_size = heap_size,
					.is_copy = is_copy, .pin = pin};
}
/* A copied snapshot that reads h was made: h's close waits for its
 * release (the copies' count, with COPIES_CLOSED: reclaim.c). */
#define COPIES_CLOSED (1u << 31)
static inline void copy_held(shmcfg *h)
{
	__atomic_fetch_add(&h->copies, 1, __ATOMIC_RELAXED); /* the copy is the caller's thread's */
}
/* The copy's option ids are origin's (another schema's): its getters take
 * the slow path, which maps them through origin (follow.c), so origin's
 * close waits for its release too. */
static inline void snap_mapped(struct shmcfg_snapshot *s, shmcfg *origin)
{
	s->origin = origin;
	s->view.nopts = 0;
	copy_held(origin);
}
static inline uint32_t *slot_lrefs(const shmcfg *h, const void *slot)
{
	return (uint32_t *)((char *)slot + h->lay.lrefs_off);
}
static inline char *seg_heap(const shmcfg *h)
{
	return h->base + h->lay.heap_off;
}
static inline struct reader_ent *reader_at(const shmcfg *h, uint32_t i)
{
	return (struct reader_ent *)(h->base + h->lay.readers_off) + i;
}
static inline struct log_ent *log_at(const shmcfg *h, uint64_t gen)
{
	return (struct log_ent *)(h->base + h->lay.log_off) + gen % SEG_LOG_ENTRIES;
}
static inline uint32_t *ring_at(const shmcfg *h, uint64_t pos)
{
	return (uint32_t *)(h->base + h->lay.ring_off) + (pos & (h->lay.ring_size - 1));
}
/*
 * The schema's accessors (validate.c). Options are validated on first use:
 *
 * shmcfg__opt_use(h, opt) is the fallible door: the handle in range
 * (SHMCFG_E_NOOPT), then the option and its alias's final target validated
 * (SHMCFG_E_CORRUPT with a one-line detail; -ENOMEM, or another errno, when
 * the private copy could not be made: no verdict, a later call tries
 * again). Every entry point that takes an option handle, and every full
 * scan, passes it before opt_d().
 *
 * opt_d(h, i) is option i's validated descriptor (i < nopts). Its fast path
 * is one acquire load. It validates an option nobody validated yet, but it
 * cannot fail: if the option is corrupt (or its copy cannot be made now) it
 * returns an inert descriptor (type 0, which every type check refuses, empty
 * strings, no alias, no implications, alias_final = i): safe, never used
 * for a result, because the callers that can fail have passed
 * shmcfg__opt_use() or a whole-schema accessor first.
 *
 * sstr(h, r) is the string of a reference of a validated descriptor:
 * NUL-terminated, in bounds, in the private copy; an empty reference (the
 * inert descriptor's, an empty list's) reads nothing of it. h->strings with
 * h->strings_size is what the cells of validated descriptors and
 * implications decode against (shmcfg__value_from_cell).
 *
 * Whole-schema accessors, for full scans (generation 1 at creation): every
 * option validated (shmcfg__schema_all) and the implication order (made
 * from the ranks: each once, impliers before their targets), each checked
 * once, on first use. A name index entry is read through schema_index_at
 * (range-checked).
 *
 * A field added to struct opt_desc is checked in shmcfg__opt_check
 * (validate.c, on first use; whatever it references pinned before it is
 * read); one added to struct schema_hdr in shmcfg__schema_open (at attach:
 * constant work only); a new array used whole gets an accessor in
 * validate_all.c, checked when first used whole, and a line in
 * shmcfg__schema_validate (shmcfg_check).
 */
/* validate.c: one option validated on first use; the name index */
int shmcfg__opt_use(const shmcfg *h, shmcfg_opt opt);
void shmcfg__schema_warm(const shmcfg *h);
const struct opt_desc *shmcfg__opt_slow(const shmcfg *h, uint32_t i);
int shmcfg__schema_index(const shmcfg *h, uint32_t slot, uint32_t *id);
/* Name index entry `slot` (< index_size) in *id: UINT32_MAX (empty) or an
 * option id, range-checked; inline when its page was copied already. */
static inline int schema_index_at(const shmcfg *h, uint32_t slot, uint32_t *id)
{
	uint64_t pos = h->lay.schema_off + h->sch->index_off + (uint64_t)slot * 4;
	/* acquire: pairs with the release store of page_ok in shmcfg__schema_pin */
	if (!__atomic_load_n(&h->page_ok[pos >> h->page_shift], __ATOMIC_ACQUIRE))
		return shmcfg__schema_index(h, slot, id);
	uint32_t v = h->index_raw[slot];
	if (__builtin_expect(v != UINT32_MAX && v >= h->lay.nopts, 0))
		return shmcfg__schema_index(h, slot, id); /* says so */
	*id = v;
	return 0;
}
/* validate_all.c: the schema used whole */
/* h->whole_ok[]: every option validated (validate_all.c); every page of the
 * schema region private (validate.c: shmcfg__schema_pin) */
enum { WHOLE_ALL, WHOLE_PRIVATE, WHOLE_N };
#define OPT_OK 1    /* h->opt_ok[i]: option i validated */
#define OPT_PLAIN 2 /* ... and neither an alias nor deprecated: a lookup of it needs nothing more */
/*
 * h->lk[slot], the lookup's cache of name-index slot `slot`: 0 (not known
 * yet), or the plain option (OPT_PLAIN) the slot names, once validated: its
 * name's offset in strings << 32 | the name's length << LK_ID_BITS | its id.
 * A lookup then reads the entry and the name: one dependent load fewer than
 * the index entry, the option's state and the name. Names of LK_LEN_MAX
 * bytes or more are not cached (a valid entry is never 0: a name has bytes).
 */
#define LK_ID_BITS 22
#define LK_LEN_MAX (1u << (32 - LK_ID_BITS))
_Static_assert(SEG_MAX_OPTS <= 1u << LK_ID_BITS, "an option id fits LK_ID_BITS");
int shmcfg__schema_all(const shmcfg *h);
void shmcfg__schema_created(const shmcfg *h, const void *built, const uint8_t hash[16]);
int shmcfg__schema_topo(const shmcfg *h, const uint32_t **topo);
int shmcfg__schema_by_name(const shmcfg *h, const uint32_t **by_name);
static inline const struct opt_desc *opt_d(const shmcfg *h, uint32_t i)
{
	/* acquire: pairs with the release store of opt_ok[i] in validate.c
	 * (opt_validate): the descriptor and everything it references were
	 * copied and checked before it */
	if (__builtin_expect(__atomic_load_n(&h->opt_ok[i], __ATOMIC_ACQUIRE), 1))
		return &h->desc[i];
	return shmcfg__opt_slow(h, i);
}
/* Whether attach maps now what h's commits and reads will touch: asked
 * for (SHMCFG_ATTACH_PREFAULT), or a writer's of a segment up to
 * SEG_WRITER_MAP_BYTES (with the schema's validated copy: segment.c,
 * vcopy.c), whose first commits then fault on nothing. */
static inline bool attach_maps_all(const shmcfg *h)
{
	return (h->opts.flags & SHMCFG_ATTACH_PREFAULT) || (!h->rdonly && h->lay.total_size <= SEG_WRITER_MAP_BYTES);
}
/*
 * What an attach populated past SEG_EAGER_BYTES (attach_maps_all(): a
 * writer's up to SEG_WRITER_MAP_BYTES, or SHMCFG_ATTACH_PREFAULT): the
 * segment (follow.c) and the schema's validated copy (segment.c), walked
 * once with one prefetch a page in address order. A populate fills the
 * page tables without loading through them, so each page's first load in
 * the process walked tables cold in the caches (and, under a hypervisor,
 * the host's): 250-440 ns a random load against 150-190 once each page had
 * one. A fresh process's first commits waited on two such walks in a row
 * (an option's descriptor, then its name, whose offset the descriptor
 * holds): side by side, a fresh process's first 7 commits at 100,000
 * options took 591-711 ns with the walk against 1,111 ns without, for
 * ~0.07 ms (3%) more of a 2.4 ms attach (doc/benchmarks.md, session 42).
 * A prefetch never faults: a page truncated away meanwhile is skipped.
 */
static inline void warm_walks(const void *p, size_t len)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	for (size_t o = 0; o < len; o += ps)
		__builtin_prefetch((const char *)p + o);
}
/* The schema region's bytes, as checked (the private or validated copy). */
static inline const char *schema_region(const shmcfg *h)
{
	return (const char *)h->desc - h->sch->desc_off;
}
static inline const char *sstr(const shmcfg *h, struct sref r)
{
	return r.len ? h->strings + r.off : "";
}
static inline uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
/* When a writer's wait that starts at `now` (CLOCK_MONOTONIC) gives up. */
static inline uint64_t commit_deadline(const shmcfg *h, uint64_t now)
{
	return now + (uint64_t)h->commit_timeout_ms * 1000000ull;
}
static inline uint64_t cur_gen(uint64_t cur)
{
	return cur >> SHMCFG__SLOT_BITS;
}
static inline uint32_t cur_slot(uint64_t cur)
{
	return (uint32_t)(cur & ((1u << SHMCFG__SLOT_BITS) - 1));
}

#endif /* SHMCFG_HANDLE_H */
