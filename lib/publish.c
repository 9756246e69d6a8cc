/*
 * Commits. A commit never modifies a published slot. Under the writer lock
 * (an OFD lock on the lock object) it picks a free slot (reclaim.c), marks
 * it busy, writes the new layers and resolves every option (resolve.c),
 * computes the config hash and the checksum, stamps the slot with the new
 * generation and publishes it with one store of `current` (seqlock.h, (C) to
 * (E)). Readers therefore see whole generations. A writer that dies anywhere
 * before that store has published nothing; the next writer simply starts
 * over.
 */
#include "internal.h"
#include "seqlock.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Whether any change differs from what its layer holds in the old slot. */
static bool txn_changes(const shmcfg *h, const char *old_slot, const struct change *ch, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		const struct shmcfg__cell *c = slot_layers(h, old_slot) + (size_t)ch[k].opt * NLAYERS + ch[k].layer;
		bool had = c->meta & META_SET;
		shmcfg_value old;
		if (had != !ch[k].reset)
			return true;
		if (had && (shmcfg__value_from_cell(c, slot_heap(h, old_slot), h->lay.heap_size, &old) ||
			    !shmcfg_value_equal(&old, &ch[k].v)))
			return true;
	}
	return false;
}

static int cmp_change(const void *a, const void *b)
{
	const struct change *x = a, *y = b;
	if (x->opt != y->opt)
		return x->opt < y->opt ? -1 : 1;
	return x->layer - y->layer;
}

static void write_log(shmcfg *h, uint64_t gen, const bool *changed_opt, uint32_t nchanged)
{
	struct log_ent *e = log_at(h, gen);
	/* the same seqlock as a slot: stamp 0, (C), fields, (D) */
	seq_write_begin(&e->gen, 0);
	e->time_ns = now_ns(CLOCK_REALTIME);
	e->pid = (int32_t)getpid();
	e->uid = getuid();
	e->nchanged = nchanged;
	e->nids = 0;
	for (uint32_t i = 0; i < h->lay.nopts && e->nids < SHMCFG_LOG_IDS; i++)
		if (changed_opt[i])
			e->ids[e->nids++] = i;
	seq_write_end(&e->gen, gen);
}

/*
 * The commit proper. With first, this is generation 1 of a new segment: no
 * old slot, no lock (nobody can attach before `ready`).
 */
