#!/bin/sh
# SPDX-License-Identifier: MIT
# The models of the concurrency protocol (tests/model/shmcfg.pml), of the
# writer lock (tests/model/wlock.pml), of the threads' sticky pins
# (tests/model/tpin.pml) and of the accessors' copy (tests/model/copy.pml),
# checked by
# spin: the correct model verifies with no error in each configuration (safety
# and non-progress cycles), reaches every coverage probe, and each mutant (a
# deliberate bug the code must not have) fails. Prints TAP, with each run's
# states and time as comments. Skips (77) without spin or a C compiler, unless
# SHMCFG_REQUIRE_SPIN=1. doc/reliability.md, "The protocol's model".
#
# Environment: top_srcdir (where tests/model/shmcfg.pml is; default .), SPIN,
# CC, MODEL_JOBS (parallel runs, default 2), MODEL_TIMEOUT (seconds per run,
# default 300), MODEL_KEEP=1 (keep the work directory and its trails),
# MODEL_FULL=1 (also the harmless variants: 10 s more).
set -u
: "${top_srcdir:=.}" "${SPIN:=spin}" "${CC:=cc}" "${MODEL_JOBS:=2}" "${MODEL_TIMEOUT:=300}" "${MODEL_FULL:=0}"
pml="$top_srcdir/tests/model/shmcfg.pml"

# the model does not depend on how the library was built: the sanitizer
# builds of CI leave it to the plain one
if [ -n "${SHMCFG_SANITIZERS:-}" ]; then
	echo "1..0 # SKIP the model is checked by the plain build's run"
	exit 0
fi
have() { command -v "$1" >/dev/null 2>&1; }
# $CC may carry flags ("gcc -m32"): look up its first word
cc_word=${CC%% *}
if ! have "$SPIN" || ! have "$cc_word"; then
	if [ "${SHMCFG_REQUIRE_SPIN:-0}" = 1 ]; then
		echo "1..1"
		echo "not ok 1 - spin ($SPIN) and a C compiler ($CC) are required (SHMCFG_REQUIRE_SPIN=1)"
		exit 1
	fi
	echo "1..0 # SKIP spin ($SPIN) or a C compiler ($CC) not found"
	exit 0
fi
if [ ! -r "$pml" ]; then
	echo "1..1"
	echo "not ok 1 - $pml: not found (set top_srcdir)"
	exit 1
fi
pmldir=$(cd "$(dirname "$pml")" && pwd)
pml=$pmldir/shmcfg.pml

tmp=$(mktemp -d "${TMPDIR:-/tmp}/shmcfg-model.XXXXXX") || exit 1
if [ "${MODEL_KEEP:-0}" = 1 ]; then
	trap 'echo "# kept $tmp"' EXIT
else
	trap 'rm -rf "$tmp"' EXIT
fi
trap 'exit 130' INT TERM

# Long runs are compiled with optimisation, short ones without (pan.c takes
# seconds to optimise, more than most runs last). GCC spends most of -O1 in
# dead-store elimination over pan's big transition function: skip it.
fast="-O1"
if echo 'int main(void){return 0;}' > "$tmp/probe.c" &&
	$CC -O1 -fno-dse -fno-tree-dse -o "$tmp/probe" "$tmp/probe.c" >/dev/null 2>&1; then
	fast="-O1 -fno-dse -fno-tree-dse"
fi
# --foreground: pan stays in our process group, and an interrupt reaches it
timeout_cmd=
if have timeout; then
	if timeout --foreground 1 true 2>/dev/null; then
		timeout_cmd="timeout --foreground $MODEL_TIMEOUT"
	else
		timeout_cmd="timeout $MODEL_TIMEOUT"
	fi
fi

