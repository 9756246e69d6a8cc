/* SPDX-License-Identifier: MIT */
/*
 * A test child of the shell tests (tests/cli): attach a segment read-write
 * and take one snapshot, which claims the process's entry in the reader
 * table (plain attaches claim none); release it (the entry keeps its pin, as an idle
 * reader's does), say "ready GENERATION" on stdout, and wait to be killed.
 *
 *   snapshot-holder NAME
 *
 * Exit status 1 (with the library's detail on stderr) if it cannot.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "shmcfg.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: snapshot-holder NAME\n");
		return 2;
	}
	shmcfg *h;
	shmcfg_snapshot *s;
	int r = shmcfg_attach(argv[1], 0, NULL, &h);
	if (!r)
		r = shmcfg_snapshot_acquire(h, &s);
	if (r) {
		const char *d = shmcfg_errdetail();
		fprintf(stderr, "snapshot-holder: %s\n", d && *d ? d : shmcfg_strerror(r));
		return 1;
	}
	unsigned long long gen = (unsigned long long)shmcfg_snapshot_generation(s);
	shmcfg_snapshot_release(s);
	printf("ready %llu\n", gen);
	fflush(stdout);
	for (;;)
		pause(); /* killed by the test */
}
