/*
 * Segments: creation, attach (with validation of every size and offset
 * before use), detach, unlink, and the consistency check.
 */
#include "internal.h"

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

#include <xxhash.h>

extern char **environ;

#define READY_WAIT_MS 1000

#define PATH_BYTES (sizeof SHM_DIR + sizeof LOCK_PREFIX + SEG_NAME_MAX)

/* The object's path in /dev/shm, and its lock object's. */
static void object_paths(const char *name, char seg[static PATH_BYTES], char lock[static PATH_BYTES])
{
	snprintf(seg, PATH_BYTES, SHM_DIR SEG_PREFIX "%s", name);
	snprintf(lock, PATH_BYTES, SHM_DIR LOCK_PREFIX "%s", name);
}

static int name_check(const char *name, char path[static PATH_BYTES], char lock[static PATH_BYTES])
{
	size_t len = name ? strlen(name) : 0;
	if (len == 0 || len > SEG_NAME_MAX || name[0] == '.')
		return shmcfg__err(-EINVAL, "segment name '%.80s' must be 1-%d characters, not starting with '.'",
				   name ? name : "", SEG_NAME_MAX);
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return shmcfg__err(-EINVAL, "segment name '%.80s': character '%c' is not allowed (use [A-Za-z0-9._-])",
					   name, *p);
	object_paths(name, path, lock);
	return 0;
}

static const char *file_kind(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISDIR(m) ? "a directory" :
	       S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" :
	       S_ISLNK(m) ? "a symbolic link" : "not a regular file";
}

/*
 * Open an object of /dev/shm that must be a regular file. O_NONBLOCK: a FIFO
 * planted under the name must not block us in open(2); O_NOFOLLOW: neither
 * may a symlink lead us elsewhere. Anything but a regular file is refused at
 * once as "not a segment".
 */
static int open_regular(const char *path, const char *name, int flags, int *fd_ret, struct stat *st)
{
	int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ENXIO || e == EISDIR) /* a socket; a directory opened for writing */
			return shmcfg__err(SHMCFG_E_MAGIC, "%s: %s is %s, not a segment", name, path,
					   e == ENXIO ? "a socket" : "a directory");
		return shmcfg__err(-e, "%s: %s", name,
				   e == ENOENT ? "no such segment" : e == ELOOP ? "is a symbolic link, not a segment" : strerror(e));
	}
	if (fstat(fd, st) < 0) {
		int e = errno;
		close(fd);
		return shmcfg__err(-e, "%s: fstat: %s", name, strerror(e));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return shmcfg__err(SHMCFG_E_MAGIC, "%s: %s is %s, not a segment", name, path,
				   file_kind(st->st_mode));
	}
	*fd_ret = fd;
	return 0;
}

/* "65534 (nobody)" */
static void user_text(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];
	if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &res) == 0 && res)
		snprintf(buf, len, "%u (%s)", (unsigned)uid, res->pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
}

/* Name squatting: whoever can create files in /dev/shm can plant an object
 * under a name another user expects. Trust the caller's own objects and
 * root's, or exactly the owner the caller names. */
static int owner_check(const char *name, const struct stat *st, const shmcfg_attach_opts *o)
{
	bool ok = (o->flags & SHMCFG_ATTACH_OWNER) ? st->st_uid == o->owner
						   : st->st_uid == geteuid() || st->st_uid == 0;
	if (ok)
		return 0;
	char who[300], want[300];
	user_text(st->st_uid, who, sizeof who);
	if (o->flags & SHMCFG_ATTACH_OWNER) {
		user_text(o->owner, want, sizeof want);
		return shmcfg__err(SHMCFG_E_OWNER, "%s: segment is owned by uid %s, not by the expected owner %s",
				   name, who, want);
	}
	return shmcfg__err(SHMCFG_E_OWNER,
			   "%s: segment is owned by uid %s, not by you or root (name the owner to trust it: --owner)",
			   name, who);
}

static uint64_t align64(uint64_t x)
{
	return (x + 63) & ~63ull;
}

