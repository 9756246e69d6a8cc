/* SPDX-License-Identifier: MIT */
/*
 * Thread-local patches (the seed's config.patch() and closure patcher).
 *
 * Each thread keeps a stack of frames; a frame holds (option, value) pairs
 * for one handle, named by its address and serial (another handle may get
 * a closed one's address: a frame a thread left open on it patches no
 * other). A frame may have an owner (a patcher, or the caller's object:
 * shmcfg_patch_enter), who closes it wherever it is among the thread's
 * frames: patches may end out of order, as the seed's may.
 * While a thread has frames, shmcfg__tls_patched is
 * non-zero and the inline getters take the slow path, which reads the
 * thread's overlay: a private copy of the current slot with the patches in
 * the user layer, resolved again (resolve.c). The overlay is rebuilt when the
 * generation or the frames change. Patches never touch the segment.
 */
#include "internal.h"
#include "slot.h"
#include "seqlock.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

/* Non-zero while the thread has patches: its inline reads take the slow
 * path (shmcfg.h). Initial-exec: the inline read tests it without a call. */
__thread int shmcfg__tls_patched __attribute__((tls_model("initial-exec")));
/* The number of the thread's frames as they are now: new (process-wide)
 * at each change of them, so that a binding may cache what a patched
 * thread reads under (it, the word `current`) (python/shmcfg/_fast.c). */
__thread uint64_t shmcfg__tls_patch_id __attribute__((tls_model("initial-exec")));
static uint64_t patch_ids;

struct pframe {
	const shmcfg *h;
	uint64_t serial;    /* h's */
	shmcfg_opt *opts;
	shmcfg_value *vals; /* owned, unless borrowed */
	size_t n, cap;
	const void *owner;  /* who closes it by name (a patcher, shmcfg_patch_enter's), or NULL */
	bool borrowed;      /* opts and vals are the owner's, a patcher's */
	struct pframe *prev;
};

struct overlay {
	const shmcfg *h;
	uint64_t serial;    /* h's */
	uint64_t gen;
	unsigned epoch;
	char *copy;        /* a slot, then a copy of the value heap with room for the patches */
	uint64_t heap_cap; /* bytes that heap may hold */
	uint64_t top;      /* bytes of it copied from the segment */
	struct overlay *next;
};

struct shmcfg_patcher {
	shmcfg *h;
	uint64_t serial;    /* h's, when the patcher was made: apply and restore read nothing of h */
	shmcfg_opt *opts;
	shmcfg_value *vals;
	size_t n, cap;
};

static __thread struct pframe *top;
static __thread struct overlay *overlays;
static __thread unsigned epoch; /* bumped whenever this thread's frames change */

/* The thread's frames changed: its overlay is old, its patch id too. */
static void frames_changed(void)
{
	epoch++;
	shmcfg__tls_patch_id = __atomic_add_fetch(&patch_ids, 1, __ATOMIC_RELAXED);
}

/* f patches handle h of serial `serial` (not a closed handle that had h's
 * address: the caller may pass a closed handle's address and serial,
 * neither read here) */
static bool frame_is(const struct pframe *f, const shmcfg *h, uint64_t serial)
{
	return f->h == h && f->serial == serial;
}

static bool frame_of(const struct pframe *f, const shmcfg *h)
{
	return frame_is(f, h, h->serial);
}

/* The thread has a frame of handle h of serial `serial` (h is not read). */
static bool has_frames(const shmcfg *h, uint64_t serial)
{
	for (struct pframe *f = top; f; f = f->prev)
		if (frame_is(f, h, serial))
			return true;
	return false;
}

static struct overlay **find_overlay(const shmcfg *h, uint64_t serial)
{
	struct overlay **o = &overlays;
	while (*o && ((*o)->h != h || (*o)->serial != serial))
		o = &(*o)->next;
	return o;
}

/* The patches of h in this thread, innermost last (so that it wins when an
 * option is patched twice). */
