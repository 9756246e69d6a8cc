#!/usr/bin/env python3
"""A launcher and N worker ranks sharing one configuration through shmcfg.

    python3 examples/trainer.py --workers 4 --steps 200 [--segment NAME]
    python3 examples/trainer.py --workers 2 --steps 20 --demo

The launcher creates a segment (the embedded default schema:
torch.compiler.config and torch._dynamo.config) and starts the workers with
multiprocessing. Each worker attaches the segment by name, as a rank of a
real job would, and reads options in its training loop, one step every
--step-ms milliseconds. When it sees a new generation it prints the options
it uses and the config hash. Change an option from another terminal while it
runs:

    tools/shmctl set NAME torch._dynamo.config.recompile_limit=16 \\
        torch.compiler.config.cache_key_tag=v2

and every worker reports the new generation within one step, with the same
config hash. At the end the launcher checks that all workers finished on the
same generation and hash (exit status 1 if not).

--demo makes the launcher do that itself halfway through (with tools/shmctl
when it is there, else with the Python API), so that the example runs
unattended; tests/test_python.py runs it that way.
"""

import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
# From a source tree, use its package (python/shmcfg) and its library.
if os.path.isfile(os.path.join(TOP, "python", "shmcfg", "__init__.py")):
    sys.path.insert(0, os.path.join(TOP, "python"))

import shmcfg  # noqa: E402

DEMO_CHANGES = {"torch._dynamo.config.recompile_limit": 16,
                "torch.compiler.config.cache_key_tag": "demo"}


def short(h):
    return h.hex()[:12] + "..."


def say(line):
    """Print one line with one write(2), so that lines of several processes
    sharing a pipe never interleave."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (line + "\n").encode())


def worker(rank, segname, steps, step_s, results):
    seg = shmcfg.attach(segname)
    dynamo = seg.module("torch._dynamo.config")
    compiler = seg.module("torch.compiler.config")
    seen = []
    last = 0
    for step in range(steps):
        if seg.generation != last:
            # a new generation: its hash, and the values this rank now uses
            last, h = seg.current()
            seen.append(last)
            say(f"worker {rank}: step {step}: generation {last}, "
                f"recompile_limit={dynamo.recompile_limit}, "
                f"cache_key_tag={compiler.cache_key_tag!r}, "
                f"dynamic_shapes={compiler.dynamic_shapes}, config hash {short(h)}")
        # the hot path: plain attribute reads, as a training step reads its config
        limit = dynamo.recompile_limit
        tag = compiler.cache_key_tag
        dynamic = compiler.dynamic_shapes
        work(limit, tag, dynamic, step_s)
    g, h = seg.current()
    results.put((rank, g, h.hex(), seen))


def work(limit, tag, dynamic, seconds):
    """The training step."""
    time.sleep(seconds)


def find_shmctl():
    """$SHMCTL, the source tree's tools/shmctl, or shmctl on the PATH."""
    for cand in (os.environ.get("SHMCTL"), os.path.join(TOP, "tools", "shmctl")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return shutil.which("shmctl")


def demo_set(segname, seg):
    """Change two options as an operator would; return how it was done."""
    tool = find_shmctl()
    if tool:
        cmd = [tool, "set", segname] + [f"{k}={v}" for k, v in DEMO_CHANGES.items()]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if p.returncode == 0:
            return " ".join(["shmctl"] + cmd[1:])
        say(f"launcher: {' '.join(cmd)} failed ({p.stderr.strip()}); "
              f"using the Python API")
    seg.set(DEMO_CHANGES)
    return "seg.set(%r)" % (DEMO_CHANGES,)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--step-ms", type=float, default=50.0, help="duration of one step")
    ap.add_argument("--segment", help="segment name (default: trainer-PID)")
    ap.add_argument("--demo", action="store_true",
                    help="change two options halfway through (shmctl set, or the API)")
    ap.add_argument("--keep", action="store_true", help="leave the segment at the end")
    ap.add_argument("--start-method", default="fork", choices=["fork", "spawn", "forkserver"])
    a = ap.parse_args(argv)

    name = a.segment or f"trainer-{os.getpid()}"
    seg = shmcfg.create(name, force=True)
    status = 0
    procs = []
    try:
        say(f"launcher: segment '{name}' created, generation {seg.generation}, "
            f"config hash {short(seg.config_hash)}")
        tool = find_shmctl() or "shmctl"
        if os.path.isabs(tool) and tool.startswith(os.getcwd() + os.sep):
            tool = os.path.relpath(tool)
        say(f"launcher: {a.workers} workers, {a.steps} steps of {a.step_ms:g} ms; "
            f"try, from another terminal:\n"
            f"  {tool} set {name} torch._dynamo.config.recompile_limit=16 "
            f"torch.compiler.config.cache_key_tag=v2")

        ctx = multiprocessing.get_context(a.start_method)
        results = ctx.Queue()
        step_s = a.step_ms / 1000.0
        procs = [ctx.Process(target=worker, args=(r, name, a.steps, step_s, results))
                 for r in range(a.workers)]
        for p in procs:
            p.start()
        demo_gen = None
        if a.demo:
            time.sleep(a.steps * step_s / 2)
            how = demo_set(name, seg)
            demo_gen = seg.generation
            say(f"launcher: {how} -> generation {demo_gen}, "
                f"config hash {short(seg.config_hash)}")
        reports = sorted(results.get(timeout=a.steps * step_s + 60) for _ in procs)
        for p in procs:
            p.join()
        final = seg.current()
        ok = ({r[1] for r in reports} == {final.generation} and
              {r[2] for r in reports} == {final.config_hash.hex()})
        if demo_gen is not None:
            missed = [r[0] for r in reports if not any(g >= demo_gen for g in r[3])]
            if missed:
                ok = False
                say(f"launcher: workers {missed} never saw generation {demo_gen}")
            else:
                say(f"launcher: every worker saw generation {demo_gen} "
                    f"(the change made halfway)")
        if ok:
            say(f"launcher: all {len(reports)} workers agree: generation "
                f"{final.generation}, config hash {final.config_hash.hex()}")
        else:
            status = 1
            for rank, g, h, seen in reports:
                say(f"launcher: worker {rank} ended on generation {g}, hash {h}")
            say("launcher: MISMATCH: the workers do not agree")
    except KeyboardInterrupt:
        status = 130
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        if not a.keep:
            seg.close()
            shmcfg.unlink(name, missing_ok=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
