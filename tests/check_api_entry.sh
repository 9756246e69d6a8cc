#!/bin/sh
# SPDX-License-Identifier: MIT
# Every exported function of include/shmcfg.h.in begins with SHMCFG_API_ENTRY
# (those that cannot fail with SHMCFG_API_KEEP): the outermost public call
# clears the error detail (lib/internal.h). Exempt: the error functions, the
# version and the slow paths of the inline getters (which must call nothing
# that is not async-signal-safe) and of generated batched reads (as the
# getters', it keeps the thread's error detail). The calls with a fast path
# (FAST) begin with SHMCFG_API_FAST instead, the releasers with a fast path
# (FAST_KEEP) with SHMCFG_API_FAST_KEEP: lib/internal.h says when that is
# the same. Prints TAP.
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
cd "$top_srcdir" || exit 99

EXEMPT=" shmcfg_errdetail shmcfg_strerror shmcfg_errname shmcfg_version shmcfg__get_slow shmcfg__get_slow_n shmcfg__snapshot_get_slow "
# the functions that cannot fail: releasers and accessors without a status
KEEP=" shmcfg_value_clear shmcfg_schema_free shmcfg_close shmcfg_closep
 shmcfg_txn_abort shmcfg_cluster_apply_abort shmcfg_patcher_free shmcfg_value_equal shmcfg_list_next shmcfg_type_name
 shmcfg_source_name shmcfg_schema_count shmcfg_name shmcfg_count shmcfg_readonly
 shmcfg_schema_hash shmcfg_snapshot_generation shmcfg_snapshot_hash shmcfg_snapshot_cluster_revision
 shmcfg_set_commit_timeout shmcfg_set_heap_growth shmcfg_history_free
 shmcfg_set_log shmcfg_retired shmcfg_waiters "
KEEP=" $(echo $KEEP) "
FAST=" shmcfg_snapshot_acquire "
FAST_KEEP=" shmcfg_snapshot_release "

names=$(sed -n 's/^SHMCFG_EXPORT[^(]*[ *]\([a-z_0-9]*\)(.*/\1/p' include/shmcfg.h.in)
[ -n "$names" ] || { echo "Bail out! no SHMCFG_EXPORT functions found in include/shmcfg.h.in"; exit 99; }

n=0
fail=0
for f in $names; do
	case "$EXEMPT" in *" $f "*) continue ;; esac
	want=SHMCFG_API_ENTRY
	case "$KEEP" in *" $f "*) want=SHMCFG_API_KEEP ;; esac
	case "$FAST" in *" $f "*) want=SHMCFG_API_FAST ;; esac
	case "$FAST_KEEP" in *" $f "*) want=SHMCFG_API_FAST_KEEP ;; esac
	# the first line of the body of the definition: "file:line: text"
	first=$(awk -v f="$f" '
		!body && ($0 ~ "^[a-z].*[ *]" f "\\(" || $0 ~ "^[a-z].*[ *]\\(" f "\\)\\(") && $0 !~ /;[ \t]*$/ { head = FILENAME ":" FNR; body = 1; next }
		body == 1 && $0 == "{" { body = 2; next }
		body == 2 { print head ": " $0; exit }
	' lib/*/*.c)
	n=$((n + 1))
	if [ -z "$first" ]; then
		# not defined (yet): tests/check_exports.sh reports it
		echo "ok $n - $f # SKIP not defined in lib/*/*.c"
		continue
	fi
	case "$first" in
	*": 	$want;" | *": 	$want("*) echo "ok $n - $f begins with $want" ;;
	*)
		echo "not ok $n - $f does not begin with $want"
		echo "#   ${first%%: *}: body starts with: ${first#*: }"
		fail=1
		;;
	esac
done
echo "1..$n"
exit $fail
