/* SPDX-License-Identifier: MIT */
/*
 * The writer lock (lib/commit/wlock.c, and the claim's half in
 * lib/read/readers.c), as a Promela model for spin. Run by
 * tests/model/check.sh; described in doc/reliability.md, "The protocol's
 * model".
 *
 * What it models: the lock word (0, or its owner: reader entry e as e + 1,
 * or BYOFD for a writer without an entry, which holds byte 0), its waiters'
 * bit, the OFD locks on byte 0 and on each entry's byte, and:
 *  - wlock_take: the compare-and-swap from 0, the look at a taken word, the
 *    death check take_from_dead (a non-blocking lock attempt on the owner's
 *    byte, the compare-and-swap while holding it, the unlock; a waiter that
 *    holds byte 0 itself takes a BYOFD word at once), the waiters' bit set
 *    by compare-and-swap, the futex sleep (FUTEX_WAIT compares the word; a
 *    sleeper wakes on a FUTEX_WAKE or, the code's 10 ms slice, when the
 *    owner's byte is free: the model lets a sleeper wake only then, so a
 *    lost wake-up shows as a deadlock);
 *  - wlock_drop: the exchange to 0, FUTEX_WAKE if the bit was set;
 *  - shmcfg__lock_writer: a writer without an entry takes byte 0 (blocking)
 *    before the word and drops it after;
 *  - readers.c try_claim: a process that takes a dead owner's entry byte
 *    frees a word naming that entry (wlock_entry_taken), then commits too;
 *  - death: a killer may kill one writer at any step (the kernel drops its
 *    OFD locks: its entry's byte, byte 0, a byte it was trying; the word
 *    stays as it was).
 *
 * Processes: writer 0 holds entry 0 (claimed at its start); writers 1 and
 * 2 have none (BYOFD). Each makes NCOMMITS commits, then lives on
 * holding its entry's byte (a process whose work is done but which has not
 * exited: a waiter must not depend on its exit). The claimer takes the entry
 * of a dead writer, if one died, and commits once as its owner.
 *
 * Properties: mutual exclusion (an assertion in the critical section); no
 * invalid end state (every live writer finishes its commits: no wait on a
 * dead owner or a lost wake-up lasts for ever).
 *
 * Mutants (-D): MUTANT_GETLK tells death by a look at the owner's byte
 * (F_OFD_GETLK) and then swaps without holding it: a new owner of the same
 * entry is robbed (mutual exclusion); MUTANT_NO_CLAIM_CLEAR: a claim leaves
 * the dead owner's word (waiters find its byte held, for ever); MUTANT_NO_WAKE:
 * the owner drops the word without waking the sleepers (they sleep for ever).
 */

#ifndef NCOMMITS
#define NCOMMITS 1
#endif
#ifndef DEATHS
#define DEATHS 1
#endif

#define NW 3
#define BIT 16          /* WLOCK_WAITERS */
#define BYOFD 3         /* WLOCK_BY_OFD: the entries' words are 1 and 2 */
#define OWNER(w) ((w) & 15)
#define CLAIMER 5       /* the claimer's id + 1 in the byte holders */

byte word;              /* lock_file.writer */
byte b0;                /* byte 0's OFD lock: holder + 1, 0 free */
byte eb[2];             /* entry bytes' OFD locks: holder + 1, 0 free */
byte wakes;             /* FUTEX_WAKE calls so far (mod 256) */
byte incs;              /* writers in the critical section */
bool inside[NW + 1];    /* who: a writer that dies there leaves it */
bool dead[NW];
bool kill[NW];
byte deaths;
byte cov;
#define COVER(n) cov = n; cov = 0

/* The killer: one writer dies at any point (the `unless` of each writer). */
active proctype Killer()
{
	if
	:: deaths < DEATHS -> deaths++;
		if
		:: kill[0] = true
		:: kill[1] = true
		:: kill[2] = true
		fi
	:: true
	fi
}

/* the owner the word names is gone: its byte is free */
#define OWNER_BYTE_FREE(w) \
	((OWNER(w) == BYOFD && b0 == 0) || (OWNER(w) == 1 && eb[0] == 0) || (OWNER(w) == 2 && eb[1] == 0))

inline critical_section(who)
{
	atomic { incs++; inside[who] = true };
	assert(incs == 1);
	atomic { incs--; inside[who] = false }
}

