/*
 * Test-only crash points, compiled only into the test copy of the library
 * (SHMCFG_WITH_FAULTS): never in the installed library or tools.
 */
#include "internal.h"

#include <stdlib.h>

#ifdef SHMCFG_WITH_FAULTS
/*
 * Test-only crash points. SHMCFG_FAULT is a comma-separated list of
 * point[:n][:stop]: the n-th pass (default 1) of the thread through
 * shmcfg__fault(point) raises SIGKILL (the process dies exactly there, as
 * kill -9 would), or SIGSTOP with ":stop" (a test then acts while the
 * process stands there, and sends SIGCONT).
 */
#include <signal.h>
#include <unistd.h>
void shmcfg__fault(const char *point)
{
	static __thread unsigned passes[16];
	const char *f = getenv("SHMCFG_FAULT");
	size_t n = strlen(point);
	for (unsigned item = 0; f && *f && item < 16; item++) {
		const char *end = strchr(f, ',');
		size_t len = end ? (size_t)(end - f) : strlen(f);
		if (len >= n && strncmp(f, point, n) == 0 && (len == n || f[n] == ':')) {
			const char *opt = f + n;
			int want = 1;
			if (*opt == ':' && opt[1] >= '0' && opt[1] <= '9')
				want = atoi(++opt);
			bool stop = memmem(f, len, ":stop", 5) != NULL;
			if (++passes[item] == (unsigned)want)
				raise(stop ? SIGSTOP : SIGKILL);
		}
		f = end ? end + 1 : f + len;
	}
}
#endif
