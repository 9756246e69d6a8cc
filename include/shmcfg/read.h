/* SPDX-License-Identifier: MIT */
/*
 * The inline read's machinery: the part of a handle it reads (struct
 * shmcfg_view), the slot seqlock's read side and the checked read of one
 * cell (shmcfg__read_cell), behind shmcfg_get_bool/_int/_float.
 * Included by <shmcfg.h>: do not include it, nor use what it declares,
 * directly; it is not the API, and changes with SHMCFG_VIEW_ABI and
 * SHMCFG_GEN_ABI.
 */
#ifndef SHMCFG_READ_H
#define SHMCFG_READ_H
#ifndef SHMCFG_H
#error "include <shmcfg.h>, not <shmcfg/read.h>"
#endif

/**
 * The part of a handle that the inline getters read: it is the first member
 * of every `shmcfg`. Versioned by @ref abi (fields are only ever appended);
 * everything else is opaque.
 *
 * A slot is a snapshot of one generation. Its first 8 bytes are its
 * generation stamp (SLOT_BUSY | the old generation while a writer rewrites
 * it: never a generation a reader looks for), followed by the writers'
 * words; at SHMCFG__CELLS_OFF starts an array of `nopts` cells.
 */
struct shmcfg_view {
	uint32_t abi;              /**< SHMCFG_VIEW_ABI */
	uint32_t nopts;
	uint32_t nslots;
	uint32_t cells_off;        /**< SHMCFG__CELLS_OFF */
	const uint64_t *current;   /**< (generation << 8) | slot, in the segment header */
	const char *slots;         /**< slot 0 */
	uint64_t slot_size;
	/* ABI 2 */
	const char *slot[256];     /**< address of slot i; indices >= nslots name slot 0 */
	/* ABI 3 */
	const char *copy;          /**< the accessors' copy's first block: the handle + SHMCFG__COPY_AT */
};
#define SHMCFG_VIEW_ABI 3
#define SHMCFG__CELLS_OFF 64
/* The accessors' copy (the proven reads, shmcfg/proven.h): 64-byte blocks,
 * each a seqlock word and the value words of SHMCFG__COPY_PER_BLOCK
 * options, at SHMCFG__COPY_AT from the handle (below) */
#define SHMCFG__COPY_PER_BLOCK 7
/* The accessors' copy's first block is at this distance from the handle
 * (0.12): a handle is mapped, its first 64 KiB its own and the segment's
 * first pages after them, read-only (the copy starts 4 KiB into a
 * segment), so that an accessor finds its block without a load */
#define SHMCFG__COPY_AT (65536 + 4096)

/** One value cell of a slot: the value bits and their metadata. */
struct shmcfg__cell {
	uint64_t val;  /**< bool/int: the value; float: its bits; str/list: heap offset | count << 32 */
	uint64_t meta; /**< bits 0-7 type, 8 null, 9-12 source, 13 set, 32-63 byte length */
};

#define SHMCFG_NULL 1 /**< getter result: the value is null */
#define SHMCFG__SLOT_BITS 8
#define SHMCFG__SPIN 64

/** Non-zero while the thread has patches: its reads take the slow path. */
extern SHMCFG_EXPORT __thread int shmcfg__tls_patched __attribute__((tls_model("initial-exec")));
/** Do not use directly: a number naming the thread's patch frames as they
 * are now, new (process-wide) at each change of them, 0 before the first:
 * what a binding caches a patched thread's reads under. */
extern SHMCFG_EXPORT __thread uint64_t shmcfg__tls_patch_id __attribute__((tls_model("initial-exec")));

/** Do not use directly: the out-of-line read behind the inline getters
 * (patched threads, bad handles, null values, retries). Cold, so that
 * compilers move the call out of the inline read's straight line. */
SHMCFG_EXPORT int shmcfg__get_slow(const shmcfg *h, shmcfg_opt opt, shmcfg_type type,
				   uint64_t *bits) __attribute__((cold));

