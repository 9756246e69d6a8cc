/* SPDX-License-Identifier: MIT */
/*
 * shmcfg internals, shared by the files of lib/ (lib/README.md): the
 * segment's layout (layout.h), the handle (handle.h), and the index of the
 * functions each file defines, by layer, lowest first. Nothing here is part
 * of the public API.
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
/* the library's own calls, not the header's inline fast paths before them */
#undef shmcfg_snapshot_acquire
#undef shmcfg_snapshot_release
/* shmcfg__tls_pin of a thread without a pin (error.c): none yet, or none to
 * have (the process's pins: reclaim.c) */
extern const uintptr_t shmcfg__no_tp, shmcfg__none_tp;
#include "layout.h"
#include "handle.h"

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
/*
 * The fast path of a call counted in nanoseconds (shmcfg_snapshot_acquire),
 * in place of SHMCFG_API_ENTRY: taken only while the thread has no error
 * detail to clear, and then it sets none and makes no public call, which is
 * all that SHMCFG_API_ENTRY is for; when it is not taken, or gives up, the
 * call goes on in a function that begins with SHMCFG_API_ENTRY. So the
 * call's cleanup (the nesting depth) is not on that path, and its slow path
 * is a tail call.
 */
#define SHMCFG_API_FAST(cond) if (__builtin_expect(!shmcfg__detail_set && (cond), 1))
/* The same for a releaser (shmcfg_snapshot_release), in place of
 * SHMCFG_API_KEEP: its fast path sets no detail and makes no public call,
 * so it has no nesting to count, whatever the detail holds; what does
 * either goes on in a function that begins with SHMCFG_API_KEEP. */
