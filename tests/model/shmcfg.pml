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
 *    pin awaits a grace period);
 *  - the pin protocol, labels (F)-(H) (lib/read/reclaim.c): shmcfg_snapshot_acquire
 *    (the view, the fast path's `active` increment and stamp re-check, the
 *    replacement of a dead view by pin_current, retire()),
 *    shmcfg_snapshot_release, the reclaimer thread and its RCU grace period
 *    before unpin_free, and the writer's side: shmcfg__choose_slot,
 *    shmcfg__claim_slot, shmcfg__gen_pinned, the busy mark that keeps the
 *    old generation;
 *  - the reader table (lib/read/readers.c): a process's first pinned snapshot
 *    claims its entry and raises readers_hwm (try_claim); a writer with no
 *    free slot reaps dead readers' entries (shmcfg__reap);
 *  - death: a writer may die instead of any step it takes while it holds
 *    the writer lock (its successor then takes the lock: wlock.pml checks
 *    how), a reader process
 *    (its thread and its reclaimer thread) instead of any step. The
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
 *    process's entry), a reader's read_lock with its load of `current`, its
 *    read_unlock with the view checks under view_lock and the search for a
 *    free pin of its own entry, a release (the snapshot's last reads, the
 *    decrement (H), read_unlock), and the reclaimer's grace period with its
 *    unpin stores (taken at a moment with no read-side section). A failed
 *    validation re-loads `current` in the same step (a stronger check than
 *    the code's later load: `current` only grows).
 *  - Slot choice: the code takes the most recent slot (the one holding the
 *    latest generation, the least to copy) that is neither current nor
 *    pinned; the model takes any of them (a superset of the code's
 *    behaviours). -DMRU: the code's order.
 *  - One thread per reader process (its snapshots nest two deep, which is
 *    what makes the grace period matter) plus its reclaimer thread; a
 *    reader follows a script of operations (-DS0, -DS1). Liveness of a
 *    process (its OFD lock) is a flag, set at death, read by the reaper.
 *  - Writer 1 runs only once writer 0 died or finished: two live writers
 *    are kept apart by the lock, which tests/model/wlock.pml checks.
 *  - No deadline: the writer waits for a slot, and for the lock, for as long
 *    as it takes (the code gives up after the commit timeout), so that a
 *    wait that never ends shows up as a non-progress cycle.
 *  - Not modelled: fork and inherited handles, segment replacement
 *    (FROZEN_SLOT, thaw), shmctl gc, another process claiming a dead
 *    entry, several threads of one process sharing a view and view_lock.
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
 * on and must fail. HARMLESS_* change what the code's comments say matters
 * and must still verify (see the doc for why): HARMLESS_PIN_AFTER_ACTIVE
 * stores the pin after the `active` increment, HARMLESS_NO_PIN_CHECK drops
 * pin_current's stamp check.
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
byte act[NR];			/* reader_ent.active (`active` is a keyword of Promela) */
byte pins[NR * NPINS];		/* reader_ent.pins */
bool eused[NR];			/* reader_ent.pid != 0 (entry_used) */
byte nest[NR];			/* the process's urcu read-side nesting (its one reader thread) */
byte rq[NR];			/* its reclaimer's queue: pins of retired views, a bitmask */
byte rbatch[NR];		/* the batch its reclaimer took */
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
 * (its locals and its process-local state go, its reclaimer thread with it;
 * its reader entry stays, with its OFD lock free).
 */
#define WDIE \
	:: atomic { d_step { wd < WDEATHS -> \
		wd++; wdead[w] = true; wlock = 0; \
		cs = 0; cg = 0; gen = 0; s = 0; best = 0; bstamp = 0; h = 0; i = 0; k = 0; n = 0; \
		res = false; reaped = false }; \
		goto wgone }

#define RDIE \
	:: atomic { d_step { rd < RDEATHS -> \
		rd++; rdead[r] = true; nest[r] = 0; rq[r] = 0; rbatch[r] = 0; \
		use[r * NSLOTS] = 0; use[r * NSLOTS + 1] = 0; use[r * NSLOTS + 2] = 0; \
		c = 0; s = 0; g = 0; v = 0; v1 = 0; k = 0; nh = 0; pvg = 0; pvs = 0; pvk = 0; prog = 0; \
		hs0 = 0; hg0 = 0; hs1 = 0; hg1 = 0; pv = false; round1 = false; fast = false; ok = false; late = false }; \
		goto rgone }

/*
 * The scan's pre-filter (reclaim.c shmcfg__choose_slot: !shmcfg__gen_pinned),
 * evaluated at once: a heuristic, which shmcfg__claim_slot re-checks.
 */
#define PINNED_NOW(g) ((g) != 0 && \
	((hwm > 0 && act[0] != 0 && (pins[0] == (g) || pins[1] == (g))) || \
	 (hwm > 1 && act[1] != 0 && (pins[2] == (g) || pins[3] == (g)))))

