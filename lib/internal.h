/*
 * shmcfg internals: the segment layout and the declarations shared by the
 * files of lib/. Nothing here is part of the public API.
 *
 * One segment = one POSIX shm object, laid out as
 *
 *   header   struct seg_header, one page: sizes and offsets of every region,
 *            `current` (generation << 8 | slot), the futex word and the
 *            writer state (heap.c, publish.c)
 *   schema   immutable after creation: struct schema_hdr, descriptors,
 *            implications, name hash index, name order, implication order,
 *            dependents, strings
 *   log      ring of commit records, one per recent generation
 *   ring     the ids each recent commit changed, for O(change) slot updates
 *   history  the last N commits: an index of N struct hist_ent, then a byte
 *            ring of their records (who, and each layer change with its old
 *            and new value; history.c)
 *   readers  table of 64-byte entries {pins, pid, start time, attach time,
 *            active}; entry i is owned by whoever holds the OFD lock on
 *            byte 1 + i of the lock object
 *   slots    K snapshots of the whole configuration; each is a slot header,
 *            the hot cells (one per option) and one layer reference per
 *            option (a chunk of the value heap, 0 = no layer set)
 *   heap     the value heap: refcounted chunks, each holding the layers of
 *            one option that are set and their strings (heap.c)
 *
 * Every offset and size is validated against the object's real size at
 * attach (validate.c); every offset read from a slot is validated before use.
 */
#ifndef SHMCFG_INTERNAL_H
#define SHMCFG_INTERNAL_H

#include "config.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "shmcfg.h"

#define SEG_MAGIC 0x3147464343d48535ULL /* bytes 35 85 d4 43 43 46 47 31 */
#define SEG_LAYOUT_VERSION 7u
#define SEG_READY 0x52454459u           /* "REDY" */
#define SEG_HEADER_BYTES 4096u
#define SEG_PREFIX "/shmcfg."
#define LOCK_PREFIX "/shmcfg-lock."  /* + NAME.INSTANCE: the companion lock object (objects.c) */
#define SEG_NAME_MAX 200
#define SHM_DIR "/dev/shm"

#define SEG_MAX_SLOTS 255u
#define SEG_DEFAULT_SLOTS 8u
#define SEG_DEFAULT_READERS 1024u /* 64 KiB: with the history, a small segment stays under 256 KiB */
#define SEG_MAX_READERS 65536u
#define SEG_LOG_ENTRIES 64u
#define SEG_PINS 4u
#define SEG_MAX_OPTS (1u << 22)
#define SEG_MAX_VALUE_BYTES (1u << 20) /* one string or list */
#define SEG_MAX_SCHEMA_BYTES (1ull << 31)
#define SEG_MAX_HEAP_BYTES (1ull << 32)
#define SEG_MIN_RING 1024u
#define SEG_MAX_RING (1u << 22)

/* A slot's stamp while a writer rewrites it: the busy bit over the old
 * generation, so that the pin check of the next writer still matches it
 * if this writer dies before it restores or re-stamps the slot. */
#define SLOT_BUSY (1ull << 63)
#define STAMP_GEN(st) ((st) & ~SLOT_BUSY)

/* Bytes of the lock object that carry OFD locks: the writer lock, then one
 * per reader entry; far past them, the cluster agent's claim (cluster.c). */
#define LOCK_WRITER_BYTE 0
#define LOCK_ENTRY_BYTE(i) ((off_t)1 + (off_t)(i))
#define LOCK_AGENT_BYTE ((off_t)1 << 32)

/* The layers a slot stores for each option, lowest precedence first. They
 * are the sources SHMCFG_SRC_KNOB..SHMCFG_SRC_ENV_FORCE; layer_of() and
 * source_of() convert, so that no code does arithmetic on sources. */
enum layer { LAYER_KNOB, LAYER_ENV_DEFAULT, LAYER_CLUSTER, LAYER_USER, LAYER_ENV_FORCE, NLAYERS };
_Static_assert(SHMCFG_SRC_ENV_DEFAULT == SHMCFG_SRC_KNOB + LAYER_ENV_DEFAULT &&
		       SHMCFG_SRC_CLUSTER == SHMCFG_SRC_KNOB + LAYER_CLUSTER &&
		       SHMCFG_SRC_USER == SHMCFG_SRC_KNOB + LAYER_USER &&
		       SHMCFG_SRC_ENV_FORCE == SHMCFG_SRC_KNOB + LAYER_ENV_FORCE,
	       "stored sources are consecutive");
