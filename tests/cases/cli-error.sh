#!/bin/sh
# The shmctl error cases, one directory each under tests/cases/cli-error
# (tests/cases/README): run by tests/cases/cli_error.py, which prints TAP.
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
exec "${PYTHON3:-python3}" "$top_srcdir/tests/cases/cli_error.py"
