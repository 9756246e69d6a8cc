#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A torchrun job whose ranks share one configuration through shmcfg.

    python3 -m torch.distributed.run --nproc-per-node 4 --standalone \\
        examples/torch_trainer.py --segment NAME --steps 200

Each rank trains the same small torch.compile'd MLP (backend "aot_eager")
wrapped in DistributedDataParallel, on synthetic data, on the CPU with the
gloo backend. Its configuration lives in the shmcfg segment NAME: the
trainer's own options (app.config.lr, app.config.log_every,
app.config.pause_ms) and torch._dynamo.config.recompile_limit, which torch
itself reads from the segment (shmcfg.torch.install). Rank 0 creates the
segment when there is none (examples/torch_trainer.yaml); the others attach
it after a barrier.

An operator changes the job while it runs, from any shell of the host:

    tools/shmctl set NAME app.config.lr=0.05

Every step, the ranks agree on the configuration over the process group:
each reads (generation, config hash) with seg.current(), the ranks
all_gather them, and while they differ they read again (they share the
memory: the next read agrees). A new agreed generation is applied by every
rank at the same step, and rank 0 prints what changed
(`step 37: generation 3: app.config.lr 0.1 -> 0.05`). A segment replaced
(`tools/shmctl create --force NAME --schema examples/torch_trainer.yaml`) is
followed the same way: a rank that finds its segment retired reattaches,
and the ranks agree again (`step 52: segment replaced, following
generation 1`). At the end every rank prints the generation and config
hash it finished with.

A rank that dies (SIGKILL) ends the job: its peers' collectives fail (gloo
sees the connection close; --timeout bounds a collective in any case) and
torchrun, which watches its workers, stops the others and exits non-zero
naming the failed rank.
"""

import argparse
import datetime
import os
import signal
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
# From a source tree, use its package (python/shmcfg) and its library.
if os.path.isfile(os.path.join(TOP, "python", "shmcfg", "__init__.py")):
    sys.path.insert(0, os.path.join(TOP, "python"))

import shmcfg  # noqa: E402
import shmcfg.torch  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.elastic.multiprocessing.errors import record  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

SCHEMA = os.path.join(HERE, "torch_trainer.yaml")
APP = "app.config"
# the options this trainer applies at a step boundary, by full name
OPTIONS = ("app.config.lr", "app.config.log_every", "app.config.pause_ms",
           "torch._dynamo.config.recompile_limit")


def say(line):
    """Print one line with one write(2): the ranks share torchrun's stdout."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (line + "\n").encode())


def short(h):
    return h.hex()[:12] + "..."


def open_segment(name, schema, rank):
    """Rank 0 attaches the segment, or creates it from `schema` when there is
    none; the other ranks attach it after a barrier. A second barrier once
    all are attached: a replacement made after it is seen by every rank's
    first agreement (see agree())."""
    created = False
    if rank == 0:
        try:
            seg = shmcfg.attach(name)
        except shmcfg.NotFoundError:
            try:
                seg = shmcfg.create(name, schema=schema)
                created = True
            except shmcfg.ExistsError:  # created by someone else meanwhile
                seg = shmcfg.attach(name)
    dist.barrier()
    if rank != 0:
        seg = shmcfg.attach(name)
    dist.barrier()
    missing = []
    for opt in OPTIONS:
        try:
            seg.describe(opt)
        except shmcfg.UnknownOptionError:
            missing.append(opt)
    if missing:
        raise SystemExit(f"rank {rank}: segment '{name}' has no {', '.join(missing)}: create it "
                         f"with --schema {os.path.relpath(schema)} (or remove it: "
                         f"the trainer creates it)")
    return seg, created


def read_config(seg, app):
    """(current, values): the options OPTIONS as of one generation (read
    again when a commit lands in between). torch's own option is read
    through torch's module, which the bridge serves from the segment."""
    while True:
        cur = seg.current()
        vals = {"app.config.lr": app.lr,
                "app.config.log_every": app.log_every,
                "app.config.pause_ms": app.pause_ms,
                "torch._dynamo.config.recompile_limit": torch._dynamo.config.recompile_limit}
        if seg.current() == cur:
            return cur, vals


def follow(seg):
    """Move to the segment now of that name, if this one was replaced or
    removed: "moved", "stayed" (not retired), or "gone": there is none
    (removed, or between a removal and its re-creation), and the rank stays
    on the old segment's values."""
    if not seg.retired:
        return "stayed"
    try:
        seg.reattach()
    except shmcfg.NotFoundError:
        return "gone"
    return "moved"


def agree(seg, app, world):
    """Read the configuration until every rank read the same one: returns
    (current, values, moved, gone), `moved` whether some rank followed a
    replaced segment in the meantime, `gone` whether this rank's segment was
    removed with no other of its name to follow.

    Each round, each rank follows a replacement it sees, reads (generation,
    hash) and the values, and the ranks all_gather [followed, generation,
    hash]. The round is accepted when every row is equal and no rank
    followed in it: a rank that attached a new segment did so before that
    round's all_gather, so in the next round every rank still on the old
    segment sees it retired and follows too."""
    moved = False
    while True:
        how = follow(seg)
        cur, vals = read_config(seg, app)
        mine = torch.tensor([int(how == "moved"), cur.generation,
                             *struct.unpack("<qq", cur.config_hash)], dtype=torch.int64)
        rows = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(rows, mine)
        rows = [tuple(r.tolist()) for r in rows]
        moved = moved or any(r[0] for r in rows)
        if not any(r[0] for r in rows) and all(r == rows[0] for r in rows):
            return cur, vals, moved, how == "gone"


class MLP(torch.nn.Module):
    def __init__(self, d_in=16, d_hidden=32):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(d_in, d_hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(d_hidden, 1))

    def forward(self, x):
        return self.net(x)