/*
 * The read side of the slot seqlock, in three steps. The writer (lib/
 * publish.c, its steps in lib/read/seqlock.h) that reuses a slot stores the busy
 * mark (the top bit over the old generation, seq_cst), issues a release
 * fence (C), rewrites the cells, stores the new stamp (release, D), then
 * `current` (seq_cst, E). A reader:
 *
 *   slot = shmcfg__seq_begin(v, &cur)  (A) acquire load of `current`
 *   val  = shmcfg__seq_val(slot, opt)      relaxed loads of cells: any number
 *   ok   = shmcfg__seq_end(slot, cur)  (B) acquire fence, then the stamp
 *
 *  - (A) pairs with (E): a reader that sees generation g in `current` sees
 *    every store that built g's slot, so its cell loads return g's values
 *    or later ones.
 *  - (B) pairs with (C): if any cell load saw a byte of a later rewrite, the
 *    fences synchronise, and the stamp load (after B) sees the busy mark
 *    (stored before C) or a later generation, never the one taken from
 *    `current`.
 * Generations only grow, so a stamp equal to the one in `current` proves
 * that the slot held that generation for the whole read: every cell loaded
 * between the two steps, one or many, belongs to it. Otherwise, retry.
 * The slot comes from the view's table of 256 addresses: an index past
 * `nslots` (a hostile segment) names slot 0, which is mapped, so at worst
 * the read returns values that slot 0 validly holds.
 */
static inline const char *shmcfg__seq_begin(const struct shmcfg_view *v, uint64_t *cur)
{
	/* the view's pointers move to a new incarnation when the segment is
	 * replaced (lib/segment/replace.c: any mix of old and new fails the stamp check) */
	*cur = __atomic_load_n(__atomic_load_n(&v->current, __ATOMIC_RELAXED), __ATOMIC_ACQUIRE); /* (A) */
	return __atomic_load_n(&v->slot[*cur & ((1u << SHMCFG__SLOT_BITS) - 1)], __ATOMIC_RELAXED);
}

static inline uint64_t shmcfg__seq_val(const char *slot, shmcfg_opt opt)
{
	const struct shmcfg__cell *c = (const struct shmcfg__cell *)(slot + SHMCFG__CELLS_OFF) + opt;
	return __atomic_load_n(&c->val, __ATOMIC_RELAXED);
}

static inline uint64_t shmcfg__seq_meta(const char *slot, shmcfg_opt opt)
{
	const struct shmcfg__cell *c = (const struct shmcfg__cell *)(slot + SHMCFG__CELLS_OFF) + opt;
	return __atomic_load_n(&c->meta, __ATOMIC_RELAXED);
}

static inline bool shmcfg__seq_end(const char *slot, uint64_t cur)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE); /* (B) */
	return __atomic_load_n((const uint64_t *)slot, __ATOMIC_RELAXED) == cur >> SHMCFG__SLOT_BITS;
}

/*
 * The validated read: the seqlock above over one cell. The handle is
 * checked against `nopts`; one compare checks both the type and "not null".
 * A null value, a wrong type, a patched thread (its reads show its patches)
 * and a handle out of range go to the cold slow path, which says which; so
 * does a read that did not validate SHMCFG__SPIN times (a hostile segment
 * cannot hang a reader).
 */
static inline int shmcfg__read_cell(const shmcfg *h, shmcfg_opt opt, shmcfg_type type,
				    bool has_ret, uint64_t *bits)
{
	const struct shmcfg_view *v = (const struct shmcfg_view *)h;
	/* a NULL handle or out-pointer: -EINVAL from the slow path (a caller's
	 * &local folds has_ret away; !h is one predicted branch) */
	if (__builtin_expect(shmcfg__tls_patched != 0 || !h || !has_ret || opt >= v->nopts, 0))
		return shmcfg__get_slow(h, opt, type, has_ret ? bits : NULL);
	for (int spin = 0; spin < SHMCFG__SPIN; spin++) {
		uint64_t cur;
		const char *slot = shmcfg__seq_begin(v, &cur);
		uint64_t val = shmcfg__seq_val(slot, opt);
		uint64_t meta = shmcfg__seq_meta(slot, opt);
		if (!shmcfg__seq_end(slot, cur))
			continue;
		if (__builtin_expect((meta & 0x1ff) != (uint64_t)type, 0))
			break; /* null, or the wrong type: the slow path says which */
		*bits = val;
		return 0;
	}
	return shmcfg__get_slow(h, opt, type, bits);
}

