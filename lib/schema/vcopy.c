/* SPDX-License-Identifier: MIT */
/*
 * The validated copy of a schema: one per schema and user, in /dev/shm
 * (doc/design.md, "The validated copy").
 *
 * A segment's creator, once it has validated the big schema it built,
 * writes it with every option's verdict to SHM_DIR
 * "/shmcfg-schema.HASH.UID": only bytes it built itself (the region it
 * validated is compared with its builder's), HASH the schema hash, owned by
 * its uid, mode 0400, written unnamed (O_TMPFILE) and linked only once
 * whole, so that the name never shows a part and a writer killed on the way
 * leaves nothing. A later attach by the same uid, of the same library
 * version, of a segment whose header names that hash and whose schema header
 * is the copy's maps the copy shared instead of copying the region
 * privately page by page, and validates nothing again: no one but that uid
 * (and root) can write the file, and the uid trusts its own processes
 * already. A writer who makes its segment's header name the hash of a
 * schema the uid created gives that segment's readers of that uid the
 * schema they created, validated: nothing it chose. What the copy spares is
 * a fresh process's first uses of options (two page copies and a validation
 * each: issue 26's first commits at 100,000 options), and a private copy of
 * the schema in each process that uses it all.
 *
 * Everything here is best effort: a copy that cannot be written or trusted
 * is not used, and the private copy is made as without it.
 */
#include "internal.h"
#include "schema.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define VCOPY_PREFIX "/shmcfg-schema."
#define VCOPY_MAGIC 0x59504f4347464d53ull /* "SMFGCOPY" */
#define VCOPY_MODE 0400
/* SHM_DIR VCOPY_PREFIX, 32 hex digits, '.', a uid */
#define VCOPY_PATH_BYTES (sizeof SHM_DIR + sizeof VCOPY_PREFIX + 32 + 1 + 20)

/* The file: this header, a verdict byte per option (opt_ok's, every one
 * OPT_OK), then the schema region at a 64-byte boundary. */
struct vcopy_hdr {
	uint64_t magic;
	uint32_t layout_version; /* SEG_LAYOUT_VERSION */
	uint32_t nopts;
	uint64_t schema_size;
	uint64_t schema_at;      /* schema_at(nopts) */
	uint8_t schema_hash[16]; /* the builder's */
	uint32_t lib_version;    /* SHMCFG_VERSION_HEX: another library's validation may differ */
	uint32_t pad[3];
};
_Static_assert(sizeof(struct vcopy_hdr) == 64, "the copy's header");

/* Schemas up to this size are copied whole by attach anyway (validate.c):
 * no file for them. The test copy of the library lets tests make copies of
 * small schemas. */
#define VCOPY_MIN_BYTES (2u << 20)
#ifdef SHMCFG_WITH_FAULTS
__attribute__((visibility("default"))) size_t shmcfg__vcopy_min_bytes = VCOPY_MIN_BYTES;
#else
#define shmcfg__vcopy_min_bytes VCOPY_MIN_BYTES
#endif

bool shmcfg__vcopy_wanted(const shmcfg *h)
{
	return SEG_HEADER_BYTES + h->lay.schema_size > shmcfg__vcopy_min_bytes;
}

static uint64_t schema_at(uint32_t nopts)
{
	return (sizeof(struct vcopy_hdr) + (uint64_t)nopts + 63) & ~(uint64_t)63;
}

static void vcopy_path(char out[VCOPY_PATH_BYTES], const uint8_t hash[16], uid_t uid)
{
	char hex[33];
	shmcfg__hex16(hash, hex);
	snprintf(out, VCOPY_PATH_BYTES, SHM_DIR VCOPY_PREFIX "%s.%u", hex, (unsigned)uid);
}

/* The copy behind fd, mapped, if it is one h may trust; MAP_FAILED if not. */
static char *copy_map(const shmcfg *h, int fd, bool populate)
{
	struct stat st;
	uint64_t at = schema_at(h->lay.nopts), size = at + h->lay.schema_size;
	/* the uid's own file, which no one else may read or write: as written */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != VCOPY_MODE ||
	    (uint64_t)st.st_size != size)
		return MAP_FAILED;
	char *m = shmcfg__mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
	if (m == MAP_FAILED)
		return m;
	const struct vcopy_hdr *vh = (const struct vcopy_hdr *)m;
	/* this segment's schema: the hash its header names, and the header
	 * attach read from it (the handle reads the regions by it) */
	bool ok = vh->magic == VCOPY_MAGIC && vh->layout_version == SEG_LAYOUT_VERSION &&
		  vh->lib_version == SHMCFG_VERSION_HEX && vh->nopts == h->lay.nopts &&
		  vh->schema_size == h->lay.schema_size && vh->schema_at == at &&
		  !memcmp(vh->schema_hash, h->lay.schema_hash, 16) && !memcmp(m + at, &h->sch_copy, sizeof h->sch_copy);
	const unsigned char *v = (const unsigned char *)m + sizeof *vh;
	unsigned char bad = 0;
	for (uint32_t i = 0; ok && i < h->lay.nopts; i++)
		bad |= (unsigned char)((v[i] & ~OPT_PLAIN) ^ OPT_OK);
	if (!ok || bad) {
		munmap(m, (size_t)size);
		return MAP_FAILED;
	}
	return m;
}

