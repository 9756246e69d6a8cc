#!/bin/sh
# SPDX-License-Identifier: MIT
# Stands for the C tests in a build configured --without-cmocka, which
# builds none of them: reports each test of the tier (make regtest sets
# SHMCFG_TIER=regtest) as a skip, so that the summary counts them.
if [ "${SHMCFG_TIER:-check}" = regtest ]; then
	tests=${SHMCFG_REGTEST_C_TESTS:-}
else
	tests=${SHMCFG_CHECK_C_TESTS:-}
fi
n=0
for t in $tests; do
	n=$((n + 1))
	echo "ok $n $t # SKIP built without cmocka (configure --without-cmocka)"
done
echo "1..$n"
