/* SPDX-License-Identifier: MIT */
/*
 * Handles of segments: creation, attach (the trust checks of objects.c, the
 * validation of validate.c, a private copy of the header, the schema copied
 * and validated on first use), reattach and close.
 */
#include "internal.h"
#include "slot.h"
#include "history.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define READY_WAIT_MS 1000

/* LeakSanitizer does not scan mappings: what only a handle points to (its
 * schema's copy, its name) would be reported as leaked by a program that
 * exits with the handle open. Weak: called only under LSan. */
extern void __lsan_register_root_region(const void *p, size_t size) __attribute__((weak));
extern void __lsan_unregister_root_region(const void *p, size_t size) __attribute__((weak));

/* A handle is mapped, not allocated (handle.h, HANDLE_BYTES), with the room
 * of a copy of @p nopts options after it, which shmcfg__copy_map() fills
 * with the segment's pages: reserved, not memory (PROT_NONE) */
static int handle_alloc(const char *name, uint32_t nopts, shmcfg **ret)
{
	if ((size_t)sysconf(_SC_PAGESIZE) > HANDLE_BYTES)
		return shmcfg__err(-EINVAL, "%s: pages of %ld bytes: a handle needs pages of at most 64 KiB", name,
				   sysconf(_SC_PAGESIZE));
	size_t len = HANDLE_BYTES + copy_map_bytes(nopts);
	char *m = shmcfg__mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	const char *what = "mmap";
	if (m != MAP_FAILED && mprotect(m, HANDLE_BYTES, PROT_READ | PROT_WRITE) < 0)
		what = "mprotect";
	else if (m != MAP_FAILED) {
		shmcfg *h = (shmcfg *)m;
		/* zeroed already: written now so that its pages are faulted in
		 * here, not in the handle's first commits and reads */
		memset(h, 0, sizeof *h);
		h->map_bytes = len;
		static uint64_t serials;
		h->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
		if (__lsan_register_root_region)
			__lsan_register_root_region(h, HANDLE_BYTES);
		*ret = h;
		return 0;
	}
	int e = errno == EAGAIN ? ENOMEM : errno; /* (a locked-memory limit) -EAGAIN is attach's "try again" */
	if (m != MAP_FAILED)
		munmap(m, len);
	return shmcfg__err(-e, "%s: the handle's %zu KiB (its own and its accessors' copy's): %s: %s", name,
			   len >> 10, what, strerror(e));
}

static void handle_free(shmcfg *h)
{
	if (!h)
		return;
	if (h->base)
		munmap(h->base, h->size);
	shmcfg__built(h); /* a failed creation's build locks */
	if (h->fd >= 0)
		close(h->fd);
	shmcfg__lock_unmap(h);
	if (h->lock_fd >= 0)
		close(h->lock_fd);
	pthread_mutex_destroy(&h->view_lock);
	pthread_mutex_destroy(&h->commit_lock);
	pthread_mutex_destroy(&h->entry_lock);
	shmcfg__schema_close(h);
	shmcfg__free(h->topo);
	shmcfg__free(h->by_name);
	shmcfg__free((void *)h->warned);
	shmcfg__free(h->name);
	shmcfg__env_used_free(h);
	shmcfg__free(h->hist_buf);
	shmcfg__free(h->poison_slot);
	shmcfg__free(h->root_map);
	if (__lsan_unregister_root_region)
		__lsan_unregister_root_region(h, HANDLE_BYTES);
	munmap(h, h->map_bytes);
}

/* The rest of a close: the reader entry, the mapping, the handle. Run by
 * shmcfg_close(), or by the release that ends a close that waited for
 * snapshots (shmcfg__view_close()). */
