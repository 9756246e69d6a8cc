/* SPDX-License-Identifier: MIT */
/*
 * shmcfg's concurrency protocol, as a Promela model for spin. Run by
 * tests/model/check.sh; described in doc/reliability.md, "The protocol's
 * model". Each step cites the C function (and label) it stands for.
 *
 * What it models:
 *  - the slot seqlock, labels (A)-(E) (lib/read/seqlock.h: seq_read, lib/read/seqlock.c): the
 *    reader's (A) load of `current`, its relaxed loads of the cells, (B) the
 *    stamp re-check, and shmcfg__seq_retry's rule (a failed validation is
 *    legitimate only if `current` moved); the writer's busy mark (F)/(C),
 *    its rewrite, (D) the stamp and (E) the publication (lib/commit/publish.c
 *    shmcfg__commit). The validated read stands for every seqlock reader:
 *    the inline getters and read_proven (include/shmcfg.h.in), and in
 *    lib/read/read.c shmcfg__get_slow, read_n, shmcfg_get, slot_hdr_words and
 *    shmcfg__copy_snapshot (a copied snapshot, also the fallback when every
 *    pin holds a snapshot);
 *  - the pin protocol, labels (F)-(H) (lib/read/reclaim.c): shmcfg_snapshot_acquire
 *    (the fast path's increment of a pin word, its tag check and stamp
 *    re-check, make_view's reuse of a pin that holds no snapshot),
 *    shmcfg_snapshot_release's decrement, and the writer's side:
 *    shmcfg__choose_slot, shmcfg__claim_slot, shmcfg__gen_pinned, the busy
 *    mark that keeps the old generation;
 *  - the reader table (lib/read/readers.c): a process's first pinned snapshot
 *    claims its entry and raises readers_hwm (try_claim); a writer with no
 *    free slot reaps dead readers' entries (shmcfg__reap);
 *  - death: a writer may die instead of any step it takes while it holds
 *    the writer lock (its successor then takes the lock: wlock.pml checks
 *    how), a reader process instead of any step. The
 *    successor writer takes the lock, finds `wip` set and sweeps (lib/slot/heap.c
 *    shmcfg__heap_sweep: a slot stamped beyond `current` by a writer that
 *    died between (D) and (E) loses its stamp), and takes a slot left busy
 *    (BUSY | old) as holding the old generation for its pin check.
 *
 * Abstractions:
 *  - A slot holds 2 cells; commit g of writer w writes VAL(g, w) into both.
 *    pubval[g] (a ghost) is the value commit g published, so a validated
 *    read that returns anything but pubval[g] in both cells (a mix of
 *    generations, a dead writer's unpublished value, a half-rewritten slot)
 *    trips an assertion. The value heap, its chunks and reference counts,
 *    the commit log and ring, the config hash, the history, `base` and the
 *    incremental copy (sync_slot) are all "rewrite both cells"; a failed
 *    commit's undo and the full-heap recycle() are left out (they rewrite
 *    only slots claimed by the same shmcfg__claim_slot).
 *  - Spin interleaves atomic steps (sequential consistency). Each access to
 *    shared memory the protocol orders is its own step; steps are merged
 *    only where nothing another process does in between could change an
 *    outcome: what a writer does under the writer lock before it touches a
 *    slot (lock, `current`, sweep, `wip`: one step), the scan's stamps and
 *    pre-filter (a heuristic the claim re-checks), the reap (a dead
 *    process's entry), a reader's claim with its load of `current`,
 *    make_view's search for a pin of its own entry that holds nothing with
 *    its compare-and-swap (no other process writes a live owner's words),
 *    the view's fields with the tag's publication, and a release (the
 *    snapshot's last reads, the decrement (H)). A failed
 *    validation re-loads `current` in the same step (a stronger check than
 *    the code's later load: `current` only grows).
 *  - Slot choice: the code takes the most recent slot (the one holding the
 *    latest generation, the least to copy) that is neither current nor
 *    pinned; the model takes any of them (a superset of the code's
 *    behaviours). -DMRU: the code's order.
 *  - One thread per reader process (its snapshots nest two deep, which is
 *    what makes a pin's count matter); a reader follows a script of
 *    operations (-DS0, -DS1). Liveness of a
 *    process (its OFD lock) is a flag, set at death, read by the reaper.
 *  - Writer 1 runs only once writer 0 died or finished: two live writers
 *    are kept apart by the lock, which tests/model/wlock.pml checks.
 *  - No deadline: the writer waits for a slot, and for the lock, for as long
 *    as it takes (the code gives up after the commit timeout), so that a
 *    wait that never ends shows up as a non-progress cycle.
 *  - Not modelled: fork and inherited handles, segment replacement
 *    (FROZEN_SLOT, thaw), shmctl gc, another process claiming a dead
 *    entry, several threads of one process sharing its views and view_lock
 *    (tests/test_concurrency.c test_shared_views runs that under TSan), the
 *    count's limit (PIN_COUNT_LIMIT: a copy), PIN_CLOSED (a close).
 *
 * Bounds: 3 slots; 2 writer processes (the first and its successor); 2
 * reader processes with 2 pins each (SEG_PINS is 4); generations 1 to
 * MAXGEN (default 3: two commits); at most WDEATHS writer deaths and
 * RDEATHS reader deaths (default 1 each); the readers' scripts S0 and S1.
 *
 * Properties:
 *  P1 a writer never rewrites a slot that a live reader uses under a
 *     snapshot (an assertion at each rewrite; the snapshot's own reads of
 *     its cells are checked at release too);
 *  P2 a validated read returns, in both cells, the value that the commit
 *     of the generation its stamp names published; also: a failed
 *     validation implies `current` moved (seqlock.c), the current slot holds
 *     current's generation, no two slots carry one generation, `wip` is
 *     found set only after a writer died (publish.c);
 *  P3 no non-progress cycle (pan -l -f): no writer waits for ever on a dead
 *     writer's or a dead reader's state (nor a reader on anything);
 *  P4 no invalid end state (deadlock).
 *
 * Variants (-D at spin -a): each MUTANT_* breaks one thing the code relies
 * on and must fail. HARMLESS_NO_VIEW_CHECK drops make_view's stamp check
 * (the fast path re-checks after its increment) and must still verify.
 * -DONE_PIN lets make_view use pin 0 only (every pin held: the copy).
 */