#define SHMCFG_API_FAST_KEEP(cond) if (__builtin_expect((cond), 1))
void shmcfg__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define assert_return(expr, r) assert_return_as(__func__, expr, r)
/* ... in a helper of public calls: the detail names the call, not the helper */
#define assert_return_as(name, expr, r)                                                  \
	do {                                                                             \
		if (__builtin_expect(!(expr), 0))                                        \
			return shmcfg__err((r), "%s: invalid argument (%s)", name, #expr); \
	} while (0)

#include "fault.h" /* fault.c: crash points and the resource seam */

/* sized.c: structs that grow (the caller's size of a public struct) */
int shmcfg__sized_in(void *dst, size_t full, const void *src, size_t size, size_t min, const char *what);
int shmcfg__sized_out(size_t size, size_t min, const char *what);
void shmcfg__sized_copy(void *dst, size_t size, const void *src, size_t full);

/* textbuf.c: a text that grows in the heap; the first failure sticks in err */
struct shmcfg__text {
	char *p;
	size_t len, cap;
	int err;
};
void shmcfg__text_putn(struct shmcfg__text *b, const char *s, size_t n);
void shmcfg__text_put(struct shmcfg__text *b, const char *s);
void shmcfg__text_printf(struct shmcfg__text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void shmcfg__hex16(const uint8_t b[16], char out[33]); /* a digest as 32 lowercase hex digits */

/* process.c: this process (its pid, start time, names) */
extern pid_t shmcfg__self_pid;
extern int shmcfg__forking;
uint64_t shmcfg__proc_start_time(pid_t pid);
void shmcfg__self_identity(uid_t uid, char user[SHMCFG_USER_MAX], char comm[SHMCFG_PROCESS_MAX]);
void shmcfg__handle_identity(shmcfg *h);

/* value.c: values, parsing, comparison */
int shmcfg__value_copy(const shmcfg_value *src, shmcfg_value *dst);
int shmcfg__canon_set(shmcfg_value *v);
/* The UTF-8 sequence at p (before e): its length and code point, or 0 if it
 * is not one (overlong forms, surrogates and values past U+10FFFF are not). */
int shmcfg__utf8_seq(const unsigned char *p, const unsigned char *e, uint32_t *cp);
bool shmcfg__utf8_valid(const char *s, size_t len);
/* s made printable text in place: each byte of an invalid UTF-8 sequence, and each
 * C0 or C1 control and DEL, becomes '?' (a terminal acts on them) */
void shmcfg__printable(char *s);
/* s as one printable line for a message: control bytes and invalid UTF-8 as \xNN, valid UTF-8 kept;
 * cut to fit out (len bytes, >= 8), on a character's boundary (value.c) */
void shmcfg__line_text(const char *s, char *out, size_t len);
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
/* The cell of a value without bytes (null, bool, int, float), with flags
 * in its meta: shmcfg__cell_encode()'s, inline for a commit's usual case. */
static inline struct shmcfg__cell shmcfg__scalar_cell(const shmcfg_value *v, uint64_t flags)
{
	struct shmcfg__cell c = {.meta = (uint64_t)v->type | flags};
	if (v->is_null)
		c.meta |= META_NULL;
	else if (v->type == SHMCFG_BOOL)
		c.val = v->u.b;
	else if (v->type == SHMCFG_INT)
		c.val = (uint64_t)v->u.i;
	else if (v->type == SHMCFG_FLOAT)
		memcpy(&c.val, &v->u.f, 8);
	return c;
}
/* Whether two cells' bits of a bool, int or float of type t hold the same
 * value, as shmcfg_value_equal() compares them: a bool by truth, the rest
 * bit by bit (NaN equal to itself, -0.0 not to 0.0). */
static inline bool shmcfg__scalar_bits_equal(unsigned t, uint64_t a, uint64_t b)
{
	return t == SHMCFG_BOOL ? (a != 0) == (b != 0) : a == b;
}
bool shmcfg__list_ok(const shmcfg_value *v);
int shmcfg__cell_value(const shmcfg *h, const struct shmcfg__cell *c, const char *heap, uint64_t size,
		       shmcfg_value *ret);
/* two cells: the same value from the same source, each in its own heap */
bool shmcfg__cells_equal(const shmcfg *h, const struct shmcfg__cell *a, const char *ha, uint64_t sa,
			 const struct shmcfg__cell *b, const char *hb, uint64_t sb);

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

/* vcopy.c: the validated copy of a schema, per schema and user (wanted:
 * for h's schema; open: at attach, the region's address in it, or NULL;
 * make: by h's creator, after h's schema was validated whole) */
bool shmcfg__vcopy_wanted(const shmcfg *h);
const char *shmcfg__vcopy_open(shmcfg *h);
void shmcfg__vcopy_make(const shmcfg *h, const void *built, const uint8_t built_hash[16]);
void shmcfg__vcopy_remove(const uint8_t hash[16]);
int shmcfg__vcopy_orphans(unsigned flags, void (*fn)(const shmcfg_orphan *o, void *userdata), void *userdata);

/* validate.c: what attach checks; the schema's private copy (pin: bytes
 * [off, off + len) of the region copied, before they are read); one option's
 * checks (0, 1 with the problem in msg, or a negative error: no verdict)
 * (and above, opt_d) */
int shmcfg__schema_open(shmcfg *h);
void shmcfg__schema_close(shmcfg *h);
int shmcfg__schema_pin(const shmcfg *h, uint64_t off, uint64_t len);
int shmcfg__cell_check(const shmcfg *h, const struct shmcfg__cell *c, uint32_t type);
int shmcfg__opt_check(const shmcfg *h, uint32_t i, char *msg, size_t mlen);
void shmcfg__opt_label(const shmcfg *h, uint32_t i, char out[96]);
/* a scan of every option's checks, bounded by the schema's size (E70):
 * what it says when its options read more than twice the schema's bytes */
void shmcfg__scan_start(void);
bool shmcfg__scan_over(const shmcfg *h);
#define SHMCFG__SCAN_OVER "schema: its options reference more than twice its bytes (one range again and again)"
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

/* optname.c: names as people type them */
#define NEAR_FULL_NAME_BYTES 300 /* " (did you mean NAME?)", a name of up to 255 bytes */
void shmcfg__near_full_name(const shmcfg *h, const char *text, unsigned *tries, char buf[NEAR_FULL_NAME_BYTES]);

/* readers.c: the reader table and the OFD lock primitives */
int shmcfg__ofd_lock(int fd, off_t byte, bool write, int timeout_ms);
void shmcfg__ofd_unlock(int fd, off_t byte);
int shmcfg__ofd_held(int fd, off_t byte);
bool shmcfg__entry_alive(const shmcfg *h, uint32_t i);
int shmcfg__reader_claim(shmcfg *h);
int shmcfg__thread_entry_claim(shmcfg *h);
void shmcfg__thread_entry_release(shmcfg *h, uint32_t i);
uint32_t shmcfg__readers_hwm(const shmcfg *h);
void shmcfg__reader_release(shmcfg *h);
int shmcfg__reap(shmcfg *h, void (*fn)(const shmcfg_reader *, void *), void *ud);
void shmcfg__pin_holders(const shmcfg *h, char *buf, size_t len);
void shmcfg__wlock_wake(shmcfg *h);

/* seqlock.c (and seqlock.h): the slot seqlock */
bool shmcfg__seq_copy(const shmcfg *h, uint64_t cur, void *dst, char *heap, uint64_t *top);
int shmcfg__seq_copy_current(const shmcfg *h, void *dst, char *heap, uint64_t *top, uint64_t *gen);
int shmcfg__seq_retry(const shmcfg *h, uint64_t cur, int *tries);

/* read.c: slow and copying reads */
int shmcfg__copy_snapshot(shmcfg *h, shmcfg_snapshot **ret);

/* reclaim.c: both sides of the pin protocol, the reclaimer, fork handlers */
int shmcfg__claim_entry(shmcfg *h); /* our reader entry (claimed now if need be), or -1 */
bool shmcfg__gen_pinned(const shmcfg *h, uint64_t gen, bool trust);
bool shmcfg__claim_slot(shmcfg *h, uint32_t s, uint64_t stamp, bool trust);
int shmcfg__choose_slot(shmcfg *h, uint32_t cur_s, uint64_t cur_g, uint32_t *ret, uint64_t *old_stamp);
bool shmcfg__view_close(shmcfg *h, void (*destroy)(shmcfg *h));
bool shmcfg__pins_held(const shmcfg *h); /* a pinned snapshot of h held now (fork.c) */

/* tpin.c: the threads' sticky pins, outside their fast path (tpin.h) */
bool shmcfg__tpin_revoke(shmcfg *h, uint64_t cur_g, bool trusted);
unsigned shmcfg__tpin_close(shmcfg *h);
bool shmcfg__tpin_held(const shmcfg *h);
void shmcfg__tpin_destroy(shmcfg *h);
void shmcfg__tpin_fork_prepare(void);
void shmcfg__tpin_fork_parent(void);
void shmcfg__tpin_fork_child(void);

/* txn.c: transactions */
struct change {
	shmcfg_opt opt;   /* final alias target */
	enum layer layer;
	bool reset;
	bool by_cluster;  /* a layer the cluster agent wrote, copied as such (replace.c) */
	bool if_cluster;  /* a reset made only if the layer is the cluster's when committed (under the
			   * writer lock: a local value set meanwhile stays; cluster_apply.c) */
	shmcfg_value v;   /* owned */
};
#define TXN_SMALL 4     /* the changes a transaction prefetches for (txn.c) */
#define TXN_INLINE 128  /* the changes a transaction holds without allocating, with their commit's
			 * history cells: 100-change commits grew five times and allocated their
			 * history's cells, ~2% of their instructions */
struct shmcfg_txn {
	shmcfg *h;          /* begun on (h, ch and cap set by shmcfg__txn_new, the rest zeroed) */
	struct change *ch; size_t cap;
	const shmcfg *origin; /* its options are mapped to h's; NULL: h's own */
	enum layer layer;   /* what shmcfg_txn_set() writes */
	size_t n;
	uint32_t *idx; size_t idx_cap; /* (opt, layer) -> change + 1, once n is large (txn.c) */
	int err; char *err_detail; /* the first refused change (the commit fails with it), its detail */
	uint64_t cluster_rev;           /* shmcfg_txn_origin(), 0 = none */
	/* checked under the writer lock (publish.c), for cluster_apply.c:
	 * cluster_keep: the layers written are the cluster's, and the revision
	 * is the one the segment has then (cluster_rev is set to it);
	 * cluster_no_older: a cluster_rev below the segment's is refused (-ESTALE) */
	bool cluster_keep, cluster_no_older;
	bool commit_asked; /* its commit's lines asked for (shmcfg__prefetch_commit, txn.c) */
	char who[SHMCFG_WHO_MAX];       /* zero-filled: copied whole into the log (publish.c) */
	struct change small_ch[TXN_INLINE]; /* ch's first storage */
	/* its commit's history cells, each change's layer before and after
	 * (publish.c, hist_room), up to TXN_INLINE changes: not 4 KiB more of
	 * every commit's stack */
	struct shmcfg__cell small_hist[TXN_INLINE][2];
};
shmcfg_txn *shmcfg__txn_new(shmcfg *h); /* txn.c: what shmcfg_txn_begin() and replace.c start from */
int shmcfg__txn_set_layer(shmcfg_txn *t, shmcfg_opt opt, enum layer layer, const shmcfg_value *v);
int shmcfg__txn_refuse(shmcfg_txn *t, int r); /* t poisoned by refusal r (the first is kept): r */
/* shmcfg_txn_reset(), made at commit only if the layer is then the cluster's (if_cluster) */
int shmcfg__txn_reset_if_cluster(shmcfg_txn *t, shmcfg_opt opt);
void shmcfg__prefetch_commit(const shmcfg *h); /* hints: the lines every commit writes */

/* publish.c: commits */
int shmcfg__commit(shmcfg_txn *t, uint64_t *gen_ret, bool *published);
int shmcfg__commit_first(shmcfg_txn *t, uint64_t gen, uint64_t cluster_rev, bool record);
bool shmcfg__mode_wakes(unsigned mode);

/* wlock.c: the writer lock (a word of the lock object, and the handle's mutex) */
int shmcfg__lock_writer(shmcfg *h);
void shmcfg__unlock_writer(shmcfg *h);
void shmcfg__wlock_state(const shmcfg *h, shmcfg_info *ret); /* shmcfg_stat's writer fields */


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

/* layout.c: the region arithmetic of a new segment, and its check at attach */
int shmcfg__layout(uint32_t n, uint64_t schema_size, uint64_t value_bytes, const shmcfg_create_opts *o,
		   struct seg_header *lay);
int shmcfg__header_check(const struct seg_header *hd, uint64_t real_size, const char *name);

#include "objects.h" /* objects.c: names, trust, the lock object */
#include "replace.h" /* segments replaced, and followed */

#endif
