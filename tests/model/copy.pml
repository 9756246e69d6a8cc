/* SPDX-License-Identifier: MIT */
/*
 * The accessors' copy (lib/read/seqlock.h, seq_publish_copy(); its reader
 * shmcfg__read_proven() in include/shmcfg/proven.h; doc/design.md,
 * "Generated accessors and the batched read") as a Promela model for spin,
 * checked by tests/model/check.sh (runs C*: the correct model in two
 * configurations, its probes and five mutants).
 *
 *   spin -a copy.pml && cc -O1 -DSAFETY -o pan pan.c && ./pan -m20000
 *   (and -DMUTANT=n, n = 1..5: each must fail; -DPROBE=n, n = 1..4: each
 *   must fail, which shows the step is reached: 1 a read taken from the
 *   copy, 2 a read the copy's seqlock sends to the slots, 3 a writer's
 *   death, 4 a whole rewrite; -DSPLIT: each option a block of its own, both
 *   in one block by default; -DMAXG=n: the last generation, 3 by default
 *   (two commits); -DWDEATHS=n writer deaths, 1 by default (2: 30 M states,
 *   25 s); -DNREADS=n reads, 3 by default)
 *
 * The protocol. Every commit keeps each option's effective value word in a
 * copy after the header, in blocks of a seqlock word and seven options'
 * words; here two options, in one block or (SPLIT) in two. The writer (one at a time: the writer lock, tests/model/wlock.pml) of
 * generation g + 1:
 *   copy_dirty found set (a writer died inside): whole; copy_dirty = 1;
 *   (W1) each changed option's block odd, and
 *   (W2) its word from the new slot's cells; if whole, every block odd,
 *        then every option's word;
 *   (E)  `current` = g + 1: publication (the slots' protocol, which
 *        tests/model/shmcfg.pml checks, is atomic here: a slot read gives
 *        the value of the generation in `current`, at one instant);
 *   (W3) those blocks even again, past their old values;
 *   copy_dirty = 0.
 * A writer may die at any step (WDEATHS): it leaves what it wrote, and a
 * commit that dies before (E) published nothing; the next writer commits
 * generation g + 1 afresh, with other changes. Each attempt writes values
 * of its own (a dead one's were never any generation's), so a read that
 * returns a dead writer's word fails.
 * The accessor (R1) loads the block's seqlock, (R2) the word, (R3) the
 * seqlock again: equal and even, the word is the value; else the slots.
 *
 * Memory model: sequentially consistent. On x86-TSO the protocol has no
 * store followed by a load whose order matters (the writer's only load of
 * the copy is of its own block; the reader stores nothing), so TSO behaves
 * as SC here; for weaker machines the code's fences give these orders (the
 * W1 release fence before W2, W3's release store paired with R1's acquire
 * load, the acquire fence between R2 and R3): seqlock.h says which pairs
 * with which. This model checks the order of the steps, not the fences.
 *
 * Checked, with values that name the generation that set them (option o of
 * generation g holds the number of the last generation <= g that changed
 * o): each read, by the copy or the slots, returns the value of a
 * generation published between the read's start and its end (never a
 * dead writer's word, never a generation not yet published or an old one); a
 * reader's reads of an option never go backwards, across the two paths
 * (which the first implies, each read's window starting where the last
 * ended: asserted as a cross-check of the model itself).
 * Mutants (each must fail): 1 (E) before (W1): published, then the words
 * written in even blocks; 2 (W3) before (E): the new words in even blocks
 * before the publication; 3 the reader skips (R3): a word read in a block
 * that went odd and changed under it; 4 the reader does not test the
 * seqlock's low bit: a word read while odd; 5 copy_dirty ignored: a dead
 * writer's word left in a block that the next commit makes even.
 */

#ifndef MAXG
#define MAXG 3      /* the last generation: commits 2..MAXG */
#endif
#ifndef WDEATHS
#define WDEATHS 1   /* writers that may die */
#endif
#ifndef NREADS
#define NREADS 3    /* the reader's reads */
#endif
#ifndef MUTANT
#define MUTANT 0
#endif
#ifndef PROBE
#define PROBE 0
#endif
#define probe(n) assert(PROBE != n)

#define NOPT 2
#define NBLK 2
#ifdef SPLIT
#define BLK(o) (o)   /* each option a block of its own */
#else
#define BLK(o) 0     /* both options in one block */
#endif

/* the copy */
byte seq[NBLK];
byte word[NOPT];
bool copy_dirty;
/* `current` and what its slot holds, published at once by (E) */
byte cur_g = 1;
byte curval[NOPT];
/* what each published generation held: hist[g * NOPT + o] (values grow:
 * each commit attempt writes its own number into the options it changes) */
byte hist[(MAXG + 2) * NOPT];