#ifndef MAXGEN
#define MAXGEN 3
#endif
#ifndef WDEATHS
#define WDEATHS 1
#endif
#ifndef RDEATHS
#define RDEATHS 1
#endif

#define NSLOTS 3
#define NR 2		/* reader processes (PINNED_NOW and reap are written for 2) */
#define NW 2		/* writer processes: the first, and its successor */
#define NPINS 2		/* pins per reader entry (SEG_PINS is 4) */

#define BUSY 128			/* SLOT_BUSY */
#define SGEN(st) ((st) & 127)		/* STAMP_GEN */
/* reclaim.c: the slot's key in the code's order (-DMRU); its base is 0 if
 * busy or stamped beyond the current generation (heap.c shmcfg__slot_base) */
#define MRU_KEY(x) (((stamp[x] & BUSY) == 0 && SGEN(stamp[x]) <= cg -> SGEN(stamp[x]) : 0) * 2 + \
		    (SGEN(stamp[x]) != 0 -> 1 : 0) + 1)
#define CUR(g, s) ((g) * 4 + (s))	/* `current`: generation << 8 | slot */
#define CUR_GEN(c) ((c) / 4)
#define CUR_SLOT(c) ((c) % 4)
#define VAL(g, w) ((g) + 16 * (w))	/* the value commit g of writer w writes */
#define NONE 255

byte current;
byte stamp[NSLOTS];		/* slot_hdr.gen */
byte cell[2 * NSLOTS];		/* two cells per slot */
byte wip;			/* seg_header.wip */
byte wlock;			/* the writer lock (wlock.pml): 0, or holder + 1 */
byte hwm;			/* readers_hwm */
/* reader_ent.pins: each word is (tag, count), always read and written
 * together, in one step (one 64-bit atomic access in the code) */