static int gather(const shmcfg *h, shmcfg_opt **opts, shmcfg_value **vals, size_t *n, uint64_t *bytes)
{
	*n = 0;
	*bytes = 0;
	for (struct pframe *f = top; f; f = f->prev)
		if (frame_of(f, h))
			for (size_t i = 0; i < f->n; i++) {
				(*n)++;
				const shmcfg_value *v = &f->vals[i];
				if (!v->is_null && v->type == SHMCFG_STR)
					*bytes += v->u.str.len + 1;
				else if (!v->is_null && v->type >= SHMCFG_LIST)
					*bytes += v->u.list.bytes + 1;
			}
	*opts = shmcfg__malloc((*n ? *n : 1) * sizeof **opts);
	*vals = shmcfg__malloc((*n ? *n : 1) * sizeof **vals);
	if (!*opts || !*vals) {
		shmcfg__free(*opts);
		shmcfg__free(*vals);
		return shmcfg__nomem();
	}
	size_t k = *n;
	for (struct pframe *f = top; f; f = f->prev)
		if (frame_of(f, h))
			for (size_t i = f->n; i-- > 0;) {
				(*opts)[--k] = f->opts[i];
				(*vals)[k] = f->vals[i];
			}
	return 0;
}

/* Copy the current generation into the overlay: 0, or the seqlock's
 * verdict (shmcfg__seq_retry) if it never held still. */
static int copy_current(const shmcfg *h, struct overlay *ov)
{
	return shmcfg__seq_copy_current(h, ov->copy, ov->copy + h->lay.slot_size, &ov->top, &ov->gen);
}

/*
 * Rebuild the overlay of h from the current generation and the frames. A
 * strict rebuild returns why the patched view cannot be resolved (a patch
 * set now is then refused). Otherwise, when a later commit made the patches
 * unresolvable (conflicting implications), the thread degrades to the shared
 * values with its patched options' values on top, and is warned once.
 */
static int rebuild(const shmcfg *h, struct overlay *ov, bool strict)
{
	shmcfg *hw = (shmcfg *)h;
	shmcfg_opt *opts;
	shmcfg_value *vals;
	size_t n;
	uint64_t bytes;
	int r = gather(h, &opts, &vals, &n, &bytes);
	if (r)
		return r;
	/* the heap's copy, then a chunk per patched option holding its layers
	 * anew: the patch values, and its other layers again, whose bytes are
	 * in the heap (so at most heap_size more) */
	uint64_t cap = 2 * h->lay.heap_size + bytes + n * (CHUNK_HDR_BYTES + NLAYERS * sizeof(struct shmcfg__cell) + 16);
	if (cap > ov->heap_cap) {
		char *copy = shmcfg__realloc(ov->copy, h->lay.slot_size + cap);
		if (!copy) {
			r = shmcfg__nomem();
			goto out;
		}
		ov->copy = copy;
		ov->heap_cap = cap;
	}
	if ((r = copy_current(h, ov)))
		goto out;
	r = shmcfg__resolve_patched(hw, ov->copy, ov->copy + h->lay.slot_size, ov->top, ov->heap_cap, opts,
				    vals, n, true);
	if (r && !strict && r != -ENOMEM) {
		shmcfg__log(SHMCFG_LOG_WARNING, "%s: this thread's patches no longer resolve (%s); "
			    "reading the shared values with the patched values on top",
			    h->name, shmcfg_errdetail());
		if (!(r = copy_current(h, ov)))
			r = shmcfg__resolve_patched(hw, ov->copy, ov->copy + h->lay.slot_size, ov->top,
						    ov->heap_cap, opts, vals, n, false);
	}
out:
	shmcfg__free(opts);
	shmcfg__free(vals);
	ov->epoch = r ? epoch - 1 : epoch;
	return r;
}

static struct overlay *overlay_of(const shmcfg *h, int *err)
{
	struct overlay **slot = find_overlay(h, h->serial), *ov = *slot;
	*err = 0;
	if (!ov) {
		ov = shmcfg__calloc(1, sizeof *ov);
		if (!ov) {
			*err = shmcfg__nomem();
			return NULL;
		}
		ov->h = h;
		ov->serial = h->serial;
		ov->epoch = epoch - 1;
		*slot = ov;
	}
	return ov;
}