/**
 * The part of a snapshot that its inline getters read: the first member of
 * every `shmcfg_snapshot`. Versioned by SHMCFG_SNAPSHOT_VIEW_ABI (fields are
 * only ever appended); everything else is opaque. `nopts` is 0 when the
 * option ids need the slow path (a snapshot of a handle followed into
 * another schema maps them).
 */
struct shmcfg_snapshot_view {
	uint32_t abi;                     /**< SHMCFG_SNAPSHOT_VIEW_ABI */
	uint32_t nopts;
	const struct shmcfg__cell *cells; /**< the snapshot's generation: its slot's cells */
	/* ABI 2 */
	struct shmcfg__tpin *tp;          /**< the thread pin it counts on, NULL: none (the library releases it) */
};
#define SHMCFG_SNAPSHOT_VIEW_ABI 2

/** Do not use directly: the out-of-line read behind the inline snapshot
 * getters (a bad snapshot or option, a mapped snapshot, null values, the
 * wrong type). */
SHMCFG_EXPORT int shmcfg__snapshot_get_slow(const shmcfg_snapshot *snap, shmcfg_opt opt, shmcfg_type type,
					    uint64_t *bits) __attribute__((cold));

/*
 * The checked read of one cell of a snapshot. No seqlock: the snapshot's
 * generation stays in its slot until it is released (the pin, or a private
 * copy; a child reading a snapshot inherited across fork() relies on its
 * parent's hold, as shmcfg_snapshot_get() does), and the acquire that
 * returned it ordered the slot's stores before these loads (the acquire load
 * of `current` pairs with the publication, E).
 * Relaxed loads all the same: other processes share the memory. One compare
 * checks both the type and "not null".
 */
static inline int shmcfg__snapshot_read(const shmcfg_snapshot *snap, shmcfg_opt opt, shmcfg_type type,
					bool has_ret, uint64_t *bits)
{
	const struct shmcfg_snapshot_view *v = (const struct shmcfg_snapshot_view *)snap;
	if (__builtin_expect(!snap || !has_ret || opt >= v->nopts, 0))
		return shmcfg__snapshot_get_slow(snap, opt, type, has_ret ? bits : NULL);
	uint64_t meta = __atomic_load_n(&v->cells[opt].meta, __ATOMIC_RELAXED);
	uint64_t val = __atomic_load_n(&v->cells[opt].val, __ATOMIC_RELAXED);
	if (__builtin_expect((meta & 0x1ff) != (uint64_t)type, 0))
		return shmcfg__snapshot_get_slow(snap, opt, type, bits); /* null, or the wrong type */
	*bits = val;
	return 0;
}

/**
 * Do not use directly: what the inline snapshot acquire and release
 * (shmcfg_snapshot_acquire() and shmcfg_snapshot_release() in shmcfg.h)
 * read and write of a thread's sticky pin (lib/read/tpin.c, which has the
 * argument); the snapshot it hands out follows it (SHMCFG__TPIN_SNAP). Its
 * words are a reader-table entry's: w[0] the generation's tag and a count,
 * stored only by the owner thread; w[1] the releases by other threads;
 * w[2] non-zero while a writer or a fork revokes the pin. The inline paths
 * take a pin from holding nothing (w[0] == idle) to holding one snapshot
 * (busy) and back; the library does the rest (nesting, other threads'
 * releases, a new generation).
 */
struct shmcfg__tpin {
	uint64_t *w;
	const uint64_t *cur_ptr; /**< the `current` word of the mapping it pins; NULL: none */
	uint64_t cur;            /**< ... its value when pinned: (generation << 8) | slot */
	uint64_t idle, busy;     /**< w[0] holding no snapshot, and one */
	uint64_t foreign;        /**< w[1] when idle was set */
	int closing;             /**< its handle closes: the release tells the library */
};
#define SHMCFG__TPIN_SNAP(tp) ((shmcfg_snapshot *)((struct shmcfg__tpin *)(tp) + 1))

/**
 * Do not use directly: the calling thread's pin on the handle of its last
 * snapshot (or a pin of no handle), with SHMCFG__TP_BUSY while it holds the
 * one snapshot the inline acquire counted, SHMCFG__TP_LIB while its count
 * is the library's (nested snapshots). Only the thread itself, or one after
 * its exit, reuses a pin it had: no other thread's pin is ever found here.
 * Its address names the thread.
 */
