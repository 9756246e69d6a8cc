/* SPDX-License-Identifier: MIT */
/*
 * The threads' sticky pins (lib/read/tpin.c, shmcfg/read.h; doc/design.md,
 * "Sticky thread pins") as a Promela model for spin, checked by
 * tests/model/check.sh (runs T*: the correct model, its probes and four
 * mutants). It was written before the pins were built (session 24, as
 * doc/experiments/sticky-pin.pml) and follows the library since.
 *
 *   spin -a tpin.pml && cc -O1 -DSAFETY -o pan pan.c && ./pan -m2000000
 *   (and -DMUTANT=n, n = 1..4: each must fail, see the end of this comment;
 *   -DPROBE=n, n = 1..4: each must fail, which shows the step is reached;
 *   -DMAXG=n commits, 6 by default)
 *
 * The protocol. A thread that takes snapshots owns a thread entry of the
 * reader table: its word (a generation's tag and a count, written only by
 * its owner, with plain stores), `foreign` (releases made by other
 * threads: an atomic add), and the revocation word (TP_BY_WRITER, set by a
 * writer, cleared by the owner's re-pin). The count is the owner's
 * acquires minus its own releases; the snapshots held are count - foreign.
 *   acquire, fast: load `current` (g, slot s); if the word's tag is g:
 *     store count + 1 (plain), compiler barrier, load the revocation: set ?
 *     store the count back, slow path : the snapshot is (g, s).
 *   acquire, slow (the entry holds nothing): xchg word = (g, count + 1),
 *     load the stamp of s: == g ? clear the revocation, the snapshot is
 *     (g, s) : store the count back (the library stores tag 0), retry. (The
 *     entry holds a snapshot of an older generation: the process's pin
 *     words; not here.)
 *   release by the owner: store count - 1 (plain, release);
 *   release by another thread: atomic foreign += 1.
 *   writer, choosing a slot s of generation gs (not current): an entry pins
 *     gs if its tag is gs and (the writer has not revoked and fenced yet, or
 *     its revocation is clear, or count - foreign > 0). Claim: busy mark
 *     (seq_cst), the same check again (seq_cst loads), then rewrite. No free
 *     slot: revoke every entry of an older generation (set the revocation),
 *     membarrier(GLOBAL_EXPEDITED), and from then on trust the counts of
 *     revoked entries; choose again; still none: the commit waits (here:
 *     gives up this round). Writers are one at a time (the writer lock).
 * Why it holds: the membarrier makes the owner's compiler barrier a full
 * fence for the writer (liburcu's memb flavour): either the writer's count
 * load after the membarrier sees the owner's increment, or the owner's load
 * of revoked after its increment sees the revocation and backs off. After
 * a revocation no fast acquire succeeds, so the count the writer reads only
 * falls; the slow path is the present Dekker pair (xchg + stamp against busy
 * mark + word).
 *
 * Memory model: the writer's and the foreign thread's operations are
 * sequentially consistent (they are fenced or locked in the code); the
 * owner's plain stores to its word go through a one-entry store buffer
 * (x86-TSO: a later load may pass them), drained by a flusher at any time,
 * by the owner's xchg, and by the writer's membarrier (the IPI's full fence
 * on the owner's CPU). The owner reads its own buffered word (forwarding).
 *
 * Checked: a holder's every read of its slot finds the generation it
 * acquired (never the busy mark, never a newer generation); counts never
 * go below zero.
 * Mutants (each must fail): 1 the writer trusts count 0 of an entry it did
 * not revoke; 2 no membarrier after the revocation; 3 the fast path skips
 * the revocation's check; 4 the writer skips the re-check after its busy
 * mark.
 */

#define NS 3     /* slots */
#ifndef MAXG
#define MAXG 6   /* commits */
#endif
#define BUSYC 255
#define NONE 0

/* slots: stamp (generation), busy mark, and what the slot holds */
byte stamp[NS];
bool busy[NS];
byte content[NS];
byte cur_g = 1, cur_s = 0;

/* the owner's record in memory, and its store buffer */
byte tag_m = 0, cnt_m = 0;
bool buf_full = false;
byte tag_b, cnt_b;
byte foreign = 0;
bool revoked = false;

/* a snapshot handed to the foreign thread: its generation and slot */
chan handoff = [1] of { byte, byte };

#define OWN_TAG (buf_full -> tag_b : tag_m)
#define OWN_CNT (buf_full -> cnt_b : cnt_m)

/* a plain store of the owner's word: behind the previous one (FIFO) */
inline own_store(t, c)
{
	atomic { !buf_full -> tag_b = t; cnt_b = c; buf_full = true }
}

proctype flusher()
{
end:	do
	:: atomic { buf_full -> tag_m = tag_b; cnt_m = cnt_b; buf_full = false }
	od
}

