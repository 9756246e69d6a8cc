#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A launcher and N worker ranks sharing one configuration through shmcfg.

    python3 examples/trainer.py --workers 4 --steps 200 [--segment NAME]
    python3 examples/trainer.py --workers 2 --steps 20 --demo

The launcher creates a segment (the embedded default schema:
torch.compiler.config and torch._dynamo.config) and starts the workers with
multiprocessing. Each worker attaches the segment by name, as a rank of a
real job would, and reads options in its training loop, one step every
--step-ms milliseconds; between steps it waits for a commit (seg.wait), so
that it sees a new generation at once, and prints the options it uses and
the config hash. Change an option from another terminal while it runs:

    tools/shmctl set NAME torch._dynamo.config.recompile_limit=16 \\
        torch.compiler.config.cache_key_tag=v2

and every worker reports the new generation at once, with the same config
hash. Replace the segment (tools/shmctl create --force NAME, or resize it):
every worker follows the new one by itself (the library does, at its next
read) and goes on with its values. Remove it and create it anew (shmctl rm,
then create): every worker's wait raises shmcfg.RetiredError, and the
worker reattaches (seg.reattach()). At the end the launcher checks
that all workers finished on the same generation and hash as the segment now
of that name (exit status 1 if not).

The launcher watches its workers: one that dies (kill -9) or fails makes it
print which (rank, pid, signal or status), stop the others and exit 1, at
once.

--demo makes the launcher do both itself (with tools/shmctl when it is there,
else with the Python API), each once every worker has reported the
generation before, and end the workers once they all report the replaced
segment's: it runs unattended, and tests/test_trainer_demo.py runs it that way.

Many hosts (doc/cluster.md): with --cluster, the launcher simulates --hosts
hosts on this machine, each with its own segment and its own shmcfg-sync
agent following one etcd prefix, and rank r reads the segment of host
r % hosts. Hosts apply a cluster change milliseconds apart; the ranks switch
to it together, at the first step boundary where every rank's host has
applied it (each rank reads its host's revision, the ranks compare the
minimum and the maximum, as torch.distributed.all_reduce would):

    python3 examples/trainer.py --cluster --endpoints unix:/path/client.sock:1 \
        --hosts 3 --workers 6 [--demo]
    tools/shmctl cluster set trainer-PID-h0 torch._dynamo.config.recompile_limit=16 \
        --endpoints unix:/path/client.sock:1 --cluster trainer-PID
"""

import argparse
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import wait as wait_any

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
# From a source tree, use its package (python/shmcfg) and its library.
if os.path.isfile(os.path.join(TOP, "python", "shmcfg", "__init__.py")):
    sys.path.insert(0, os.path.join(TOP, "python"))

import shmcfg  # noqa: E402

DEMO_CHANGES = {"torch._dynamo.config.recompile_limit": 16,
                "torch.compiler.config.cache_key_tag": "demo"}
# what the demo sets in the segment that replaces the first
REPLACED_CHANGES = {"torch._dynamo.config.recompile_limit": 32,
                    "torch.compiler.config.cache_key_tag": "replaced"}


def short(h):
    return h.hex()[:12] + "..."


def say(line):
    """Print one line with one write(2), so that lines of several processes
    sharing a pipe never interleave."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (line + "\n").encode())