# The runs, fields separated by @: name, expect, spin -D flags, optimisation,
# mode, pattern, title
#   expect: pass (no error), fail (an error whose text matches pattern),
#   xpass (pass, run only with MODEL_FULL=1: the harmless variants)
#   mode: safety (assertions, invalid end states) or np (non-progress
#   cycles under weak fairness; assertions too)
# The configurations: V2 nested snapshots and plain reads, a reader that
# dies at any step; V3 writer and reader deaths at any step; L1 four
# generations, a reader that may die holding two pins (liveness); L2
# liveness with a writer that dies at any step. V1: V2 without deaths;
# V1S: V1 with snapshots only; V5: five generations, a reader that takes
# and releases two snapshots (a view reused after its slot was); V1P: V1
# with one pin per entry (every pin held: the copy).
V1="-DS0=3 -DS1=4 -DWDEATHS=0 -DRDEATHS=0"
V1S="-DS0=3 -DS1=2 -DWDEATHS=0 -DRDEATHS=0"
V2="-DS0=3 -DS1=4 -DWDEATHS=0 -DRDEATHS=1"
V3="-DS0=2 -DS1=1 -DWDEATHS=1 -DRDEATHS=1"
L1="-DMAXGEN=4 -DS0=3 -DS1=0 -DWDEATHS=0 -DRDEATHS=1"
L2="-DS0=2 -DS1=0 -DWDEATHS=1 -DRDEATHS=0"
V5="-DMAXGEN=5 -DS0=5 -DS1=0 -DWDEATHS=0 -DRDEATHS=0"
P1='assertion violated .*(use\[|pubval)'
PT='assertion violated .*content\[hs\]'
T4="-DMAXG=4"
P2='assertion violated .*pubval'
PC='assertion violated published'
cat > "$tmp/runs" <<EOF
L1@shmcfg@pass@$L1@$fast@np@@correct model, liveness with a reader dying holding two pins (L1, 4 generations): no non-progress cycle, no assertion
W2@wlock@pass@-DNCOMMITS=2@$fast@safety@@writer lock (wlock.pml), two commits each, a writer dying at any step: mutual exclusion, no invalid end state
V3@shmcfg@pass@$V3@$fast@safety@@correct model, writer and reader deaths at any step (V3): no assertion, no invalid end state
V2@shmcfg@pass@$V2@$fast@safety@@correct model, nested snapshots and reads, a reader dying at any step (V2): no assertion, no invalid end state
L2@shmcfg@pass@$L2@$fast@np@@correct model, liveness with a writer dying at any step (L2): no non-progress cycle, no assertion
V5@shmcfg@pass@$V5@$fast@safety@@correct model, five generations, two snapshots in turn (V5): no assertion, no invalid end state
V1P@shmcfg@pass@$V1 -DONE_PIN@$fast@safety@@correct model, one pin per entry: every pin held, the snapshot copies (V1P): no assertion, no invalid end state
harmless@shmcfg@xpass@$V1S -DHARMLESS_NO_VIEW_CHECK@$fast@safety@@variant: make_view without its stamp check is harmless (V1, snapshots only): no error
no_recheck@shmcfg@fail@$V3 -DMUTANT_NO_RECHECK@-O0@safety@$P2@mutant: the stamp checked before the cells and not re-loaded after them: a mixed read (P2)
reuse_held@shmcfg@fail@$V1 -DMUTANT_REUSE_HELD@-O0@safety@$P1@mutant: a view rewritten in a pin that still holds a snapshot: that snapshot's slot rewritten (P1)
no_tag_check@shmcfg@fail@$V5 -DMUTANT_NO_TAG_CHECK@-O0@safety@$P1@mutant: a view taken without checking its word's tag: counted on another generation, its slot rewritten (P1)
busy_no_gen@shmcfg@fail@$V3 -DMUTANT_BUSY_NO_GEN@-O0@safety@$P1@mutant: the busy mark without the old generation: after a writer's death, a held snapshot's slot rewritten (P1)
stamp_before_count@shmcfg@fail@$V1 -DMUTANT_STAMP_BEFORE_COUNT@-O0@safety@$P1@mutant: the reader's stamp load before its increment (store-load reordering): a slot rewritten in use (P1)
mark_after_check@shmcfg@fail@$V1 -DMUTANT_MARK_AFTER_CHECK@-O0@safety@$P1@mutant: the writer's busy mark after its pin check (store-load reordering): a slot rewritten in use (P1)
snap_no_check@shmcfg@fail@$V1 -DMUTANT_SNAP_NO_CHECK@-O0@safety@$P1@mutant: a snapshot's view taken without the stamp re-check after the increment (P1)
publish_early@shmcfg@fail@$V1 -DMUTANT_PUBLISH_EARLY@-O0@safety@$P2@mutant: (D) and (E) before the rewrite: a read of the new generation gets old values (P2)
e_before_d@shmcfg@fail@$V1 -DMUTANT_E_BEFORE_D@-O0@safety@assertion violated .*current!=c@mutant: (E) before (D): a reader fails validation while current stays (the seq_retry rule)
no_sweep@shmcfg@fail@$V3 -DMUTANT_NO_SWEEP@-O0@safety@assertion violated .*stamp\[0\]&127@mutant: the successor does not unstamp a dead writer's unpublished slot: two slots carry one generation
no_reap@shmcfg@fail@$L1 -DMUTANT_NO_REAP@-O0@np@non-progress cycle@mutant: dead readers never reaped: the writer waits for ever (P3)
W1@wlock@pass@-DNCOMMITS=1@$fast@safety@@writer lock (wlock.pml), one commit each, a writer dying at any step: mutual exclusion, no invalid end state
getlk@wlock@fail@-DMUTANT_GETLK@-O0@safety@assertion violated .*incs==1@mutant: the owner's death told by a look at its byte, the word swapped without holding it: a new owner robbed (mutual exclusion)
no_claim_clear@wlock@fail@-DMUTANT_NO_CLAIM_CLEAR@-O0@safety@invalid end state@mutant: a claim of a dead owner's entry leaves its word: waiters wait for ever
no_wake@wlock@fail@-DMUTANT_NO_WAKE@-O0@safety@invalid end state@mutant: the owner drops the word without waking its sleepers: they sleep for ever
T1@tpin@pass@$T4@$fast@safety@@thread pins (tpin.pml), an owner with a store buffer, another thread releasing, a writer over 3 slots and 4 commits: a held slot never rewritten
tp_fast@tpin@fail@$T4 -DPROBE=1@-O0@safety@assertion violated .1!=1.@thread pins: a fast acquire is reached (probe)
tp_taken@tpin@fail@$T4 -DPROBE=2@-O0@safety@assertion violated .2!=2.@thread pins: a writer takes a slot whose pin it revoked (probe)
tp_backoff@tpin@fail@$T4 -DPROBE=3@-O0@safety@assertion violated .3!=3.@thread pins: a fast acquire backs off on a revocation (probe)
tp_foreign@tpin@fail@$T4 -DPROBE=4@-O0@safety@assertion violated .4!=4.@thread pins: a release by another thread (probe)
tp_trust@tpin@fail@$T4 -DMUTANT=1@-O0@safety@$PT@mutant: the writer trusts the count of a pin it did not revoke: a held slot rewritten
tp_no_mb@tpin@fail@$T4 -DMUTANT=2@-O0@safety@$PT@mutant: no membarrier after the revocation: an increment in the owner's store buffer missed
tp_no_check@tpin@fail@$T4 -DMUTANT=3@-O0@safety@$PT@mutant: the fast acquire does not load its revocation: counted after the writer trusted the count
tp_no_recheck@tpin@fail@$T4 -DMUTANT=4@-O0@safety@$PT@mutant: the writer does not check the pins again after its busy mark: a re-pin missed
C1@copy@pass@@$fast@safety@@accessors' copy (copy.pml), two options in one block, two commits, a writer dying at any step: each read a published value of its time, never backwards
C2@copy@pass@-DSPLIT@$fast@safety@@accessors' copy, each option a block of its own (C2): the same
c_probe_copy@copy@fail@-DPROBE=1@-O0@safety@assertion violated .1!=1.@accessors' copy: a read taken from the copy (probe)
c_probe_slots@copy@fail@-DPROBE=2@-O0@safety@assertion violated .2!=2.@accessors' copy: a read the copy's seqlock sends to the slots (probe)
c_probe_death@copy@fail@-DPROBE=3@-O0@safety@assertion violated .3!=3.@accessors' copy: a writer's death (probe)
c_probe_whole@copy@fail@-DPROBE=4@-O0@safety@assertion violated .4!=4.@accessors' copy: a whole rewrite after a death (probe)
c_e_first@copy@fail@-DMUTANT=1@-O0@safety@$PC@mutant: (E) before (W1): an accessor reads the old word of a published generation
c_w3_first@copy@fail@-DMUTANT=2@-O0@safety@$PC@mutant: (W3) before (E): an accessor reads a word not yet published
c_no_r3@copy@fail@-DMUTANT=3@-O0@safety@$PC@mutant: the accessor does not load the seqlock again: a word read across a commit
c_odd_ok@copy@fail@-DMUTANT=4@-O0@safety@$PC@mutant: the accessor takes an odd seqlock: a word read while it is written
c_no_dirty@copy@fail@-DMUTANT=5@-O0@safety@$PC@mutant: copy_dirty ignored: a dead writer's word in a block the next commit makes even
EOF
nruns=$(wc -l < "$tmp/runs")
echo "1..$((nruns + 2))"

