/* SPDX-License-Identifier: MIT */
/*
 * The new segment of a replacement (replace.c), built under
 * /dev/shm/shmcfg-new.NAME.RANDOM before its rename: under way while its
 * creator lives, else what a replacer killed before its rename left, for
 * shmcfg_orphans() (objects.c) to remove.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * A replacement's new incarnation, built under /dev/shm/shmcfg-new.NAME.RANDOM
 * (replace.c) before its rename: its header (instance, creator) once
 * written. Its creator alive: a replacement under way, whose lock object no
 * scan may take; dead: what a replacer killed before its rename left.
 */

static bool temp_header(const char *path, struct seg_header *hd)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, hd, sizeof *hd, 0) == (ssize_t)sizeof *hd &&
		  hd->magic == SEG_MAGIC && hd->layout_version == SEG_LAYOUT_VERSION;
	close(fd);
	return ok;
}

static bool creator_alive(const struct seg_header *hd)
{
	return hd->create_pid > 0 && (kill(hd->create_pid, 0) == 0 || errno == EPERM);
}

/* Whether a replacement of segment `name` with instance inst is under way. */
bool shmcfg__replacement_under_way(const char *name, const uint8_t inst[16])
{
	DIR *d = opendir(SHM_DIR);
	bool found = false;
	size_t plen = strlen(TEMP_PREFIX), nlen = strlen(name);
	for (struct dirent *e; d && !found && (e = readdir(d));) {
		char path[PATH_BYTES + 40];
		struct seg_header hd;
		if (strncmp(e->d_name, TEMP_PREFIX, plen) || strncmp(e->d_name + plen, name, nlen) ||
		    e->d_name[plen + nlen] != '.')
			continue;
		snprintf(path, sizeof path, SHM_DIR "/%s", e->d_name);
		found = temp_header(path, &hd) && !memcmp(hd.instance, inst, 16) && creator_alive(&hd);
	}
	if (d)
		closedir(d);
	return found;
}

bool shmcfg__replacement_left(const char *dname, const char *name, uid_t euid, char seg[static SEG_NAME_MAX + 1],
			      char path[static PATH_BYTES + 40], uid_t *uid, uint8_t inst[16])
{
	size_t plen = strlen(TEMP_PREFIX);
	/* the prefix first: a shorter name ends before dname + plen */
	if (strncmp(dname, TEMP_PREFIX, plen))
		return false;
	const char *dot = strrchr(dname + plen, '.');
	struct seg_header hd;
	struct stat st;
	if (!dot || (size_t)(dot - dname - plen) > SEG_NAME_MAX)
		return false;
	memcpy(seg, dname + plen, (size_t)(dot - dname - plen));
	seg[dot - dname - plen] = 0;
	snprintf(path, PATH_BYTES + 40, SHM_DIR "/%s", dname);
	if ((name && strcmp(seg, name)) || lstat(path, &st) < 0 || (euid != 0 && st.st_uid != euid) ||
	    !temp_header(path, &hd) || creator_alive(&hd))
		return false;
	*uid = st.st_uid;
	memcpy(inst, hd.instance, 16);
	return true;
}

