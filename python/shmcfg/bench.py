"""Cost of one attribute read of a config module, next to a plain Python
attribute read, measured in the same run.

    python3 -m shmcfg.bench [--segment NAME] [--number N] [--repeat R] [--json]

Creates a segment with the embedded default schema (removed afterwards,
unless --segment names an existing one) and times, per read (best of R runs
of N reads each):

- a plain attribute of a module object (the baseline), and of an instance;
- int and bool options, an int option through an alias, a str option, a set
  option (a fresh set per read): values cached per generation;
- the int option through the library call (``fast_reads=False``), and while
  the thread has a patch open (every read then calls the library).
"""

import argparse
import json
import os
import sys
import timeit
import types


def measure(number=200000, repeat=5, segment=None):
    """A list of (label, ns per read, ratio to a plain module attribute read)."""
    import shmcfg

    own = segment is None
    name = segment or f"shmcfg-bench-{os.getpid()}"
    seg = shmcfg.create(name, force=True) if own else shmcfg.attach(name)
    try:
        slow = shmcfg.attach(name, fast_reads=False)
        dyn = seg.module("torch._dynamo.config")
        comp = seg.module("torch.compiler.config")
        dyn_slow = slow.module("torch._dynamo.config")
        plain_mod = types.ModuleType("plain")
        plain_mod.recompile_limit = 8

        class Plain:
            pass

        plain_obj = Plain()
        plain_obj.recompile_limit = 8
        cases = [
            ("plain module attribute", "m.recompile_limit", {"m": plain_mod}),
            ("plain instance attribute", "o.recompile_limit", {"o": plain_obj}),
            ("int option", "d.recompile_limit", {"d": dyn}),
            ("bool option", "d.verbose", {"d": dyn}),
            ("int option via alias", "c.recompile_limit", {"c": comp}),
            ("str option", "c.cache_key_tag", {"c": comp}),
            ("set option (fresh copy)", "d.reorderable_logging_functions", {"d": dyn}),
            ("int option (library call)", "d.recompile_limit", {"d": dyn_slow}),
        ]
        out = []
        base = None
        for label, stmt, g in cases:
            t = min(timeit.repeat(stmt, globals=g, number=number, repeat=repeat)) / number
            if base is None:
                base = t
            out.append((label, t * 1e9, t / base))
        with dyn.patch(recompile_limit=8):
            t = min(timeit.repeat("d.recompile_limit", globals={"d": dyn}, number=number,
                                  repeat=repeat)) / number
        out.append(("int option, thread has a patch", t * 1e9, t / base))
        slow.close()
        return out
    finally:
        if own:
            seg.close()
            shmcfg.unlink(name, missing_ok=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m shmcfg.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--segment", help="an existing segment (default: a temporary one)")
    ap.add_argument("--number", type=int, default=200000, help="reads per run")
    ap.add_argument("--repeat", type=int, default=5, help="runs (the best counts)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    a = ap.parse_args(argv)
    res = measure(a.number, a.repeat, a.segment)
    if a.json:
        print(json.dumps([{"case": l, "ns": round(ns, 1), "ratio": round(r, 2)}
                          for l, ns, r in res], indent=2))
        return 0
    import platform
    print(f"Python {platform.python_version()} ({platform.machine()}), "
          f"best of {a.repeat} x {a.number} reads")
    print(f"{'read':40} {'ns':>8} {'x plain':>8}")
    for label, ns, r in res:
        print(f"{label:40} {ns:8.1f} {r:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
