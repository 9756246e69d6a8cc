#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""examples/README.md does what it shows: tests/readme.py --examples (the
regtest tier: its trainer runs take about 20 s)."""
import os
import sys

readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "readme.py")
os.execv(sys.executable, [sys.executable, readme, "--examples"])
