# SPDX-License-Identifier: MIT
"""python3 -m shmcfg.importer: the shmcfg-import command."""

import sys

from .cli import run

sys.exit(run())