static void handle_destroy(shmcfg *h)
{
	if (h->pid != getpid() && h->forked_holding) {
		/* a child closing a handle its parent held snapshots of when it
		 * forked: the child may hold them too (pinned ones are views
		 * inside the handle, reading its mapping; copies read its
		 * schema), and cannot count them (the pins are the parent's).
		 * Only the descriptors go; the memory stays until the child
		 * exits or execs. */
		if (h->fd >= 0)
			close(h->fd);
		if (h->lock_fd >= 0)
			close(h->lock_fd);
		h->fd = h->lock_fd = -1;
		return;
	}
	shmcfg__tpin_destroy(h);
	if (h->pid == getpid())
		shmcfg__reader_release(h);
	handle_free(h);
}

/*
 * How shmcfg_wait counts itself, so that commits wake only when someone
 * waits (watch.c): a read-write handle counts in the header; a read-only one
 * through a writable mapping of the header page that it makes for the wait
 * only, if its process may then open the object for writing. A class of
 * users that may read but not write the object cannot count itself: then
 * every commit wakes.
 */
static void waiters_setup(shmcfg *h, const struct stat *st)
{
	h->wake_always = shmcfg__mode_wakes(st->st_mode);
	h->mode_ns = now_ns(CLOCK_MONOTONIC_COARSE); /* the clock wake() reads */
	if (!h->rdonly)
		h->waiters = &h->hdr->waiters;
}

/* Read exactly len bytes at off: a short read means the object shrank. */
static int pread_all(shmcfg *h, void *dst, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(h->fd, (char *)dst + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return shmcfg__err(n < 0 ? -errno : SHMCFG_E_CORRUPT, "%s: cannot read %zu bytes at %llu: %s",
					   h->name, len, (unsigned long long)off,
					   n < 0 ? strerror(errno) : "the object shrank");
		done += (size_t)n;
	}
	return 0;
}

/*
 * Validate a segment and build the handle's private copies. The header and
 * the schema's header are read with pread(2) (bounded, and a truncated
 * object gives a short read, never SIGBUS) and checked before the object is
 * mapped; the rest of the schema is mapped privately and each part of it is
 * copied and validated when it is first used (validate.c). Only the copies
 * are used later: a process that scribbles on the segment cannot make us
 * read out of bounds through them. The work here does not grow with the
 * number of options.
 */
/* A sparse object would be backed by memory only as it is touched: a
 * hostile size claim must not make us fill /dev/shm (and die of SIGBUS when
 * it is full). shmcfg_create allocates every page before the object has a
 * size (posix_fallocate sets it last), so no segment is ever sparse, not
 * even one being created: refused at once, without waiting for `ready`. */
static int sparse_check(const shmcfg *h, const struct stat *st)
{
	if ((uint64_t)st->st_blocks * 512 >= (uint64_t)st->st_size)
		return 0;
	return shmcfg__err(SHMCFG_E_CORRUPT, "%s: object is sparse (%llu of %llu bytes allocated): not a segment",
			   h->name, (unsigned long long)st->st_blocks * 512, (unsigned long long)st->st_size);
}

