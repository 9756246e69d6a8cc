/* SPDX-License-Identifier: MIT */
/*
 * The objects of /dev/shm and who may be trusted with them: names and paths,
 * opening (regular files only, never blocking, never following a link),
 * owners, the lock object that holds the writer lock and the reader entries'
 * liveness locks (doc/design.md, "Trust"), removal and retirement, the
 * processes that have a segment mapped, and the lock objects whose segment
 * is gone (orphans).
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The name as an error may show it: one line, bytes outside printable ASCII
 * as \xNN (a name can come from anyone's file in /dev/shm), and the quote
 * and the backslash so too, so that a list of names quoted '...' reads one
 * way; at most 80 bytes of it and "..." (len > 90 for room for it). */
void shmcfg__name_text(const char *name, char *out, size_t len)
{
	size_t o = 0;
	const unsigned char *p = (const unsigned char *)name;
	for (; *p && o + 5 < len && o < 80; p++)
		o += (size_t)snprintf(out + o, len - o, *p >= 0x20 && *p < 0x7f && *p != '\'' && *p != '\\' ? "%c" : "\\x%02x",
				      *p);
	if (*p && o + 4 <= len)
		memcpy(out + o, "...", 3), o += 3;
	out[o] = 0;
}

int shmcfg__name_check(const char *name, char path[static PATH_BYTES])
{
	size_t len = name ? strlen(name) : 0;
	char shown[128];
	shmcfg__name_text(name ? name : "", shown, sizeof shown);
	if (len == 0 || len > SEG_NAME_MAX || name[0] == '.')
		return shmcfg__err(-EINVAL, "segment name '%s' must be 1-%d characters, not starting with '.'",
				   shown, SEG_NAME_MAX);
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-')) {
			char c[8];
			shmcfg__name_text((char[]){*p, 0}, c, sizeof c);
			return shmcfg__err(-EINVAL, "segment name '%s': character '%s' is not allowed (use [A-Za-z0-9._-])",
					   shown, c);
		}
	snprintf(path, PATH_BYTES, SHM_DIR SEG_PREFIX "%s", name);
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
/*
 * Why a segment may be missing here though it exists: this process sees
 * another /dev/shm than the host's (a container's private one, Docker's 64
 * MiB default; another mount or IPC namespace than init's). "" when
 * nothing says so. doc/deployment.md.
 */
static void shm_elsewhere(char *buf, size_t len)
{
	char self[64] = "", init[64] = "";
	bool other_ns = false;
	const char *ns[] = {"mnt", "ipc"};
	for (int i = 0; i < 2 && !other_ns; i++) {
		char p[32];
		snprintf(p, sizeof p, "/proc/self/ns/%s", ns[i]);
		ssize_t a = readlink(p, self, sizeof self - 1);
		snprintf(p, sizeof p, "/proc/1/ns/%s", ns[i]);
		ssize_t b = readlink(p, init, sizeof init - 1); /* not ours to read: no verdict */
		other_ns = a > 0 && b > 0 && (a != b || memcmp(self, init, (size_t)a) != 0);
	}
	struct statvfs vs;
	uint64_t mib = statvfs(SHM_DIR, &vs) == 0 ? (uint64_t)vs.f_blocks * vs.f_frsize >> 20 : 0;
	/* in a container whose init we cannot compare with (we are in its
	 * namespaces): Docker's private /dev/shm is 64 MiB unless --shm-size */
	bool container = mib && mib <= 64 &&
			 (access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0 || getenv("container"));
	buf[0] = 0;
	if (other_ns || container)
		snprintf(buf, len, " in this process's /dev/shm (%llu MiB): it runs in %s, whose /dev/shm is its own; "
			 "share the host's (doc/deployment.md)", (unsigned long long)mib,
			 other_ns ? "another mount or IPC namespace than init" : "a container");
}