/* The thread's overlay of h, brought up to date with the current generation
 * and the frames; NULL with *err set if it cannot be. */
static struct overlay *fresh_overlay(const shmcfg *h, int *err)
{
	struct overlay *ov = overlay_of(h, err);
	if (ov && (ov->epoch != epoch || ov->gen != shmcfg_generation(h)) && (*err = rebuild(h, ov, false)))
		return NULL;
	return ov;
}

/* The thread's fresh overlay of h; NULL if the thread has no patches of h
 * (*err 0) or if the overlay cannot be made (*err says why). */
static struct overlay *patched(const shmcfg *h, int *err)
{
	*err = 0;
	return has_frames(h, h->serial) ? fresh_overlay(h, err) : NULL;
}

bool shmcfg__patched_cell(const shmcfg *h, shmcfg_opt opt, struct shmcfg__cell *cell,
			  const char **heap, uint64_t *heap_size, int *err)
{
	struct overlay *ov = patched(h, err);
	if (ov) {
		*cell = slot_cells(h, ov->copy)[opt];
		*heap = ov->copy + h->lay.slot_size;
		*heap_size = ov->heap_cap;
	}
	return ov || *err;
}

bool shmcfg__patched_slot(const shmcfg *h, const char **slot, uint64_t *gen, int *err)
{
	struct overlay *ov = patched(h, err);
	if (ov) {
		*slot = ov->copy;
		*gen = ov->gen;
	}
	return ov || *err;
}

bool shmcfg__patch_value(const shmcfg *h, shmcfg_opt opt, const shmcfg_value **v)
{
	for (struct pframe *f = top; f; f = f->prev) /* innermost first: it wins */
		if (frame_of(f, h))
			for (size_t i = 0; i < f->n; i++)
				if (f->opts[i] == opt) {
					*v = &f->vals[i];
					return true;
				}
	return false;
}

/* Free h's overlay once the thread has no frame of h left. */
static void drop_overlay(const shmcfg *h, uint64_t serial)
{
	struct overlay **o = find_overlay(h, serial), *ov = *o;
	if (!ov || has_frames(h, serial))
		return;
	*o = ov->next;
	shmcfg__free(ov->copy);
	shmcfg__free(ov);
}

/* Check that the thread's patched view of h resolves now (after a change
 * of its frames); an error says why. */
static int validate(const shmcfg *h)
{
	int r;
	struct overlay *ov = overlay_of(h, &r);
	return ov ? rebuild(h, ov, true) : r;
}

static void frame_free(struct pframe *f);

/*
 * A thread that exits with frames open (or an overlay) frees them: a
 * pthread key, set (to a non-NULL value) at the thread's first frame, whose
 * destructor runs at its exit. The library is linked -z nodelete, so the
 * destructor outlives a dlclose. Without the key (pthread_key_create
 * failed), what such a thread leaves open stays allocated, as before.
 */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static bool exit_key_ok;
static __thread bool exit_key_set;

static void thread_exit(void *unused)
{
	(void)unused;
	while (top) {
		struct pframe *f = top;
		top = f->prev;
		frame_free(f);
	}
	while (overlays) {
		struct overlay *ov = overlays;
		overlays = ov->next;
		shmcfg__free(ov->copy);
		shmcfg__free(ov);
	}
	shmcfg__tls_patched = 0;
}

static void exit_key_make(void)
{
	exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

/* Open a frame of handle h of serial `serial` (h is not read: a patcher's
 * handle may be closed) on top of the thread's: 0 or -ENOMEM. */
static int push(const shmcfg *h, uint64_t serial, shmcfg_opt *opts, shmcfg_value *vals, size_t n,
		const void *owner, bool borrowed)
{
	if (!exit_key_set) {
		pthread_once(&exit_key_once, exit_key_make);
		exit_key_set = exit_key_ok && pthread_setspecific(exit_key, &exit_key_set) == 0;
	}
	struct pframe *f = shmcfg__malloc(sizeof *f);
	if (!f)
		return shmcfg__nomem();
	*f = (struct pframe){.h = h, .serial = serial, .opts = opts, .vals = vals, .n = n, .cap = n,
			     .owner = owner, .borrowed = borrowed, .prev = top};
	top = f;
	frames_changed();
	shmcfg__tls_patched++;
	return 0;
}

int shmcfg_patch_push(shmcfg *h)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	return push(h, h->serial, NULL, NULL, 0, NULL, false);
}