static int handle_setup(shmcfg *h, const struct stat *st, const uint8_t *expect_hash)
{
	int r = pread_all(h, &h->lay, sizeof h->lay, 0);
	if (r)
		return r;
	if ((r = shmcfg__header_check(&h->lay, (uint64_t)st->st_size, h->name)))
		return r;
	if ((r = sparse_check(h, st)))
		return r;
	/* The schema hash is compared, not recomputed: hashing the region would
	 * read all of it. shmcfg_check recomputes it and validates everything. */
	if (h->lay.schema_size < sizeof(struct schema_hdr))
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: schema region of %llu bytes is too small", h->name,
				   (unsigned long long)h->lay.schema_size);
	if ((r = pread_all(h, &h->sch_copy, sizeof h->sch_copy, h->lay.schema_off)) ||
	    (r = shmcfg__schema_open(h)))
		return r;
	if (expect_hash && memcmp(expect_hash, h->lay.schema_hash, 16) != 0) {
		char a[33], b[33];
		shmcfg__hex16(h->lay.schema_hash, a);
		shmcfg__hex16(expect_hash, b);
		return shmcfg__err(SHMCFG_E_SCHEMA, "%s: segment schema %s, expected %s", h->name, a, b);
	}
	h->warned = shmcfg__calloc(h->lay.nopts, 1);
	if (!h->warned)
		return shmcfg__nomem();
	h->size = (size_t)st->st_size;
	/* a small segment's pages are mapped now, as its schema is copied
	 * (validate.c): not in the process's first commits and reads */
	h->base = shmcfg__mmap(NULL, h->size, h->rdonly ? PROT_READ : PROT_READ | PROT_WRITE,
			       MAP_SHARED | (h->size <= SEG_EAGER_BYTES ? MAP_POPULATE : 0), h->fd, 0);
	if (h->base == MAP_FAILED) {
		h->base = NULL;
		return shmcfg__err(-errno, "%s: mmap: %s", h->name, strerror(errno));
	}
	h->hdr = (struct seg_header *)h->base;
	/* mapped now where a commit's first uses would fault: asked for, or a
	 * writer's with the schema's validated copy (whose uses fault nothing) */
	if (h->size > SEG_EAGER_BYTES && ((h->opts.flags & SHMCFG_ATTACH_PREFAULT) || h->vcopy) && attach_maps_all(h)) {
		shmcfg__map_populate(h);
		/* the validated copy, populated as it was mapped (vcopy.c), walked
		 * last: its descriptors and names are the first commits' first
		 * cold walks (handle.h) */
		if (h->vcopy)
			warm_walks(h->priv, h->priv_size);
	}
	waiters_setup(h, st);
	/* Pairs with the creator's release store of `ready` (shmcfg_create):
	 * seeing it through the mapping means seeing the whole initialised
	 * segment (handle_map saw it through pread already). */
	if (__atomic_load_n(&h->hdr->ready, __ATOMIC_ACQUIRE) != SEG_READY && h->lay.ready == SEG_READY)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: header changed while attaching", h->name);
	h->view = (struct shmcfg_view){
		.abi = SHMCFG_VIEW_ABI,
		.nopts = h->lay.nopts,
		.nslots = h->lay.nslots,
		.cells_off = (uint32_t)h->lay.cells_off,
		.current = &h->hdr->current,
		.slots = h->base + h->lay.slots_off,
		.slot_size = h->lay.slot_size,
		.copy = (const char *)h + SHMCFG__COPY_AT,
	};
	/* the handle has room for the options its attach saw at first (the
	 * header peeked before it was made): other options now, a header
	 * that changed (a creation finished meanwhile): try again */
	if (copy_map_bytes(h->lay.nopts) != h->map_bytes - HANDLE_BYTES)
		return shmcfg__err(-EAGAIN, "%s: header changed while attaching", h->name);
	if ((r = shmcfg__copy_map(h, h->fd, h->lay.nopts)))
		return shmcfg__err(r, "%s: mmap of the accessors' copy: %s", h->name, strerror(-r));
	/* every index a hostile `current` can hold names a mapped slot */
	for (uint32_t s = 0; s < 256; s++)
		h->view.slot[s] = (const char *)slot_at(h, s < h->lay.nslots ? s : 0);
	return 0;
}

/* Wait until the object is sized and its creator stored `ready`, then
 * validate and map it. Nothing is mapped before the header checked out. */
static int handle_map(shmcfg *h, const uint8_t *expect_hash)
{
	struct stat st;
	uint64_t deadline = 0;
	for (;;) {
		if (fstat(h->fd, &st) < 0)
			return shmcfg__err(-errno, "%s: fstat: %s", h->name, strerror(errno));
		int sr = sparse_check(h, &st);
		if (sr)
			return sr;
		if ((uint64_t)st.st_size >= SEG_HEADER_BYTES) {
			struct seg_header hd;
			int r = pread_all(h, &hd, sizeof hd, 0);
			if (r)
				return r;
			if (hd.ready == SEG_READY)
				break;
			if (hd.magic != 0 && hd.magic != SEG_MAGIC)
				return shmcfg__err(SHMCFG_E_MAGIC, "%s: not a shmcfg segment", h->name);
		} else if (st.st_size > 0)
			return shmcfg__err(SHMCFG_E_CORRUPT,
					   "%s: object has %lld bytes, less than a header (truncated?)",
					   h->name, (long long)st.st_size);
		uint64_t now = now_ns(CLOCK_REALTIME);
		if (!deadline)
			deadline = now + READY_WAIT_MS * 1000000ull;
		if (now >= deadline)
			return shmcfg__err(SHMCFG_E_NOTREADY,
					   "%s: segment was never initialised (its creator died?); remove it with shmctl rm",
					   h->name);
		usleep(2000);
	}
	return handle_setup(h, &st, expect_hash);
}