int shmcfg__open_regular(const char *path, const char *name, int flags, int *fd_ret, struct stat *st)
{
	int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ENXIO || e == EISDIR) /* a socket; a directory opened for writing */
			return shmcfg__err(SHMCFG_E_MAGIC, "%s: %s is %s, not a segment", name, path,
					   e == ENXIO ? "a socket" : "a directory");
		char where[300] = "";
		if (e == ENOENT)
			shm_elsewhere(where, sizeof where);
		return shmcfg__err(-e, "%s: %s%s", name,
				   e == ENOENT ? "no such segment" : e == ELOOP ? "is a symbolic link, not a segment" : strerror(e),
				   where);
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
void shmcfg__user_text(uid_t uid, char *buf, size_t len)
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
int shmcfg__owner_check(const char *name, const struct stat *st, const shmcfg_attach_opts *o)
{
	bool ok = (o->flags & SHMCFG_ATTACH_OWNER) ? st->st_uid == o->owner
						   : st->st_uid == geteuid() || st->st_uid == 0;
	if (ok)
		return 0;
	char who[300], want[300];
	shmcfg__user_text(st->st_uid, who, sizeof who);
	if (o->flags & SHMCFG_ATTACH_OWNER) {
		shmcfg__user_text(o->owner, want, sizeof want);
		return shmcfg__err(SHMCFG_E_OWNER, "%s: segment is owned by uid %s, not by the expected owner %s",
				   name, who, want);
	}
	return shmcfg__err(SHMCFG_E_OWNER,
			   "%s: segment is owned by uid %s, not by you or root (name the owner to trust it: --owner)",
			   name, who);
}

/*
 * The writer lock and the reader entries' liveness locks are OFD locks on a
 * companion object, /dev/shm/shmcfg-lock.NAME.INSTANCE, not on the segment:
 * an OFD read lock needs only a read-only descriptor, so on the segment any
 * reader could take the writer lock or keep dead readers "alive". The lock
 * object grants read and write to exactly the permission classes that may
 * write the segment (0644 -> 0600, 0664 -> 0660), so only writers can open
 * it. Its name carries the segment's random instance id: a stranger cannot
 * plant it in advance (the creator makes it, O_EXCL, before the id appears
 * in the segment), and an attacher never pairs a segment with the lock
 * object of another incarnation of its name. It also holds the id.
 */
static mode_t lock_mode(mode_t seg_mode)
{
	mode_t m = 0;
	for (int shift = 0; shift <= 6; shift += 3)
		if (seg_mode & (0002u << shift))
			m |= 0006u << shift;
	return m;
}

/*
 * Map the lock object's page (read-write handles: the writer lock word),
 * through an open file description of its own: a mapping holds its file
 * open, and the kernel drops OFD locks only when their description closes,
 * so a mapping of lock_fd's, inherited by a forked child, would keep the
 * parent's locks (its reader entry) alive after the parent died. Returns 0
 * or -1 with errno; the mmap's failure says "mmap: ".
 */
static int lock_map(shmcfg *h, const char *path, const char **what)
{
	struct stat a, b;
	*what = "open";
	/* lock_fd's file anew, even if a replacer removed it since; without
	 * /proc by its name, where the check below sees a replacement */
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", h->lock_fd);
	int fd = open(self, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	void *p = MAP_FAILED;
	if (fstat(fd, &a) < 0 || fstat(h->lock_fd, &b) < 0)
		goto out;
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		errno = ESTALE; /* replaced under its name since we opened it */
		goto out;
	}
	*what = "mmap";
	p = shmcfg__mmap(NULL, LOCK_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p != MAP_FAILED)
		h->lock_map = p;
out:;
	int e = errno;
	close(fd);
	errno = e;
	return p == MAP_FAILED ? -1 : 0;
}

void shmcfg__lock_unmap(shmcfg *h)
{
	if (h->lock_map)
		munmap(h->lock_map, LOCK_FILE_BYTES);
	h->lock_map = NULL;
}