byte ptag[NR * NPINS];		/* PIN_TAG: the generation of the view */
byte pcnt[NR * NPINS];		/* PIN_COUNT: snapshots of it the owner holds */
bool eused[NR];			/* reader_ent.pid != 0 (entry_used) */
bool rdead[NR];			/* reader process r died: its entry's OFD lock is free */
bool wdead[NW];
bool wfin;			/* the first writer made its last commit */
byte wd, rd;			/* deaths so far */
/* ghosts */
byte pubval[MAXGEN + 1];	/* the value commit g published; 0: none */
byte use[NR * NSLOTS];		/* snapshots live reader r holds on slot s, validated */

/*
 * Coverage probes: check.sh compiles the correct model with spin -o3 (no
 * statement merging) and reads pan's list of unreached statements: each
 * probe `cov = n` must be reached by some run. -DCOVERAGE=n turns probe n
 * into a failing assertion instead (a trail to it).
 */
byte cov;
#ifdef COVERAGE
#define COVER(n) assert(COVERAGE != n)
#else
#define COVER(n) cov = n; cov = 0
#endif

/*
 * Death. Instead of its next step, a writer holding the lock may die (its
 * locals go; its successor takes the lock: wlock.pml), and so may a reader process
 * (its locals and its process-local state go, its views with them; its
 * reader entry stays, counts and all, with its OFD lock free).
 */
#define WDIE \
	:: atomic { d_step { wd < WDEATHS -> \
		wd++; wdead[w] = true; wlock = 0; \
		cs = 0; cg = 0; gen = 0; s = 0; best = 0; bstamp = 0; h = 0; i = 0; k = 0; n = 0; \
		res = false; reaped = false }; \
		goto wgone }

#define RDIE \
	:: atomic { d_step { rd < RDEATHS -> \
		rd++; rdead[r] = true; \
		use[r * NSLOTS] = 0; use[r * NSLOTS + 1] = 0; use[r * NSLOTS + 2] = 0; \
		c = 0; s = 0; g = 0; v = 0; v1 = 0; k = 0; nh = 0; pvk = 0; want = 0; old = 0; prog = 0; \
		vg[0] = 0; vg[1] = 0; vs[0] = 0; vs[1] = 0; \
		hs0 = 0; hg0 = 0; hk0 = 0; hs1 = 0; hg1 = 0; hk1 = 0; pv = false; ok = false }; \
		goto rgone }

/*
 * The scan's pre-filter (reclaim.c shmcfg__choose_slot: !shmcfg__gen_pinned),
 * evaluated at once: a heuristic, which shmcfg__claim_slot re-checks.
 */
#define HELD(i, g) (pcnt[i] != 0 && ptag[i] == (g))
#define PINNED_NOW(g) ((g) != 0 && \
	((hwm > 0 && (HELD(0, g) || HELD(1, g))) || \
	 (hwm > 1 && (HELD(2, g) || HELD(3, g)))))

/* reclaim.c shmcfg__gen_pinned, every load its own step: readers_hwm, then
 * each pin word of each entry, all seq_cst */
inline gen_pinned(g, res)
{
	if
	:: atomic { res = false; i = 0; k = 0; h = (g != 0 -> hwm : 0) }	/* readers.c shmcfg__readers_hwm */
	WDIE
	fi;
	do
	:: atomic { i < h ->
		if
		:: HELD(i * NPINS + k, g) -> res = true; i = h	/* (F) a word: count and tag */
		:: else ->
			if
			:: k == NPINS - 1 -> k = 0; i++
			:: else -> k++
			fi
		fi }
	:: atomic { i >= h -> i = 0; k = 0; h = 0; break }
	WDIE
	od
}

/* reclaim.c shmcfg__choose_slot: one slot of the scan (inside an atomic).
 * The code takes the most recent slot that is neither current nor pinned
 * (key: twice the generation it holds, 0 if empty or stamped beyond current
 * by a dead writer, plus one if stamped at all, plus one); the model, unless
 * -DMRU, may take any of them: a superset.
 * h: the best key so far (MRU), or the set of candidates. */
inline scan_slot(x)
{
	if
	:: x != cs && !PINNED_NOW(SGEN(stamp[x])) ->	/* reclaim.c:161, acquire */
#ifdef MRU
		if
		:: MRU_KEY(x) > h -> best = x; h = MRU_KEY(x)
		:: else
		fi
#else
		h = h | (1 << x)
#endif
	:: else
	fi
}