extern SHMCFG_EXPORT __thread uintptr_t shmcfg__tls_pin __attribute__((tls_model("initial-exec")));
#define SHMCFG__TP_BUSY 1u
#define SHMCFG__TP_LIB 2u
/** Do not use directly: a release found its pin's handle closing. */
SHMCFG_EXPORT void shmcfg__tpin_closed(struct shmcfg__tpin *tp) __attribute__((cold));

/*
 * Count a snapshot on the thread's pin (which holds none), if it pins the
 * generation current in h's mapping: a plain store of the word, then a
 * load of the revocation word. A writer that wants the slot stores the
 * revocation and runs membarrier() before it reads the word: either our
 * store is visible to it by then, or our load comes after that fence and
 * sees the revocation (we undo, and the library takes over). Until it is
 * revoked, the pin's generation is never rewritten, whatever its count:
 * no stamp check. Only the compiler's order is kept here; the fence is the
 * writer's (lib/read/tpin.c; tests/model/tpin.pml).
 */
static inline bool shmcfg__tpin_count(struct shmcfg__tpin *tp, const shmcfg *h)
{
	const uint64_t *cp = __atomic_load_n(&((const struct shmcfg_view *)h)->current, __ATOMIC_RELAXED);
	uint64_t *w = tp->w;
	if (__builtin_expect(cp != tp->cur_ptr || __atomic_load_n(cp, __ATOMIC_RELAXED) != tp->cur, 0))
		return false;
	__atomic_store_n(&w[0], tp->busy, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* store, then load: the writer's membarrier fences them */
	if (__builtin_expect(__atomic_load_n(&w[2], __ATOMIC_RELAXED) != 0, 0)) {
		__atomic_store_n(&w[0], tp->idle, __ATOMIC_RELAXED);
		return false;
	}
	return true;
}

/* The inline acquire: the thread's pin, holding nothing, counts one. */
static inline bool shmcfg__tpin_acquire(const shmcfg *h, shmcfg_snapshot **ret)
{
	uintptr_t t = shmcfg__tls_pin;
	if (__builtin_expect((t & (SHMCFG__TP_BUSY | SHMCFG__TP_LIB)) || !h || !ret ||
				     !shmcfg__tpin_count((struct shmcfg__tpin *)t, h),
			     0))
		return false;
	shmcfg__tls_pin = t | SHMCFG__TP_BUSY;
	shmcfg_snapshot *snap = SHMCFG__TPIN_SNAP(t);
	if (!snap)
		__builtin_unreachable(); /* past a pin we read: the getters need no null test */
	*ret = snap;
	return true;
}

/*
 * The inline release: the one snapshot of the calling thread's pin, if no
 * other thread released one of it meanwhile (else the library counts):
 * a plain store (release: our reads of the slot happen before a writer
 * that loads it sees the pin free), then the close's flag, loaded after
 * it (Dekker with the close's membarrier). Anything else is the library's:
 * another thread's release, nested snapshots, a double release.
 */
static inline bool shmcfg__tpin_release(shmcfg_snapshot *snap)
{
	/* The pin from the snapshot's address: the thread's word holds it
	 * with exactly SHMCFG__TP_BUSY when this is the one snapshot the
	 * inline acquire counted (pins and snapshots are aligned: no other
	 * pin or flag matches). The word is compared, not used: the store
	 * below does not wait for its load. */
	uintptr_t t = (uintptr_t)snap - sizeof(struct shmcfg__tpin);
	struct shmcfg__tpin *tp = (struct shmcfg__tpin *)t;
	if (__builtin_expect(shmcfg__tls_pin != t + SHMCFG__TP_BUSY ||
				     __atomic_load_n(&tp->w[1], __ATOMIC_RELAXED) != tp->foreign,
			     0))
		return false;
	__atomic_store_n(&tp->w[0], tp->idle, __ATOMIC_RELEASE);
	shmcfg__tls_pin = t;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* the pin, never freed, is all we touch now: a close that saw our
	 * store may have ended and unmapped the segment */
	if (__builtin_expect(__atomic_load_n(&tp->closing, __ATOMIC_RELAXED) != 0, 0))
		shmcfg__tpin_closed(tp);
	return true;
}

#endif /* SHMCFG_READ_H */