/*
 * Attach (shmcfg__schema_open, before the private mapping): map this uid's
 * copy of h's schema if there is one to trust, its pages mapped now for a
 * writer of a segment up to SEG_WRITER_MAP_BYTES (its commits' first uses
 * then fault on nothing; segment.c maps the segment's too) or with
 * SHMCFG_ATTACH_PREFAULT, and on first read otherwise. Returns the schema
 * region's address in it, with h->priv, priv_size, the verdicts and WHOLE_*
 * set; NULL if there is none.
 */
const char *shmcfg__vcopy_open(shmcfg *h)
{
	if (!shmcfg__vcopy_wanted(h))
		return NULL;
	char path[VCOPY_PATH_BYTES];
	vcopy_path(path, h->lay.schema_hash, geteuid());
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *m = copy_map(h, fd, attach_maps_all(h));
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	/* the handle is not shared yet: plain stores */
	memcpy(h->opt_ok, m + sizeof(struct vcopy_hdr), h->lay.nopts);
	h->whole_ok[WHOLE_PRIVATE] = h->whole_ok[WHOLE_ALL] = 1;
	h->priv = m;
	h->priv_size = (size_t)(schema_at(h->lay.nopts) + h->lay.schema_size);
	h->vcopy = true;
	return m + schema_at(h->lay.nopts);
}

static int write_all(int fd, const void *p, size_t n, off_t off)
{
	for (const char *c = p; n;) {
		ssize_t w = pwrite(fd, c, n, off);
		if (w <= 0)
			return -1;
		c += w, n -= (size_t)w, off += w;
	}
	return 0;
}

/* Whether a copy h may trust is at path. */
static bool copy_there(const shmcfg *h, const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	char *m = copy_map(h, fd, false);
	close(fd);
	if (m == MAP_FAILED)
		return false;
	munmap(m, (size_t)(schema_at(h->lay.nopts) + h->lay.schema_size));
	return true;
}

/*
 * h's creator, after h's schema was validated whole (every option passed):
 * write this uid's copy of it if there is none it may trust, from h's
 * private copy, which the validation pinned whole, only if that is byte for
 * byte what the creator built (@p built, hashed @p built_hash: a writer may
 * have changed the object between its creation and h's pread of the header
 * or the pins), h's header names that hash, and the region's header is the
 * one h reads the regions by. Best effort; the caller's error state is kept.
 */
void shmcfg__vcopy_make(const shmcfg *h, const void *built, const uint8_t built_hash[16])
{
	if (!shmcfg__vcopy_wanted(h) || h->vcopy || !__atomic_load_n(&h->whole_ok[WHOLE_ALL], __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&h->whole_ok[WHOLE_PRIVATE], __ATOMIC_ACQUIRE))
		return;
	uint32_t n = h->lay.nopts;
	const char *region = h->priv + h->lay.schema_off;
	if (memcmp(h->lay.schema_hash, built_hash, 16) || memcmp(region, built, (size_t)h->lay.schema_size) ||
	    memcmp(region, &h->sch_copy, sizeof h->sch_copy))
		return;
	char path[VCOPY_PATH_BYTES];
	vcopy_path(path, h->lay.schema_hash, geteuid());
	if (copy_there(h, path))
		return;
	uint64_t at = schema_at(n);
	char *head = shmcfg__calloc(1, (size_t)at);
	int fd = head ? open(SHM_DIR, O_TMPFILE | O_WRONLY | O_CLOEXEC, VCOPY_MODE) : -1;
	bool ok = fd >= 0 && fchmod(fd, VCOPY_MODE) == 0;
	if (ok) {
		struct vcopy_hdr *vh = (struct vcopy_hdr *)head;
		*vh = (struct vcopy_hdr){.magic = VCOPY_MAGIC,
					 .layout_version = SEG_LAYOUT_VERSION,
					 .nopts = n,
					 .schema_size = h->lay.schema_size,
					 .schema_at = at,
					 .lib_version = SHMCFG_VERSION_HEX};
		memcpy(vh->schema_hash, h->lay.schema_hash, 16);
		/* every verdict set (WHOLE_ALL: each option passed); another
		 * thread may be storing the same values meanwhile */
		unsigned char *v = (unsigned char *)head + sizeof *vh;
		for (uint32_t i = 0; i < n; i++)
			v[i] = __atomic_load_n(&h->opt_ok[i], __ATOMIC_RELAXED);
		ok = write_all(fd, head, (size_t)at, 0) == 0 &&
		     write_all(fd, region, (size_t)h->lay.schema_size, (off_t)at) == 0;
	}
	shmcfg__fault("vcopy.written");
	/* linked whole under its name, or not at all; one there that is not
	 * a copy to trust (of another layout, say) and is this uid's own is
	 * replaced: a stranger's stays, and is never used */
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	for (int tries = 0; ok && tries < 2; tries++) {
		if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0 || errno != EEXIST)
			break;
		struct stat st;
		if (copy_there(h, path) || lstat(path, &st) || st.st_uid != geteuid() || unlink(path))
			break;
	}
	if (fd >= 0)
		close(fd);
	shmcfg__free(head);
}

