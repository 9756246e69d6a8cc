#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Python binding's type hints (PEP 561): the package carries py.typed,
mypy finds its own code consistent with its hints, and a user's program
written against the public API passes ``mypy --strict`` (which rejects a
call of an unannotated function and a wrongly typed use of a return value).

Skips (exit 77) where mypy is not installed, unless SHMCFG_REQUIRE_MYPY=1
(CI: .ci/deps installs it), where that is a failure. The cache lives in the
build tree (tests/mypy-cache/), so a later run takes seconds. Run by
`make check`, or by hand from a built tree: python3 tests/test_typing.py
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("top_srcdir") or os.path.dirname(HERE)
BUILDDIR = os.environ.get("top_builddir") or os.path.dirname(HERE)
PKG = os.path.join(SRCDIR, "python", "shmcfg")

try:
    import mypy  # noqa: F401
except ImportError as e:
    if os.environ.get("SHMCFG_REQUIRE_MYPY") == "1":
        raise
    print(f"# skipped: mypy is not installed ({e}); .ci/deps installs it", file=sys.stderr)
    sys.exit(77)

# Every public name of the package, used as a typed program would; each
# reveal_type-free line is checked by --strict for an untyped call or an
# Any where a type is expected.
CLIENT = '''\
from typing import Any, Dict, List, Optional, Tuple

import shmcfg
from shmcfg import (ConfigModule, Current, OptionInfo, Segment, SubConfigProxy, Transaction,
                    attach, create, unlink)


def use(seg: Segment) -> None:
    m: ConfigModule = seg.module("torch._dynamo.config")
    limit: int = m.recompile_limit + 1
    with m.patch(recompile_limit=limit):
        pass
    with m.patch("recompile_limit", 4):
        pass
    digest: bytes = m.get_hash()
    copy: Dict[str, Any] = m.get_config_copy()
    saved: bytes = m.save_config()
    gen: int = m.load_config(saved)
    code: str = m.codegen_config()
    portable: Dict[str, Any] = m.save_config_portable(ignore_private_configs=False)
    g: int = seg.generation
    cur: Current = seg.current()
    h: bytes = cur.config_hash + seg.config_hash + seg.schema_hash
    info: OptionInfo = seg.describe("recompile_limit")
    alias: Optional[str] = info.alias
    flags: bool = info.hash_ignored or info.save_ignored or info.private
    names: List[str] = seg.options()
    default: bool = seg.is_default("recompile_limit")
    gen = seg.set({"recompile_limit": 3})
    gen = seg.set({"recompile_limit": 3}, layer="knob", origin=(7, "me"))
    gen = seg.reset("recompile_limit")
    t: Transaction = seg.transaction()
    gen = t.set("recompile_limit", 5).update({"recompile_limit": 6}).reset("x").commit()
    with seg.transaction(layer="user") as t2:
        t2["recompile_limit"] = 9
    after: Optional[int] = seg.wait(after=g, timeout=0.1)
    changed = seg.changes(1)
    entry: Optional[Dict[str, Any]] = seg.commit_info(g)
    hist: List[Dict[str, Any]] = seg.history(n=3, options="recompile_limit")
    rng: Tuple[int, int, int] = seg.history_range()
    values: Dict[str, Any] = seg.values_at(g)
    gen = seg.rollback(1, knob=True, who="me")
    text: str = seg.dump(all=True) + seg.codegen("shell")
    gen = seg.load(text)
    retired: bool = seg.retired or seg.fast_reads or seg.readonly
    same: Segment = seg.reattach()
    value: Any = seg.get("recompile_limit")
    seg.unlink()
    seg.close()


def main() -> None:
    with create("typing", force=True, no_env=True, schema_text="options: {}") as seg:
        use(seg)
    seg2: Segment = attach("typing", readonly=True, fast_reads=False, owner="root")
    unlink("typing", missing_ok=True)
    version: str = shmcfg.library_version + shmcfg.library_path
    fast: Optional[str] = shmcfg.fast_extension
    try:
        pass
    except shmcfg.NotFoundError as e:
        err: OSError = e
    except (shmcfg.UnknownOptionError, shmcfg.OptionTypeError, shmcfg.OptionValueError,
            shmcfg.RetiredError, shmcfg.OwnerError) as e2:
        err2: Exception = e2
    proxy: Optional[SubConfigProxy] = None
'''

# A misuse that the hints must catch (a test of the test: with no hints,
# everything is Any and would pass).
BAD = '''\
import shmcfg
seg = shmcfg.attach("x")
g: str = seg.generation
seg.set(["recompile_limit"])
'''


def mypy(*args):
    env = dict(os.environ, MYPYPATH=os.path.join(SRCDIR, "python"))
    # one cache per set of options: another set would check everything again
    cache = os.path.join(BUILDDIR, "tests", "mypy-cache", "strict" if "--strict" in args else "plain")
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", cache,
                           "--no-error-summary", *args], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)


def main():
    failed = 0

    def check(ok, what, out=""):
        nonlocal failed
        print(("ok" if ok else "FAIL") + ": " + what)
        if not ok:
            failed += 1
            print(out)

    check(os.path.isfile(os.path.join(PKG, "py.typed")), "python/shmcfg/py.typed (PEP 561)")
    r = mypy(PKG)
    check(r.returncode == 0, "mypy python/shmcfg", r.stdout)
    with tempfile.TemporaryDirectory() as d:
        good, bad = os.path.join(d, "client.py"), os.path.join(d, "bad.py")
        with open(good, "w") as f:
            f.write(CLIENT)
        with open(bad, "w") as f:
            f.write(BAD)
        # the package as a user's mypy sees an installed one: its hints,
        # not its own code checked strictly
        r = mypy("--strict", "--follow-imports=silent", good)
        check(r.returncode == 0, "mypy --strict on a program using the public API", r.stdout)
        r = mypy("--strict", "--follow-imports=silent", bad)
        want = ['bad.py:3: error: Incompatible types in assignment', 'bad.py:4: error: Argument 1']
        check(r.returncode == 1 and all(w in r.stdout for w in want),
              "mypy --strict rejects misuse of the public API", r.stdout)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