static int attach_next(shmcfg *h, shmcfg **ret);

static int handle_new(const char *name, bool rdonly, uint32_t nopts, shmcfg **ret)
{
	shmcfg *h = NULL;
	int r = handle_alloc(name, nopts, &h);
	if (r)
		return r;
	h->fd = -1;
	h->lock_fd = -1;
	h->build_fd[0] = h->build_fd[1] = -1;
	h->reader = -1;
	h->cur_pin = -1;
	h->rdonly = rdonly;
	h->pid = getpid();
	h->uid = getuid(); /* for the commit log: no getuid() per commit */
	h->commit_timeout_ms = 2000;
	h->attach_next = attach_next;
	handle_mutexes_init(h);
	h->name = shmcfg__strdup(name);
	if (!h->name) {
		handle_free(h);
		return shmcfg__nomem();
	}
	*ret = h;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Attach, close, retire, unlink                                      */
/* ------------------------------------------------------------------ */

static int attach_once(const char *name, const shmcfg_attach_opts *o, shmcfg **ret)
{
	char path[PATH_BYTES];
	int r = shmcfg__name_check(name, path);
	if (r)
		return r;
	bool rdonly = o->flags & SHMCFG_ATTACH_RDONLY;
	struct stat st;
	int fd = -1;
	r = shmcfg__open_regular(path, name, rdonly ? O_RDONLY : O_RDWR, &fd, &st);
	if (r == -EACCES && !rdonly && faccessat(AT_FDCWD, path, R_OK, AT_EACCESS) == 0)
		r = shmcfg__err(-EACCES, "%s: no write access to the segment (it may be read: attach it read-only)",
				name);
	if (r)
		return r;
	/* the handle's room for the accessors' copy: the options the header
	 * says now (handle_setup checks them again, validated) */
	struct seg_header hd;
	uint32_t nopts = pread(fd, &hd, sizeof hd, 0) == (ssize_t)sizeof hd && hd.magic == SEG_MAGIC &&
					 hd.ready == SEG_READY && hd.nopts <= SEG_MAX_OPTS
				 ? hd.nopts
				 : 0;
	shmcfg *h;
	if ((r = handle_new(name, rdonly, nopts, &h))) {
		close(fd);
		return r;
	}
	h->fd = fd;
	h->opts = *o;
	if (o->expect_schema_hash) {
		memcpy(h->expect_hash, o->expect_schema_hash, 16);
		h->opts.expect_schema_hash = h->expect_hash;
	}
	r = shmcfg__owner_check(name, &st, o);
	if (!r) {
		h->owner = st.st_uid;
		r = handle_map(h, h->opts.expect_schema_hash);
	}
	if (!r && !rdonly)
		r = shmcfg__lock_open(h, &st);
	else if (!r && shmcfg__lock_open(h, &st)) {
		/* read-only: the lock object only tells liveness (and only to
		 * those who may open it): best effort */
		if (h->lock_fd >= 0)
			close(h->lock_fd);
		h->lock_fd = -1;
		shmcfg__clear_err();
	}
	/* last, the options validated (a small schema's, and with
	 * SHMCFG_ATTACH_PREFAULT the whole schema copied first and a spoiled
	 * option failing the attach): not by each option's first use */
	if (!r && (o->flags & SHMCFG_ATTACH_PREFAULT)) {
		r = shmcfg__schema_all(h);
		/* and what else a first use would fault in or look up: the
		 * lookup's cache (zero pages until touched), the committer's
		 * names (the history's) */
		if (!r) {
			memset(h->lk, 0, (size_t)h->sch->index_size * sizeof *h->lk);
			if (!rdonly)
				shmcfg__handle_identity(h);
		}
	} else if (!r)
		shmcfg__schema_warm(h);
	if (r) {
		handle_free(h);
		return r;
	}
	shmcfg__open_add(h);
	*ret = h;
	return 0;
}

static int attach_with(const char *name, const shmcfg_attach_opts *opts, shmcfg **ret)
{
	shmcfg__fork_init();
	assert_return_as("shmcfg_attach_with", ret, -EINVAL);
	shmcfg_attach_opts o = opts ? *opts : (shmcfg_attach_opts){0};
	if (o.flags & ~(unsigned)(SHMCFG_ATTACH_RDONLY | SHMCFG_ATTACH_OWNER | SHMCFG_ATTACH_PREFAULT))
		return shmcfg__err(-EINVAL, "attach flags %#x: unknown bits", o.flags);
	/* no lock object: the segment was removed or replaced between our
	 * opens (the next try sees what is there now), or someone removed it
	 * by hand (the detail says so) */
	for (int i = 0;; i++) {
		int r = attach_once(name, &o, ret);
		if (r != -EAGAIN)
			return r;
		if (i == 3)
			return SHMCFG_E_CORRUPT;
	}
}

int shmcfg_attach(const char *name, unsigned flags, const uint8_t *expect_schema_hash, shmcfg **ret)
{
	SHMCFG_API_ENTRY;
	return shmcfg_attach_with(name, &(shmcfg_attach_opts){.flags = flags, .expect_schema_hash = expect_schema_hash},
				  ret);
}

shmcfg *shmcfg_close(shmcfg *h)
{
	SHMCFG_API_KEEP;
	if (!h)
		return NULL;
	shmcfg_close(__atomic_load_n(&h->next, __ATOMIC_ACQUIRE)); /* the successors it followed */
	shmcfg__open_remove(h);
	shmcfg__patch_forget(h);
	if (shmcfg__view_close(h, handle_destroy))
		handle_destroy(h);
	return NULL;
}

void shmcfg_closep(shmcfg **h)
{
	SHMCFG_API_KEEP;
	if (h)
		*h = shmcfg_close(*h);
}

/* A replaced segment's successor (follow.c): the segment now of h's name,
 * of h's schema, another incarnation; -EAGAIN while the replacer has not
 * put it in place yet. */
static int attach_next(shmcfg *h, shmcfg **ret)
{
	/* of another schema too (follow.c maps the options), unless the handle
	 * was attached for one schema hash: h->opts keeps it */
	shmcfg *n;
	int r = shmcfg_attach_with(h->name, &h->opts, &n);
	if (r)
		return r;
	if (!memcmp(n->lay.instance, h->lay.instance, 16)) {
		shmcfg_close(n);
		return -EAGAIN;
	}
	/* another segment under the name (this one's successor removed, and one
	 * created anew): not followed, as for a removal; the frozen values are
	 * the last this handle's segment had. Of its lineage, past its frozen
	 * word's generation (its last + 1), a successor's successor is. */
	uint64_t frozen = cur_gen(__atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE));
	if (memcmp(n->lay.lineage, h->lay.lineage, 16) || n->lay.first_gen < frozen) {
		shmcfg_close(n);
		return shmcfg__err(-ENOENT, "%s: the segment now of that name is not the one that replaced it", h->name);
	}
	/* of another schema than the program's: its options mapped (follow.c).
	 * The program's schema hash with other options: a header that lies
	 * about its schema (a writer's forgery), whose cells the program's
	 * option handles would index past: not followed */
	const shmcfg *root = h->root ? h->root : h;
	uint32_t nopts = n->lay.nopts;
	if (!memcmp(n->lay.schema_hash, root->lay.schema_hash, 16) && nopts != root->lay.nopts) {
		shmcfg_close(n);
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: its successor claims its schema's hash for %u options, not %u",
				   h->name, nopts, root->lay.nopts);
	}
	n->root = root;
	if (memcmp(n->lay.schema_hash, root->lay.schema_hash, 16) && !(n->root_map = shmcfg__opt_map(root, n))) {
		shmcfg_close(n);
		return shmcfg__nomem();
	}
	*ret = n;
	return 0;
}