/* Everything in the header checked against the object's real size. */
static int header_check(const struct seg_header *hd, uint64_t real_size, const char *name)
{
	if (hd->magic != SEG_MAGIC)
		return shmcfg__err(SHMCFG_E_MAGIC, "%s: not a shmcfg segment (magic %016llx)", name,
				   (unsigned long long)hd->magic);
	if (hd->layout_version != SEG_LAYOUT_VERSION)
		return shmcfg__err(SHMCFG_E_VERSION,
				   "%s: segment layout version %u, this library reads version %u", name,
				   hd->layout_version, SEG_LAYOUT_VERSION);
	if (hd->header_size != sizeof *hd)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: header size %u, expected %zu", name,
				   hd->header_size, sizeof *hd);
	if (hd->total_size != real_size)
		return shmcfg__err(SHMCFG_E_CORRUPT,
				   "%s: header says %llu bytes but the object has %llu (truncated?)",
				   name, (unsigned long long)hd->total_size,
				   (unsigned long long)real_size);
	uint64_t n = hd->nopts, sz = real_size, slots_bytes, tmp;
	if (n == 0 || n > SEG_MAX_OPTS || hd->nslots < 2 || hd->nslots > SEG_MAX_SLOTS ||
	    hd->nreaders == 0 || hd->nreaders > SEG_MAX_READERS)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: bad counts (options %u, slots %u, readers %u)",
				   name, hd->nopts, hd->nslots, hd->nreaders);
	/* regions in order, each inside the object, none overlapping */
	if (hd->schema_off != SEG_HEADER_BYTES || hd->schema_size > sz ||
	    hd->schema_off > sz - hd->schema_size ||
	    hd->log_off < hd->schema_off + hd->schema_size ||
	    hd->log_off > sz - SEG_LOG_ENTRIES * sizeof(struct log_ent) ||
	    hd->readers_off < hd->log_off + SEG_LOG_ENTRIES * sizeof(struct log_ent) ||
	    hd->readers_off % 64 || hd->readers_off > sz - (uint64_t)hd->nreaders * 64 ||
	    hd->slots_off < hd->readers_off + (uint64_t)hd->nreaders * 64 || hd->slots_off % 64 ||
	    hd->slot_size % 64 ||
	    __builtin_mul_overflow(hd->slot_size, (uint64_t)hd->nslots, &slots_bytes) ||
	    hd->slots_off > sz || slots_bytes > sz - hd->slots_off || hd->log_off % 8)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: a region lies outside the object", name);
	/* slot layout: header, cells, layers, heap */
	if (hd->cells_off != SLOT_CELLS_OFF ||
	    hd->layers_off != hd->cells_off + n * sizeof(struct shmcfg__cell) ||
	    hd->heap_off != hd->layers_off + n * NLAYERS * sizeof(struct shmcfg__cell) ||
	    __builtin_add_overflow(hd->heap_off, hd->heap_size, &tmp) || tmp > hd->slot_size ||
	    hd->heap_size >= UINT32_MAX || hd->heap_size > SEG_MAX_HEAP_BYTES || hd->heap_size < 2 ||
	    hd->schema_size > SEG_MAX_SCHEMA_BYTES)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: bad slot layout", name);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Open handles, for fork()                                           */
/* ------------------------------------------------------------------ */

/*
 * A forked child shares its parent's open file descriptions, and with them
 * the OFD locks on the lock object: a child that never uses shmcfg would
 * keep a dead parent's reader entry (or writer lock) alive. So the child
 * closes its copies of every lock descriptor at once (the parent's locks
 * stay, held by the parent's descriptors); its inherited handles can still
 * read, and refuse to commit or pin (SHMCFG_E_FORKED).
 */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static shmcfg *open_handles;

static void open_add(shmcfg *h)
{
	pthread_mutex_lock(&open_lock);
	h->next_open = open_handles;
	open_handles = h;
	pthread_mutex_unlock(&open_lock);
}

static void open_remove(shmcfg *h)
{
	pthread_mutex_lock(&open_lock);
	for (shmcfg **p = &open_handles; *p; p = &(*p)->next_open)
		if (*p == h) {
			*p = h->next_open;
			break;
		}
	pthread_mutex_unlock(&open_lock);
}

static void open_before_fork(void)
{
	pthread_mutex_lock(&open_lock);
}

static void open_after_fork_parent(void)
{
	pthread_mutex_unlock(&open_lock);
}

static void open_after_fork_child(void)
{
	for (shmcfg *h = open_handles; h; h = h->next_open)
		if (h->lock_fd >= 0) {
			close(h->lock_fd);
			h->lock_fd = -1;
		}
	pthread_mutex_init(&open_lock, NULL);
}

__attribute__((constructor)) static void open_register_atfork(void)
{
	pthread_atfork(open_before_fork, open_after_fork_parent, open_after_fork_child);
}