/* Whether hex is 32 lower-case hex digits followed by ".UID" (digits). */
static bool copy_name(const char *s, char hex[33], unsigned long *uid)
{
	for (int i = 0; i < 32; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	if (s[32] != '.' || s[33] < '0' || s[33] > '9')
		return false;
	char *end;
	*uid = strtoul(s + 33, &end, 10);
	memcpy(hex, s, 32);
	hex[32] = 0;
	return *end == 0;
}

/*
 * The schema hashes (hex) of the segments in the directory d of this layout
 * that this process can read, in *hashes (freed by the caller): 0, or -1
 * with no verdict (out of descriptors or memory: then no copy may be judged
 * unused). An entry that cannot be opened otherwise is not a segment this
 * process can attach, nor one whose copies it could use.
 */
static int segment_hashes(DIR *d, char (**hashes)[33], size_t *n)
{
	size_t cap = 0;
	const char *seg = SEG_PREFIX + 1;
	*hashes = NULL;
	*n = 0;
	rewinddir(d);
	for (struct dirent *e; (e = readdir(d));) {
		if (strncmp(e->d_name, seg, strlen(seg)))
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				return -1;
			continue;
		}
		struct stat st;
		struct seg_header hd;
		bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, &hd, sizeof hd, 0) == (ssize_t)sizeof hd &&
			  hd.magic == SEG_MAGIC && hd.layout_version == SEG_LAYOUT_VERSION;
		close(fd);
		if (!ok)
			continue;
		if (*n == cap) {
			void *more = shmcfg__realloc(*hashes, (cap = cap ? 2 * cap : 16) * sizeof **hashes);
			if (!more)
				return -1;
			*hashes = more;
		}
		shmcfg__hex16(hd.schema_hash, (*hashes)[(*n)++]);
	}
	return 0;
}

static bool has_hash(char (*hashes)[33], size_t n, const char *hex)
{
	for (size_t k = 0; k < n; k++)
		if (!strcmp(hashes[k], hex))
			return true;
	return false;
}

/* A segment of this schema hash was removed or replaced by another schema:
 * the copies of it this process may remove (its own; every user's, for
 * root), unless a segment it can read still has that schema. */
void shmcfg__vcopy_remove(const uint8_t hash[16])
{
	char hex[33], prefix[64];
	shmcfg__hex16(hash, hex);
	int len = snprintf(prefix, sizeof prefix, "%s%s.", VCOPY_PREFIX + 1, hex);
	DIR *d = opendir(SHM_DIR);
	if (!d)
		return;
	char(*hashes)[33];
	size_t nh;
	if (segment_hashes(d, &hashes, &nh) == 0 && !has_hash(hashes, nh, hex)) {
		rewinddir(d);
		for (struct dirent *de; (de = readdir(d));)
			if (!strncmp(de->d_name, prefix, (size_t)len))
				(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	shmcfg__free(hashes);
	closedir(d);
}

/*
 * Orphaned copies (shmcfg_orphans with no name): this uid's (any uid's, for
 * root) whose schema hash no segment of this layout that this process can
 * read names: the segments they were made for were removed by hand, or by
 * another user. Out of descriptors or memory, none is judged. Returns how
 * many.
 */
int shmcfg__vcopy_orphans(unsigned flags, void (*fn)(const shmcfg_orphan *o, void *userdata), void *userdata)
{
	DIR *d = opendir(SHM_DIR);
	if (!d)
		return 0;
	char(*hashes)[33];
	size_t nh;
	bool known = segment_hashes(d, &hashes, &nh) == 0;
	const char *cp = VCOPY_PREFIX + 1;
	int n = 0;
	uid_t euid = geteuid();
	rewinddir(d);
	for (struct dirent *e; known && (e = readdir(d));) {
		char hex[33], path[sizeof SHM_DIR + 257];
		unsigned long uid;
		struct stat st;
		if (strncmp(e->d_name, cp, strlen(cp)) || !copy_name(e->d_name + strlen(cp), hex, &uid) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || (st.st_uid != euid && euid != 0))
			continue;
		if (has_hash(hashes, nh, hex))
			continue;
		snprintf(path, sizeof path, SHM_DIR "/%s", e->d_name);
		shmcfg_orphan o = {.name = hex, .path = path, .uid = st.st_uid};
		if (flags & SHMCFG_ORPHANS_REMOVE) {
			if (unlinkat(dirfd(d), e->d_name, 0) == 0)
				o.removed = true;
			else if (errno == ENOENT)
				continue; /* removed meanwhile */
			else
				o.error = -errno;
		}
		n++;
		if (fn)
			fn(&o, userdata);
	}
	shmcfg__free(hashes);
	closedir(d);
	return n;
}