int shmcfg_reattach(shmcfg **hp)
{
	SHMCFG_API_ENTRY;
	assert_return(hp && *hp, -EINVAL);
	shmcfg *h = *hp, *n;
	int r = shmcfg_attach_with(h->name, &h->opts, &n);
	if (r)
		return r;
	shmcfg_close(h);
	*hp = n;
	return 0;
}

/* The sizes a creation may ask for, checked; zeroes become the defaults. */
int shmcfg__create_opts_check(shmcfg_create_opts *o)
{
	if (!o->slots)
		o->slots = SEG_DEFAULT_SLOTS;
	if (!o->readers)
		o->readers = SEG_DEFAULT_READERS;
	if (!o->mode)
		o->mode = 0600;
	if (!o->history)
		o->history = SEG_DEFAULT_HISTORY;
	if (o->slots < 2 || o->slots > SEG_MAX_SLOTS)
		return shmcfg__err(-EINVAL, "slots must be 2-%u, not %u", SEG_MAX_SLOTS, o->slots);
	if (o->history < SEG_MIN_HISTORY || o->history > SEG_MAX_HISTORY)
		return shmcfg__err(-EINVAL, "history must be %u-%u commits, not %u", SEG_MIN_HISTORY,
				   SEG_MAX_HISTORY, o->history);
	if (o->readers > SEG_MAX_READERS)
		return shmcfg__err(-EINVAL, "readers must be 1-%u, not %u", SEG_MAX_READERS, o->readers);
	if (o->mode & ~0777u)
		return shmcfg__err(-EINVAL, "mode %o has bits beyond 0777", (unsigned)o->mode);
	if (o->heap_bytes && (o->heap_bytes > SEG_MAX_HEAP_BYTES || o->heap_bytes < 1024))
		return shmcfg__err(-EINVAL, "value heap of %llu bytes is out of range (1 KiB to 4 GiB)",
				   (unsigned long long)o->heap_bytes);
	return 0;
}