proctype Writer(byte p)
{
	byte mine, w, n, waited, seen, got;
	bool byofd = (p >= 1);
	{
		if
		:: byofd -> mine = BYOFD
		:: else -> atomic { eb[p] == 0 -> eb[p] = p + 1 }; mine = p + 1	/* reader_claim */
		fi;
		do
		:: n < NCOMMITS ->
			if
			:: byofd -> atomic { b0 == 0 -> b0 = p + 1 }		/* ofd_lock byte 0, waits */
			:: else
			fi;
			waited = 0;
			do
			:: atomic { word == 0 -> word = mine | waited; break }	/* CAS 0 -> mine */
			:: atomic { word != 0 -> w = word }
				/* take_from_dead */
				got = 0;
				if
				:: OWNER(w) == BYOFD && byofd ->		/* we hold byte 0 */
					atomic { if :: word == w -> word = mine | (w & BIT); got = 1; COVER(1) :: else fi }
				:: else ->
#ifdef MUTANT_GETLK
					if
					:: atomic { OWNER_BYTE_FREE(w) } ->
						atomic { if :: word == w -> word = mine | (w & BIT); got = 1 :: else fi }
					:: else
					fi
#else
					if
					:: atomic { OWNER(w) == BYOFD && b0 == 0 -> b0 = p + 1 } ->
						atomic { if :: word == w -> word = mine | (w & BIT); got = 1; COVER(2) :: else fi };
						b0 = 0
					:: atomic { OWNER(w) == 1 && eb[0] == 0 -> eb[0] = p + 1 } ->
						atomic { if :: word == w -> word = mine | (w & BIT); got = 1; COVER(3) :: else fi };
						eb[0] = 0
					:: atomic { OWNER(w) == 2 && eb[1] == 0 -> eb[1] = p + 1 } ->
						atomic { if :: word == w -> word = mine | (w & BIT); got = 1 :: else fi };
						eb[1] = 0
					:: else	/* alive, or its byte held by a claimer or another taker */
					fi
#endif
				fi;
				if
				:: got -> break
				:: else
				fi;
				/* the waiters' bit, then the futex sleep on w | BIT */
				if
				:: atomic { word == w -> word = w | BIT; w = w | BIT }
				:: atomic { word != w -> w = 0 }		/* moved: look again */
				fi;
				if
				:: w != 0 ->
					if
					:: atomic { word == w -> seen = wakes }	/* FUTEX_WAIT sleeps */
						/* woken, or the slice ended and the owner is gone */
						atomic { wakes != seen || OWNER_BYTE_FREE(w) -> COVER(4) };
						waited = BIT
					:: atomic { word != w }			/* EAGAIN */
					fi
				:: else
				fi
			od;
			critical_section(p);
			/* wlock_drop */
			atomic {
				w = word; word = 0;
#ifndef MUTANT_NO_WAKE
				if :: w & BIT -> wakes++; COVER(5) :: else fi
#endif
			};
			if
			:: byofd -> b0 = 0
			:: else
			fi;
			n++
		:: else -> break
		od;
		/* done: lives on, holding its entry */
	} unless {
		atomic { kill[p] ->
			dead[p] = true;
			if :: eb[0] == p + 1 -> eb[0] = 0 :: else fi;
			if :: eb[1] == p + 1 -> eb[1] = 0 :: else fi;
			if :: b0 == p + 1 -> b0 = 0 :: else fi;
			/* it may have died in the critical section */
			if :: inside[p] -> inside[p] = false; incs-- :: else fi;
			COVER(6) }
	}
}

/* A new process claims a dead writer's entry (try_claim), then commits once. */
active proctype Claimer()
{
	byte e, w, mine, waited, seen;
end_claim:
	if
	:: atomic { dead[0] && eb[0] == 0 -> eb[0] = CLAIMER; e = 0 }
	:: atomic { dead[1] && eb[1] == 0 -> eb[1] = CLAIMER; e = 1 }
	fi;
	mine = e + 1;
#ifndef MUTANT_NO_CLAIM_CLEAR
	atomic {							/* wlock_entry_taken */
		if
		:: OWNER(word) == mine -> w = word; word = 0; COVER(7);
			if :: w & BIT -> wakes++ :: else fi
		:: else
		fi
	};
#endif
	/* its commit: the same take as a writer's, without deaths of its own
	 * (one death is the bound); it waits like the others */
	do
	:: atomic { word == 0 -> word = mine | waited; break }
	:: atomic { word != 0 -> w = word }
		if
		:: atomic { word == w && OWNER(w) == BYOFD && b0 == 0 -> word = mine | (w & BIT); break }
		:: atomic { word == w && OWNER(w) == 1 && eb[0] == 0 -> word = mine | (w & BIT); break }
		:: atomic { word == w && OWNER(w) == 2 && eb[1] == 0 -> word = mine | (w & BIT); break }
		:: else
		fi;
		if
		:: atomic { word == w -> word = w | BIT; w = w | BIT; seen = wakes }
			atomic { wakes != seen || word != w || OWNER_BYTE_FREE(w) };
			waited = BIT
		:: atomic { word != w }
		fi
	od;
	critical_section(NW);
	atomic { w = word; word = 0; if :: w & BIT -> wakes++ :: else fi }
}

init
{
	atomic {
		run Writer(0);
		run Writer(1);
		run Writer(2)
	}
}