static void handle_free(shmcfg *h)
{
	if (!h)
		return;
	if (h->base)
		munmap(h->base, h->size);
	if (h->fd >= 0)
		close(h->fd);
	if (h->lock_fd >= 0)
		close(h->lock_fd);
	pthread_mutex_destroy(&h->view_lock);
	pthread_mutex_destroy(&h->commit_lock);
	free(h->schema_copy);
	free((void *)h->warned);
	free(h->name);
	free(h);
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
 * the schema are read with pread(2) (bounded, and a truncated object gives a
 * short read, never SIGBUS) and checked before the object is mapped; only
 * the copies are used later: a process that scribbles on the segment cannot
 * make us read out of bounds through them.
 */
static int handle_setup(shmcfg *h, const struct stat *st, const uint8_t *expect_hash)
{
	int r = pread_all(h, &h->lay, sizeof h->lay, 0);
	if (r)
		return r;
	if ((r = header_check(&h->lay, (uint64_t)st->st_size, h->name)))
		return r;
	/* a sparse object would be backed by memory only as it is touched: a
	 * hostile size claim must not make us fill /dev/shm (and die of
	 * SIGBUS when it is full); shmcfg_create allocates every page */
	if ((uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: object is sparse (%llu of %llu bytes allocated)",
				   h->name, (unsigned long long)st->st_blocks * 512,
				   (unsigned long long)st->st_size);
	h->schema_copy = malloc(h->lay.schema_size);
	if (!h->schema_copy)
		return -ENOMEM;
	if ((r = pread_all(h, h->schema_copy, h->lay.schema_size, h->lay.schema_off)))
		return r;
	h->sch = h->schema_copy;
	/* the schema hash covers the region whole: it detects any change to it */
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, XXH3_128bits(h->schema_copy, h->lay.schema_size));
	if (memcmp(canon.digest, h->lay.schema_hash, 16) != 0)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: schema region does not match its hash",
				   h->name);
	if (h->lay.schema_size < sizeof(struct schema_hdr) || shmcfg__schema_validate(h, true, NULL, NULL))
		return SHMCFG_E_CORRUPT;
	if (expect_hash && memcmp(expect_hash, h->lay.schema_hash, 16) != 0) {
		char a[33], b[33];
		for (int i = 0; i < 16; i++) {
			snprintf(a + 2 * i, 3, "%02x", h->lay.schema_hash[i]);
			snprintf(b + 2 * i, 3, "%02x", expect_hash[i]);
		}
		return shmcfg__err(SHMCFG_E_SCHEMA, "%s: segment schema %s, expected %s", h->name, a, b);
	}
	h->warned = calloc(h->lay.nopts, 1);
	if (!h->warned)
		return -ENOMEM;
	h->size = (size_t)st->st_size;
	h->base = mmap(NULL, h->size, h->rdonly ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
		       h->fd, 0);
	if (h->base == MAP_FAILED) {
		h->base = NULL;
		return shmcfg__err(-errno, "%s: mmap: %s", h->name, strerror(errno));
	}
	h->hdr = (struct seg_header *)h->base;
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
	};
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

static shmcfg *handle_new(const char *name, bool rdonly)
{
	shmcfg *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->fd = -1;
	h->lock_fd = -1;
	h->reader = -1;
	h->rdonly = rdonly;
	h->pid = getpid();
	h->commit_timeout_ms = 2000;
	pthread_mutex_init(&h->view_lock, NULL);
	pthread_mutex_init(&h->commit_lock, NULL);
	h->name = strdup(name);
	if (!h->name) {
		free(h);
		return NULL;
	}
	return h;
}

/* ------------------------------------------------------------------ */
/* The lock object                                                    */
/* ------------------------------------------------------------------ */

/*
 * The writer lock and the reader entries' liveness locks are OFD locks on a
 * companion object, /dev/shm/shmcfg-lock.NAME, not on the segment: an OFD
 * read lock needs only a read-only descriptor, so on the segment any reader
 * could take the writer lock or keep dead readers "alive". The lock object
 * grants read and write to exactly the permission classes that may write the
 * segment (0644 -> 0600, 0664 -> 0660), so only writers can open it. It
 * carries the segment's random instance id, so that an attacher never pairs
 * a segment with the lock object of another incarnation of its name.
 */
static mode_t lock_mode(mode_t seg_mode)
{
	mode_t m = 0;
	for (int shift = 0; shift <= 6; shift += 3)
		if (seg_mode & (0002u << shift))
			m |= 0006u << shift;
	return m;
}