proctype reader()
{
	byte o, q, w, again, v, gs, k, n = 0;
	byte last[NOPT];
	bool published;
	do
	:: n < NREADS ->
		atomic {
			n++;
			if
			:: o = 0
			:: o = 1
			fi;
			gs = cur_g
		};
		if
		:: q = seq[BLK(o)];   /* (R1) */
			w = word[o];       /* (R2) */
#if MUTANT == 3
			again = q;
#else
			again = seq[BLK(o)]; /* (R3) */
#endif
#if MUTANT == 4
			if
			:: again == q -> v = w; probe(1)
#else
			if
			:: again == q && (q & 1) == 0 -> v = w; probe(1)
#endif
			:: else -> v = curval[o]; probe(2) /* the slots */
			fi
		:: v = curval[o] /* a read by the slots alone */
		fi;
		/* what the read returned was published between its start and now */
		d_step {
			published = false;
			k = gs;
			do
			:: k <= cur_g -> published = published || hist[k * NOPT + o] == v; k++
			:: else -> break
			od;
			assert(published);
			assert(v >= last[o]); /* never backwards */
			last[o] = v;
			q = 0; w = 0; again = 0; v = 0; gs = 0; k = 0; published = false
		}
	:: else -> break
	od
}

/* The writer may die here: the rest of its commit never happens. */
#if WDEATHS > 0
#define DIE if :: deaths < WDEATHS -> deaths++; probe(3); goto died :: true -> skip fi
#else
#define DIE skip
#endif

inline odd(b) { seq[b] = seq[b] | 1 }
/* (E): `current` and its slot's values at once; the history of the model */
#define PUBLISH skip; d_step { cur_g = g + 1; o = 0; \
	do :: o < NOPT -> curval[o] = nv[o]; hist[(g + 1) * NOPT + o] = nv[o]; o++ :: else -> break od }
inline even(b) { seq[b] = (seq[b] | 1) + 1 }

proctype writer()
{
	byte g = 1, o, att = 1, deaths = 0;
	bool ch[NOPT];
	byte nv[NOPT]; /* the new slot's cells */
	bool whole;
	do
	:: g < MAXG ->
		att++; /* this attempt's value: no other attempt's, dead or not */
		/* the changes: a nonempty set of options */
		o = 0;
		do
		:: o < NOPT -> if :: ch[o] = true :: ch[o] = false fi; o++
		:: else -> break
		od;
		if
		:: !ch[0] && !ch[1] -> ch[0] = true
		:: else -> skip
		fi;
		o = 0;
		do
		:: o < NOPT -> nv[o] = (ch[o] -> att : curval[o]); o++
		:: else -> break
		od;
#if MUTANT == 5
		whole = false;
#else
		whole = copy_dirty;
#endif
		copy_dirty = true;
		DIE;
#if MUTANT == 1
		PUBLISH;
		DIE;
#endif
		o = 0;
		if
		:: whole -> /* every block (W1), then every word (W2) */
			do
			:: o < NBLK -> odd(o); DIE; o++
			:: else -> break
			od;
			o = 0;
			do
			:: o < NOPT -> word[o] = nv[o]; DIE; o++ /* (W2) */
			:: else -> break
			od
		:: else ->
			do
			:: o < NOPT ->
				if
				:: ch[o] ->
					odd(BLK(o)); /* (W1) */
					DIE;
					word[o] = nv[o]; /* (W2) */
					DIE
				:: else -> skip
				fi;
				o++
			:: else -> break
			od
		fi;
#if MUTANT == 2
		o = 0;
		do
		:: o < NOPT -> if :: whole || ch[o] -> even(BLK(o)); DIE :: else -> skip fi; o++
		:: else -> break
		od;
#endif
#if MUTANT != 1
		PUBLISH; /* (E) */
		DIE;
#endif
#if MUTANT != 2
		o = 0;
		if
		:: whole -> /* every block (W3) */
			do
			:: o < NBLK -> even(o); DIE; o++
			:: else -> break
			od
		:: else -> /* each changed option's block (W3): twice for a block of two */
			do
			:: o < NOPT -> if :: ch[o] -> even(BLK(o)); DIE :: else -> skip fi; o++
			:: else -> break
			od
		fi;
#endif
		copy_dirty = false;
		if :: whole -> probe(4) :: else -> skip fi;
died:
		g = cur_g /* a dead writer's successor commits the next generation */
	:: else -> break
	od
}

init
{
	byte o = 0;
	atomic {
		/* generation 1: every option's value 1, the copy even */
		do
		:: o < NOPT -> curval[o] = 1; word[o] = 1; hist[NOPT + o] = 1; o++
		:: else -> break
		od;
		run reader();
		run writer()
	}
}