int shmcfg__commit(shmcfg_txn *t, bool first, uint64_t *gen_ret)
{
	shmcfg *h = t->h;
	uint32_t n = h->lay.nopts;
	int r;
	if (getpid() != h->pid)
		return shmcfg__err(SHMCFG_E_FORKED, "%s: commit in a child of the attaching process: attach again",
				   h->name);
	if (t->n)
		qsort(t->ch, t->n, sizeof *t->ch, cmp_change);
	struct build b = {.h = h};
	b.implied_by = shmcfg__malloc(n * sizeof(uint32_t));
	b.implier = shmcfg__malloc(n * sizeof(uint32_t));
	bool *changed_opt = shmcfg__calloc(n, sizeof(bool));
	struct hashbuf hb = {0};
	if (!b.implied_by || !b.implier || !changed_opt) {
		r = shmcfg__nomem();
		goto out_free;
	}
	if (!first) {
		/* OFD locks belong to the open file description, which all threads
		 * of a handle share: they exclude other processes and handles, and
		 * this mutex excludes the handle's other threads */
		pthread_mutex_lock(&h->commit_lock);
		r = shmcfg__ofd_lock(h->lock_fd, LOCK_WRITER_BYTE, true, h->commit_timeout_ms);
		if (r == -EAGAIN)
			r = shmcfg__err(SHMCFG_E_LOCKED, "%s: another writer held the lock for %d ms",
					h->name, h->commit_timeout_ms);
		else if (r)
			r = shmcfg__err(r, "%s: writer lock: %s", h->name, strerror(-r));
		if (r) {
			pthread_mutex_unlock(&h->commit_lock);
			goto out_free;
		}
	}
	shmcfg__fault("commit.locked");
	uint64_t cur = __atomic_load_n(&h->hdr->current, __ATOMIC_ACQUIRE);
	uint32_t cur_s = first ? UINT32_MAX : cur_slot(cur);
	uint64_t gen = first ? 1 : cur_gen(cur) + 1;
	if (!first) {
		/* under the lock the current slot cannot change; check it anyway */
		if (cur_s >= h->lay.nslots ||
		    __atomic_load_n(&slot_at(h, cur_s)->gen, __ATOMIC_ACQUIRE) != cur_gen(cur)) {
			r = shmcfg__err(SHMCFG_E_CORRUPT, "%s: current slot %u does not hold generation %llu",
					h->name, cur_s, (unsigned long long)cur_gen(cur));
			goto out_unlock;
		}
		b.old_slot = (const char *)slot_at(h, cur_s);
	}
	/* a transaction that changes no layer publishes nothing, and must not
	 * take (or wait for) a slot to find that out */
	if (!first && !txn_changes(h, b.old_slot, t->ch, t->n)) {
		r = 1;
		if (gen_ret)
			*gen_ret = cur_gen(cur);
		goto out_unlock;
	}
	uint32_t s = 0;
	if (!first && (r = shmcfg__choose_slot(h, cur_s, cur_gen(cur), &s)))
		goto out_unlock;
	shmcfg__fault("commit.slot");
	b.slot = (char *)slot_at(h, s);
	b.cells = slot_cells(h, b.slot);
	b.layers = slot_layers(h, b.slot);
	b.heap = slot_heap(h, b.slot);
	b.cap = h->lay.heap_size;
	/* the busy mark of choose_slot() came with (C): every store below is
	 * ordered after it for a reader's (B) */
	if ((r = shmcfg__build_layers(&b, t->ch, t->n)) || (r = shmcfg__resolve(&b)))
		goto out_unlock;
	/* what changed, for the commit log: the effective value of any option,
	 * or a layer of an option the transaction touched (the others' layers
	 * were copied as they were) */
	uint32_t nchanged = 0;
	size_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		bool ch = first || !shmcfg__cells_equal(h, &b.cells[i], b.heap, slot_cells(h, b.old_slot) + i,
						slot_heap(h, b.old_slot));
		for (; k < t->n && t->ch[k].opt == i; k++)
			ch = ch || !shmcfg__cells_equal(h, &b.layers[(size_t)i * NLAYERS + t->ch[k].layer], b.heap,
						slot_layers(h, b.old_slot) + (size_t)i * NLAYERS + t->ch[k].layer,
						slot_heap(h, b.old_slot));
		changed_opt[i] = ch;
		nchanged += ch;
	}
	struct slot_hdr *sl = (struct slot_hdr *)b.slot;
	sl->heap_used = b.used;
	uint8_t hash[16];
	if ((r = shmcfg__config_hash(h, b.slot, hash, &hb)))
		goto out_unlock;
	memcpy(sl->config_hash, hash, 16);
	sl->checksum = shmcfg__slot_checksum(h, b.slot);
	shmcfg__fault("commit.written");
	write_log(h, gen, changed_opt, nchanged);
	/* pairs with the readers' stamp check: everything above is visible to a
	 * reader that sees this stamp */
	seq_write_end(&sl->gen, gen); /* (D) */
	shmcfg__fault("commit.stamped");
	/* the publication: pairs with the acquire load of `current` in every
	 * read; seq_cst also orders it before the futex bump for shmcfg_wait() */
	seq_publish(h, gen, s); /* (E) */
	shmcfg__fault("commit.published");
	__atomic_fetch_add(&h->hdr->futex, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &h->hdr->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	if (gen_ret)
		*gen_ret = gen;
	r = 0;
out_unlock:
	if (!first) {
		shmcfg__ofd_unlock(h->lock_fd, LOCK_WRITER_BYTE);
		pthread_mutex_unlock(&h->commit_lock);
	}
out_free:
	shmcfg__free(b.implied_by);
	shmcfg__free(b.implier);
	shmcfg__free(changed_opt);
	shmcfg__free(hb.p);
	return r;
}

int shmcfg_txn_commit(shmcfg_txn *t, uint64_t *gen_ret)
{
	SHMCFG_API_ENTRY;
	assert_return(t, -EINVAL);
	if (t->err) { /* a change was refused: publish none, and say which */
		int r = t->err_detail ? shmcfg__err(t->err, "%s", t->err_detail)
				      : shmcfg__err(t->err, "a change was refused: %s", shmcfg_strerror(t->err));
		shmcfg_txn_abort(t);
		return r;
	}
	int r = shmcfg__commit(t, false, gen_ret);
	shmcfg_txn_abort(t);
	return r;
}
