/* SPDX-License-Identifier: MIT */
/*
 * The objects of /dev/shm (objects.c): names, trust checks, the lock
 * object, removal. Included by internal.h.
 */
#ifndef SHMCFG_OBJECTS_H
#define SHMCFG_OBJECTS_H

/* objects.c: /dev/shm objects, trust, the lock object, removal */
#define PATH_BYTES (sizeof SHM_DIR + sizeof LOCK_PREFIX + SEG_NAME_MAX + 34)
int shmcfg__name_check(const char *name, char path[static PATH_BYTES]);
/* A name for a message: one line, <= 80 bytes, non-printable bytes as \xNN (len >= 6). */
void shmcfg__name_text(const char *name, char *out, size_t len);
/* The lock object's path: the name and the segment's random instance id, so nobody can
 * plant it before the creator (who makes it before any process can read the id). */
static inline void shmcfg__lock_path(const char *name, const uint8_t instance[16], char out[static PATH_BYTES])
{
	int n = snprintf(out, PATH_BYTES, SHM_DIR LOCK_PREFIX "%s.", name);
	for (int i = 0; i < 16 && n > 0 && n + 2 < (int)PATH_BYTES; i++, n += 2)
		snprintf(out + n, 3, "%02x", instance[i]);
}
struct stat;
int shmcfg__open_regular(const char *path, const char *name, int flags, int *fd_ret, struct stat *st);
int shmcfg__owner_check(const char *name, const struct stat *st, const shmcfg_attach_opts *o);
void shmcfg__user_text(uid_t uid, char *buf, size_t len);
int shmcfg__lock_create(shmcfg *h, const uint8_t instance[16], mode_t seg_mode, gid_t gid);
int shmcfg__lock_open(shmcfg *h, const struct stat *seg_st);
void shmcfg__lock_remove(const char *name, const uint8_t instance[16]);
void shmcfg__lock_unmap(shmcfg *h);
int shmcfg__remove_segment(const char *name, const char *path, bool quiet_enoent);

/* unfinished.c: the build lock (LOCK_BUILD_BYTE) of h's new object at
 * path, open at fd (which: 0 the segment's object, 1 the lock object): taken
 * on a description of its own (h->build_fd), and path checked to be still
 * fd's file (a scan may have removed it first); released once the segment
 * is in place at its name, or the handle freed (shmcfg__built). */
int shmcfg__build_lock(shmcfg *h, int which, int fd, const char *path, const char *what);
void shmcfg__built(shmcfg *h);
/* fork.c: a descriptor for a build lock or a scan's read lock, which a
 * forked child closes: path opened with flags (NULL: dup_of duplicated,
 * close-on-exec), or -errno; and closed. */
int shmcfg__fork_open(const char *path, int flags, int dup_of);
void shmcfg__fork_close(int fd);
/* Whether a scan may remove the object at fd: its maker's build lock is
 * not held, and the scan now holds it (a read lock) until it closes fd
 * (shmcfg__fork_close: fd is shmcfg__fork_open's, so that a child forked
 * meanwhile does not hold it), so that a maker that had not taken it yet
 * sees its object gone. */
bool shmcfg__unbuilt(int fd);

/* unfinished.c: a replacement's new object (/dev/shm/shmcfg-new.NAME.RANDOM,
 * replace.c) whose maker is gone (readdir's name dname, of segment `name`
 * or of any if NULL; the caller's or, for root, anyone's): its segment,
 * path, owner, and *fd, open with the scan's read lock on its build byte */
#define TEMP_PREFIX "shmcfg-new."
bool shmcfg__replacement_left(const char *dname, const char *name, uid_t euid, char seg[static SEG_NAME_MAX + 1],
			      char path[static PATH_BYTES + 40], uid_t *uid, int *fd);

/* fork.c: the one fork registration, made by the first create or attach,
 * and the list of open handles that its handlers walk */
void shmcfg__fork_init(void);
void shmcfg__open_add(shmcfg *h);
void shmcfg__open_remove(shmcfg *h);

#endif