def worker(rank, segname, steps, step_s, conn, stop=None):
    """Attach, then run steps: read the options, work, and between steps wait
    for a commit (the rest of the step's time). Runs `steps` steps, and with
    `stop` (the demo) until it is set. Every new generation is printed and
    sent to the launcher on `conn` as ("generation", generation, config
    hash); at the end ("done", generation, config hash, generations seen)."""
    seg = shmcfg.attach(segname)
    dynamo = seg.module("torch._dynamo.config")
    compiler = seg.module("torch.compiler.config")
    seen = []
    last = None  # (generation, hash): generations restart in a new segment

    def report(step):
        nonlocal last
        if seg.current() == last:
            return
        # a new generation: its hash, and its values, read from one snapshot
        # (three attribute reads could straddle a commit)
        with seg.snapshot() as snap:
            cur = shmcfg.Current(snap.generation, snap.config_hash)
            line = (f"worker {rank}: step {step}: generation {cur.generation}, "
                    f"recompile_limit={snap['torch._dynamo.config.recompile_limit']}, "
                    f"cache_key_tag={snap['torch.compiler.config.cache_key_tag']!r}, "
                    f"dynamic_shapes={snap['torch.compiler.config.dynamic_shapes']}, "
                    f"config hash {short(cur.config_hash)}")
        last = cur
        seen.append(cur.generation)
        say(line)
        conn.send(("generation", cur.generation, cur.config_hash.hex()))

    step = 0
    while step < steps or (stop is not None and not stop.is_set()):
        report(step)
        # the hot path: plain attribute reads, as a training step reads its config
        limit = dynamo.recompile_limit
        tag = compiler.cache_key_tag
        dynamic = compiler.dynamic_shapes
        work(limit, tag, dynamic)
        # the rest of the step: wait for a commit, report it at once
        deadline = time.monotonic() + step_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                if seg.wait(after=last.generation, timeout=left) is not None:
                    report(step)
            except shmcfg.RetiredError:
                # removed (shmctl rm), perhaps created anew: this process
                # still reads the old values; move to the new segment (one
                # replaced by shmctl create --force or resize is followed by
                # the library itself)
                if reattach(seg, rank, step, deadline):
                    report(step)
        step += 1
    if seg.retired:  # removed after the last wait: end on the segment now of that name
        reattach(seg, rank, step, time.monotonic(), quiet=True)
    g, h = seg.current()
    conn.send(("done", g, h.hex(), seen))
    conn.close()


def reattach(seg, rank, step, deadline, quiet=False):
    """Attach the segment now of that name; until `deadline`, while there is
    none yet (between the removal and the creation of a replacement)."""
    while True:
        try:
            seg.reattach()
        except shmcfg.NotFoundError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)  # the name is free for an instant: try again
            continue
        if not quiet:
            say(f"worker {rank}: step {step}: the segment was removed or replaced: reattached")
        return True


def work(limit, tag, dynamic):
    """The training step (it uses the options it read)."""

def cluster_worker(rank, segname, step_s, revs, barrier, conn, stop):
    """A rank of a job that spans hosts: it reads its own host's segment, and
    adopts what the cluster layer brings only at a step boundary where every
    rank's host has applied the same cluster revision. `revs` and `barrier`
    stand in for the all-reduce of a real job:

        t = torch.tensor([rev, -rev]); dist.all_reduce(t, op=dist.ReduceOp.MIN)
        lo, hi = t[0].item(), -t[1].item()

    Each switch is sent to the launcher on `conn` as ("switch", step,
    revision, recompile_limit); at the end ("done",)."""
    seg = shmcfg.attach(segname)
    dynamo = seg.module("torch._dynamo.config")
    active_rev = None
    step = 0
    try:
        while not stop.is_set():
            # the step boundary: this host's values with the revision they
            # belong to (read again until the revision held still: it only grows)
            while True:
                rev = seg.cluster_revision
                limit = dynamo.recompile_limit
                if seg.cluster_revision == rev:
                    break
            revs[rank] = rev
            barrier.wait(timeout=60)      # every rank has written its revision
            lo, hi = min(revs[:]), max(revs[:])
            barrier.wait(timeout=60)      # every rank has read them
            if lo == hi == rev and rev != active_rev:
                active_rev = rev
                say(f"rank {rank}: step {step}: every rank has cluster revision {rev}: "
                    f"switching, recompile_limit={limit}")
                conn.send(("switch", step, rev, limit))
            time.sleep(step_s)            # the training step, on the active values
            step += 1
    except threading.BrokenBarrierError:
        pass                              # the launcher ended the job
    seg.close()
    conn.send(("done",))
    conn.close()