int shmcfg__lock_create(shmcfg *h, const uint8_t instance[16], mode_t seg_mode, gid_t gid)
{
	char path[PATH_BYTES];
	shmcfg__lock_path(h->name, instance, path);
	h->lock_fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			  lock_mode(seg_mode));
	if (h->lock_fd < 0)
		return shmcfg__err(-errno, "%s: cannot create its lock object %s: %s", h->name, path,
				   strerror(errno));
	int r = shmcfg__build_lock(h, 1, h->lock_fd, path, "lock object");
	if (r) { /* removed by a scan, or still ours to remove */
		struct stat a, b;
		if (fstat(h->lock_fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			unlink(path);
		close(h->lock_fd);
		h->lock_fd = -1;
		return r;
	}
	shmcfg__fault("lock.created"); /* an empty lock object */
	/* the whole page written: allocated, so its mapping cannot fault */
	union {
		struct lock_file lf;
		char page[LOCK_FILE_BYTES];
	} u = {.lf = {.magic = LOCK_MAGIC}};
	memcpy(u.lf.instance, instance, 16);
	if (fchmod(h->lock_fd, lock_mode(seg_mode)) < 0 ||
	    (gid != 0 && gid != (gid_t)-1 && fchown(h->lock_fd, (uid_t)-1, gid) < 0) ||
	    pwrite(h->lock_fd, u.page, sizeof u.page, 0) != (ssize_t)sizeof u.page) {
		int e = errno;
		unlink(path);
		return shmcfg__err(-e, "%s: cannot set up its lock object %s: %s", h->name, path, strerror(e));
	}
	const char *what;
	if (lock_map(h, path, &what) < 0) {
		int e = errno;
		unlink(path);
		return shmcfg__err(-e, "%s: cannot map its lock object %s: %s: %s", h->name, path, what, strerror(e));
	}
	return 0;
}

void shmcfg__lock_remove(const char *name, const uint8_t instance[16])
{
	char path[PATH_BYTES];
	shmcfg__lock_path(name, instance, path);
	if (unlink(path) < 0 && errno != ENOENT)
		shmcfg__log(SHMCFG_LOG_WARNING, "%s: cannot remove its lock object %s: %s", name, path, strerror(errno));
}

/* Open the lock object of the segment h attached: -EAGAIN when it is gone
 * (the segment was removed or replaced while we attached: try again). A
 * read-only handle opens it read-only, to tell live readers from dead ones
 * (F_OFD_GETLK needs no write access); it never locks. */
int shmcfg__lock_open(shmcfg *h, const struct stat *seg_st)
{
	char path[PATH_BYTES];
	shmcfg__lock_path(h->name, h->lay.instance, path);
	struct stat st;
	int r = shmcfg__open_regular(path, h->name, h->rdonly ? O_RDONLY : O_RDWR, &h->lock_fd, &st);
	if (r == -ENOENT) {
		shmcfg__err(SHMCFG_E_CORRUPT, "%s: its lock object %s is missing (removed by hand?): the segment cannot be written; re-create it",
			    h->name, path);
		return -EAGAIN;
	}
	if (r == -EACCES)
		return shmcfg__err(-EACCES, "%s: no write access to its lock object %s", h->name, path);
	if (r)
		return r;
	if (st.st_uid != seg_st->st_uid) {
		char who[300], seg[300];
		shmcfg__user_text(st.st_uid, who, sizeof who);
		shmcfg__user_text(seg_st->st_uid, seg, sizeof seg);
		return shmcfg__err(SHMCFG_E_OWNER, "%s: its lock object %s belongs to uid %s, the segment to uid %s",
				   h->name, path, who, seg);
	}
	struct lock_file lf;
	if (st.st_size != LOCK_FILE_BYTES || pread(h->lock_fd, &lf, sizeof lf, 0) != (ssize_t)sizeof lf ||
	    lf.magic != LOCK_MAGIC || memcmp(lf.instance, h->lay.instance, 16) != 0)
		return shmcfg__err(SHMCFG_E_CORRUPT, "%s: %s is not its lock object", h->name, path);
	shmcfg__fault("attach.lock_opened"); /* a replacer may remove it now */
	const char *what;
	if (!h->rdonly && lock_map(h, path, &what) < 0) {
		int e = errno; /* ENOENT, ESTALE (no /proc): replaced meanwhile, as above */
		shmcfg__err(-e, "%s: cannot map its lock object %s: %s: %s", h->name, path, what, strerror(e));
		return e == ENOENT || e == ESTALE ? -EAGAIN : -e;
	}
	return 0;
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

/*
 * Remove the name, then mark the object we opened retired and wake its
 * waiters: every attached process learns at its next wait (or within the
 * wait's re-check interval, from st_nlink, when we could not write the mark).
 * The lock object goes last: its name comes from the header we read first.
 */
int shmcfg__remove_segment(const char *name, const char *path, bool quiet_enoent)
{
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) /* the owner of a segment it may not write */
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	struct seg_header hd;
	bool have_hd = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		       (uint64_t)st.st_size >= SEG_HEADER_BYTES &&
		       pread(fd, &hd, sizeof hd, 0) == (ssize_t)sizeof hd && hd.magic == SEG_MAGIC &&
		       hd.layout_version == SEG_LAYOUT_VERSION;
	int r = unlink(path) < 0 ? -errno : 0;
	if (r == -EISDIR || (r == -EPERM && fd < 0 && lstat(path, &st) == 0 && S_ISDIR(st.st_mode)))
		r = rmdir(path) < 0 ? -errno : 0; /* a directory planted under the name */
	if (r) {
		if (fd >= 0)
			close(fd);
		if (r == -ENOENT && quiet_enoent)
			return 0;
		if (r == -EPERM || r == -EACCES) {
			struct stat ls;
			char who[300] = "another user";
			if (lstat(path, &ls) == 0)
				shmcfg__user_text(ls.st_uid, who, sizeof who);
			return shmcfg__err(r, "%s: cannot remove %s: it belongs to uid %s", name, path, who);
		}
		return shmcfg__err(r, "%s: %s", name, r == -ENOENT ? "no such segment" : strerror(-r));
	}
	if (have_hd) {
		struct seg_header *m = shmcfg__mmap(NULL, SEG_HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			/* release: pairs with the acquire load in shmcfg_retired();
			 * the futex bump wakes waiters as a commit does */
			uint32_t zero = 0; /* a replaced (frozen) one stays so */
			__atomic_compare_exchange_n(&m->retired, &zero, RETIRED_REMOVED, false, __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED);
			__atomic_fetch_add(&m->futex, 1, __ATOMIC_SEQ_CST);
			syscall(SYS_futex, &m->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
			munmap(m, SEG_HEADER_BYTES);
		}
		shmcfg__lock_remove(name, hd.instance);
		shmcfg__vcopy_remove(hd.schema_hash);
	} else {
		/* a header we cannot read names no instance: its lock object is
		 * one of those of this name whose segment is now gone */
		(void)shmcfg_orphans(name, SHMCFG_ORPHANS_REMOVE, NULL, NULL);
		shmcfg__clear_err();
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

int shmcfg_unlink(const char *name)
{
	SHMCFG_API_ENTRY;
	char path[PATH_BYTES];
	int r = shmcfg__name_check(name, path);
	return r ? r : shmcfg__remove_segment(name, path, false);
}

#define ATTACHED_SCAN_NS 1000000000ull

int shmcfg_attached_pids(const char *name, pid_t *pids, size_t max)
{
	SHMCFG_API_ENTRY;
	char path[PATH_BYTES];
	int r = shmcfg__name_check(name, path);
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
	/* processes of other users can make their maps as long as they like:
	 * the scan is bounded, and then reports what it found (a lower bound) */
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + ATTACHED_SCAN_NS;
	while ((de = readdir(d)) && now_ns(CLOCK_MONOTONIC) < deadline) {
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
		for (unsigned k = 1; !found && fgets(line, sizeof line, f); k++) {
			if (k % 4096 == 0 && now_ns(CLOCK_MONOTONIC) >= deadline)
				break;
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

/*
 * Orphaned lock objects: /dev/shm/shmcfg-lock.NAME.INSTANCE whose segment is
 * gone (removed with rm(1) or unlink(2), or damaged and then removed), found
 * and removed (shmcfg_orphans()). One is orphaned when what is at
 * /dev/shm/shmcfg.NAME is not, and can never again become, the incarnation
 * INSTANCE:
 *  - nothing is there, or something that is no regular file: a creator makes
 *    the segment's name (O_EXCL) before its lock object, so the incarnation
 *    that made this lock object held the name already, and a removed name
 *    never comes back with the same random instance id;
 *  - a complete segment (our magic and layout version, `ready`) of another
 *    instance id.
 * Anything else keeps it: a segment being created (the lock object is made
 * before the header is written, and only `ready`, stored last with release,
 * says the header is whole), one of another layout version, one we cannot
 * read. So a scan never takes the lock object of a creation under way (the
 * window the trust work closed stays closed).
 *
 * Only our own objects are touched: regular files under the lock prefix whose
 * bytes are a lock file (LOCK_MAGIC) carrying the instance id its name says,
 * owned by the caller, or by anyone when the caller is root. (/dev/shm is
 * sticky: between our check and our unlink only the owner or root can swap
 * the file.)
 */
#define LOCK_FILE_PREFIX (&LOCK_PREFIX[1]) /* as readdir() names it: no leading '/' */

/* Whether the segment NAME can never again be incarnation inst. */
static bool segment_gone(const char *name, const uint8_t inst[16])
{
	char path[PATH_BYTES];
	if (shmcfg__name_check(name, path)) {
		shmcfg__clear_err();
		return false; /* no name a segment could have: not ours to judge */
	}
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP;
	struct stat st;
	struct seg_header hd;
	bool gone = false;
	if (fstat(fd, &st) < 0)
		gone = false;
	else if (!S_ISREG(st.st_mode))
		gone = true; /* a planted FIFO, directory...: no creation can be under way */
	else if (pread(fd, &hd, sizeof hd, 0) == (ssize_t)sizeof hd && hd.magic == SEG_MAGIC &&
		 hd.layout_version == SEG_LAYOUT_VERSION && hd.ready == SEG_READY) {
		/* ready is stored after the header was written (release): read the
		 * instance again after seeing it */
		uint8_t now[16];
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		gone = pread(fd, now, sizeof now, offsetof(struct seg_header, instance)) == (ssize_t)sizeof now &&
		       memcmp(now, inst, sizeof now) != 0;
	}
	close(fd);
	return gone;
}

static int hex_nibble(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "NAME.INSTANCE" (the part after the prefix): NAME into name, the id into
 * inst; false if it is not of that shape. */
static bool parse_lock_name(const char *rest, char name[static SEG_NAME_MAX + 1], uint8_t inst[16])
{
	const char *dot = strrchr(rest, '.');
	if (!dot || dot == rest || (size_t)(dot - rest) > SEG_NAME_MAX || strlen(dot + 1) != 32)
		return false;
	for (int i = 0; i < 16; i++) {
		int hi = hex_nibble(dot[1 + 2 * i]), lo = hex_nibble(dot[2 + 2 * i]);
		if (hi < 0 || lo < 0)
			return false;
		inst[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(name, rest, (size_t)(dot - rest));
	name[dot - rest] = 0;
	return true;
}

/* path open if it is a lock file of ours carrying inst that we may judge
 * (or an empty one: its maker was killed before it wrote it), else -1: its
 * owner in *uid. */
static int our_lock_file(const char *path, const uint8_t inst[16], uid_t euid, uid_t *uid)
{
	/* a descriptor a forked child closes: the scan may lock it (below) */
	int fd = shmcfg__fork_open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, -1);
	if (fd < 0)
		return -1; /* gone, or another user's that we cannot read */
	struct stat st = {0};
	struct lock_file lf;
	bool ours = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (euid == 0 || st.st_uid == euid) &&
		    (st.st_size == 0 || (st.st_size == LOCK_FILE_BYTES && pread(fd, &lf, sizeof lf, 0) == (ssize_t)sizeof lf &&
					  lf.magic == LOCK_MAGIC && memcmp(lf.instance, inst, 16) == 0));
	*uid = st.st_uid;
	if (!ours) {
		shmcfg__fork_close(fd);
		return -1;
	}
	return fd;
}

int shmcfg_orphans(const char *name, unsigned flags, void (*fn)(const shmcfg_orphan *o, void *userdata),
		   void *userdata)
{
	SHMCFG_API_ENTRY;
	char path[PATH_BYTES];
	if (flags & ~(unsigned)SHMCFG_ORPHANS_REMOVE)
		return shmcfg__err(-EINVAL, "orphans flags %#x: unknown bits", flags);
	int r = name ? shmcfg__name_check(name, path) : 0;
	if (r)
		return r;
	DIR *d = opendir(SHM_DIR);
	if (!d)
		return errno == ENOENT ? 0 : shmcfg__err(-errno, "%s: %s", SHM_DIR, strerror(errno));
	uid_t euid = geteuid();
	int n = 0;
	size_t plen = strlen(LOCK_FILE_PREFIX);
	for (struct dirent *e; (e = readdir(d));) {
		char seg[SEG_NAME_MAX + 1], tpath[PATH_BYTES + 40];
		uint8_t inst[16];
		uid_t uid = 0;
		int fd;
		if (shmcfg__replacement_left(e->d_name, name, euid, seg, tpath, &uid, &fd)) {
			shmcfg__fault("scan.locked"); /* its read lock held */
			shmcfg_orphan t = {.name = seg, .path = tpath, .uid = uid};
			/* its lock object is judged on its own, as any (below): the
			 * instance in this object's header is whatever its maker, or a
			 * stranger who planted a copy of a live segment, wrote */
			if (flags & SHMCFG_ORPHANS_REMOVE) {
				if (unlink(tpath) == 0) {
					t.removed = true;
				} else {
					t.error = -errno;
				}
			}
			shmcfg__fork_close(fd);
			n++;
			if (fn)
				fn(&t, userdata);
			continue;
		}
		if (strncmp(e->d_name, LOCK_FILE_PREFIX, plen) || !parse_lock_name(e->d_name + plen, seg, inst) ||
		    (name && strcmp(seg, name)))
			continue;
		shmcfg__lock_path(seg, inst, path); /* the same name: only lower-case hex parsed */
		/* its segment gone, and no maker building it (a replacement's new
		 * lock object has a segment of another instance at its name) */
		if ((fd = our_lock_file(path, inst, euid, &uid)) < 0)
			continue;
		/* the build lock first: once the scan holds it, a maker that
		 * finished has its segment at the name (not gone), and one that
		 * had not begun finds its object removed */
		if (!shmcfg__unbuilt(fd)) {
			shmcfg__fork_close(fd);
			continue;
		}
		shmcfg__fault("scan.locked");
		if (!segment_gone(seg, inst)) {
			shmcfg__fork_close(fd);
			continue;
		}
		shmcfg_orphan o = {.name = seg, .path = path, .uid = uid};
		if (flags & SHMCFG_ORPHANS_REMOVE) {
			if (unlink(path) == 0) {
				o.removed = true;
			} else if (errno == ENOENT) {
				shmcfg__fork_close(fd);
				continue; /* someone else removed it meanwhile */
			} else {
				o.error = -errno;
			}
		}
		shmcfg__fork_close(fd);
		n++;
		if (fn)
			fn(&o, userdata);
	}
	closedir(d);
	return name ? n : n + shmcfg__vcopy_orphans(flags, fn, userdata);
}