static int lock_create(shmcfg *h, const char *path, mode_t seg_mode, gid_t gid)
{
	for (int attempt = 0;; attempt++) {
		h->lock_fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
				  lock_mode(seg_mode));
		if (h->lock_fd >= 0)
			break;
		int e = errno;
		struct stat st;
		/* a leftover of ours (a creator that died) goes; another user's
		 * squats the name: refuse rather than lock with its object */
		if (e == EEXIST && attempt == 0 && lstat(path, &st) == 0 &&
		    (st.st_uid == geteuid() || geteuid() == 0) && unlink(path) == 0)
			continue;
		if (e == EEXIST && lstat(path, &st) == 0 && st.st_uid != geteuid()) {
			char who[300];
			user_text(st.st_uid, who, sizeof who);
			return shmcfg__err(SHMCFG_E_OWNER, "%s: its lock object %s exists and belongs to uid %s; remove it (as that user or root)",
					   h->name, path, who);
		}
		return shmcfg__err(-e, "%s: cannot create its lock object %s: %s", h->name, path, strerror(e));
	}
	struct lock_file lf = {.magic = LOCK_MAGIC};
	memcpy(lf.instance, h->lay.instance, 16);
	if (fchmod(h->lock_fd, lock_mode(seg_mode)) < 0 ||
	    (gid != 0 && gid != (gid_t)-1 && fchown(h->lock_fd, (uid_t)-1, gid) < 0) ||
	    pwrite(h->lock_fd, &lf, sizeof lf, 0) != (ssize_t)sizeof lf) {
		int e = errno;
		unlink(path);
		return shmcfg__err(-e, "%s: cannot set up its lock object %s: %s", h->name, path, strerror(e));
	}
	return 0;
}

/* Open the lock object of the segment h attached: -EAGAIN if it belongs to
 * another incarnation of the name (replaced while we attached). A read-only
 * handle opens it read-only, to tell live readers from dead ones (F_OFD_GETLK
 * needs no write access); it never locks. */
static int lock_open(shmcfg *h, const char *path, const struct stat *seg_st)
{
	struct stat st;
	int r = open_regular(path, h->name, h->rdonly ? O_RDONLY : O_RDWR, &h->lock_fd, &st);
	if (r == -ENOENT)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: its lock object %s is missing (removed by hand?): the segment cannot be written; re-create it",
				   h->name, path);
	if (r == -EACCES)
		return shmcfg__err(-EACCES, "%s: no write access to its lock object %s", h->name, path);
	if (r)
		return r;
	if (st.st_uid != seg_st->st_uid) {
		char who[300], seg[300];
		user_text(st.st_uid, who, sizeof who);
		user_text(seg_st->st_uid, seg, sizeof seg);
		return shmcfg__err(SHMCFG_E_OWNER, "%s: its lock object %s belongs to uid %s, the segment to uid %s",
				   h->name, path, who, seg);
	}
	struct lock_file lf;
	if (pread(h->lock_fd, &lf, sizeof lf, 0) != (ssize_t)sizeof lf || lf.magic != LOCK_MAGIC)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: %s is not its lock object", h->name, path);
	if (memcmp(lf.instance, h->lay.instance, 16) != 0)
		return -EAGAIN;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Attach, close, retire, unlink                                      */
/* ------------------------------------------------------------------ */

static int attach_once(const char *name, const shmcfg_attach_opts *o, shmcfg **ret)
{
	char path[PATH_BYTES], lock[PATH_BYTES];
	int r = name_check(name, path, lock);
	if (r)
		return r;
	bool rdonly = o->flags & SHMCFG_ATTACH_RDONLY;
	shmcfg *h = handle_new(name, rdonly);
	if (!h)
		return -ENOMEM;
	h->opts = *o;
	if (o->expect_schema_hash) {
		memcpy(h->expect_hash, o->expect_schema_hash, 16);
		h->opts.expect_schema_hash = h->expect_hash;
	}
	struct stat st;
	r = open_regular(path, name, rdonly ? O_RDONLY : O_RDWR, &h->fd, &st);
	if (!r)
		r = owner_check(name, &st, o);
	if (!r) {
		h->owner = st.st_uid;
		r = handle_map(h, h->opts.expect_schema_hash);
	}
	if (!r && !rdonly)
		r = lock_open(h, lock, &st);
	else if (!r && lock_open(h, lock, &st)) {
		/* read-only: the lock object only tells liveness (and only to
		 * those who may open it): best effort */
		if (h->lock_fd >= 0)
			close(h->lock_fd);
		h->lock_fd = -1;
		shmcfg__clear_err();
	}
	if (r) {
		handle_free(h);
		return r;
	}
	open_add(h);
	*ret = h;
	return 0;
}