static inline enum layer layer_of(shmcfg_source s)
{
	return (enum layer)(s - SHMCFG_SRC_KNOB);
}
static inline shmcfg_source source_of(enum layer l)
{
	return (shmcfg_source)(SHMCFG_SRC_KNOB + l);
}
static inline bool source_is_stored(shmcfg_source s)
{
	return s >= SHMCFG_SRC_KNOB && s <= SHMCFG_SRC_ENV_FORCE;
}

/* cell meta bits (see struct shmcfg__cell in shmcfg.h) */
#define META_TYPE(m) ((unsigned)((m)&0xff))
#define META_NULL (1ull << 8)
#define META_SRC_SHIFT 9
#define META_SRC(m) ((shmcfg_source)(((m) >> META_SRC_SHIFT) & 15))
#define META_SET (1ull << 13)
/* str/list bytes in the schema's strings area (a default or an implied
 * value), not in the value heap */
#define META_SCHEMA (1ull << 14)
#define META_BY_CLUSTER (1ull << 15) /* a layer cell the cluster agent wrote (shmcfg_txn_origin) */
#define META_LEN(m) ((uint32_t)((m) >> 32))
#define CELL_OFF(v) ((uint32_t)(v))
#define CELL_COUNT(v) ((uint32_t)((v) >> 32))

/* Size classes of heap chunks (heap.c). */
#define HEAP_CLASSES 48

struct seg_header {
	uint64_t magic;          /* SEG_MAGIC: a byte-order mismatch reads as bad magic */
	uint32_t layout_version; /* SEG_LAYOUT_VERSION */
	uint32_t header_size;    /* sizeof(struct seg_header) */
	uint32_t ready;          /* SEG_READY, stored last by the creator (release) */
	uint32_t nopts;          /* options */
	uint64_t total_size;     /* bytes of the object; must equal fstat's size */
	uint64_t schema_off, schema_size;
	uint64_t log_off;        /* SEG_LOG_ENTRIES struct log_ent */
	uint64_t readers_off;    /* nreaders struct reader_ent */
	uint32_t nreaders, nslots;
	uint64_t slots_off, slot_size;
	uint64_t cells_off;      /* within a slot: nopts hot cells */
	uint64_t lrefs_off;      /* within a slot: nopts uint32_t chunk references */
	uint64_t ring_off;       /* ring_size uint32_t option ids */
	uint32_t ring_size;      /* a power of two */
	uint32_t pad1;
	uint64_t heap_off, heap_size; /* the value heap (heap.c) */
	uint8_t schema_hash[16];
	uint64_t create_time_ns; /* CLOCK_REALTIME */
	uint32_t create_uid;
	int32_t create_pid;
	uint8_t instance[16];    /* random; the lock object carries the same bytes */
	uint64_t hist_off;       /* hist_n struct hist_ent (history.c) */
	uint64_t hist_ring_off, hist_ring_size; /* the records' byte ring */
	uint32_t hist_n, pad4;   /* entries of the history index; padding */
	/* layout 7: the segment's lineage (random at a creation, kept by each
	 * replacement, replace.c) and its first generation; a handle follows a
	 * segment of its lineage whose first generation is past its own last
	 * (follow.c), never one created anew under the name */
	uint8_t lineage[16];
	uint64_t first_gen;
	/* Everything above is immutable after creation (shmcfg_check compares
	 * it with the attach-time copy). The hot words, each on its own cache
	 * line so that commits bumping the futex do not disturb readers of
	 * `current`. */
	_Alignas(64) uint64_t current; /* (generation << 8) | slot; release-stored by commits */
	_Alignas(64) uint32_t futex;   /* bumped after every publication, then FUTEX_WAKE */
	uint32_t retired;        /* non-zero once removed (shmcfg_unlink) or replaced: RETIRED_* */
	uint32_t readers_hwm;    /* entries ever claimed: scans stop here (readers.c) */
	uint32_t pad2;
	uint64_t copy_fallbacks; /* processes that found the reader table full */
	uint32_t waiters;        /* handles inside shmcfg_wait that counted themselves (watch.c) */
	uint32_t pad3;
	/* Writer state, written only under the writer lock (heap.c). `wip` is the
	 * generation a commit is building, 0 between commits: a writer that
	 * finds it set knows its predecessor died mid-commit and rebuilds the
	 * heap's reference counts and free lists from the slots. */
	_Alignas(64) uint64_t wip;
	uint64_t heap_top;       /* bytes of the heap ever carved into chunks */
	uint64_t heap_live;      /* bytes of chunks in use */
	uint64_t heap_free[HEAP_CLASSES]; /* free list heads: chunk offset, 0 = empty */
	uint64_t ring_head;      /* ring positions ever used (publish.c) */
	uint64_t hist_head;      /* bytes of the history ring ever used (history.c) */
	/* The cluster agent's record (cluster.c): a seqlock of its own, written
	 * under the writer lock. */
	_Alignas(64) uint64_t sync_seq; /* odd while written; 0 = never written */
	struct sync_rec {
		char endpoints[256], cluster[64], host[64], error[256];
		int32_t pid;
		uint32_t nrejected;
		uint64_t updated_ns, applied_rev, out_of_sync_ns;
	} sync;
	_Alignas(64) char end[];
};