/* readers.c shmcfg__reap: the entry of a dead process (a lock attempt on
 * it succeeds: rdead[i]) that holds something is cleared (entry_clear) */
inline reap(n)
{
	n = 0;
#ifndef MUTANT_NO_REAP
	i = 0;
	do
	:: i < hwm ->
		if
		:: rdead[i] && (eused[i] || ptag[i * NPINS] != 0 || ptag[i * NPINS + 1] != 0 ||
				pcnt[i * NPINS] != 0 || pcnt[i * NPINS + 1] != 0) ->
			ptag[i * NPINS] = 0; ptag[i * NPINS + 1] = 0; pcnt[i * NPINS] = 0; pcnt[i * NPINS + 1] = 0;
			eused[i] = false; n++;
			COVER(5)			/* a dead reader's entry reaped */
		:: else
		fi;
		i++
	:: else -> break
	od;
	i = 0
#endif
}

/* P1: no live reader uses slot x under a snapshot */
#define UNUSED(x) (use[x] == 0 && use[NSLOTS + x] == 0)

/*
 * publish.c shmcfg__commit. Writer 1 is the successor: its lock attempt
 * succeeds once writer 0 died (its entry's OFD lock dropped: wlock.pml) or made its
 * last commit.
 */
proctype Writer(byte w)
{
	byte cs, cg, gen, s, best, bstamp, h, i, k, n;
	bool res, reaped;
	do
	:: atomic { wlock == 0 && (w == 0 || wdead[0] || wfin) && CUR_GEN(current) >= MAXGEN ->
		wfin = true; break }			/* the model's bound on commits */
	:: atomic { wlock == 0 && (w == 0 || wdead[0] || wfin) && CUR_GEN(current) < MAXGEN ->
		wlock = w + 1;				/* publish.c shmcfg__lock_writer */
		cs = CUR_SLOT(current);			/* shmcfg__commit: current (acquire), */
		cg = CUR_GEN(current);			/* stable under the lock */
		assert(stamp[cs] == cg);		/* the current slot holds its generation */
		if
		:: wip != 0 ->				/* a writer died mid-commit */
			assert(wd > 0);
			COVER(13);
#ifndef MUTANT_NO_SWEEP
			/* heap.c shmcfg__heap_sweep: a slot stamped beyond current
			 * (its writer died between (D) and (E)) loses its stamp */
			s = 0;
			do
			:: s < NSLOTS ->
				if
				:: !(stamp[s] & BUSY) && stamp[s] > cg -> stamp[s] = 0; COVER(7)
				:: else
				fi;
				s++
			:: else -> break
			od;
			s = 0
#endif
		:: else
		fi;
		gen = cg + 1;
		wip = gen }				/* hd->wip = gen */
		/* reclaim.c shmcfg__choose_slot */
		do
		:: if
			:: atomic {			/* the scan */
				best = NONE;
				h = 0;
				scan_slot(0);
				scan_slot(1);
				scan_slot(2);
#ifndef MRU
				if
				:: h & 1 -> best = 0
				:: h & 2 -> best = 1
				:: h & 4 -> best = 2
				:: h == 0
				fi;
#endif
				h = 0;
				bstamp = (best != NONE -> stamp[best] : 0);
				if
				:: bstamp & BUSY -> COVER(10)	/* a dead writer's busy slot taken */
				:: else
				fi }
			WDIE
			fi;
			if
			:: atomic { best == NONE ->	/* no free slot: reap once, then wait */
				if
				:: !reaped -> reaped = true; reap(n)
				:: else -> n = 0
				fi;
				if
				:: n == 0 -> reaped = false; COVER(6)	/* usleep(1000), again (no deadline) */
				:: else
				fi;
				n = 0 }
			:: best != NONE ->
				/* reclaim.c shmcfg__claim_slot */
#ifdef MUTANT_MARK_AFTER_CHECK
				/* the pin loads before the busy mark's store (store-load reordering) */
				gen_pinned(SGEN(bstamp), res);
				if
				:: atomic { !res -> stamp[best] = BUSY | SGEN(bstamp); s = best }; break
				:: res
				WDIE
				fi
#else
				if
#ifdef MUTANT_BUSY_NO_GEN
				:: stamp[best] = BUSY		/* the busy mark without the old generation */
#else
				:: stamp[best] = BUSY | SGEN(bstamp)	/* (F), (C): seq_write_begin, seq_cst */
#endif
				WDIE
				fi;
				gen_pinned(SGEN(bstamp), res);	/* (F) */
				if
				:: atomic { !res -> s = best }; break
				:: atomic { res -> stamp[best] = bstamp; COVER(1) }	/* seq_write_end: put back */
				WDIE
				fi
#endif
			WDIE
			fi
		od;
		atomic { best = NONE; bstamp = 0; reaped = false; res = false }
#ifdef MUTANT_PUBLISH_EARLY
		/* (D) and (E) before the rewrite */
		if :: stamp[s] = gen WDIE fi;
		if :: atomic { current = CUR(gen, s); pubval[gen] = VAL(gen, w) } WDIE fi;
#endif
		/* publish.c sync_slot, build_txn: the rewrite (P1) */
		if :: atomic { assert(UNUSED(s)); cell[2 * s] = VAL(gen, w) } WDIE fi;
		if :: atomic { assert(UNUSED(s)); cell[2 * s + 1] = VAL(gen, w) } WDIE fi;
#ifndef MUTANT_PUBLISH_EARLY
#ifdef MUTANT_E_BEFORE_D
		if :: atomic { current = CUR(gen, s); pubval[gen] = VAL(gen, w) } WDIE fi;
		if :: stamp[s] = gen WDIE fi;
#else
		/* (D) seq_write_end, release; no other slot carries generation gen */
		if
		:: atomic {
			assert((s == 0 || SGEN(stamp[0]) != gen) && (s == 1 || SGEN(stamp[1]) != gen) &&
			       (s == 2 || SGEN(stamp[2]) != gen));
			stamp[s] = gen }
		WDIE
		fi;
		/* (E) seq_publish, seq_cst */
		if :: atomic { current = CUR(gen, s); pubval[gen] = VAL(gen, w) } WDIE fi;
#endif
#endif
		/* hd->wip = 0; shmcfg__unlock_writer */
		if :: atomic { wip = 0; wlock = 0; cs = 0; cg = 0; gen = 0; s = 0 } WDIE fi
	od;
wgone:
	skip
}