# One run, by its line number in $tmp/runs: its verdict in $tmp/<name>.res.
cat > "$tmp/one.sh" <<'EOF'
set -u
line=$(sed -n "${1}p" "$tmp/runs")
IFS='@' read -r name model expect dflags opt mode pattern title <<LINE
$line
LINE
d="$tmp/$name"
mkdir "$d" && cd "$d" || exit 1
res="$tmp/$name.res"
if [ "$expect" = xpass ]; then
	if [ "${MODEL_FULL:-0}" != 1 ]; then
		echo skip > "$res"
		exit 0
	fi
	expect=pass
fi
# statement merging off (-o3): pan's list of unreached statements is then
# exact, for the coverage probes
if ! $SPIN -o3 $dflags -a "$pmldir/$model.pml" > spin.out 2>&1; then
	{ echo "fail"; echo "spin -a failed:"; sed 's/^/  /' spin.out; } > "$res"
	exit 0
fi
if [ "$mode" = np ]; then
	cflags="-DNP -DNFAIR=3"; pflags="-l -f"
else
	cflags="-DSAFETY"; pflags=""
fi
if ! $CC $opt -w $cflags -DMEMLIM=4096 -o pan pan.c > cc.out 2>&1; then
	{ echo "fail"; echo "$CC failed:"; sed 's/^/  /' cc.out | head -20; } > "$res"
	exit 0
