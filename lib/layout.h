/* SPDX-License-Identifier: MIT */
/*
 * The segment's layout: what a segment holds where, the same for every
 * process and every version of the library of one SEG_LAYOUT_VERSION.
 * Included by lib/internal.h; nothing here is part of the public API.
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
 *   readers  table of 64-byte entries {pin words, pid, kind, start time,
 *            attach time}; entry i is owned by whoever holds the OFD lock
 *            on byte 1 + i of the lock object: a process's entry (its
 *            handle's pins) or one of its threads' (a sticky pin: tpin.c)
 *   slots    K snapshots of the whole configuration; each is a slot header,
 *            the hot cells (one per option) and one layer reference per
 *            option (a chunk of the value heap, 0 = no layer set)
 *   heap     the value heap: refcounted chunks, each holding the layers of
 *            one option that are set and their strings (heap.c)
 *
 * Every offset and size is validated against the object's real size at
 * attach (validate.c); every offset read from a slot is validated before use.
 */
#ifndef SHMCFG_LAYOUT_H
#define SHMCFG_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shmcfg.h"

#define SEG_MAGIC 0x3147464343d48535ULL /* bytes 35 85 d4 43 43 46 47 31 */
#define SEG_LAYOUT_VERSION 13u
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
#define SEG_EAGER_BYTES (8u << 20) /* up to this size attach maps every page at once (segment.c) */
/* ... and up to this size a writer's attach with the schema's validated
 * copy maps the pages its commits touch, and the copy's (vcopy.c) */
#define SEG_WRITER_MAP_BYTES (64u << 20)
#define SEG_MAX_RING (1u << 22)

/* A slot's stamp while a writer rewrites it: the busy bit over the old
 * generation, so that the pin check of the next writer still matches it
 * if this writer dies before it restores or re-stamps the slot. */
#define SLOT_BUSY (1ull << 63)
#define STAMP_GEN(st) ((st) & ~SLOT_BUSY)

/* Bytes of the lock object that carry OFD locks: the writer lock's fallback
 * (wlock.c: a writer without a reader entry), then one per reader entry; far
 * past them, the cluster agent's claim (cluster.c), and the build lock: held
 * by the process that made the object (and, at the same byte, the new
 * segment's object) from its creation until the segment is in place at its
 * name (unfinished.c, "The build lock"). */
#define LOCK_WRITER_BYTE 0
#define LOCK_ENTRY_BYTE(i) ((off_t)1 + (off_t)(i))
#define LOCK_AGENT_BYTE ((off_t)1 << 32)
#define LOCK_BUILD_BYTE (((off_t)1 << 32) + 1)

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
	/* The accessors' copy (below) is being written: set by a commit before
	 * its first block goes odd, cleared after the last is even again
	 * (seqlock.h, seq_publish_copy). Found set, a writer died in between
	 * (or a replacer froze the segment): the next commit rewrites it whole.
	 * Under the writer lock only. */
	uint32_t copy_dirty;
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
/* The lock object's bytes (objects.c): written whole at creation, mapped
 * read-write by read-write handles only (nobody else can open it so). */
#define LOCK_FILE_BYTES 4096u
struct lock_file {
	uint64_t magic;
	uint8_t instance[16];
	uint8_t pad[40];
	/* The writer lock (wlock.c): 0 free, else the owner (WLOCK_OWNER) and
	 * WLOCK_WAITERS; on a cache line of its own. */
	uint32_t writer;
	uint8_t pad2[60];
};
_Static_assert(sizeof(struct lock_file) <= LOCK_FILE_BYTES, "the lock object's words fit its page");
#define WLOCK_WAITERS (1u << 31)          /* someone sleeps on the word: unlock wakes */
#define WLOCK_OWNER(w) ((w) & ~WLOCK_WAITERS) /* reader entry + 1, or WLOCK_BY_OFD */
#define WLOCK_BY_OFD 0x7fffffffu          /* the owner holds LOCK_WRITER_BYTE (no entry) */

struct slot_hdr {
	uint64_t gen;            /* stamp: the generation held, 0 if empty, SLOT_BUSY | old while rewritten */
	uint64_t hash_sum[2];    /* sum of the options' config hash digests (hash.c): the config
				  * hash is its digest, made by the reader that asks for it */
	uint64_t checksum;       /* sum of every option's mix of cell and layer reference (hash.c) */
	uint64_t base;           /* the generation the cells and references hold, for writers:
				  * valid while the stamp equals it or is 0 (filled at creation
				  * or recycled); 0 = unknown (shmcfg__slot_base, heap.c) */
	uint64_t cluster_rev;    /* the cluster revision this generation carries (cluster.c) */
};

#define SLOT_CELLS_OFF 64u
_Static_assert(SLOT_CELLS_OFF == SHMCFG__CELLS_OFF, "the inline read knows where cells start");

struct schema_hdr {
	uint32_t nopts;
	uint32_t index_size;     /* schema_index_size(nopts); an entry UINT32_MAX marks empty */
	uint32_t nimplies;
	uint32_t nrdeps;
	uint64_t desc_off;       /* nopts struct opt_desc, from the schema region start */
	uint64_t implies_off;    /* nimplies struct implies_ent */
	uint64_t index_off;      /* index_size uint32_t option ids */
	uint64_t rdeps_off;      /* nrdeps uint32_t: the runs of opt_desc.rdep_first */
	uint64_t strings_off, strings_size; /* NUL-terminated strings and value bytes */
};