/*
 * The validated read: seqlock.h; shmcfg.h.in shmcfg__read_cell and
 * read_proven; read.c shmcfg__get_slow, read_n, shmcfg_get, slot_hdr_words,
 * and shmcfg__copy_snapshot (seqlock.c shmcfg__seq_copy).
 */
inline seq_read()
{
	do
	:: if :: atomic { c = current; s = CUR_SLOT(c); g = CUR_GEN(c) } RDIE fi;	/* (A) acquire */
#ifdef MUTANT_NO_RECHECK
		/* the stamp checked before the cells, not re-loaded after them */
		if
		:: stamp[s] == g ->
			if :: v = cell[2 * s] RDIE fi;
			if :: v1 = cell[2 * s + 1] RDIE fi;
			atomic { assert(v == pubval[g] && v1 == pubval[g]); c = 0; s = 0; g = 0; v = 0; v1 = 0 };
			break
		:: atomic { stamp[s] != g -> assert(current != c) }
		RDIE
		fi
#else
		if :: v = cell[2 * s] RDIE fi;			/* relaxed */
		if :: v1 = cell[2 * s + 1] RDIE fi;		/* relaxed */
		if
		:: atomic { stamp[s] == g ->			/* (B) fence acquire, the stamp */
			assert(v == pubval[g] && v1 == pubval[g]);	/* P2 */
			c = 0; s = 0; g = 0; v = 0; v1 = 0 };
			break
		:: atomic { stamp[s] != g ->
			/* seqlock.c shmcfg__seq_retry: only if current moved */
			assert(current != c);
			COVER(8) }
		RDIE
		fi
#endif
	od
}

/* a held snapshot: a stack of two (slot, generation, pin) */
#define PUSH(ps, pg, pk) \
	if \
	:: nh == 0 -> hs0 = ps; hg0 = pg; hk0 = pk \
	:: else -> hs1 = ps; hg1 = pg; hk1 = pk \
	fi; \
	nh++