int shmcfg_patch_enter(shmcfg *h, const void *owner)
{
	SHMCFG_API_ENTRY;
	assert_return(h && owner, -EINVAL);
	return push(h, h->serial, NULL, NULL, 0, owner, false);
}

static int frame_put(struct pframe *f, shmcfg_opt opt, shmcfg_value *v)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->opts[i] == opt) {
			shmcfg_value_clear(&f->vals[i]);
			f->vals[i] = *v;
			return 0;
		}
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 4;
		shmcfg_opt *o = shmcfg__realloc(f->opts, cap * sizeof *o);
		if (o)
			f->opts = o;
		shmcfg_value *vv = o ? shmcfg__realloc(f->vals, cap * sizeof *vv) : NULL;
		if (!vv)
			return shmcfg__nomem();
		f->vals = vv;
		f->cap = cap;
	}
	f->opts[f->n] = opt;
	f->vals[f->n++] = *v;
	return 0;
}

/* Check v for opt (an alias means its target) and copy it, as a commit would. */
static int prepare(shmcfg *h, shmcfg_opt opt, const shmcfg_value *v, shmcfg_opt *final,
		   shmcfg_value *out)
{
	int r = shmcfg__target_of(h, opt, final);
	return r ? r : shmcfg__prepare_value(h, *final, v, out);
}

int shmcfg_patch_set(shmcfg *h, shmcfg_opt opt, const shmcfg_value *v)
{
	SHMCFG_API_ENTRY;
	assert_return(h && v, -EINVAL);
	struct pframe *f = top;
	while (f && !frame_of(f, h))
		f = f->prev;
	if (!f || f->borrowed)
		return shmcfg__err(-ENOENT, "%s: no open patch frame in this thread", h->name);
	shmcfg_opt final;
	shmcfg_value c;
	int r = prepare(h, opt, v, &final, &c);
	if (r)
		return r;
	/* keep what the frame held, to put it back if the patch is refused */
	size_t at = f->n;
	for (size_t i = 0; i < f->n; i++)
		if (f->opts[i] == final)
			at = i;
	bool existed = at < f->n;
	shmcfg_value before = {0};
	if (existed && (r = shmcfg__value_copy(&f->vals[at], &before))) {
		shmcfg_value_clear(&c);
		return r;
	}
	if ((r = frame_put(f, final, &c))) {
		shmcfg_value_clear(&c);
		shmcfg_value_clear(&before);
		return r;
	}
	frames_changed();
	/* the patched view must resolve: a patch that does not fit or whose
	 * implications conflict is refused, and the frame is as it was */
	if ((r = validate(h))) {
		char why[400];
		snprintf(why, sizeof why, "%s", shmcfg_errdetail());
		if (existed) {
			shmcfg_value_clear(&f->vals[at]);
			f->vals[at] = before;
		} else {
			shmcfg_value_clear(&f->vals[--f->n]);
		}
		frames_changed();
		return shmcfg__err(r, "patch refused: %s", why);
	}
	shmcfg_value_clear(&before);
	return 0;
}

int shmcfg_patch_set_text(shmcfg *h, shmcfg_opt opt, const char *text)
{
	SHMCFG_API_ENTRY;
	assert_return(h && text, -EINVAL);
	shmcfg_value v;
	int r = shmcfg__parse_for(h, opt, text, &v);
	if (r)
		return r;
	r = shmcfg_patch_set(h, opt, &v);
	shmcfg_value_clear(&v);
	return r;
}