def batch(rank, step, d_in=16, n=32):
    """This rank's synthetic batch of `step`: y = x . w + noise."""
    g = torch.Generator().manual_seed(1000003 * step + rank)
    x = torch.randn(n, d_in, generator=g)
    w = torch.linspace(-1.0, 1.0, d_in).unsqueeze(1)
    return x, x @ w + 0.01 * torch.randn(n, 1, generator=g)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--segment", default="torch-trainer", help="segment name (default %(default)s)")
    ap.add_argument("--schema", default=SCHEMA,
                    help="schema of the segment rank 0 creates when there is none "
                         "(default examples/torch_trainer.yaml)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds a collective may wait for a peer (default %(default)s)")
    a = ap.parse_args(argv)

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    seg, created = open_segment(a.segment, a.schema, rank)
    shmcfg.torch.install(seg)  # torch._dynamo.config reads the segment's options
    app = seg.module(APP)
    say(f"rank {rank}: pid {os.getpid()}, segment '{a.segment}' "
        f"{'created' if created else 'attached'}")
    if rank == 0:
        say(f"rank 0: {world} ranks, {a.steps} steps; change the job from another shell:\n"
            f"  tools/shmctl set {a.segment} app.config.lr=0.05\n"
            f"  tools/shmctl create --force {a.segment} --schema "
            f"{os.path.relpath(a.schema)}    (the ranks follow it)")

    torch.manual_seed(0)
    model = DDP(torch.compile(MLP(), backend="aot_eager"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    applied = None  # the (generation, hash) the ranks use
    vals = {}
    gone = False  # rank 0 said the segment was removed
    for step in range(a.steps):
        # the step boundary: every rank takes the same configuration
        cur, new, moved, now_gone = agree(seg, app, world)
        if rank == 0 and now_gone != gone:
            gone = now_gone
            if gone:
                say(f"step {step}: segment '{a.segment}' removed: the ranks keep generation "
                    f"{cur.generation}'s values until one of that name is created")
        if moved or cur != applied:
            if rank == 0:
                report(seg, step, applied, cur, vals, new, moved)
            for group in opt.param_groups:
                group["lr"] = new["app.config.lr"]
            applied, vals = cur, new
            say(f"rank {rank}: step {step}: generation {cur.generation}, config hash "
                f"{short(cur.config_hash)}, lr {opt.param_groups[0]['lr']}, recompile_limit "
                f"{new['torch._dynamo.config.recompile_limit']}")
        x, y = batch(rank, step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()  # DDP averages the gradients over the ranks
        opt.step()
        if rank == 0 and step % vals["app.config.log_every"] == 0:
            say(f"step {step}: loss {loss.item():.4f}, lr {opt.param_groups[0]['lr']:g}")
        if vals["app.config.pause_ms"]:
            time.sleep(vals["app.config.pause_ms"] / 1000.0)
    final = applied or seg.current()  # (--steps 0)
    say(f"rank {rank}: done: {a.steps} steps, generation {final.generation}, "
        f"config hash {final.config_hash.hex()}")
    dist.barrier()
    dist.destroy_process_group()
    # seg stays attached until the process exits: torch's config modules
    # read through it to the end
    return 0


def end(rc):
    """Leave a rank that finished: its output flushed, then _exit(), past the
    interpreter's teardown. In torch 2.13 the gloo group's threads outlive
    destroy_process_group() (and the model's deletion) and still run while
    the interpreter is torn down: twice in CI a rank of this trainer died of
    a signal at the very end of a run whose work was done (SIGABRT after its
    last line once, SIGSEGV once), a failure of the kind that
    pytorch/pytorch#179291 describes (a gloo thread dropping a collective's
    tensors during that teardown). Nothing of shmcfg needs the teardown: the
    kernel releases what a process holds in a segment when it exits."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def report(seg, step, applied, cur, old_vals, new_vals, moved):
    """Rank 0's lines for a new agreed configuration."""
    g = cur.generation
    if applied is None:
        say(f"step {step}: generation {g}: "
            + ", ".join(f"{k} {v!r}" for k, v in new_vals.items())
            + f", config hash {short(cur.config_hash)}")
        return
    if moved:
        # generations restart in a new segment: what differs from the
        # values in use
        say(f"step {step}: segment replaced, following generation {g}")
        changes = {k: (old_vals[k], v) for k, v in new_vals.items() if old_vals[k] != v}
    else:
        changes = seg.changes(applied.generation, g, values=True)
        if changes is None:  # no longer in the history
            changes = {k: (old_vals[k], v) for k, v in new_vals.items() if old_vals[k] != v}
    for name, (old, new) in sorted(changes.items()):
        say(f"step {step}: generation {g}: {name} {old!r} -> {new!r}")
    if not changes and not moved:
        say(f"step {step}: generation {g}: no value changed")


@record  # a rank's exception goes into torchrun's failure report
def recorded_main(argv=None):
    """main() with its exception in torchrun's report, the report written
    whole. When a rank fails, torchrun sends SIGTERM to the others and then
    reads the error file of every rank that failed: a rank whose collective
    failed at that moment (a peer was killed) could be stopped by that
    SIGTERM while @record wrote its file, and torch 2.13's agent, finding
    the file empty, died of a JSONDecodeError instead of printing its
    failure report (seen once in CI, on a loaded machine). So a failing
    rank ignores SIGTERM before @record writes (process-wide: a blocked
    signal would still reach torch's threads); it exits right after, and
    torchrun's SIGKILL, after its grace period, still ends it."""
    try:
        return main(argv)
    except BaseException:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise


if __name__ == "__main__":
    end(recorded_main())  # an exception leaves as usual (torchrun's report)
