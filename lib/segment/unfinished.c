/* SPDX-License-Identifier: MIT */
/*
 * Objects under construction: the build lock their maker holds (a new
 * segment's object, its lock object) until the segment is in place at its
 * name; and the new segment of a replacement (replace.c), built under
 * /dev/shm/shmcfg-new.NAME.RANDOM before its rename: under way while its
 * maker holds that lock, else what a replacer killed before its rename
 * left, for shmcfg_orphans() (objects.c) to remove.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * The build lock. A scan (shmcfg_orphans) judges what a killed creator or
 * replacer left: a lock object whose segment is not at its name, a
 * replacement's new object. Their maker holds an OFD write lock on
 * LOCK_BUILD_BYTE of each from the moment it made it until the segment is
 * in place at its name (a creation's `ready`, a replacement's rename), so a
 * maker alive is told from one gone by the kernel, in any pid namespace,
 * whatever it had written (a killed maker may leave an empty object). A
 * scan removes an object only while it holds a read lock on that byte
 * itself (shmcfg__unbuilt), and a maker checks, once its lock is taken,
 * that its path still names its file: whichever comes first, the scan
 * never removes an object a live maker goes on with.
 *
 * The lock is on a description of its own (the file opened again through
 * /proc/self/fd), which nothing maps and a forked child closes (fork.c): a
 * child forked during the build, which shares the maker's descriptions and
 * mappings, must not keep a dead maker's objects looking alive.
 */
int shmcfg__build_lock(shmcfg *h, int which, int fd, const char *path, const char *what)
{
	const char *name = h->name;
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	int lfd = shmcfg__fork_open(self, O_RDWR | O_NONBLOCK | O_CLOEXEC, -1);
	if (lfd == -ENOENT || lfd == -ENOTDIR)
		lfd = shmcfg__fork_open(NULL, 0, fd); /* no /proc: the maker's own description */
	if (lfd < 0)
		return shmcfg__err(lfd, "%s: cannot open its new %s %s again: %s", name, what, path, strerror(-lfd));
	h->build_fd[which] = lfd;
	struct stat a, b;
	/* a scan holds it for a moment (listing, or judging another object) */
	int r = shmcfg__ofd_lock(lfd, LOCK_BUILD_BYTE, true, 1000);
	if (!r && (fstat(lfd, &a) < 0 || lstat(path, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		r = -ESTALE;
	if (r == -ESTALE)
		return shmcfg__err(-EAGAIN, "%s: its new %s %s was removed by a scan for leftovers as it was made: "
				   "try again", name, what, path);
	if (r == -EAGAIN)
		return shmcfg__err(-EAGAIN, "%s: its new %s %s was held by another process for 1 s as it was made: "
				   "try again", name, what, path);
	return r ? shmcfg__err(r, "%s: cannot lock its new %s %s: %s", name, what, path, strerror(-r)) : 0;
}

void shmcfg__built(shmcfg *h)
{
	for (int i = 0; i < 2; i++)
		if (h->build_fd[i] >= 0) {
			shmcfg__fork_close(h->build_fd[i]); /* the description's last reference: the lock goes */
			h->build_fd[i] = -1;
		}
}

bool shmcfg__unbuilt(int fd)
{
	return shmcfg__ofd_lock(fd, LOCK_BUILD_BYTE, false, 0) == 0;
}

/*
 * A replacement's new incarnation, built under /dev/shm/shmcfg-new.NAME.RANDOM
 * (replace.c) before its rename, under its maker's build lock (above):
 * held, a replacement under way; not, what a replacer killed before its
 * rename left, whatever it had written (nothing, when killed at once).
 */
bool shmcfg__replacement_left(const char *dname, const char *name, uid_t euid, char seg[static SEG_NAME_MAX + 1],
			      char path[static PATH_BYTES + 40], uid_t *uid, int *fd)
{
	size_t plen = strlen(TEMP_PREFIX);
	/* the prefix first: a shorter name ends before dname + plen */
	if (strncmp(dname, TEMP_PREFIX, plen))
		return false;
	const char *dot = strrchr(dname + plen, '.');
	struct stat st;
	if (!dot || (size_t)(dot - dname - plen) > SEG_NAME_MAX)
		return false;
	memcpy(seg, dname + plen, (size_t)(dot - dname - plen));
	seg[dot - dname - plen] = 0;
	snprintf(path, PATH_BYTES + 40, SHM_DIR "/%s", dname);
	if (name && strcmp(seg, name))
		return false;
	*fd = shmcfg__fork_open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, -1);
	if (*fd < 0)
		return false;
	if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode) || (euid != 0 && st.st_uid != euid) || !shmcfg__unbuilt(*fd)) {
		shmcfg__fork_close(*fd);
		return false;
	}
	*uid = st.st_uid;
	return true;
}