/* coverage: tests/model/check.sh's way; -DPROBE=n fails iff step n is reached:
 * 1 a fast acquire, 2 a writer takes a slot whose pin it revoked, 3 a fast
 * acquire backs off on a revocation, 4 a release by another thread */
#ifndef PROBE
#define PROBE 0
#endif
#define probe(n) assert(PROBE != n)

/* a holder reads its snapshot: the slot must still hold its generation */
inline use(g, s)
{
	assert(content[s] == g) /* a busy mark alone, put back, rewrites nothing */
}

proctype owner()
{
	byte g, s, t, c, r, hg, hs, n = 0;
	int held;
	bool has = false; /* a snapshot (hg, hs) held by this thread */
	do
	:: n < 5 && !has ->
		n++;
		atomic { g = cur_g; s = cur_s };
		t = OWN_TAG; c = OWN_CNT;
		if
		:: t == g ->
			own_store(g, c + 1);
			/* compiler barrier only: the load may pass the store */
#if MUTANT == 3
			r = 0;
#else
			r = revoked;
#endif
			if
			:: r -> own_store(g, c); probe(3); goto slow
			:: else -> hg = g; hs = s; has = true; probe(1); goto done
			fi
		:: else -> skip
		fi;
slow:
		t = OWN_TAG; c = OWN_CNT;
		held = c - foreign;
		if
		:: held != 0 -> goto done /* the process's pin words: not modelled */
		:: else -> skip
		fi;
		/* xchg: drains the buffer, then stores to memory, full fence */
		atomic { !buf_full -> tag_m = g; cnt_m = c + 1 };
		if
		:: !busy[s] && stamp[s] == g ->
			revoked = false; /* after the stamp check */
			hg = g; hs = s; has = true
		:: else -> own_store(g, c) /* not ours: the next round takes a newer one */
		fi;
done:
		skip
	:: has ->
		use(hg, hs);
		if
		:: t = OWN_TAG; c = OWN_CNT; own_store(t, c - 1); has = false /* release */
		:: handoff!hg, hs; has = false /* to the other thread, which releases */
		:: use(hg, hs) /* keep it a while */
		fi
	:: !has && n >= 5 -> break
	od;
	assert(OWN_CNT >= foreign)
}

proctype other()
{
	byte g, s;
end:	do
	:: handoff?g, s ->
		use(g, s);
		use(g, s);
		foreign++; /* atomic add */
		probe(4)
	od
}

/* Whether the owner's record pins generation gs, as the writer sees it
 * (two loads: the word, then foreign). */
inline pinned(gs, res)
{
	atomic { wt = tag_m; wc = cnt_m };
	wf = foreign;
#if MUTANT == 1
	res = (gs != 0 && wt == gs && wc - wf > 0);
#else
	res = (gs != 0 && wt == gs && (!trust || !revoked || wc - wf > 0));
#endif
}

/* Revoke every entry of an older generation that a slot holds, then the
 * membarrier; from then on, this commit trusts the counts it reads. */
inline revoke()
{
	k = 0;
	do
	:: k < NS -> if :: k != cur_s && tag_m == stamp[k] && tag_m != 0 -> revoked = true :: else -> skip fi; k++
	:: else -> break
	od;
#if MUTANT != 2
	atomic { !buf_full }; /* membarrier: the owner's CPU fences */
#endif
	trust = true;
	tries = 1
}

proctype writer()
{
	byte g = 1, s, k, tries, wt, wc, wf;
	bool p, found, trust;
	do
	:: g < MAXG ->
		tries = 0;
		trust = false; /* per commit, as choose_slot's */
		/* the library revokes only when no slot is free; revoking at any
		 * time is more behaviours, and reaches the races with few slots */
		if
		:: revoke()
		:: skip
		fi;
again:
		found = false;
		k = 0;
		do
		:: k < NS && !found ->
			if
			:: k != cur_s ->
				pinned(stamp[k], p);
				if
				:: !p ->
					busy[k] = true; /* seq_cst store */
#if MUTANT == 4
					p = false;
#else
					pinned(stamp[k], p);
#endif
					if
					:: p -> busy[k] = false
					:: else -> found = true; s = k
					fi
				:: else -> skip
				fi
			:: else -> skip
			fi;
			k++
		:: else -> break
		od;
		if
		:: found ->
			if :: stamp[s] != 0 && revoked && tag_m == stamp[s] -> probe(2) :: else -> skip fi;
			content[s] = BUSYC;
			g++;
			content[s] = g;
			stamp[s] = g;
			busy[s] = false;
			atomic { cur_g = g; cur_s = s }
		:: !found && tries == 0 ->
			revoke();
			goto again
		:: else -> break /* every slot held: the commit would wait */
		fi
	:: else -> break
	od
}

init
{
	atomic {
		stamp[0] = 1; content[0] = 1; /* generation 1, current, in slot 0 */
		run flusher(); run owner(); run other(); run writer()
	}
}