#define W(k) (r * NPINS + (k))	/* pin word k of our entry */

/* reclaim.c shmcfg_snapshot_acquire, with make_view */
inline acquire()
{
	if
	:: atomic {
		/* first time: reclaim.c claim_entry, readers.c try_claim: the
		 * entry is ours; readers_hwm raised (seq_cst) before any count */
		eused[r] = true;
		if
		:: hwm < r + 1 -> hwm = r + 1
		:: else
		fi;
		want = CUR_GEN(current) }		/* shmcfg_generation, acquire */
	RDIE
	fi;
	do
	:: if
		:: pv ->
#ifdef MUTANT_STAMP_BEFORE_COUNT
			/* the stamp loaded before the increment (store-load reordering) */
			if :: ok = (stamp[vs[pvk]] == want) RDIE fi;
			if :: atomic { old = ptag[W(pvk)]; pcnt[W(pvk)]++; ok = ok && old == want } RDIE fi;
#else
			if :: atomic { old = ptag[W(pvk)]; pcnt[W(pvk)]++ } RDIE fi;	/* (G) fetch_add, seq_cst */
#ifdef MUTANT_NO_TAG_CHECK
			old = want;				/* the old value's tag not checked */
#endif
			if
			:: old == want ->
#ifdef MUTANT_SNAP_NO_CHECK
				ok = true			/* no stamp re-check */
#else
				if
				:: ok = (stamp[vs[pvk]] == want)	/* (G) the stamp, seq_cst */
				RDIE
				fi;
				if
				:: !ok -> COVER(2)		/* its slot reused while idle */
				:: else
				fi
#endif
			:: else -> ok = false; COVER(14)	/* the view is of another generation */
			fi;
#endif
			if
			:: atomic { ok ->
				use[r * NSLOTS + vs[pvk]]++; PUSH(vs[pvk], want, pvk);
				if
				:: nh == 2 -> COVER(9)		/* two snapshots held */
				:: else
				fi;
				if
				:: want != CUR_GEN(current) -> COVER(12)	/* the view is older than current */
				:: else
				fi;
				ok = false; old = 0; want = 0 };
				break				/* counted until release */
			:: !ok ->
				if :: atomic { pcnt[W(pvk)]--; old = 0 } RDIE fi	/* undo, release */
			fi
		:: else
		fi;
		/* make_view, under view_lock: the current generation and its slot
		 * (seq_read with cur_read's stamp check) */
		do
		:: if :: atomic { c = current; s = CUR_SLOT(c); g = CUR_GEN(c) } RDIE fi;	/* (A) */
#ifdef HARMLESS_NO_VIEW_CHECK
			break				/* no stamp check here: the fast path re-checks */
#else
			if
			:: stamp[s] == g -> break	/* acquire */
			:: atomic { stamp[s] != g -> assert(current != c); COVER(3) }	/* shmcfg__seq_retry */
			RDIE
			fi
#endif
		od;
		/* a view of it already, else a pin that holds no snapshot: our own
		 * words, which no other process writes while we live, so the scan
		 * and the compare-and-swap to tag 0 are one step */
		if
		:: atomic {
			if
			:: pv && vg[pvk] == g -> k = pvk
			:: else ->
#ifdef MUTANT_REUSE_HELD
				k = (pv -> pvk : 0);	/* the newest view's pin, whatever its count */
				pcnt[W(k)] = 0;
#elif defined(ONE_PIN)
				k = (pcnt[W(0)] == 0 -> 0 : NONE);	/* -DONE_PIN: only pin 0 is used */
#else
				k = (pcnt[W(0)] == 0 -> 0 : (pcnt[W(1)] == 0 -> 1 : NONE));
#endif
				if
				:: k != NONE ->
					if
					:: ptag[W(k)] != 0 -> COVER(11)	/* a pin reused */
					:: else
					fi;
					ptag[W(k)] = 0
				:: else
				fi
			fi }
		RDIE
		fi;
		if
		:: atomic { k == NONE ->		/* -EAGAIN: shmcfg__copy_snapshot, */
			k = 0; c = 0; s = 0; g = 0; want = 0; COVER(4);	/* the validated read next */
			prog = prog * 4 + 1 };
			break
		:: k != NONE ->
			/* the view's fields, then the tag: (G) fetch_add, seq_cst;
			 * the newest view (h->cur_pin); the next round wants it */
			if
			:: atomic { vg[k] = g; vs[k] = s; ptag[W(k)] = g; pv = true; pvk = k; want = g;
				c = 0; s = 0; g = 0; k = 0 }
			RDIE
			fi
		fi
	od
}