int shmcfg_attach_with(const char *name, const shmcfg_attach_opts *opts, shmcfg **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(ret, -EINVAL);
	shmcfg_attach_opts o = opts ? *opts : (shmcfg_attach_opts){0};
	if (o.flags & ~(unsigned)(SHMCFG_ATTACH_RDONLY | SHMCFG_ATTACH_OWNER))
		return shmcfg__err(-EINVAL, "attach flags %#x: unknown bits", o.flags);
	/* a lock object of another incarnation: the name was replaced between
	 * our two opens; the next try sees the new pair */
	for (int i = 0;; i++) {
		int r = attach_once(name, &o, ret);
		if (r != -EAGAIN)
			return r;
		if (i == 3)
			return shmcfg__err(SHMCFG_E_CORRUPT, "%s: its lock object belongs to another segment of that name",
					   name);
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
	open_remove(h);
	shmcfg__patch_forget(h);
	shmcfg__view_close(h);
	if (h->pid == getpid())
		shmcfg__reader_release(h);
	handle_free(h);
	return NULL;
}

void shmcfg_closep(shmcfg **h)
{
	SHMCFG_API_KEEP;
	if (h)
		*h = shmcfg_close(*h);
}

bool shmcfg_retired(const shmcfg *h)
{
	SHMCFG_API_KEEP;
	if (!h)
		return false;
	if (__atomic_load_n(&h->hdr->retired, __ATOMIC_ACQUIRE))
		return true;
	/* removed by other means (rm in /dev/shm): the name no longer links it */
	struct stat st;
	return fstat(h->fd, &st) == 0 && st.st_nlink == 0;
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

/*
 * Remove the name, then mark the object we opened retired and wake its
 * waiters: every attached process learns at its next wait (or within the
 * wait's re-check interval, from st_nlink, when we could not write the mark).
 * The lock object goes last, so that no attacher pairs the old segment with
 * a new lock object: it checks the instance id anyway.
 */
static int remove_segment(const char *name, const char *path, const char *lock, bool quiet_enoent)
{
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < SEG_HEADER_BYTES)) {
		close(fd);
		fd = -1;
	}
	if (unlink(path) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		if (e == ENOENT && quiet_enoent)
			return 0;
		if (e == EPERM || e == EACCES) {
			struct stat ls;
			char who[300] = "another user";
			if (lstat(path, &ls) == 0)
				user_text(ls.st_uid, who, sizeof who);
			return shmcfg__err(-e, "%s: cannot remove %s: it belongs to uid %s", name, path, who);
		}
		return shmcfg__err(-e, "%s: %s", name, e == ENOENT ? "no such segment" : strerror(e));
	}
	if (fd >= 0) {
		struct seg_header *hd = mmap(NULL, SEG_HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (hd != MAP_FAILED) {
			if (hd->magic == SEG_MAGIC && hd->layout_version == SEG_LAYOUT_VERSION) {
				/* release: pairs with the acquire load in shmcfg_retired();
				 * the futex bump wakes waiters as a commit does */
				__atomic_store_n(&hd->retired, 1, __ATOMIC_RELEASE);
				__atomic_fetch_add(&hd->futex, 1, __ATOMIC_SEQ_CST);
				syscall(SYS_futex, &hd->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
			}
			munmap(hd, SEG_HEADER_BYTES);
		}
		close(fd);
	}
	if (unlink(lock) < 0 && errno != ENOENT)
		shmcfg__log(1, "%s: cannot remove its lock object %s: %s", name, lock, strerror(errno));
	return 0;
}

int shmcfg_unlink(const char *name)
{
	SHMCFG_API_ENTRY;
	char path[PATH_BYTES], lock[PATH_BYTES];
	int r = name_check(name, path, lock);
	return r ? r : remove_segment(name, path, lock, false);
}

int shmcfg_attached_pids(const char *name, pid_t *pids, size_t max)
{
	SHMCFG_API_ENTRY;
	char path[PATH_BYTES], lock[PATH_BYTES];
	int r = name_check(name, path, lock);
	if (r)
		return r;
	assert_return(pids || max == 0, -EINVAL);
	struct stat st;
	if (stat(path, &st) < 0)
		return shmcfg__err(-errno, "%s: %s", name, errno == ENOENT ? "no such segment" : strerror(errno));
	DIR *d = opendir("/proc");
	if (!d)
		return shmcfg__err(-errno, "/proc: %s", strerror(errno));
	int n = 0;
	struct dirent *de;
	char line[PATH_MAX + 256];
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		char maps[64];
		snprintf(maps, sizeof maps, "/proc/%ld/maps", pid);
		FILE *f = fopen(maps, "re");
		if (!f)
			continue; /* gone, or not ours to read */
		bool found = false;
		/* "start-end perms offset dev inode path": the same inode under
		 * our path (or "path (deleted)") */
		while (!found && fgets(line, sizeof line, f)) {
			unsigned long long ino;
			int at = 0;
			if (sscanf(line, "%*s %*s %*s %*s %llu %n", &ino, &at) < 1 || ino != (unsigned long long)st.st_ino)
				continue;
			size_t pl = strlen(path);
			found = !strncmp(line + at, path, pl) && (line[at + pl] == '\n' || line[at + pl] == ' ');
		}
		fclose(f);
		if (found) {
			if ((size_t)n < max)
				pids[n] = (pid_t)pid;
			n++;
		}
	}
	closedir(d);
	return n;
}

int shmcfg_create(const char *name, const shmcfg_schema *schema, const shmcfg_create_opts *opts,
		  shmcfg **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(ret, -EINVAL);
	char path[PATH_BYTES], lock[PATH_BYTES];
	int r = name_check(name, path, lock);
	if (r)
		return r;
	shmcfg_create_opts o = opts ? *opts : (shmcfg_create_opts){0};
	if (!o.slots)
		o.slots = SEG_DEFAULT_SLOTS;
	if (!o.readers)
		o.readers = SEG_DEFAULT_READERS;
	if (!o.mode)
		o.mode = 0600;
	if (o.slots < 2 || o.slots > SEG_MAX_SLOTS)
		return shmcfg__err(-EINVAL, "slots must be 2-%u, not %u", SEG_MAX_SLOTS, o.slots);
	if (o.readers > SEG_MAX_READERS)
		return shmcfg__err(-EINVAL, "readers must be 1-%u, not %u", SEG_MAX_READERS, o.readers);
	if (o.mode & ~0777u)
		return shmcfg__err(-EINVAL, "mode %o has bits beyond 0777", (unsigned)o.mode);

	shmcfg_schema *own = NULL;
	if (!schema) {
		r = shmcfg__default_schema(&own);
		if (r)
			return r;
		schema = own;
	}
	struct built_schema *b = NULL;
	r = shmcfg__schema_build(schema, &b);
	if (r) {
		shmcfg_schema_free(own);
		return r;
	}
	uint64_t n = shmcfg__schema_nopts(b);
	uint64_t heap = o.heap_bytes ? o.heap_bytes : 65536 + 4 * shmcfg__schema_strings_bytes(b);
	if (heap > SEG_MAX_HEAP_BYTES || heap < 64) {
		shmcfg__schema_built_free(b);
		shmcfg_schema_free(own);
		return shmcfg__err(-EINVAL, "heap of %llu bytes per slot is out of range",
				   (unsigned long long)heap);
	}
	struct seg_header lay = {
		.magic = SEG_MAGIC,
		.layout_version = SEG_LAYOUT_VERSION,
		.header_size = sizeof(struct seg_header),
		.nopts = (uint32_t)n,
		.schema_off = SEG_HEADER_BYTES,
		.schema_size = shmcfg__schema_bytes(b),
		.nreaders = o.readers,
		.nslots = o.slots,
		.cells_off = SLOT_CELLS_OFF,
		.create_time_ns = now_ns(CLOCK_REALTIME),
		.create_uid = getuid(),
		.create_pid = getpid(),
	};
	if (getrandom(lay.instance, sizeof lay.instance, 0) != (ssize_t)sizeof lay.instance) {
		/* no entropy yet (early boot): time and pid still tell incarnations apart */
		uint64_t w[2] = {lay.create_time_ns, (uint64_t)getpid()};
		memcpy(lay.instance, w, 16);
	}
	lay.log_off = align64(lay.schema_off + lay.schema_size);
	lay.readers_off = align64(lay.log_off + SEG_LOG_ENTRIES * sizeof(struct log_ent));
	lay.slots_off = align64(lay.readers_off + (uint64_t)o.readers * sizeof(struct reader_ent));
	lay.layers_off = lay.cells_off + n * sizeof(struct shmcfg__cell);
	lay.heap_off = lay.layers_off + n * NLAYERS * sizeof(struct shmcfg__cell);
	lay.heap_size = heap;
	lay.slot_size = align64(lay.heap_off + heap);
	lay.total_size = lay.slots_off + lay.slot_size * o.slots;

	shmcfg *h = handle_new(name, false);
	if (!h) {
		r = -ENOMEM;
		goto fail_built;
	}
	/* --force: the old segment is retired (its processes learn it) and removed */
	if ((o.flags & SHMCFG_CREATE_FORCE) && (r = remove_segment(name, path, lock, true)))
		goto fail_handle;
	/* O_EXCL|O_NOFOLLOW: nothing planted under the name is followed or reused */
	h->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, o.mode);
	if (h->fd < 0) {
		r = -errno;
		shmcfg__err(r, "%s: %s", name,
			    r == -EEXIST ? "segment exists (remove it first, or force)" : strerror(-r));
		goto fail_handle;
	}
	shmcfg__fault("create.opened");
	/* the umask must not narrow the mode the caller asked for */
	if (fchmod(h->fd, o.mode) < 0 ||
	    (o.gid != 0 && o.gid != (gid_t)-1 && fchown(h->fd, (uid_t)-1, o.gid) < 0)) {
		r = shmcfg__err(-errno, "%s: cannot set mode %o / group %d: %s", name,
				(unsigned)o.mode, (int)o.gid, strerror(errno));
		goto fail_unlink;
	}
	/* reserve every page now: a full /dev/shm fails here, not later with SIGBUS */
	r = -posix_fallocate(h->fd, 0, (off_t)lay.total_size);
	if (r) {
		shmcfg__err(r, "%s: cannot allocate %llu bytes in /dev/shm: %s", name,
			    (unsigned long long)lay.total_size, strerror(-r));
		goto fail_unlink;
	}
	shmcfg__fault("create.allocated");
	void *schema_bytes = malloc(lay.schema_size);
	if (!schema_bytes) {
		r = -ENOMEM;
		goto fail_unlink;
	}
	shmcfg__schema_write(b, schema_bytes, lay.schema_hash);
	bool written = pwrite(h->fd, schema_bytes, lay.schema_size, (off_t)lay.schema_off) == (ssize_t)lay.schema_size &&
		       pwrite(h->fd, &lay, sizeof lay, 0) == (ssize_t)sizeof lay;
	free(schema_bytes);
	if (!written) {
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
	r = handle_setup(h, &st, NULL);
	if (!r)
		r = lock_create(h, lock, o.mode, o.gid);
	if (!r)
		r = shmcfg__commit_env(h, o.flags & SHMCFG_CREATE_NO_ENV ? NULL : o.envp ? o.envp : environ,
				       !(o.flags & SHMCFG_CREATE_NO_ENV));
	if (r)
		goto fail_unlink;
	shmcfg__fault("create.gen1");
	/* Pairs with the acquire load of `ready` in handle_map(): an attacher
	 * that sees SEG_READY sees the whole header, schema and generation 1. */
	__atomic_store_n(&h->hdr->ready, SEG_READY, __ATOMIC_RELEASE);
	h->lay.ready = SEG_READY;
	shmcfg__schema_built_free(b);
	shmcfg_schema_free(own);
	open_add(h);
	*ret = h;
	return 0;
fail_unlink:
	unlink(path);
	if (h->lock_fd >= 0)
		unlink(lock);
fail_handle:
	handle_free(h);
fail_built:
	shmcfg__schema_built_free(b);
	shmcfg_schema_free(own);
	return r;
}

const char *shmcfg_name(const shmcfg *h)
{
	SHMCFG_API_KEEP;
	return h ? h->name : NULL;
}

uint32_t shmcfg_count(const shmcfg *h)
{
	SHMCFG_API_KEEP;
	return h ? h->lay.nopts : 0;
}

bool shmcfg_readonly(const shmcfg *h)
{
	SHMCFG_API_KEEP;
	return h && h->rdonly;
}

void shmcfg_schema_hash(const shmcfg *h, uint8_t out[16])
{
	SHMCFG_API_KEEP;
	memcpy(out, h->lay.schema_hash, 16);
}

int shmcfg_stat(const shmcfg *h, shmcfg_info *ret)
{
	SHMCFG_API_ENTRY;
	assert_return(h && ret, -EINVAL);
	memset(ret, 0, sizeof *ret);
	ret->layout_version = h->lay.layout_version;
	ret->size = h->size;
	ret->nopts = h->lay.nopts;
	ret->nslots = h->lay.nslots;
	ret->nreaders = h->lay.nreaders;
	ret->heap_bytes = h->lay.heap_size;
	memcpy(ret->schema_hash, h->lay.schema_hash, 16);
	ret->create_time_ns = h->lay.create_time_ns;
	ret->create_uid = h->lay.create_uid;
	ret->create_pid = h->lay.create_pid;
	for (uint32_t s = 0; s < h->lay.nslots; s++)
		ret->slot_gen[s] = STAMP_GEN(__atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE));
	ret->retired = shmcfg_retired(h);
	ret->readers_hwm = shmcfg__readers_hwm(h);
	ret->copy_fallbacks = __atomic_load_n(&h->hdr->copy_fallbacks, __ATOMIC_RELAXED);
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	ret->generation = cur_gen(cur);
	if (cur_slot(cur) < h->lay.nslots) {
		const struct slot_hdr *sl = slot_at(h, cur_slot(cur));
		ret->heap_used = sl->heap_used;
	}
	ret->generation = shmcfg_config_hash(h, ret->config_hash);
	return 0;
}