static void frame_free(struct pframe *f)
{
	if (!f->borrowed) {
		for (size_t i = 0; i < f->n; i++)
			shmcfg_value_clear(&f->vals[i]);
		shmcfg__free(f->opts);
		shmcfg__free(f->vals);
	}
	shmcfg__free(f);
}

/* Close a frame of handle h of serial `serial` (h is not read): owner's
 * innermost, wherever it is among the thread's frames (the frames opened
 * after it stay), or, with no owner, the innermost frame of h if nobody
 * owns it. false: no such frame. */
static bool pop(const shmcfg *h, uint64_t serial, const void *owner)
{
	struct pframe **link = &top;
	while (*link && !(frame_is(*link, h, serial) && (!owner || (*link)->owner == owner)))
		link = &(*link)->prev;
	struct pframe *f = *link;
	if (!f || f->owner != owner)
		return false;
	*link = f->prev;
	frame_free(f);
	frames_changed();
	shmcfg__tls_patched--;
	drop_overlay(h, serial);
	return true;
}

static int pop_of(const shmcfg *h, const void *owner)
{
	return pop(h, h->serial, owner)
		       ? 0
		       : shmcfg__err(-ENOENT, "%s: no matching patch frame to close in this thread", h->name);
}

int shmcfg_patch_pop(shmcfg *h)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	return pop_of(h, NULL);
}

int shmcfg_patch_exit(shmcfg *h, const void *owner)
{
	SHMCFG_API_ENTRY;
	assert_return(h && owner, -EINVAL);
	return pop_of(h, owner);
}

int shmcfg_patcher_new(shmcfg *h, shmcfg_patcher **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	*ret = shmcfg__calloc(1, sizeof **ret);
	if (!*ret)
		return shmcfg__nomem();
	(*ret)->h = h;
	(*ret)->serial = h->serial;
	return 0;
}

int shmcfg_patcher_set(shmcfg_patcher *p, shmcfg_opt opt, const shmcfg_value *v)
{
	SHMCFG_API_ENTRY;
	assert_return(p && v, -EINVAL);
	shmcfg_opt final;
	shmcfg_value c;
	int r = prepare(p->h, opt, v, &final, &c);
	if (r)
		return r;
	struct pframe tmp = {.opts = p->opts, .vals = p->vals, .n = p->n, .cap = p->cap};
	if ((r = frame_put(&tmp, final, &c)))
		shmcfg_value_clear(&c);
	p->opts = tmp.opts;
	p->vals = tmp.vals;
	p->n = tmp.n;
	p->cap = tmp.cap;
	return r;
}

int shmcfg_patcher_apply(shmcfg_patcher *p)
{
	SHMCFG_API_ENTRY;
	assert_return(p, -EINVAL);
	/* the frame borrows the patcher's checked values: no copy, no check */
	return push(p->h, p->serial, p->opts, p->vals, p->n, p, true);
}

int shmcfg_patcher_restore(shmcfg_patcher *p)
{
	SHMCFG_API_ENTRY;
	assert_return(p, -EINVAL);
	return pop(p->h, p->serial, p) ? 0
				      : shmcfg__err(-ENOENT, "the patcher's frame is not open in this thread");
}

shmcfg_patcher *shmcfg_patcher_free(shmcfg_patcher *p)
{
	SHMCFG_API_KEEP;
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n; i++)
		shmcfg_value_clear(&p->vals[i]);
	shmcfg__free(p->opts);
	shmcfg__free(p->vals);
	shmcfg__free(p);
	return NULL;
}

/* At close: drop the calling thread's frames and overlay of h, so that a
 * later handle (perhaps at the same address) starts unpatched. Other
 * threads must pop their own frames before the handle is closed. */
void shmcfg__patch_forget(const shmcfg *h)
{
	for (struct pframe **link = &top; *link;) {
		struct pframe *f = *link;
		if (!frame_of(f, h)) {
			link = &f->prev;
			continue;
		}
		*link = f->prev;
		frame_free(f);
		shmcfg__tls_patched--;
		frames_changed();
	}
	drop_overlay(h, h->serial);
}