/* The lock object's content: ties it to one incarnation of its segment. */
#define LOCK_MAGIC 0x4b434f4c47464353ULL /* "SCFGLOCK" */
struct lock_file {
	uint64_t magic;
	uint8_t instance[16];
};

struct slot_hdr {
	uint64_t gen;            /* stamp: the generation held, 0 if empty, SLOT_BUSY | old while rewritten */
	uint8_t config_hash[16]; /* read by shmcfg_config_hash(), validated by the stamp */
	uint64_t checksum;       /* sum of every option's mix of cell and layer reference (hash.c) */
	uint64_t hash_sum[2];    /* sum of the options' config hash digests (hash.c) */
	uint64_t base;           /* the generation the cells and references hold, for writers:
				  * valid while the stamp equals it or is 0 (filled at creation
				  * or recycled); 0 = unknown (shmcfg__slot_base, heap.c) */
	uint64_t cluster_rev;    /* the cluster revision this generation carries (cluster.c) */
};

#define SLOT_CELLS_OFF 64u
_Static_assert(SLOT_CELLS_OFF == SHMCFG__CELLS_OFF, "the inline read knows where cells start");

struct schema_hdr {
	uint32_t nopts;
	uint32_t index_size;     /* power of two >= 2 * nopts; UINT32_MAX marks empty */
	uint32_t nimplies;
	uint32_t nrdeps;
	uint64_t desc_off;       /* nopts struct opt_desc, from the schema region start */
	uint64_t implies_off;    /* nimplies struct implies_ent */
	uint64_t index_off;      /* index_size uint32_t option ids */
	uint64_t rdeps_off;      /* nrdeps uint32_t: the runs of opt_desc.rdep_first */
	uint64_t strings_off, strings_size; /* NUL-terminated strings and value bytes */
};

/* A string of the schema: offset and length into the strings area. */
struct sref {
	uint32_t off, len;
};

struct opt_desc {
	struct sref name, doc, knob, deprecated;
	struct sref env_default, env_force; /* NUL-separated lists */
	uint32_t n_env_default, n_env_force;
	uint32_t alias;          /* target id or SHMCFG_NO_OPT */
	uint32_t alias_final;    /* end of the chain (the option itself if not an alias) */
	uint32_t implies_first, implies_n;
	uint32_t type, flags;    /* shmcfg_type, SHMCFG_F_* | DESC_F_* */
	uint32_t rank;           /* position in the topological order (impliers first) */
	uint32_t rdep_first, rdep_n; /* dependents: run of the rdeps array */
	uint32_t pad;
	struct shmcfg__cell def, min, max, choices; /* strings in the schema strings area */
};
/* An rdeps entry: an implication (index into implies) targeting the option, or
 * an alias of it; implications first, in a full resolution's order. */
#define RDEP_ALIAS (1u << 31)
#define DESC_F_HAS_MIN (1u << 16)
#define DESC_F_HAS_MAX (1u << 17)
#define DESC_F_HAS_KNOB (1u << 18)

struct implies_ent {
	uint32_t target;
	uint32_t implier;        /* the option whose implication this is */
	struct shmcfg__cell value; /* strings in the schema strings area */
};