/* reclaim.c shmcfg_snapshot_release of the newest snapshot held, if any
 * (a copied one holds nothing): one step */
inline release()
{
	if
	:: atomic {
		if
		:: nh > 0 ->
			if
			:: nh == 2 -> s = hs1; g = hg1; k = hk1; hs1 = 0; hg1 = 0; hk1 = 0
			:: else -> s = hs0; g = hg0; k = hk0; hs0 = 0; hg0 = 0; hk0 = 0
			fi;
			nh--;
			/* P1: the snapshot's reads (snapshot.c shmcfg_snapshot_get), not validated */
			assert(cell[2 * s] == pubval[g] && cell[2 * s + 1] == pubval[g]);
			use[r * NSLOTS + s]--;
			pcnt[W(k)]--;			/* (H) fetch_sub, release */
			s = 0; g = 0; k = 0
		:: else
		fi }
	RDIE
	fi
}

/*
 * The readers' scripts: -DS0=n, -DS1=n pick one for reader 0 and 1. A
 * script is a number whose base-4 digits, lowest first, are the operations:
 * 1 a validated read, 2 acquire a snapshot, 3 release the newest one.
 */
#define PROG1 1		/* read */
#define PROG2 14	/* acquire, release */
#define PROG3 250	/* acquire, acquire, release, release */
#define PROG4 57	/* read, acquire, release */
#define PROG5 238	/* acquire, release, acquire, release */
#ifndef S0
#define S0 2
#endif
#ifndef S1
#define S1 1
#endif
#if S0 == 1
#define PROG_R0 PROG1
#elif S0 == 2
#define PROG_R0 PROG2
#elif S0 == 3
#define PROG_R0 PROG3
#elif S0 == 4
#define PROG_R0 PROG4
#elif S0 == 5
#define PROG_R0 PROG5
#else
#define PROG_R0 0
#endif
#if S1 == 1
#define PROG_R1 PROG1
#elif S1 == 2
#define PROG_R1 PROG2
#elif S1 == 3
#define PROG_R1 PROG3
#elif S1 == 4
#define PROG_R1 PROG4
#elif S1 == 5
#define PROG_R1 PROG5
#else
#define PROG_R1 0
#endif

/* A reader process: its thread runs its script, then idles (it may still
 * die, its views' tags left in its entry) */
proctype Reader(byte r; byte prog)
{
	byte c, s, g, v, v1, k, nh, pvk, want, old, hs0, hg0, hk0, hs1, hg1, hk1;
	byte vg[NPINS], vs[NPINS];		/* h->views: each one's generation and slot */
	bool pv, ok;				/* h->cur_pin >= 0 */
	do
	:: atomic { prog % 4 == 1 -> prog = prog / 4 }; seq_read()
	:: atomic { prog % 4 == 2 -> prog = prog / 4 }; acquire()
	:: atomic { prog % 4 == 3 -> prog = prog / 4 }; release()
	:: prog == 0 -> break
	od;
	atomic { pvk = 0; pv = false; vg[0] = 0; vg[1] = 0; vs[0] = 0; vs[1] = 0 };
	if
	:: skip
	RDIE
	fi;
rgone:
	skip
}

init
{
	atomic {
		/* publish.c shmcfg__commit_first: generation 1 in slot 0; the other
		 * slots hold its content, unstamped */
		current = CUR(1, 0);
		stamp[0] = 1;
		cell[0] = VAL(1, 0); cell[1] = VAL(1, 0); cell[2] = VAL(1, 0);
		cell[3] = VAL(1, 0); cell[4] = VAL(1, 0); cell[5] = VAL(1, 0);
		pubval[1] = VAL(1, 0);
		run Writer(0);
		run Writer(1);
		run Reader(0, PROG_R0);
		run Reader(1, PROG_R1)
	}
}