/*
 * A new object at path (O_EXCL: nothing planted there is reused) for the
 * segment `name`, laid out as lay (its schema hash set) with the schema
 * region's bytes, its first generation made by first(h, ctx), then `ready`.
 * On failure nothing of it is left.
 */
int shmcfg__create_object(const char *name, const char *path, struct seg_header *lay, const void *schema_bytes,
			  mode_t mode, gid_t gid, int (*first)(shmcfg *h, void *ctx), void *ctx, shmcfg **ret)
{
	lay->create_time_ns = now_ns(CLOCK_REALTIME);
	lay->create_uid = getuid();
	lay->create_pid = getpid();
	if (getrandom(lay->instance, sizeof lay->instance, 0) != (ssize_t)sizeof lay->instance) {
		/* no entropy yet (early boot): time and pid still tell incarnations apart */
		uint64_t w[2] = {lay->create_time_ns, (uint64_t)getpid()};
		memcpy(lay->instance, w, 16);
	}
	if (!lay->first_gen) { /* a creation, not a replacement: a lineage of its own */
		lay->first_gen = 1;
		memcpy(lay->lineage, lay->instance, 16);
	}
	shmcfg *h;
	int r = handle_new(name, false, lay->nopts, &h);
	if (r)
		return r;
	/* O_EXCL|O_NOFOLLOW: nothing planted under the name is followed or
	 * reused. Mode 0600 until the build lock is taken (fchmod below): a
	 * reader of the mode asked for could otherwise open it first and hold a
	 * read lock on the build byte, failing the creation (a replacement's
	 * too, which a commit that grows the heap makes) */
	h->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (h->fd < 0) {
		r = -errno;
		shmcfg__err(r, "%s: %s", name,
			    r == -EEXIST ? "segment exists (remove it first, or force)" : strerror(-r));
		goto fail_handle;
	}
	shmcfg__fault("create.excl"); /* made, mode 0600, not yet locked */
	/* until the segment is in place at its name (shmcfg__built) */
	if ((r = shmcfg__build_lock(h, 0, h->fd, path, "segment object"))) {
		struct stat a, b; /* removed by a scan, or still ours to remove */
		if (fstat(h->fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			unlink(path);
		goto fail_handle;
	}
	shmcfg__fault("create.opened");
	/* the umask must not narrow the mode the caller asked for */
	if (fchmod(h->fd, mode) < 0 || (gid != 0 && gid != (gid_t)-1 && fchown(h->fd, (uid_t)-1, gid) < 0)) {
		r = shmcfg__err(-errno, "%s: cannot set mode %o / group %d: %s", name, (unsigned)mode, (int)gid,
				strerror(errno));
		goto fail_unlink;
	}
	/* reserve every page now: a full /dev/shm fails here, not later with SIGBUS */
	r = -shmcfg__posix_fallocate(h->fd, 0, (off_t)lay->total_size);
	if (r) {
		shmcfg__err(r, "%s: cannot allocate %llu bytes in /dev/shm: %s", name,
			    (unsigned long long)lay->total_size, strerror(-r));
		goto fail_unlink;
	}
	shmcfg__fault("create.allocated");
	/* the lock object before the instance id is written where others can
	 * read it: nobody can plant its name first */
	if ((r = shmcfg__lock_create(h, lay->instance, mode, gid)))
		goto fail_unlink;
	shmcfg__fault("create.locked"); /* a lock object, and a header not yet written */
	if (pwrite(h->fd, schema_bytes, lay->schema_size, (off_t)lay->schema_off) != (ssize_t)lay->schema_size ||
	    pwrite(h->fd, lay, sizeof *lay, 0) != (ssize_t)sizeof *lay) {
		r = shmcfg__err(-errno, "%s: cannot write the segment: %s", name, strerror(errno));
		goto fail_unlink;
	}
	shmcfg__fault("create.schema");
	/* from here on the creator reads its segment as any attacher would */
	struct stat st;
	if (fstat(h->fd, &st) < 0) {
		r = shmcfg__err(-errno, "%s: fstat: %s", name, strerror(errno));
		goto fail_unlink;
	}
	h->owner = st.st_uid;
	if ((r = handle_setup(h, &st, NULL)) || (r = first(h, ctx)))
		goto fail_unlink;
	shmcfg__fault("create.gen1");
	/* Pairs with the acquire load of `ready` in handle_map(): an attacher
	 * that sees SEG_READY sees the whole header, schema and first generation. */
	__atomic_store_n(&h->hdr->ready, SEG_READY, __ATOMIC_RELEASE);
	h->lay.ready = SEG_READY;
	shmcfg__open_add(h);
	*ret = h;
	return 0;
fail_unlink:
	unlink(path);
	if (h->lock_fd >= 0)
		shmcfg__lock_remove(name, lay->instance);
fail_handle:
	handle_free(h);
	return r;
}

/* The caller's opts at its size (lib/base/sized.c); the name of releases
 * before 0.7, whose struct was this one. */
int shmcfg_attach_with_sized(const char *name, const shmcfg_attach_opts *opts, shmcfg **ret, size_t opts_size)
{
	SHMCFG_API_ENTRY;
	shmcfg_attach_opts o;
	int r = opts ? shmcfg__sized_in(&o, sizeof o, opts, opts_size, sizeof o, "shmcfg_attach_opts") : 0;
	return r ? r : attach_with(name, opts ? &o : NULL, ret);
}

int (shmcfg_attach_with)(const char *name, const shmcfg_attach_opts *opts, shmcfg **ret)
{
	SHMCFG_API_ENTRY;
	return shmcfg_attach_with_sized(name, opts, ret, sizeof *opts);
}