fi
start=$(date +%s)
$timeout_cmd ./pan -m20000 -w23 $pflags > pan.out 2>&1
rc=$?
end=$(date +%s)
errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.out | head -1)
stored=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | head -1)
visited=$(sed -n 's/.*states, stored (\([0-9.e+]*\) visited).*/\1/p' pan.out | head -1)
elapsed=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' pan.out | head -1)
first=$(grep -m1 -E '^pan:[0-9]+:' pan.out)
note="${stored:-?} states stored${visited:+ ($visited visited)}, pan ${elapsed:-?} s (wall $((end - start)) s; compiled $opt)"
verdict=fail why=
if [ $rc -ge 124 ] && [ -z "$errors" ]; then
	why="timed out or killed (rc $rc)"
elif [ -z "$errors" ]; then
	why="no verdict from pan (rc $rc)"
elif grep -q 'max search depth too small' pan.out; then
	why="search depth exceeded (raise -m)"
elif grep -qE 'out of memory|hash table is full' pan.out; then
	why="ran out of memory"
elif [ "$expect" = pass ]; then
	if [ "$errors" = 0 ]; then verdict=ok; else why="$errors error(s): $first"; fi
else
	if [ "$errors" != 0 ] && printf '%s\n' "$first" | grep -qE "$pattern"; then
		verdict=ok; note="$note; found: $first"
	elif [ "$errors" != 0 ]; then
		why="an error, but not the one expected ($pattern): $first"
	else
		why="no error: the mutant went unnoticed"
	fi
fi
{
	echo "$verdict"
	echo "$title"
	echo "$name: $note"
	[ -n "$why" ] && echo "$why"
	# probes never reached
	sed -n 's/.*"cov = \([0-9][0-9]*\)".*/unreached \1/p' pan.out
} > "$res"
[ "${MODEL_KEEP:-0}" = 1 ] || rm -f pan pan.c pan.h pan.m pan.b pan.p pan.t
exit 0
EOF

export tmp pmldir SPIN CC timeout_cmd MODEL_KEEP MODEL_FULL
seq 1 "$nruns" | xargs -P "$MODEL_JOBS" -n 1 sh "$tmp/one.sh"

n=0 fails=0
while IFS='@' read -r name model expect dflags opt mode pattern title; do
	n=$((n + 1))
	res="$tmp/$name.res"
	if [ ! -s "$res" ]; then
		echo "not ok $n - $title"
		echo "# $name: no result"
		fails=$((fails + 1))
		continue
	fi
	verdict=$(sed -n 1p "$res")
	if [ "$verdict" = skip ]; then
		echo "ok $n - $title # SKIP MODEL_FULL=1 runs it"
		continue
	elif [ "$verdict" = ok ]; then
		echo "ok $n - $title"
	else
		echo "not ok $n - $(sed -n 2p "$res")"
		fails=$((fails + 1))
	fi
	sed -n '3,$p' "$res" | grep -v '^unreached ' | sed 's/^/# /'
done < "$tmp/runs"

# Coverage: each probe of a model reached by some run of its correct model.
coverage() { # MODEL RUNS...
	m=$1
	shift
	n=$((n + 1))
	probes=$(sed -n 's/.*COVER(\([0-9][0-9]*\)).*/\1/p' "$pmldir/$m.pml" | sort -un)
	missing=
	for p in $probes; do
		reached=no
		for r in "$@"; do
			if [ -s "$tmp/$r.res" ] && [ "$(sed -n 1p "$tmp/$r.res")" = ok ] &&
				! grep -qx "unreached $p" "$tmp/$r.res"; then
				reached=yes
			fi
		done
		[ $reached = yes ] || missing="$missing $p"
	done
	if [ -z "$probes" ]; then
		echo "not ok $n - coverage of $m.pml: no probe found in the model"
		fails=$((fails + 1))
	elif [ -z "$missing" ]; then
		echo "ok $n - coverage: the runs of $m.pml's correct model reach each of its $(echo $probes | wc -w) probes"
	else
		echo "not ok $n - coverage of $m.pml: probes never reached:$missing"
		fails=$((fails + 1))
	fi
}
coverage shmcfg V2 V3 L1 L2 V5 V1P
coverage wlock W1 W2
[ $fails = 0 ]