struct log_ent {
	uint64_t gen; /* stamp, 0 while written; seqlock like a slot */
	uint64_t time_ns;
	int32_t pid;
	uint32_t uid;
	uint32_t nchanged, nids;
	uint32_t ids[SHMCFG_LOG_IDS];
	uint64_t ring_start;     /* position of its changed ids in the ring */
	uint32_t ring_n;         /* ... how many; RING_OVERFLOW: too many to list */
	uint32_t pad;
	uint64_t cluster_rev;    /* shmcfg_txn_origin(): the cluster revision applied, 0 none */
	char who[SHMCFG_WHO_MAX]; /* ... and who made the change, NUL-terminated */
};
#define RING_OVERFLOW UINT32_MAX

struct reader_ent {
	uint64_t pins[SEG_PINS]; /* pinned generations, 0 = none; see readers.c */
	int32_t pid;             /* for display: liveness is the OFD lock */
	uint32_t pad;
	uint64_t start_time;     /* owner's start time, /proc/self/stat field 22 */
	uint64_t attach_ns;
	uint64_t active;         /* snapshots the owner holds now: its pins count only
				  * while this is not 0 (reclaim.c, choose_slot) */
};

_Static_assert(sizeof(struct reader_ent) == 64, "reader entries are one cache line");
_Static_assert(sizeof(struct seg_header) <= SEG_HEADER_BYTES, "header fits its page");
_Static_assert(sizeof(struct slot_hdr) <= SLOT_CELLS_OFF, "slot header fits");

/* The process's view of one pinned generation: the snapshot of a read-write
 * handle. Replaced views are unpinned after an RCU grace period. */
struct shmcfg_snapshot {
	shmcfg *h; const shmcfg *origin; /* acquired on: its options are mapped to h's; NULL: h's own */
	uint64_t gen;
	const char *slot;   /* slot memory: in the segment, or a private copy */
	const char *heap;   /* the value heap: the segment's, or the copy's */
	uint64_t heap_size;
	bool is_copy;       /* read-only handles and pin overflow: freed on release */
	int pin;            /* index in our reader entry's pins, -1 if none */
};

struct pview; /* reclaim.c */

struct shmcfg {
	struct shmcfg_view view; /* first: the inline getters read it */
	char *name;
	int fd;
	int lock_fd;             /* the lock object, read-write handles only; -1 otherwise */
	bool rdonly;
	shmcfg_attach_opts opts; /* as attached, for shmcfg_reattach() */
	uint8_t expect_hash[16]; /* opts.expect_schema_hash points here */
	uid_t owner;             /* the object's owner at attach */
	struct shmcfg *next_open;  /* in segment.c's list of open handles (fork) */
	pid_t pid;               /* the attaching process (fork detection) */
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
	char *priv;                        /* private mapping of [0, schema end) */
	size_t priv_size;
	unsigned page_shift;
	unsigned char *opt_ok;             /* per option: 1 once validated (opt_d) */
	unsigned char *page_ok;            /* per page of priv: 1 once copied */
	unsigned char *whole_ok;           /* WHOLE_*: checked whole once; all three: __atomic_* only */
	const struct opt_desc *desc;       /* raw: read only through opt_d() */
	const struct implies_ent *implies; /* entries of validated options only */
	const uint32_t *rdeps;             /* runs of validated options only */
	const uint32_t *index_raw;         /* raw: through validate.c */
	uint32_t *topo;                    /* implication order, from the ranks: shmcfg__schema_topo */
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
	uint64_t poison_cur; char *poison_slot; /* the view of a handle that cannot follow */
	uint64_t claim_after_ns; /* table found full: no new claim before this (reclaim.c) */
	bool counted_fallback;   /* counted in the header's copy_fallbacks */
	pthread_mutex_t view_lock; /* serialises view replacement */
	pthread_mutex_t commit_lock, entry_lock; /* threads share the OFD locks: commits, claims/reaping */
	struct pview *pview;     /* RCU-protected current view */
	unsigned retired;        /* views awaiting a grace period (under reclaim.c's rq_lock) */
	bool uses_reclaimer; void (*close_deferred)(shmcfg *h); /* in rq_users; the end of a close, deferred */
	int commit_timeout_ms;
	bool no_growth;          /* shmcfg_set_heap_growth(false): a full heap fails the commit */
	_Atomic(unsigned char) *warned; /* per option: deprecation warned */
	uid_t uid;               /* getuid() at attach: for the commit log */
	char *hist_buf; size_t hist_cap; /* a commit's history record, built here (history.c) */
	uint32_t *waiters;       /* the header's count of waiters (read-write handles; watch.c) */
	bool wake_always; uint64_t mode_ns; /* readers may not count themselves (as of mode_ns: wake()) */
	shmcfg_env_use *env_used; size_t n_env_used; /* the creator's: the variables that filled the env layers (env.c) */
};

