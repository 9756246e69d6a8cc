/* SPDX-License-Identifier: MIT */
/*
 * Fork: the library's one pthread_atfork registration, so that the order
 * of its locks across fork() is written once, here, and not left to the
 * order in which the linker runs constructors; and the list of open
 * handles that its handlers walk.
 *
 * Across fork: the open handles' list (open_lock) is held. In the child:
 * the pid first (base/process.c: everything after compares against it),
 * then each handle's lock descriptor and mutexes.
 *
 * A forked child shares its parent's open file descriptions, and with them
 * the OFD locks on the lock object: a child that never uses shmcfg would
 * keep a dead parent's reader entry (or writer lock) alive. So the child
 * closes its copies of every lock descriptor at once (the parent's locks
 * stay, held by the parent's descriptors); its inherited handles can still
 * read, and refuse to commit or pin (SHMCFG_E_FORKED). Their mutexes start
 * over unlocked: a thread of the parent that held one (a follow holds
 * view_lock through a whole attach) does not exist in the child. And each
 * handle remembers whether the process held pinned snapshots of it when it
 * forked (forked_holding): a child's close keeps such a handle's memory,
 * which its inherited snapshots may read (segment.c, handle_destroy).
 *
 * Registered once, by the first create or attach, or the first descriptor
 * of a lock (a scan for leftovers in a process with no handle), rather
 * than by a constructor: the test
 * copy of the library is a static archive, whose linker would leave out an
 * object no call reaches, constructor and all.
 */
#include "internal.h"
#include "objects.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static shmcfg *open_handles;
/* descriptors whose OFD locks stand for this process's thread at work
 * (unfinished.c): a maker's build locks, a scan's read lock on what it
 * judges. A child closes its copies, so that a lock dies with its holder
 * and is not held on by a child forked meanwhile. Opened and entered, and
 * left and closed, under open_lock, which prepare() takes: no fork falls
 * between an open and its entry (the child would keep a description the
 * parent then locks), nor between leaving and closing. Past LOCKED_MAX at
 * once, a descriptor is not opened (-EMFILE). */
#define LOCKED_MAX 64
static int locked[LOCKED_MAX];
static unsigned nlocked;

int shmcfg__fork_open(const char *path, int flags, int dup_of)
{
	shmcfg__fork_init(); /* a scan in a process with no handle forks too */
	pthread_mutex_lock(&open_lock);
	int fd = -EMFILE;
	if (nlocked < LOCKED_MAX) {
		fd = path ? open(path, flags) : fcntl(dup_of, F_DUPFD_CLOEXEC, 0);
		if (fd >= 0)
			locked[nlocked++] = fd;
		else
			fd = -errno;
	}
	pthread_mutex_unlock(&open_lock);
	return fd;
}

void shmcfg__fork_close(int fd)
{
	pthread_mutex_lock(&open_lock);
	for (unsigned i = 0; i < nlocked; i++)
		if (locked[i] == fd) {
			locked[i] = locked[--nlocked];
			break;
		}
	close(fd);
	pthread_mutex_unlock(&open_lock);
}

void shmcfg__open_add(shmcfg *h)
{
	pthread_mutex_lock(&open_lock);
	h->next_open = open_handles;
	open_handles = h;
	pthread_mutex_unlock(&open_lock);
}

void shmcfg__open_remove(shmcfg *h)
{
	pthread_mutex_lock(&open_lock);
	for (shmcfg **p = &open_handles; *p; p = &(*p)->next_open)
		if (*p == h) {
			*p = h->next_open;
			break;
		}
	pthread_mutex_unlock(&open_lock);
}

/*
 * Which handles the child may hold pinned snapshots of: Dekker with the
 * other threads' acquires (reclaim.c, count_on), which count themselves on
 * a pin word (seq_cst) and then load shmcfg__forking (seq_cst). Either the
 * loads below come after an increment and see its count (the handle is
 * marked), or that acquire sees the flag, undoes its count and waits for
 * the fork to end: a snapshot taken during the fork is not the child's.
 * A thread pin counts with a plain store and then loads the flag: the
 * membarrier of shmcfg__tpin_fork_prepare() is its fence (tpin.c).
 * (The forking thread itself takes none meanwhile.) Copies need nothing
 * here: their count is in the handle's private memory, which the child
 * gets as it was at the fork. A handle this process inherited keeps its
 * parent's answer too.
 */
static void prepare(void)
{
	pthread_mutex_lock(&open_lock);
	__atomic_store_n(&shmcfg__forking, 1, __ATOMIC_SEQ_CST);
	shmcfg__tpin_fork_prepare(); /* the threads' pins: a membarrier in place of their fence */
	for (shmcfg *h = open_handles; h; h = h->next_open)
		h->forked_holding = shmcfg__pins_held(h) || (h->pid != shmcfg__self_pid && h->forked_holding);
}

static void parent(void)
{
	shmcfg__tpin_fork_parent();
	__atomic_store_n(&shmcfg__forking, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&open_lock);
}

static void child(void)
{
	__atomic_store_n(&shmcfg__forking, 0, __ATOMIC_RELAXED); /* no other thread here */
	shmcfg__self_pid = getpid();
	shmcfg__tpin_fork_child();
	for (shmcfg *h = open_handles; h; h = h->next_open) {
		if (h->lock_fd >= 0)
			close(h->lock_fd);
		h->lock_fd = -1;
		handle_mutexes_init(h);
	}
	for (unsigned i = 0; i < nlocked; i++)
		close(locked[i]); /* the thread that holds the lock is not here */
	nlocked = 0;
	pthread_mutex_unlock(&open_lock); /* held by the forking thread (prepare) */
}

static void register_fork(void)
{
	shmcfg__self_pid = getpid();
	pthread_atfork(prepare, parent, child);
}

void shmcfg__fork_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, register_fork);
}
