/*
 * Segments: creation, attach (with validation of every size and offset
 * before use), detach, unlink, and the consistency check.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

extern char **environ;

#define READY_WAIT_MS 1000

static int name_check(const char *name, char path[static sizeof SEG_PREFIX + SEG_NAME_MAX])
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
	snprintf(path, sizeof SEG_PREFIX + SEG_NAME_MAX, SEG_PREFIX "%s", name);
	return 0;
}

static uint64_t align64(uint64_t x)
{
	return (x + 63) & ~63ull;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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
	    hd->heap_size >= UINT32_MAX || hd->heap_size < 2)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: bad slot layout", name);
	return 0;
}

static void handle_free(shmcfg *h)
{
	if (!h)
		return;
	if (h->base)
		munmap(h->base, h->size);
	if (h->fd >= 0)
		close(h->fd);
	pthread_mutex_destroy(&h->view_lock);
	pthread_mutex_destroy(&h->commit_lock);
	free(h->schema_copy);
	free((void *)h->warned);
	free(h->name);
	free(h);
}

/*
 * Map an opened object and validate it; fills h. The header and the schema
 * are copied into private memory first, and only the copies are used: a
 * process that scribbles on the segment later cannot make us read out of
 * bounds through them.
 */
static int handle_setup(shmcfg *h, const uint8_t *expect_hash);

/* Wait until the object is sized and its creator stored `ready`, then map it. */
static int handle_map(shmcfg *h, const uint8_t *expect_hash)
{
	struct stat st;
	uint64_t deadline = 0;
	for (;;) {
		if (fstat(h->fd, &st) < 0)
			return shmcfg__err(-errno, "%s: fstat: %s", h->name, strerror(errno));
		if ((uint64_t)st.st_size >= SEG_HEADER_BYTES) {
			/* the creator sizes the object before anything else, then
			 * stores `ready` last: wait briefly for a creator at work */
			struct seg_header *hd = mmap(NULL, SEG_HEADER_BYTES, PROT_READ, MAP_SHARED, h->fd, 0);
			if (hd == MAP_FAILED)
				return shmcfg__err(-errno, "%s: mmap: %s", h->name, strerror(errno));
			uint32_t ready = __atomic_load_n(&hd->ready, __ATOMIC_ACQUIRE);
			uint64_t magic = hd->magic;
			munmap(hd, SEG_HEADER_BYTES);
			if (ready == SEG_READY)
				break;
			if (magic != 0 && magic != SEG_MAGIC)
				return shmcfg__err(SHMCFG_E_MAGIC, "%s: not a shmcfg segment", h->name);
		} else if (st.st_size > 0)
			return shmcfg__err(SHMCFG_E_CORRUPT,
					   "%s: object has %lld bytes, less than a header (truncated?)",
					   h->name, (long long)st.st_size);
		uint64_t now = realtime_ns();
		if (!deadline)
			deadline = now + READY_WAIT_MS * 1000000ull;
		if (now >= deadline)
			return shmcfg__err(SHMCFG_E_NOTREADY,
					   "%s: segment was never initialised (its creator died?); remove it with shmctl rm",
					   h->name);
		usleep(2000);
	}
	h->size = (size_t)st.st_size;
	h->base = mmap(NULL, h->size, h->rdonly ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
		       h->fd, 0);
	if (h->base == MAP_FAILED) {
		h->base = NULL;
		return shmcfg__err(-errno, "%s: mmap: %s", h->name, strerror(errno));
	}
	return handle_setup(h, expect_hash);
}

/* Validate a mapped segment and build the handle's private copies. */
static int handle_setup(shmcfg *h, const uint8_t *expect_hash)
{
	h->hdr = (struct seg_header *)h->base;
	memcpy(&h->lay, h->hdr, sizeof h->lay);
	int r = header_check(&h->lay, h->size, h->name);
	if (r)
		return r;
	h->schema_copy = malloc(h->lay.schema_size);
	if (!h->schema_copy)
		return -ENOMEM;
	memcpy(h->schema_copy, h->base + h->lay.schema_off, h->lay.schema_size);
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

static shmcfg *handle_new(const char *name, bool rdonly)
{
	shmcfg *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->fd = -1;
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

int shmcfg_attach(const char *name, unsigned flags, const uint8_t *expect_schema_hash, shmcfg **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(ret, -EINVAL);
	char path[sizeof SEG_PREFIX + SEG_NAME_MAX];
	int r = name_check(name, path);
	if (r)
		return r;
	bool rdonly = flags & SHMCFG_ATTACH_RDONLY;
	shmcfg *h = handle_new(name, rdonly);
	if (!h)
		return -ENOMEM;
	h->fd = shm_open(path, rdonly ? O_RDONLY : O_RDWR, 0);
	if (h->fd < 0) {
		r = -errno;
		handle_free(h);
		return shmcfg__err(r, "%s: %s", name,
				   r == -ENOENT ? "no such segment" : strerror(-r));
	}
	r = handle_map(h, expect_schema_hash);
	if (!r && !rdonly)
		r = shmcfg__reader_claim(h);
	if (r) {
		handle_free(h);
		return r;
	}
	*ret = h;
	return 0;
}

shmcfg *shmcfg_close(shmcfg *h)
{
	SHMCFG_API_KEEP;
	if (!h)
		return NULL;
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

int shmcfg_unlink(const char *name)
{
	SHMCFG_API_ENTRY;
	char path[sizeof SEG_PREFIX + SEG_NAME_MAX];
	int r = name_check(name, path);
	if (r)
		return r;
	if (shm_unlink(path) < 0) {
		r = -errno;
		return shmcfg__err(r, "%s: %s", name, r == -ENOENT ? "no such segment" : strerror(-r));
	}
	return 0;
}

int shmcfg_create(const char *name, const shmcfg_schema *schema, const shmcfg_create_opts *opts,
		  shmcfg **ret)
{
	SHMCFG_API_ENTRY;
	assert_return(ret, -EINVAL);
	char path[sizeof SEG_PREFIX + SEG_NAME_MAX];
	int r = name_check(name, path);
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
	if (heap >= UINT32_MAX || heap < 64) {
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
		.create_time_ns = realtime_ns(),
		.create_uid = getuid(),
		.create_pid = getpid(),
	};
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
	if ((o.flags & SHMCFG_CREATE_FORCE) && shm_unlink(path) < 0 && errno != ENOENT) {
		r = shmcfg__err(-errno, "%s: cannot remove the existing segment: %s", name, strerror(errno));
		goto fail_handle;
	}
	/* glibc's shm_open adds O_NOFOLLOW and O_CLOEXEC: no symlink is followed */
	h->fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, o.mode);
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
	h->size = lay.total_size;
	h->base = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
	if (h->base == MAP_FAILED) {
		h->base = NULL;
		r = shmcfg__err(-errno, "%s: mmap: %s", name, strerror(errno));
		goto fail_unlink;
	}
	shmcfg__schema_write(b, h->base + lay.schema_off, lay.schema_hash);
	memcpy(h->base, &lay, sizeof lay);
	shmcfg__fault("create.schema");
	/* from here on the creator reads its segment as any attacher would */
	r = handle_setup(h, NULL);
	if (!r)
		r = shmcfg__reader_claim(h);
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
	*ret = h;
	return 0;
fail_unlink:
	shm_unlink(path);
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
		ret->slot_gen[s] = __atomic_load_n(&slot_at(h, s)->gen, __ATOMIC_ACQUIRE);
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
		if (gen == 0)
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