/* Pointers into the mapping. */
static inline struct slot_hdr *slot_at(const shmcfg *h, uint32_t s)
{
	return (struct slot_hdr *)(h->base + h->lay.slots_off + (uint64_t)s * h->lay.slot_size);
}
static inline struct shmcfg__cell *slot_cells(const shmcfg *h, const void *slot)
{
	return (struct shmcfg__cell *)((char *)slot + h->lay.cells_off);
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
enum { WHOLE_ALL, WHOLE_N }; /* h->whole_ok[] */
int shmcfg__schema_all(const shmcfg *h);
int shmcfg__schema_topo(const shmcfg *h, const uint32_t **topo);
static inline const struct opt_desc *opt_d(const shmcfg *h, uint32_t i)
{
	/* acquire: pairs with the release store of opt_ok[i] in validate.c
	 * (opt_validate): the descriptor and everything it references were
	 * copied and checked before it */
	if (__builtin_expect(__atomic_load_n(&h->opt_ok[i], __ATOMIC_ACQUIRE), 1))
		return &h->desc[i];
	return shmcfg__opt_slow(h, i);
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
static inline uint64_t cur_gen(uint64_t cur)
{
	return cur >> SHMCFG__SLOT_BITS;
}
static inline uint32_t cur_slot(uint64_t cur)
{
	return (uint32_t)(cur & ((1u << SHMCFG__SLOT_BITS) - 1));
}

/* error.c */
int shmcfg__err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* -ENOMEM, with the detail "out of memory": every failed allocation says so */
int shmcfg__nomem(void);
void shmcfg__clear_err(void);

/*
 * Every exported function that can fail begins with SHMCFG_API_ENTRY: a
 * thread's outermost public call clears the error detail, so that no call
 * fails (or succeeds) with an earlier call's text. Calls the library makes to
 * its own public functions are nested and clear nothing: they would wipe the
 * detail that their caller is about to return. The functions that cannot
 * fail, the releasing ones (free, close, abort, release, clear) and the
 * accessors (shmcfg_name, shmcfg_type_name, ...), begin with SHMCFG_API_KEEP:
 * they keep the detail, as free() keeps errno, so that a caller may clean up
 * and name things between a failure and its report.
 * tests/check_api_entry.sh checks every export.
 */
extern __thread char shmcfg__detail[512] __attribute__((visibility("hidden")));
extern __thread unsigned shmcfg__api_depth __attribute__((visibility("hidden"), tls_model("initial-exec")));
extern __thread bool shmcfg__detail_set __attribute__((visibility("hidden"), tls_model("initial-exec")));
static inline int shmcfg__api_enter(bool clear)
{
	if (shmcfg__api_depth++ == 0 && clear && shmcfg__detail_set)
		shmcfg__clear_err();
	return 0;
}
static inline void shmcfg__api_leave(int *unused)
{
	(void)unused;
	shmcfg__api_depth--;
}
#define SHMCFG__API(clear) \
	int shmcfg__api_ __attribute__((cleanup(shmcfg__api_leave), unused)) = shmcfg__api_enter(clear)
#define SHMCFG_API_ENTRY SHMCFG__API(true)
#define SHMCFG_API_KEEP SHMCFG__API(false)
void shmcfg__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define assert_return(expr, r)                                                           \
	do {                                                                             \
		if (__builtin_expect(!(expr), 0))                                        \
			return shmcfg__err((r), "%s: invalid argument (%s)", __func__, #expr); \
	} while (0)

#include "fault.h" /* fault.c: crash points and the resource seam */

/* value.c: values, parsing, comparison */
int shmcfg__value_copy(const shmcfg_value *src, shmcfg_value *dst);
int shmcfg__canon_set(shmcfg_value *v);
bool shmcfg__utf8_valid(const char *s, size_t len);
int shmcfg__parse_env(shmcfg_type type, const char *var, const char *text, shmcfg_value *ret);
int shmcfg__parse_name_list(const char *text, shmcfg_value *ret);
struct json_error_t;
bool shmcfg__json_oom(const struct json_error_t *e);
struct json_t *shmcfg__json_parse(const char *text, size_t len, size_t max, size_t flags, struct json_error_t *e);

/* cell.c: values as the segment stores them */
int shmcfg__value_from_cell(const struct shmcfg__cell *c, const char *heap, uint64_t heap_size,
			    shmcfg_value *ret);
int shmcfg__cell_encode(const shmcfg_value *v, uint64_t flags, char *heap, uint64_t cap,
			uint64_t *used, struct shmcfg__cell *out);
bool shmcfg__list_ok(const shmcfg_value *v);
int shmcfg__cell_value(const shmcfg *h, const struct shmcfg__cell *c, const char *heap, uint64_t size,
		       shmcfg_value *ret);

/* json.c: the one JSON form of a value, and text */
struct json_t *shmcfg__value_json(const shmcfg_value *v);
int shmcfg__json_text(const struct json_t *j, size_t flags, char **ret);
int shmcfg__format_canon(const shmcfg_value *v, char **ret);
void shmcfg__float_text(double f, char *buf);

/* schema.c (and schema.h): declaring options */
int shmcfg__check_value(const char *name, shmcfg_type type, unsigned flags, const shmcfg_value *min,
			const shmcfg_value *max, const shmcfg_value *choices, const shmcfg_value *v);
int shmcfg__default_schema(shmcfg_schema **ret);

/* default_schema.c: the embedded torch.compiler.config (generated) */
extern const shmcfg_optdef shmcfg__default_opts[];
extern const size_t shmcfg__default_nopts;

/* schema_build.c: a schema laid out in a segment */
struct built_schema;
int shmcfg__schema_build(const shmcfg_schema *s, struct built_schema **ret);
void shmcfg__schema_built_free(struct built_schema *b);
uint64_t shmcfg__schema_bytes(const struct built_schema *b);
uint64_t shmcfg__schema_value_bytes(const struct built_schema *b);
void shmcfg__schema_write(const struct built_schema *b, void *dst, uint8_t hash_out[16]);
uint32_t shmcfg__schema_nopts(const struct built_schema *b);

/* validate.c: what attach checks; the schema's private copy (pin: bytes
 * [off, off + len) of the region copied, before they are read); one option's
 * checks (0, 1 with the problem in msg, or a negative error: no verdict)
 * (and above, opt_d) */
int shmcfg__header_check(const struct seg_header *hd, uint64_t real_size, const char *name);
int shmcfg__schema_open(shmcfg *h);
void shmcfg__schema_close(shmcfg *h);
int shmcfg__schema_pin(const shmcfg *h, uint64_t off, uint64_t len);
int shmcfg__cell_check(const shmcfg *h, const struct shmcfg__cell *c, uint32_t type);
int shmcfg__opt_check(const shmcfg *h, uint32_t i, char *msg, size_t mlen);
void shmcfg__opt_label(const shmcfg *h, uint32_t i, char out[96]);
/* validate_all.c: the whole schema checked, every problem reported
 * (shmcfg_check); the number of problems, or a negative error */
int shmcfg__schema_validate(const shmcfg *h, void (*fn)(const char *, void *), void *ud);

/* options.c: options of an attached segment */
int shmcfg__value_check(const shmcfg *h, shmcfg_opt opt, const shmcfg_value *v);
int shmcfg__target_of(const shmcfg *h, shmcfg_opt opt, shmcfg_opt *final);
int shmcfg__prepare_value(const shmcfg *h, shmcfg_opt final, const shmcfg_value *v, shmcfg_value *out);
int shmcfg__parse_for(const shmcfg *h, shmcfg_opt opt, const char *text, shmcfg_value *out);
void shmcfg__warn_deprecated(const shmcfg *h, shmcfg_opt opt);
int shmcfg__lookup(const shmcfg *h, const char *name, shmcfg_opt *ret); /* shmcfg_lookup, no warning */

/* readers.c: the reader table and the OFD lock primitives */
int shmcfg__ofd_lock(int fd, off_t byte, bool write, int timeout_ms);
void shmcfg__ofd_unlock(int fd, off_t byte);
int shmcfg__ofd_held(int fd, off_t byte);
int shmcfg__reader_claim(shmcfg *h);
uint32_t shmcfg__readers_hwm(const shmcfg *h);
void shmcfg__reader_release(shmcfg *h);
int shmcfg__reap(shmcfg *h, void (*fn)(const shmcfg_reader *, void *), void *ud);
void shmcfg__pin_holders(const shmcfg *h, char *buf, size_t len);
uint64_t shmcfg__proc_start_time(pid_t pid);

/* seqlock.c (and seqlock.h): the slot seqlock */
bool shmcfg__seq_copy(const shmcfg *h, uint64_t cur, void *dst, char *heap, uint64_t *top);
int shmcfg__seq_retry(const shmcfg *h, uint64_t cur, int *tries);

/* read.c: slow and copying reads */
int shmcfg__copy_snapshot(shmcfg *h, shmcfg_snapshot **ret);

/* reclaim.c: both sides of the pin protocol, the reclaimer, fork handlers */
bool shmcfg__gen_pinned(const shmcfg *h, uint64_t gen);
bool shmcfg__claim_slot(shmcfg *h, uint32_t s, uint64_t stamp);
int shmcfg__choose_slot(shmcfg *h, uint32_t cur_s, uint64_t cur_g, uint32_t *ret, uint64_t *old_stamp);
bool shmcfg__view_close(shmcfg *h, void (*destroy)(shmcfg *h));
extern pid_t shmcfg__self_pid;

/* txn.c: transactions */
struct change {
	shmcfg_opt opt;   /* final alias target */
	enum layer layer;
	bool reset;
	bool by_cluster;  /* a layer the cluster agent wrote, copied as such (replace.c) */
	shmcfg_value v;   /* owned */
};
struct shmcfg_txn {
	shmcfg *h; const shmcfg *origin; /* begun on: its options are mapped to h's; NULL: h's own */
	enum layer layer;   /* what shmcfg_txn_set() writes */
	struct change *ch; size_t n, cap;
	uint32_t *idx; size_t idx_cap; /* (opt, layer) -> change + 1, once n is large (txn.c) */
	int err; char *err_detail; /* the first refused change (the commit fails with it), its detail */
	uint64_t cluster_rev;           /* shmcfg_txn_origin(), 0 = none */
	char who[SHMCFG_WHO_MAX];
};
int shmcfg__txn_set_layer(shmcfg_txn *t, shmcfg_opt opt, enum layer layer, const shmcfg_value *v);
int shmcfg__txn_refuse(shmcfg_txn *t, int r); /* t poisoned by refusal r (the first is kept): r */

/* publish.c: commits */
int shmcfg__commit(shmcfg_txn *t, uint64_t *gen_ret, bool *published);
int shmcfg__commit_first(shmcfg_txn *t, uint64_t gen, uint64_t cluster_rev, bool record);
/* the writer lock (OFD lock of the lock object, and the handle's mutex) */
int shmcfg__lock_writer(shmcfg *h);
void shmcfg__unlock_writer(shmcfg *h);
bool shmcfg__mode_wakes(unsigned mode);


/* env.c: the environment's layers into a transaction (the first generation's) */
int shmcfg__env_changes(shmcfg_txn *t, char *const *envp);
void shmcfg__env_used_free(shmcfg *h);

/* patch.c: thread-local patches; the calling thread's patched cell of opt */
bool shmcfg__patched_cell(const shmcfg *h, shmcfg_opt opt, struct shmcfg__cell *cell,
			  const char **heap, uint64_t *heap_size, int *err);
/* ... and its whole patched copy of the current generation (a private slot, never
 * rewritten while read) and that generation. False when it has no patches of h. */
bool shmcfg__patched_slot(const shmcfg *h, const char **slot, uint64_t *gen, int *err);
void shmcfg__patch_forget(const shmcfg *h);
/* ... the value its innermost patch of opt (a final target) gives, while the frames stay */
bool shmcfg__patch_value(const shmcfg *h, shmcfg_opt opt, const shmcfg_value **v);

#include "objects.h" /* objects.c: names, trust, the lock object */
#include "replace.h" /* segments replaced, and followed */

#endif