/* reclaim.c shmcfg__gen_pinned, every load its own step: readers_hwm, then
 * each entry's `active`, then (if not 0) its pins, all seq_cst */
inline gen_pinned(g, res)
{
	if
	:: atomic { res = false; i = 0; k = 0; h = (g != 0 -> hwm : 0) }	/* readers.c:88 */
	WDIE
	fi;
	do
	:: atomic { i < h && k == 0 ->
		if
		:: act[i] != 0 -> k = 1			/* reclaim.c:102 */
		:: else -> i++
		fi }
	:: atomic { i < h && k > 0 ->
		if
		:: pins[i * NPINS + k - 1] == g -> res = true; i = h	/* reclaim.c:105 */
		:: else
		fi;
		if
		:: k == NPINS -> k = 0; i++
		:: else -> k++
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
		:: rdead[i] && (eused[i] || pins[i * NPINS] != 0 || pins[i * NPINS + 1] != 0) ->
			act[i] = 0; pins[i * NPINS] = 0; pins[i * NPINS + 1] = 0; eused[i] = false; n++;
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

/* a held snapshot: a stack of two */
#define PUSH(ps, pg) \
	if \
	:: nh == 0 -> hs0 = ps; hg0 = pg \
	:: else -> hs1 = ps; hg1 = pg \
	fi; \
	nh++

/* reclaim.c shmcfg_snapshot_acquire */
inline acquire()
{
	do
	:: if
		:: atomic {
			/* first time: reclaim.c claim_entry, readers.c try_claim: the
			 * entry is ours; readers_hwm raised (seq_cst) before any pin */
			eused[r] = true;
			if
			:: hwm < r + 1 -> hwm = r + 1
			:: else
			fi;
			nest[r]++;			/* urcu_bp_read_lock */
			g = CUR_GEN(current);		/* shmcfg_generation, acquire */
			fast = pv && (pvg == g || round1);	/* round > 0: the view we made */
			g = 0 }
		RDIE
		fi;
		if
		:: fast ->
#ifdef MUTANT_STAMP_BEFORE_ACTIVE
			/* the stamp loaded before the increment (store-load reordering) */
			if :: ok = (stamp[pvs] == pvg) RDIE fi;
			if :: act[r]++ RDIE fi;
			if
			:: atomic { ok -> use[r * NSLOTS + pvs]++; PUSH(pvs, pvg); ok = false; fast = false; round1 = false };
				break
			:: !ok -> act[r]--
			RDIE
			fi
#else
			if :: act[r]++ RDIE fi;			/* (G) seq_cst fetch_add */
#ifdef HARMLESS_PIN_AFTER_ACTIVE
			if
			:: atomic { late -> pins[r * NPINS + pvk] = pvg; late = false }	/* (G) the pin, after */
			:: !late
			RDIE
			fi;
#endif
#ifdef MUTANT_SNAP_NO_CHECK
			/* no stamp re-check */
			atomic { use[r * NSLOTS + pvs]++; PUSH(pvs, pvg); fast = false; round1 = false };
			break
#else
			if
			:: atomic { stamp[pvs] == pvg ->	/* (G) the stamp, seq_cst */
				use[r * NSLOTS + pvs]++; PUSH(pvs, pvg);
				if
				:: nh == 2 -> COVER(9)		/* two snapshots held */
				:: else
				fi;
				if
				:: pvg != CUR_GEN(current) -> COVER(12)	/* the view is older than current */
				:: else
				fi;
				fast = false; round1 = false };
				break				/* the read-side section lasts until release */
			:: stamp[pvs] != pvg ->
				if :: atomic { act[r]--; COVER(2) } RDIE fi	/* release: the view is dead */
			RDIE
			fi
#endif
#endif
		:: else
		fi;
		/* read_unlock; then, under view_lock, replace a view that is gone
		 * (pin_current: a free pin of our entry, relaxed) */
		if
		:: atomic {
			nest[r]--;
			fast = false;
			round1 = true;
			ok = pv && CUR_GEN(current) == pvg && stamp[pvs] == pvg;
			if
			:: !ok -> k = (pins[r * NPINS] == 0 -> 0 : (pins[r * NPINS + 1] == 0 -> 1 : NONE))
			:: else
			fi }
		RDIE
		fi;
		if
		:: atomic { !ok && k == NONE ->		/* -EAGAIN: shmcfg__copy_snapshot, */
			k = 0; round1 = false; COVER(4);	/* the validated read next */
			prog = prog * 4 + 1 };
			break
		:: !ok && k != NONE ->
			/* reclaim.c pin_current */
			do
			:: if :: atomic { c = current; s = CUR_SLOT(c); g = CUR_GEN(c) } RDIE fi;	/* (A) */
#ifdef HARMLESS_PIN_AFTER_ACTIVE
				late = true;
				if
				:: stamp[s] == g -> break
				:: atomic { stamp[s] != g -> assert(current != c) }
				RDIE
				fi
#else
				if :: pins[r * NPINS + k] = g RDIE fi;	/* (G) seq_cst */
#ifdef HARMLESS_NO_PIN_CHECK
				break			/* no stamp check here: the round after re-checks */
#else
				if
				:: stamp[s] == g -> break	/* seq_cst */
				:: stamp[s] != g ->
					if
					:: atomic { pins[r * NPINS + k] = 0;	/* release */
						assert(current != c);	/* shmcfg__seq_retry */
						COVER(3) }
					RDIE
					fi
				RDIE
				fi
#endif
#endif
			od;
			/* publish the new view; retire(old): queued for the reclaimer */
			if
			:: atomic {
				if
				:: pv -> rq[r] = rq[r] | (1 << pvk);
					if
					:: nh > 0 -> COVER(14)	/* retired while a snapshot of it is held */
					:: else
					fi
				:: else
				fi;
				pv = true; pvg = g; pvs = s; pvk = k; c = 0; s = 0; g = 0; k = 0; ok = false }
			RDIE
			fi
		:: else -> ok = false
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
			:: nh == 2 -> s = hs1; g = hg1; hs1 = 0; hg1 = 0
			:: else -> s = hs0; g = hg0; hs0 = 0; hg0 = 0
			fi;
			nh--;
			/* P1: the snapshot's reads (snapshot.c shmcfg_snapshot_get), not validated */
			assert(cell[2 * s] == pubval[g] && cell[2 * s + 1] == pubval[g]);
			use[r * NSLOTS + s]--;
			act[r]--;			/* (H) release */
			nest[r]--;			/* read_unlock */
			s = 0; g = 0
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
 * die, holding its last view's pin) */
proctype Reader(byte r; byte prog)
{
	byte c, s, g, v, v1, k, nh, pvg, pvs, pvk, hs0, hg0, hs1, hg1;
	bool pv, round1, fast, ok, late;
	do
	:: atomic { prog % 4 == 1 -> prog = prog / 4 }; seq_read()
	:: atomic { prog % 4 == 2 -> prog = prog / 4 }; acquire()
	:: atomic { prog % 4 == 3 -> prog = prog / 4 }; release()
	:: prog == 0 -> break
	od;
	atomic { pvg = 0; pvs = 0; pvk = 0; pv = false };
	if
	:: skip
	RDIE
	fi;
rgone:
	skip
}

/* reclaim.c reclaimer(): a retired view's pin is cleared after a grace
 * period. It dies with its process (rdead: its batch is gone). */
proctype Reclaimer(byte r)
{
end:	do
	:: atomic { !rdead[r] && rq[r] != 0 -> rbatch[r] = rq[r]; rq[r] = 0 }
#ifdef MUTANT_NO_GRACE
		atomic {
#else
		atomic { (nest[r] == 0 || rdead[r]) ->	/* grace_period(): urcu_bp_synchronize_rcu */
#endif
			/* unpin_free: (H) release stores */
			if
			:: rbatch[r] & 1 -> pins[r * NPINS] = 0
			:: else
			fi;
			if
			:: rbatch[r] & 2 -> pins[r * NPINS + 1] = 0
			:: else
			fi;
			if
			:: rbatch[r] != 0 && !rdead[r] -> COVER(11)	/* unpinned after a grace period */
			:: else
			fi;
			rbatch[r] = 0 }
	od
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
		run Reader(1, PROG_R1);
		run Reclaimer(0);
		run Reclaimer(1)
	}
}
