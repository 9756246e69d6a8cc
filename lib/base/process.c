/* SPDX-License-Identifier: MIT */
/*
 * This process, as the segment records it: its pid (shmcfg__self_pid, set
 * at load and again in a fork's child by lib/segment/fork.c, the one place
 * that handles fork), the start time that tells a pid's reuse apart, and
 * the user and command names a commit's history record carries (cached,
 * read again after a fork).
 */
#include "internal.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pid_t shmcfg__self_pid;
/* Non-zero while a fork() of this process is under way (fork.c's prepare
 * to its parent or child handler): a snapshot acquire that counted itself
 * then undoes it and waits (reclaim.c, count_on) */
int shmcfg__forking;

/* The start time of a process (clock ticks since boot, /proc/PID/stat's
 * field 22), 0 if unknown: with the pid, it names one process for good. */
uint64_t shmcfg__proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	/* field 2 (comm) may hold spaces and parens: count from the last ')' */
	char *p = strrchr(buf, ')');
	unsigned long long start = 0;
	for (int field = 2; p && *p; p++)
		if (*p == ' ' && ++field == 22) {
			start = strtoull(p + 1, NULL, 10);
			break;
		}
	return start;
}

/* The names of the committer (uid's user, this process's command), cached
 * per process. */
static struct {
	pthread_mutex_t lock;
	pid_t pid;          /* the process the cache is of: a fork reads again */
	uid_t uid;
	char user[SHMCFG_USER_MAX], comm[SHMCFG_PROCESS_MAX];
} self_id = {.lock = PTHREAD_MUTEX_INITIALIZER};

void shmcfg__self_identity(uid_t uid, char user[SHMCFG_USER_MAX], char comm[SHMCFG_PROCESS_MAX])
{
	pthread_mutex_lock(&self_id.lock);
	if (self_id.pid != shmcfg__self_pid) {
		memset(self_id.comm, 0, sizeof self_id.comm);
		int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, self_id.comm, sizeof self_id.comm - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 0 && self_id.comm[n - 1] == '\n')
			self_id.comm[n - 1] = 0;
		self_id.pid = shmcfg__self_pid;
		self_id.uid = (uid_t)-1;
	}
	if (self_id.uid != uid) {
		/* the name as the committer resolves it; a name too long for the
		 * record (or none) leaves the number to the reader */
		struct passwd pw, *res = NULL;
		char tmp[1024];
		memset(self_id.user, 0, sizeof self_id.user);
		if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &res) == 0 && res && strlen(res->pw_name) < SHMCFG_USER_MAX)
			strcpy(self_id.user, res->pw_name);
		self_id.uid = uid;
	}
	memcpy(user, self_id.user, SHMCFG_USER_MAX);
	memcpy(comm, self_id.comm, SHMCFG_PROCESS_MAX);
	pthread_mutex_unlock(&self_id.lock);
}

/* The committer's names in h, as its commits' history records carry them:
 * looked up once (NSS and /proc: ~0.1-0.3 ms), by the handle's first commit
 * or by a prefaulting attach. */
void shmcfg__handle_identity(shmcfg *h)
{
	if (h->self_known)
		return;
	shmcfg__self_identity(h->uid, h->self_user, h->self_comm);
	h->self_user_len = (uint8_t)strlen(h->self_user);
	h->self_known = true;
}
