/*
 * doc/benchmarks.md, "A snapshot at 10x a plain load": the read side of a
 * snapshot acquire + one typed get + release with a sticky per-thread pin
 * (urcu-memb's read side: plain stores and a compiler barrier; a writer
 * that must take a slot idle pins hold revokes them after a membarrier),
 * alone and behind the checks of the library's fast path, inline; beside a
 * plain load and the present design's locked pin (a locked increment, the
 * stamp, a locked decrement). The bench's loop: a compiler barrier per
 * read, -O2. Not the library: a measurement of the design.
 *   gcc -O2 -o sticky-pin sticky-pin.c && ./sticky-pin
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#define BAR() __asm__ __volatile__("" ::: "memory")
struct cell { uint64_t val, meta; };
struct slot { uint64_t gen; uint64_t pad[7]; struct cell c[64]; };
struct rec { uint64_t word; uint64_t revoked; }; /* per thread, in shared memory */
struct view { const struct slot *slot; uint64_t gen; };
struct seg { uint64_t current; uint64_t pad[7]; uint64_t pins[8]; struct slot slots[8]; };
static struct seg *S;
static struct view views[8];
static __thread struct rec *my __attribute__((tls_model("initial-exec")));
static __thread char detail_set __attribute__((tls_model("initial-exec")));
struct handle { int pid; int follow_err; void *live; int forking_seen; };
static struct handle H0, *volatile HP = &H0;
int self_pid = 1, forking;
int64_t g_plain = 42;
#define CNT(w) ((w) & 0xffff)
#define GEN(w) ((w) >> 16)

static inline __attribute__((always_inline)) const struct view *acq_sticky(void)
{
	uint64_t cur = __atomic_load_n(&S->current, __ATOMIC_ACQUIRE);
	struct rec *r = my;
	uint64_t w = __atomic_load_n(&r->word, __ATOMIC_RELAXED);
	if (__builtin_expect(GEN(w) != cur >> 8, 0))
		return NULL;
	__atomic_store_n(&r->word, w + 1, __ATOMIC_RELAXED);
	BAR(); /* the writer's membarrier orders this store before the load below */
	if (__builtin_expect(__atomic_load_n(&r->revoked, __ATOMIC_RELAXED) == GEN(w), 0))
		return NULL;
	return &views[cur & 7];
}
static inline __attribute__((always_inline)) void rel_sticky(void)
{
	struct rec *r = my;
	__atomic_store_n(&r->word, __atomic_load_n(&r->word, __ATOMIC_RELAXED) - 1, __ATOMIC_RELEASE);
}
static inline __attribute__((always_inline)) int get_int(const struct view *v, int opt, int64_t *out)
{
	const struct cell *c = &v->slot->c[opt];
	uint64_t meta = __atomic_load_n(&c->meta, __ATOMIC_RELAXED);
	if ((meta & 0x1ff) != 2)
		return -1;
	*out = (int64_t)__atomic_load_n(&c->val, __ATOMIC_RELAXED);
	return 0;
}
static inline __attribute__((always_inline)) const struct view *acq_locked(int *k)
{
	uint64_t cur = __atomic_load_n(&S->current, __ATOMIC_ACQUIRE);
	*k = cur & 7;
	uint64_t old = __atomic_fetch_add(&S->pins[*k], 1, __ATOMIC_SEQ_CST);
	if (old >> 16 != cur >> 8 || __atomic_load_n(&views[*k].slot->gen, __ATOMIC_SEQ_CST) != cur >> 8) {
		__atomic_fetch_sub(&S->pins[*k], 1, __ATOMIC_RELEASE);
		return NULL;
	}
	return &views[*k];
}
#define LOOP(fn, ...) static __attribute__((noinline)) uint64_t fn(long n) { uint64_t acc = 0; \
	for (long i = 0; i < n; i++) { BAR(); __VA_ARGS__; } return acc; }
LOOP(loop_plain, acc += (uint64_t)g_plain)
LOOP(loop_sticky, { const struct view *v = acq_sticky(); int64_t x;
	if (v && get_int(v, 5, &x) == 0) acc += (uint64_t)x; if (v) rel_sticky(); })
LOOP(loop_locked, { int k; const struct view *v = acq_locked(&k); int64_t x;
	if (v && get_int(v, 5, &x) == 0) acc += (uint64_t)x; if (v) __atomic_fetch_sub(&S->pins[k], 1, __ATOMIC_RELEASE); })
/* the same, behind the checks the library's fast path makes (its error
 * detail, the handle's process, liveness, a follow error, a fork under way) */
static inline __attribute__((always_inline)) const struct view *acq_api(struct handle *h)
{
	if (__builtin_expect(detail_set || !h || h->pid != self_pid || h->live != h || h->follow_err ||
			     __atomic_load_n(&forking, __ATOMIC_RELAXED), 0))
		return NULL;
	return acq_sticky();
}
LOOP(loop_api, { struct handle *h = HP; const struct view *v = acq_api(h); int64_t x;
	if (v && get_int(v, 5, &x) == 0) acc += (uint64_t)x; if (v && h->pid == self_pid) rel_sticky(); })
static double ns(uint64_t (*f)(long), long n)
{
	struct timespec a, b; f(n / 10);
	clock_gettime(CLOCK_MONOTONIC, &a); volatile uint64_t s = f(n); (void)s;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
}
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(void)
{
	S = mmap(NULL, sizeof *S + 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct rec *recs = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t gen = 7;
	S->current = gen << 8 | 3;
	for (int i = 0; i < 8; i++) { views[i].slot = &S->slots[i]; for (int o = 0; o < 64; o++) S->slots[i].c[o] = (struct cell){o, 2}; }
	S->slots[3].gen = gen; S->pins[3] = gen << 16;
	H0.pid = 1; H0.live = &H0;
	my = &recs[0]; my->word = gen << 16; my->revoked = 0;
	long n = 20000000;
	enum { R = 9 };
	double rs[R], rl[R], ra[R];
	for (int r = 0; r < R; r++) {
		double p = ns(loop_plain, n), s = ns(loop_sticky, n), l = ns(loop_locked, n);
		double a = ns(loop_api, n);
		rs[r] = s / p, rl[r] = l / p, ra[r] = a / p;
		printf("ns: plain %.2f  sticky %.2f  sticky + checks %.2f  locked %.2f\n", p, s, a, l);
	}
	qsort(ra, R, sizeof *ra, cmp), qsort(rs, R, sizeof *rs, cmp), qsort(rl, R, sizeof *rl, cmp);
	printf("medians, x a plain load: sticky %.1fx, sticky + checks %.1fx, locked %.1fx\n", rs[R / 2], ra[R / 2],
	       rl[R / 2]);
	return 0;
}