/*
 * The consistency check. Shallow: the header against the object's real size
 * and the schema copy. Deep: also every published slot, copied under its
 * seqlock, its checksum, and every cell's bounds.
 */
int shmcfg_check(const shmcfg *h, bool deep, void (*fn)(const char *problem, void *ud), void *ud)
{
	SHMCFG_API_ENTRY;
	assert_return(h, -EINVAL);
	int bad = 0;
	char msg[320];
#define PROBLEM(...)                                    \
	do {                                            \
		snprintf(msg, sizeof msg, __VA_ARGS__); \
		if (fn)                                 \
			fn(msg, ud);                    \
		bad++;                                  \
	} while (0)
	struct stat st;
	struct seg_header now;
	memcpy(&now, h->hdr, sizeof now);
	if (fstat(h->fd, &st) < 0)
		PROBLEM("fstat: %s", strerror(errno));
	else if (header_check(&now, (uint64_t)st.st_size, h->name))
		PROBLEM("%s", shmcfg_errdetail());
	else if (memcmp(&now, &h->lay, offsetof(struct seg_header, current)) != 0)
		PROBLEM("header changed since attach");
	if (now.ready != SEG_READY)
		PROBLEM("segment is not marked initialised");
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, XXH3_128bits(h->base + h->lay.schema_off, h->lay.schema_size));
	if (memcmp(canon.digest, h->lay.schema_hash, 16) != 0)
		PROBLEM("schema region was modified (hash mismatch)");
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	if (cur_slot(cur) >= h->lay.nslots || cur_gen(cur) == 0)
		PROBLEM("current (%llx) names slot %u of %u", (unsigned long long)cur, cur_slot(cur),
			h->lay.nslots);
	if (!deep || bad)
		return bad;
	char *copy = malloc(h->lay.slot_size);
	if (!copy) {
		PROBLEM("out of memory");
		return bad;
	}
	for (uint32_t s = 0; s < h->lay.nslots; s++) {
		uint64_t gen = __atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE);
		if (gen == 0 || (gen & SLOT_BUSY))
			continue; /* empty, or being written */
		if (!shmcfg__seq_copy(h, (gen << SHMCFG__SLOT_BITS) | s, copy))
			continue; /* rewritten while we looked: not a problem */
		const struct slot_hdr *sl = (const struct slot_hdr *)copy;
		if (sl->heap_used > h->lay.heap_size) {
			PROBLEM("slot %u (generation %llu): heap use %llu beyond its size", s,
				(unsigned long long)gen, (unsigned long long)sl->heap_used);
			continue;
		}
		if (shmcfg__slot_checksum(h, copy) != sl->checksum) {
			PROBLEM("slot %u (generation %llu): checksum mismatch", s, (unsigned long long)gen);
			continue;
		}
		const struct shmcfg__cell *cells = slot_cells(h, copy);
		const char *heap = slot_heap(h, copy);
		for (uint32_t i = 0; i < h->lay.nopts; i++) {
			shmcfg_value v;
			if (shmcfg__value_from_cell(&cells[i], heap, h->lay.heap_size, &v) ||
			    v.type != h->desc[i].type) {
				PROBLEM("slot %u (generation %llu): option %s has a bad cell", s,
					(unsigned long long)gen, sstr(h, h->desc[i].name));
				break;
			}
		}
	}
	free(copy);
	return bad;
#undef PROBLEM
}