def find_sync():
    """$SHMCFG_SYNC, the source tree's tools/shmcfg-sync, or the PATH's."""
    for cand in (os.environ.get("SHMCFG_SYNC"), os.path.join(TOP, "tools", "shmcfg-sync")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return shutil.which("shmcfg-sync")


def run_cluster(a):
    """--cluster: simulated hosts, their agents, ranks that switch together."""
    endpoints = a.endpoints or os.environ.get("SHMCFG_ETCD_ENDPOINTS")
    sync, tool = find_sync(), find_shmctl()
    if not endpoints or not sync or (a.demo and not tool):
        say("launcher: --cluster needs etcd endpoints (--endpoints or SHMCFG_ETCD_ENDPOINTS), "
            "shmcfg-sync" + (" and shmctl" if a.demo else "") + " (built in tools/ or on the PATH)")
        return 2
    base = a.segment or f"trainer-{os.getpid()}"
    names = [f"{base}-h{k}" for k in range(a.hosts)]
    segs, agents, ranks = [], [], None
    failed = False
    logdir = tempfile.mkdtemp(prefix="trainer-agents.")
    status = 1
    ctx = multiprocessing.get_context(a.start_method)
    stop = ctx.Event()
    barrier = ctx.Barrier(a.workers)
    try:
        for k, n in enumerate(names):
            segs.append(shmcfg.create(n, force=True))
            log = open(os.path.join(logdir, f"h{k}.log"), "w")
            agents.append((subprocess.Popen([sync, "--endpoints", endpoints, "--cluster", base,
                                             "--host", f"h{k}", n], stderr=log), log))
        say(f"launcher: {a.hosts} simulated hosts ({', '.join(names)}), each with a shmcfg-sync "
            f"agent following cluster '{base}'; {a.workers} ranks; try, from another terminal:\n"
            f"  {tool or 'shmctl'} cluster set {names[0]} torch._dynamo.config.recompile_limit=16 "
            f"--endpoints {endpoints} --cluster {base}")
        revs = ctx.Array("q", a.workers, lock=False)
        ranks = Ranks(ctx, cluster_worker,
                      lambda r, conn: (names[r % a.hosts], a.step_ms / 1000.0, revs, barrier,
                                       conn, stop), a.workers)
        say(f"launcher: rank pids {' '.join(map(str, ranks.pids()))}")

        def switches(want, timeout):
            """Until every rank switched to a revision `want` accepts: {rank: (step, rev, limit)}."""
            got, deadline = {}, time.monotonic() + timeout
            while len(got) < a.workers:
                msg = ranks.recv(max(0.0, deadline - time.monotonic()))  # RankFailed: one died
                if msg is None:
                    break
                rank, (kind, *rest) = msg
                if kind == "switch" and want(rest[1]):
                    got[rank] = tuple(rest)
            return got

        first = switches(lambda rev: True, 60)  # the ranks' first agreement
        if not a.demo:
            while ranks.recv() is not None:  # until interrupted, or a rank dies
                pass
            return 0
        ok = len(first) == a.workers
        if ok:
            r0 = max(v[1] for v in first.values())
            cmd = [tool, "cluster", "set", names[0], "--endpoints", endpoints, "--cluster", base,
                   "--reason", "trainer demo", "torch._dynamo.config.recompile_limit=16"]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            say(f"launcher: {' '.join(['shmctl'] + cmd[1:])}: exit {p.returncode} "
                f"{(p.stdout + p.stderr).strip()}")
            got = switches(lambda rev: rev > r0, 60)
            steps = {v[0] for v in got.values()}
            ok = (p.returncode == 0 and len(got) == a.workers and len(steps) == 1 and
                  {v[2] for v in got.values()} == {16})
            if ok:
                say(f"launcher: all {a.workers} ranks on {a.hosts} hosts switched to cluster "
                    f"revision {next(iter(got.values()))[1]} at the same step, {steps.pop()}")
            else:
                say(f"launcher: MISMATCH: the ranks' switches: {sorted(got.items())}")
        status = 0 if ok else 1
    except RankFailed as e:
        err(f"launcher: {e}; stopping the other ranks")
        status, failed = 1, True
    except KeyboardInterrupt:
        status = 130
    finally:
        stop.set()
        if ranks is not None:
            if not failed:
                # they end at their next step (a dead rank may have died
                # holding the barrier's lock: then they are only stopped)
                barrier.abort()
                ranks.join(10)
            ranks.stop()
        for ag, log in agents:
            ag.terminate()
            ag.wait(10)
            log.close()
        if status not in (0, 130) and not failed:  # a MISMATCH: what the agents said
            for k in range(len(agents)):
                with open(os.path.join(logdir, f"h{k}.log")) as f:
                    for line in f.read().splitlines()[-5:]:
                        say(f"launcher: agent h{k}: {line}")
        shutil.rmtree(logdir, ignore_errors=True)
        for seg, n in zip(segs, names):
            seg.close()
            if not a.keep:
                shmcfg.unlink(n, missing_ok=True)
    return status


def find_shmctl():
    """$SHMCTL, the source tree's tools/shmctl, or shmctl on the PATH."""
    for cand in (os.environ.get("SHMCTL"), os.path.join(TOP, "tools", "shmctl")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return shutil.which("shmctl")


def demo_set(segname, seg, changes):
    """Change options as an operator would; return how it was done."""
    tool = find_shmctl()
    if tool:
        cmd = [tool, "set", segname] + [f"{k}={v}" for k, v in changes.items()]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if p.returncode == 0:
            return " ".join(["shmctl"] + cmd[1:])
        say(f"launcher: {' '.join(cmd)} failed ({p.stderr.strip()}); "
              f"using the Python API")
    seg.set(changes)
    return "seg.set(%r)" % (changes,)


def demo_replace(segname):
    """Replace the segment as an operator would (shmctl create --force, or
    the API); return how it was done."""
    tool = find_shmctl()
    if tool:
        cmd = [tool, "create", "--force", "--fresh", "--quiet", segname]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        if p.returncode == 0:
            for line in p.stderr.splitlines():  # its note: who is attached, and follows
                say(f"launcher: {line}")
            return " ".join(["shmctl"] + cmd[1:])
        say(f"launcher: {' '.join(cmd)} failed ({p.stderr.strip()}); "
              f"using the Python API")
    shmcfg.create(segname, force=True).close()  # fresh, as --fresh
    return "shmcfg.create(%r, force=True)" % segname


class RankFailed(Exception):
    """A rank ended before it finished: killed by a signal, exited with an
    error, or exited without its final report. str() names it, its pid and
    how it ended."""

    def __init__(self, rank, proc):
        code = proc.exitcode
        if code is not None and code < 0:
            try:
                how = "was killed by " + signal.Signals(-code).name
            except ValueError:
                how = f"was killed by signal {-code}"
        elif code:
            how = f"exited with status {code}"
        else:
            how = "exited before it finished"
        super().__init__(f"rank {rank} (pid {proc.pid}) {how}")
        self.rank = rank


class Ranks:
    """The launcher's view of its worker processes. Each rank has a pipe of
    its own to the launcher, and recv() waits on those pipes and on the
    processes' sentinels together (multiprocessing.connection.wait): a rank
    that dies is seen at once, not after a timeout, and stop() ends the
    others."""

    def __init__(self, ctx, target, args, n):
        """Start n processes of target(rank, *args(rank, conn))."""
        self.procs, self.conns, self.done = [], {}, set()
        try:
            for r in range(n):
                rd, wr = ctx.Pipe(duplex=False)
                p = ctx.Process(target=target, args=(r,) + args(r, wr), name=f"rank {r}")
                try:
                    p.start()
                finally:
                    wr.close()  # the rank's end (ranks started later never hold it)
                self.procs.append(p)
                self.conns[rd] = r
        except BaseException:
            self.stop()
            raise
        self.running = {p.sentinel: r for r, p in enumerate(self.procs)}

    def recv(self, timeout=None):
        """The next message of a rank, as (rank, message); None once
        `timeout` seconds passed without one. Raises RankFailed when a rank
        ends before its ("done", ...) message or with a non-zero status (its
        messages sent before are received first)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.conns or self.running:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait_any(list(self.conns) + list(self.running), left)
            conns = [c for c in ready if c in self.conns]
            if conns:
                c = conns[0]
                rank = self.conns[c]
                try:
                    msg = c.recv()
                except EOFError:  # the rank exited: its sentinel tells how
                    del self.conns[c]
                    c.close()
                    continue
                if msg[0] == "done":
                    self.done.add(rank)
                return rank, msg
            for s in ready:  # processes that ended, their pipes drained
                rank = self.running.pop(s)
                p = self.procs[rank]
                p.join()
                if p.exitcode != 0 or rank not in self.done:
                    raise RankFailed(rank, p)
            if not ready and left is not None and left <= 0:
                return None
        return None  # every rank ended, every message received

    def stop(self, grace=1.0):
        """End the ranks still running: SIGTERM, then SIGKILL to those that
        still run after `grace` seconds; reap them all."""
        alive = {p.sentinel: p for p in self.procs if p.exitcode is None}
        for p in alive.values():
            p.terminate()
        self._until_ended(alive, grace)
        for p in alive.values():  # those still running
            p.kill()
        for p in self.procs:
            p.join()
        for c in self.conns:
            c.close()
        self.conns = {}
        self.running = {}

    def join(self, timeout):
        """Until every rank ended, at most `timeout` seconds (no signal)."""
        self._until_ended({p.sentinel: p for p in self.procs if p.exitcode is None}, timeout)

    @staticmethod
    def _until_ended(procs, timeout):
        """Wait until the processes of `procs` ({sentinel: process}) ended,
        at most `timeout` seconds; those ended are taken out of it. (Their
        sentinels say so: is_alive() may still be true for an instant after
        a process closed them, before it can be reaped.)"""
        deadline = time.monotonic() + timeout
        while procs:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            for s in wait_any(list(procs), left):
                del procs[s]

    def pids(self):
        return [p.pid for p in self.procs]


def await_all(ranks, want, timeout):
    """Until every rank reported a generation that `want(generation, hash)`
    accepts (bounded: False after `timeout` seconds). RankFailed when a rank
    dies meanwhile."""
    done = set()
    deadline = time.monotonic() + timeout
    while len(done) < len(ranks.procs):
        got = ranks.recv(max(0.0, deadline - time.monotonic()))
        if got is None:
            return False
        rank, msg = got
        if msg[0] == "generation" and want(msg[1], msg[2]):
            done.add(rank)
    return True


def err(line):
    """say() on stderr."""
    sys.stdout.flush()
    os.write(sys.stderr.fileno(), (line + "\n").encode())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--step-ms", type=float, default=50.0, help="duration of one step")
    ap.add_argument("--segment", help="segment name (default: trainer-PID)")
    ap.add_argument("--demo", action="store_true",
                    help="change two options, then replace the segment, once every worker "
                         "runs (shmctl set and create --force, or the API)")
    ap.add_argument("--keep", action="store_true", help="leave the segment at the end")
    ap.add_argument("--start-method", default="fork", choices=["fork", "spawn", "forkserver"])
    ap.add_argument("--cluster", action="store_true",
                    help="simulate --hosts hosts, each with its own segment and shmcfg-sync agent")
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--endpoints", help="etcd endpoints (default: $SHMCFG_ETCD_ENDPOINTS)")
    a = ap.parse_args(argv)
    if a.cluster:
        return run_cluster(a)

    name = a.segment or f"trainer-{os.getpid()}"
    seg = shmcfg.create(name, force=True)
    status = 0
    ranks = None
    try:
        say(f"launcher: segment '{name}' created, generation {seg.generation}, "
            f"config hash {short(seg.config_hash)}")
        tool = find_shmctl() or "shmctl"
        if os.path.isabs(tool) and tool.startswith(os.getcwd() + os.sep):
            tool = os.path.relpath(tool)
        say(f"launcher: {a.workers} workers, {a.steps} steps of {a.step_ms:g} ms; "
            f"try, from another terminal:\n"
            f"  {tool} set {name} torch._dynamo.config.recompile_limit=16 "
            f"torch.compiler.config.cache_key_tag=v2\n"
            f"  {tool} create --force {name}    (the workers follow it)")

        ctx = multiprocessing.get_context(a.start_method)
        stop = ctx.Event() if a.demo else None
        step_s = a.step_ms / 1000.0
        ranks = Ranks(ctx, worker, lambda r, conn: (name, a.steps, step_s, conn, stop), a.workers)
        say(f"launcher: worker pids {' '.join(map(str, ranks.pids()))}")
        ok = True
        if a.demo:
            # each change once every worker reported the state before it
            # (generations, not sleeps: bounded waits on the workers' reports)
            ok = await_all(ranks, lambda g, h: True, 60)
            if ok:
                how = demo_set(name, seg, DEMO_CHANGES)
                demo_gen, demo_hash = seg.current()
                say(f"launcher: {how} -> generation {demo_gen}, "
                    f"config hash {short(demo_hash)}")
                ok = await_all(ranks, lambda g, h: (g, h) == (demo_gen, demo_hash.hex()), 60)
                if ok:
                    say(f"launcher: every worker saw generation {demo_gen} (the change)")
            if ok:
                how = demo_replace(name)
                seg.reattach()  # the launcher's handle was retired too
                how2 = demo_set(name, seg, REPLACED_CHANGES)
                final = seg.current()
                say(f"launcher: {how}, then {how2} -> a new segment, generation "
                    f"{final.generation}, config hash {short(final.config_hash)}")
                ok = await_all(ranks,
                               lambda g, h: (g, h) == (final.generation, final.config_hash.hex()),
                               60)
                if ok:
                    say(f"launcher: every worker followed it and saw the new segment's "
                        f"generation {final.generation}")
            if not ok:
                say("launcher: the workers did not all report within 60 s")
            stop.set()
        # every worker's last report; a worker that dies raises RankFailed at once
        reports = {}
        bound = (0 if a.demo else a.steps * step_s) + 60
        deadline = time.monotonic() + bound
        while len(reports) < a.workers:
            got = ranks.recv(max(0.0, deadline - time.monotonic()))
            if got is None:
                err(f"launcher: the workers did not finish within {bound:g} s; stopping them")
                return 1
            rank, msg = got
            if msg[0] == "done":
                reports[rank] = msg[1:]
        while ranks.recv(max(0.0, deadline - time.monotonic())) is not None:
            pass  # they exit after their report (RankFailed if one fails to)
        # the segment now of that name, which the workers followed if it was
        # replaced while they ran (shmctl create --force): not the launcher's
        # own retired handle
        final = None
        if seg.retired:
            try:
                seg.reattach()
                say("launcher: the segment was replaced during the run: comparing with "
                    "the new one")
            except shmcfg.NotFoundError:
                say("launcher: the segment was removed during the run: comparing the "
                    "workers with each other")
        if not seg.retired:
            final = seg.current()
        ends = {(g, h) for g, h, seen in reports.values()}
        ok = ok and len(ends) == 1 and (final is None or
                                        ends == {(final.generation, final.config_hash.hex())})
        if ok:
            g, h = ends.pop()
            say(f"launcher: all {len(reports)} workers agree: generation {g}, config hash {h}")
        else:
            status = 1
            for rank, (g, h, seen) in sorted(reports.items()):
                say(f"launcher: worker {rank} ended on generation {g}, hash {h}")
            if final is not None:
                say(f"launcher: segment '{name}' is at generation {final.generation}, "
                    f"hash {final.config_hash.hex()}")
            say("launcher: MISMATCH: the workers do not agree")
    except RankFailed as e:
        # one line, no traceback: the finally ends the other ranks
        err(f"launcher: {e}; stopping the other ranks")
        status = 1
    except KeyboardInterrupt:
        status = 130
    finally:
        if ranks is not None:
            ranks.stop()
        if not a.keep:
            seg.close()
            shmcfg.unlink(name, missing_ok=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
