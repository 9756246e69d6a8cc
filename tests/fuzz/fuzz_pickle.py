#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fuzz_pickle: load_config() of any bytes (PyTorch's save_config() pickle,
or the JSON of a dump) is a commit or a documented error, within a bound of
time and memory (python/shmcfg/config.py: _ValuesUnpickler, _check_pickle,
_load_json, _check_stored; issue 24).

The input goes to ConfigModule.load_config() of a segment of a schema of
every value type, as bytes and, when it is UTF-8, as str. Each call
  - returns the generation it published, and then the module's own
    save_config() and the segment's dump() load back to the same config
    hash; or
  - raises ConfigLoadError (not a saved config), OptionTypeError or
    OptionValueError (a value the option refuses: python/README.md), or
    shmcfg.Error SHMCFG_E_FULL (more than the segment's value heap holds),
    and the generation and the config hash are what they were;
and takes at most PICKLE_FUZZ_SECONDS (10) and what the address space
allows: the harness caps it (RLIMIT_AS) at 1 GiB over what the process had
at start, so that a pickle that asks for gigabytes (issue 24: a 0.5 MB
pickle asked for 1.5 GB) fails as a MemoryError, which is a finding even
where load_config() wraps it in a ConfigLoadError.

Usage (from the source tree; the library from $top_builddir/lib/.libs, as
tests/test_python.py finds it, or $SHMCFG_LIBRARY):
  fuzz_pickle.py                      replays tests/fuzz/corpus/fuzz_pickle
                                      (make check; exit 77: skipped)
  fuzz_pickle.py --replay PATH...     replays files and directories
  fuzz_pickle.py --fuzz [ARGS...]     fuzzes with atheris (libFuzzer's ARGS:
                                      -max_total_time=60 DIR...; make fuzz)
  fuzz_pickle.py --seeds DIR          writes the seed inputs into DIR
  fuzz_pickle.py --clean              removes the segments of runs that
                                      ended (libFuzzer's exit() runs no
                                      Python cleanup: make fuzz calls it)
"""

import os
import sys

if os.environ.get("SHMCFG_SANITIZERS") and len(sys.argv) == 1:
    # as tests/test_python.py: ctypes cannot load an ASan-built library
    print("# skipped: libshmcfg is built with sanitizers", file=sys.stderr)
    sys.exit(77)

import contextlib
import json
import pickle
import resource
import shlex
import signal
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("top_srcdir") or os.path.join(HERE, os.pardir, os.pardir))
BUILDDIR = os.path.abspath(os.environ.get("top_builddir") or SRCDIR)
if "SHMCFG_LIBRARY" not in os.environ:
    _built = os.path.join(BUILDDIR, "lib", ".libs", "libshmcfg.so.3")
    if os.path.exists(_built):
        os.environ["SHMCFG_LIBRARY"] = _built
if "SHMCFG_PYTHON_EXT" not in os.environ:
    _built = os.path.join(BUILDDIR, "python", "shmcfg", ".libs", "_fast.so")
    if os.path.exists(_built):
        os.environ["SHMCFG_PYTHON_EXT"] = _built
sys.path.insert(0, os.path.join(SRCDIR, "python"))

SECONDS = float(os.environ.get("PICKLE_FUZZ_SECONDS", "10"))
MEMORY_HEADROOM = 1 << 30

SCHEMA = """\
format: 1
options:
  app.config.lr:
    type: float
    default: 0.5
    min: 0.0
    max: 10.0
  app.config.steps:
    type: int
    default: 10
    min: 1
    max: 1000
  app.config.mode:
    type: str
    default: "fast"
    choices: ["fast", "slow"]
  app.config.tags:
    type: list
    default: ["b", "a"]
  app.config.names:
    type: set
    default: ["y", "x"]
  app.config.ratio:
    type: float
    nullable: true
  app.config.count:
    type: int
    nullable: true
  app.config.enabled:
    type: bool
    nullable: true
  app.config.label:
    type: str
    nullable: true
  app.config.flag:
    type: bool
    default: false
    implies: {app.config.steps: 5}
  app.config.triton.cudagraphs:
    type: bool
    default: true
  app.config.old_flag:
    type: bool
    default: false
    deprecated: "use flag"
  app.config.cache_dir:
    type: str
    default: "/tmp"
    hash_ignored: true
  app.config.steps_alias:
    type: int
    alias: app.config.steps
  app.config._secret:
    type: int
    default: 1
    private: true
  app.config.unsaved:
    type: int
    default: 3
    save_ignored: true
  other.config.x:
    type: int
    default: 1
"""


class Timeout(BaseException):
    """An input over its time (a BaseException: load_config() wraps every
    Exception the unpickler raises in a ConfigLoadError)."""


def _on_alarm(signum, frame):
    raise Timeout(f"an input took over {SECONDS} s")


def clean_stale():
    """Remove the segments of runs that died: libFuzzer ends a run with C's
    exit(), which runs no Python cleanup."""
    import re
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return
    for n in names:
        m = re.fullmatch(r"shmcfg(?:-lock)?\.fuzz-pickle-(\d+)(?:\..*)?", n)
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join("/dev/shm", n))
        except OSError:
            pass


class Harness:
    def __init__(self):
        import shmcfg  # (imported here: atheris instruments it when fuzzing)
        clean_stale()
        self.shmcfg = shmcfg
        self.name = f"fuzz-pickle-{os.getpid()}"
        # a small value heap: a config too big for it is refused (E_FULL)
        self.seg = shmcfg.create(self.name, schema_text=SCHEMA, force=True, no_env=True,
                                 heap_bytes=64 << 10)
        self.mod = self.seg.module("app.config")
        self.names = self.seg.options()
        self.reset()
        self.base = self.seg.config_hash
        self.allowed = (shmcfg.ConfigLoadError, shmcfg.OptionTypeError, shmcfg.OptionValueError)

    def close(self):
        self.seg.unlink()
        self.seg.close()

    def reset(self):
        t = self.seg.transaction()
        for n in self.names:
            t.reset(n)
        t.commit()

    def allowed_error(self, e):
        """A documented refusal of load_config(), caused by no bound."""
        c = e
        while c is not None:  # (raise ... from None keeps __context__)
            if isinstance(c, (MemoryError, RecursionError, Timeout)):
                return False
            c = c.__context__
        if isinstance(e, self.allowed):
            return True
        return isinstance(e, self.shmcfg.Error) and e.errname == "SHMCFG_E_FULL"

    def load(self, what, arg):
        seg = self.seg
        self.reset()
        gen0, hash0 = seg.generation, seg.config_hash
        assert hash0 == self.base, "the reset does not restore the config hash"
        try:
            gen = self.mod.load_config(arg)
        except BaseException as e:  # noqa: B902 (judged below)
            if not self.allowed_error(e):
                raise AssertionError(f"load_config of {what}: {type(e).__name__} is no documented "
                                     f"error of it, or a bound was hit: {e!r:.300}") from e
            assert seg.generation == gen0 and seg.config_hash == hash0, \
                f"a refused load_config ({type(e).__name__}: {e}) changed the configuration"
            return False
        assert isinstance(gen, int) and gen == seg.generation >= gen0, \
            f"load_config returned {gen!r}, the segment is at {seg.generation}"
        h = seg.config_hash
        # what it took saves and dumps, and loads back to the same configuration
        saved = self.mod.save_config()
        assert isinstance(saved, bytes) and saved[:1] == b"\x80", "save_config is no pickle"
        self.mod.load_config(saved)
        assert seg.config_hash == h, "load_config(save_config()) changed the config hash"
        self.mod.load_config(seg.dump(all=True))
        assert seg.config_hash == h, "load_config(seg.dump()) changed the config hash"
        return True

    def one(self, data):
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, SECONDS)
        try:
            with warnings.catch_warnings():
                # unknown keys and deprecated options warn, as documented
                warnings.simplefilter("ignore")
                self.load("the bytes", data)
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    text = None
                if text is not None:
                    self.load("the text", text)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def cap_memory():
    """RLIMIT_AS: MEMORY_HEADROOM over the address space the process has."""
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = vm + MEMORY_HEADROOM
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def files_of(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, f) for f in os.listdir(p)
                          if not f.startswith(".") and os.path.isfile(os.path.join(p, f)))
        else:
            out.append(p)
    return out


def replay(paths):
    files = files_of(paths)
    if not files:
        print(f"Bail out! no input in {' '.join(paths)}")
        return 1
    h = Harness()
    cap_memory()
    print(f"1..{len(files)}", flush=True)
    t0 = time.monotonic()
    slowest = (0.0, "")
    try:
        for i, path in enumerate(files, 1):
            with open(path, "rb") as f:
                data = f.read()
            print(f"# input {path} ({len(data)} bytes)", file=sys.stderr, flush=True)
            t = time.monotonic()
            h.one(data)
            slowest = max(slowest, (time.monotonic() - t, path))
            print(f"ok {i} - fuzz_pickle {os.path.basename(path)}", flush=True)
    finally:
        h.close()
    print(f"# fuzz_pickle: {len(files)} inputs, {time.monotonic() - t0:.2f} s "
          f"(slowest {slowest[0]:.3f} s: {slowest[1]})")
    return 0


def fuzz(args):
    import atheris
    # the binding, and the pickle disassembler its memo check runs
    with atheris.instrument_imports(include=["shmcfg", "pickletools"]):
        h = Harness()
    cap_memory()
    # libFuzzer runs argv[0] again, through the shell, for -merge, -fork and
    # -jobs, with its flags and directories: the environment tells main()
    os.environ["FUZZ_PICKLE_ATHERIS"] = "1"
    argv0 = f"{shlex.quote(sys.executable)} {shlex.quote(os.path.abspath(__file__))}"
    atheris.Setup([argv0] + args, h.one)
    try:
        atheris.Fuzz()
    finally:
        h.close()


def seeds(outdir):
    """save_config() of configurations of every value type, pickles of every
    protocol, JSON dumps, and pickles load_config() refuses: other globals,
    other types, and the bombs of issue 24."""
    import shmcfg
    os.makedirs(outdir, exist_ok=True)

    def put(name, data):
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)

    name = f"fuzz-pickle-seeds-{os.getpid()}"
    seg = shmcfg.create(name, schema_text=SCHEMA, force=True, no_env=True)
    try:
        m, top = seg.module("app.config"), seg.module("")
        put("save-default", m.save_config())
        seg.set({"app.config.lr": 2.25, "app.config.steps": 999, "app.config.mode": "slow",
                 "app.config.tags": ["x", "", "\u00e9"], "app.config.names": {"n1", "n2"},
                 "app.config.ratio": float("-inf"), "app.config.count": -(1 << 63),
                 "app.config.enabled": True, "app.config.label": "l\u00e0bel",
                 "app.config.triton.cudagraphs": False, "app.config.unsaved": 4})
        put("save-values", m.save_config())
        put("save-full-names", top.save_config())
        seg.set({"app.config.ratio": float("nan"), "app.config.lr": 0.0,
                 "app.config.count": None, "app.config.flag": True, "app.config.tags": [], "app.config.names": set()})
        put("save-nan-empty", m.save_config())
        put("dump.json", seg.dump(all=True))
        put("dump-values-only.json", json.dumps({"values": {"app.config.steps": 3}}))
        put("plain.json", json.dumps({"lr": 1.5, "mode": "fast", "unknown": 1, "old_flag": True}))
    finally:
        seg.unlink()
        seg.close()
    d = {"lr": 1.0, "steps": 7, "mode": "slow", "tags": ["a", "b"], "names": {"c"}, "count": None,
         "triton.cudagraphs": False, "steps_alias": 8}
    for proto in (2, 3, 4, 5):
        put(f"proto{proto}", pickle.dumps(d, protocol=proto))
    put("frozenset-tuple", pickle.dumps({"names": frozenset({"a"}), "tags": ("t", "u")}, protocol=2))
    # refused: not a dict, values of no config type, a global that runs code
    put("not-a-dict", pickle.dumps(["lr", 1.0], protocol=2))
    put("bad-type-str", pickle.dumps({"lr": "1.0", "steps": 2.0, "tags": [1]}, protocol=2))
    put("bad-type-list", pickle.dumps({"tags": [1], "enabled": 1, "mode": {"a": 1}}, protocol=2))
    put("bad-range", pickle.dumps({"steps": 5000}, protocol=2))
    put("bad-choice", pickle.dumps({"mode": "medium", "label": "x\x00y"}, protocol=2))
    put("bytes-value", pickle.dumps({"label": b"x"}, protocol=2))  # _codecs.encode
    put("global-os-system", b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.")
    put("proto0", pickle.dumps(d, protocol=0))
    # issue 24: one 500 kB string referenced 3000 times through BINGET (1.5 GB
    # as stored); a million items from a few kB; memo indexes that ask the
    # unpickler for gigabytes of memo
    s = "s" * 500_000
    put("bomb-shared-refs", pickle.dumps({"tags": [s] * 3000}, protocol=2))
    row = [""] * 1000
    put("bomb-items", pickle.dumps({"tags": [row] * 2000}, protocol=2))
    put("bomb-memo-long-binput", b"\x80\x02}r\xff\xff\xff\x7f.")
    put("bomb-memo-put", b"\x80\x02}p4000000000\n.")
    put("bomb-memo-binget", b"\x80\x02}q\x00h\x05.")


def main(argv):
    if os.environ.get("FUZZ_PICKLE_ATHERIS") == "1":
        return fuzz(argv)  # libFuzzer running it again (-merge_inner=1 ...)
    if not argv:
        return replay([os.path.join(SRCDIR, "tests", "fuzz", "corpus", "fuzz_pickle")])
    if argv[0] == "--replay":
        return replay(argv[1:])
    if argv[0] == "--fuzz":
        return fuzz(argv[1:])
    if argv[0] == "--seeds" and len(argv) == 2:
        return seeds(argv[1])
    if argv[0] == "--clean" and len(argv) == 1:
        clean_stale()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