/* The name index's size for n options, the builder's and the only one
 * attach accepts: a power of two, at least 16 and twice n. */
static inline uint32_t schema_index_size(uint32_t n)
{
	uint32_t size = 16;
	while (size < 2 * (uint64_t)n)
		size *= 2;
	return size;
}

/* A string of the schema: offset and length into the strings area. */
struct sref {
	uint32_t off, len;
};

struct opt_desc {
	struct sref name, doc, knob, deprecated;
	struct sref env_default, env_force; /* NUL-separated lists */
	uint16_t n_env_default, n_env_force; /* at most UINT16_MAX names each (schema.c) */
	uint32_t alias;          /* target id or SHMCFG_NO_OPT */
	uint32_t alias_final;    /* end of the chain (the option itself if not an alias) */
	uint32_t implies_first, implies_n;
	uint32_t type, flags;    /* shmcfg_type, SHMCFG_F_* | DESC_F_* */
	uint32_t rank;           /* position in the topological order (impliers first) */
	uint32_t rdep_first, rdep_n; /* dependents: run of the rdeps array */
	struct shmcfg__cell def, min, max, choices; /* strings in the schema strings area */
};
/* 152 bytes: with the accessors' copy (8 bytes an option), a segment of
 * 100,000 options stays within 400 bytes an option (doc/benchmarks.md) */
_Static_assert(sizeof(struct opt_desc) == 152, "the descriptor's size");
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
	uint64_t pins[SEG_PINS]; /* pin words: PIN_TAG(generation) << PIN_TAG_SHIFT | the
				  * owner's snapshots held on it (PIN_COUNT); see reclaim.c */
	int32_t pid;             /* for display: liveness is the OFD lock */
	uint32_t kind;           /* ENTRY_PROCESS, or ENTRY_THREAD: a thread's sticky pin (tpin.c) */
	uint64_t start_time;     /* owner's start time, /proc/self/stat field 22 */
	uint64_t attach_ns;
	uint64_t reserved;       /* 0 */
};
/* A pin word. Its tag is a generation's low 48 bits (2^48 commits apart: no
 * two live generations share one); the count is how many snapshots of that
 * generation the owner holds now: a pin blocks writers only while it is not
 * 0. PIN_CLOSED is the owner's own (its handle is closing: reclaim.c). */
#define PIN_TAG_SHIFT 16
#define PIN_CLOSED (1ull << 15)
#define PIN_COUNT_MASK 0x7fffull
#define PIN_COUNT(w) ((w) & PIN_COUNT_MASK)
#define PIN_TAG(w) ((w) >> PIN_TAG_SHIFT)
#define GEN_TAG(g) ((g) & ((1ull << (64 - PIN_TAG_SHIFT)) - 1))
/* A thread entry's words (tpin.c): TP_WORD is a pin word written only by
 * its owner thread (plain stores), its count cumulative; TP_FOREIGN counts
 * the releases of its snapshots by other threads (atomic adds), so that it
 * holds PIN_COUNT(word - foreign) snapshots; TP_REVOKED is set by a writer
 * that wants its generation's slot and cleared by the owner's re-pin;
 * TP_MARK holds 1, so that the writer's scan never skips the entry. */
#define ENTRY_PROCESS 0u
#define ENTRY_THREAD 1u
enum { TP_WORD, TP_FOREIGN, TP_REVOKED, TP_MARK };
static inline uint64_t tp_held(uint64_t word, uint64_t foreign)
{
	return (word - foreign) & PIN_COUNT_MASK;
}

_Static_assert(sizeof(struct reader_ent) == 64, "reader entries are one cache line");
_Static_assert(sizeof(struct seg_header) <= SEG_HEADER_BYTES, "header fits its page");
/* The accessors' copy: from SEG_HEADER_BYTES, a 64-byte block for every
 * SHMCFG__COPY_PER_BLOCK options: a seqlock word (odd while a commit writes
 * the block), then their value words (the effective cells' `val` of the
 * current generation while it is even): an accessor reads one cache line.
 * The schema region follows it. The generated accessors find it from the
 * view's `copy` (include/shmcfg/read.h). */
#define SEG_COPY_OFF ((uint64_t)SEG_HEADER_BYTES)
#define SEG_COPY_BYTES(nopts) (((uint64_t)(nopts) + SHMCFG__COPY_PER_BLOCK - 1) / SHMCFG__COPY_PER_BLOCK * 64)
#define SEG_SCHEMA_OFF(nopts) (SEG_COPY_OFF + SEG_COPY_BYTES(nopts))
_Static_assert(SHMCFG__COPY_PER_BLOCK == 64 / 8 - 1, "a block: a seqlock word and the options' words");
_Static_assert(sizeof(struct slot_hdr) <= SLOT_CELLS_OFF, "slot header fits");

#endif /* SHMCFG_LAYOUT_H */
