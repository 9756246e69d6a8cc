/* SPDX-License-Identifier: MIT */
/*
 * Fork: the library's one pthread_atfork registration, so that the order
 * of its locks across fork() is written once, here, and not left to the
 * order in which the linker runs constructors.
 *
 * Across fork: the open handles' list (objects.c, open_lock) is held. In
 * the child: the pid first (base/process.c: everything after compares
 * against it), then the handles' lock descriptors (a child holds none of
 * its parent's OFD locks).
 *
 * Registered once, by the first create or attach (a process with no handle
 * has nothing to keep across fork), rather than by a constructor: the test
 * copy of the library is a static archive, whose linker would leave out an
 * object no call reaches, constructor and all.
 */
#include "internal.h"

#include <pthread.h>
#include <unistd.h>

static void prepare(void)
{
	shmcfg__objects_prepare_fork();
}

static void parent(void)
{
	shmcfg__objects_after_fork_parent();
}

static void child(void)
{
	shmcfg__self_pid = getpid();
	shmcfg__objects_after_fork_child();
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
