# SPDX-License-Identifier: MIT
"""The command line of shmcfg-import: arguments, the inputs read and merged,
the library's check of the schema written, and the output."""

import argparse
import os
import re
import stat
import sys
import tempfile

from . import imported as importing
from .imported import ImportedModule, env_names, import_modules
from .library import read_schema_file, self_check
from .model import IDENT_RE, NAME_RE, PROG, InputError, join_and
from .reader import ModuleReader
from .writers import write_c, write_json, write_yaml

def is_module_name(arg):
    """A SOURCE that names a module: a dotted name that is no path. A name
    ending in .py, or one the directory holds (a file, a directory, a
    symbolic link, even a broken one or a loop), is a file path, read as
    a file (its error is the OS's), never looked up or imported."""
    return bool(NAME_RE.match(arg)) and not arg.endswith(".py") and \
        not os.path.lexists(arg)


def derive_prefix(path):
    """torch/_dynamo/config.py -> torch._dynamo.config."""
    apath = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(apath))[0]
    d = os.path.dirname(apath)
    parts = [] if stem == "__init__" else [stem]
    if os.path.exists(os.path.join(d, "__init__.py")):
        while os.path.exists(os.path.join(d, "__init__.py")):
            parts.insert(0, os.path.basename(d))
            d = os.path.dirname(d)
    elif not os.path.isabs(path):
        comps = os.path.normpath(path).split(os.sep)[:-1]
        if ".." not in comps:
            parts = [c for c in comps if c not in ("", ".")] + parts
    parts = [p for p in parts if p]
    # keep the longest tail of valid identifiers
    tail = []
    for p in reversed(parts):
        if not IDENT_RE.match(p):
            break
        tail.insert(0, p)
    return ".".join(tail)


def display_name(path):
    """parent-dir/file: stable whatever the current directory."""
    apath = os.path.abspath(path)
    parent = os.path.basename(os.path.dirname(apath))
    return "%s/%s" % (parent, os.path.basename(apath)) if parent else os.path.basename(apath)


def output_refusal(path):
    """Why `path` is not replaced by the output, or None: only a regular file
    (or nothing) is replaced, as shmctl save does; a symbolic link, a
    directory, a device or a FIFO is left as it is (-o /dev/null as root
    would replace the system's)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISREG(st.st_mode):
        return None
    return "not a regular file (%s); not replaced" % (
        "a symbolic link" if stat.S_ISLNK(st.st_mode) else
        "a directory" if stat.S_ISDIR(st.st_mode) else "a device, FIFO or socket")


def write_output(path, text):
    """The output to stdout (no path, or -), else to the regular file `path`,
    replaced atomically (a file beside it, renamed over it); anything else
    at `path` is refused: OSError."""
    if path in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    why = output_refusal(path)
    if why is not None:
        raise OSError(why)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".shmcfg-import.", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        try:
            os.chmod(tmp, 0o644 & ~current_umask())
        except OSError:
            pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def main(argv=None, search_path=None):
    """The command: argv (default sys.argv[1:]), module names looked up on
    search_path (default: the current directory, then sys.path but its
    first entry, the script's directory). Returns the exit status."""
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Turn PyTorch-style config modules into a shmcfg schema: a source "
                    "file is parsed, never executed; a module name (torch._inductor.config) "
                    "is parsed and also imported in a child Python, which gives the "
                    "defaults the source computes and checks the rest.")
    ap.add_argument("sources", nargs="*", metavar="SOURCE",
                    help="a config module: a Python source file, or a module name "
                         "(a dotted name, not ending in .py, that names nothing in the "
                         "current directory); several are merged. Optional with --merge")
    ap.add_argument("-o", "--output", metavar="FILE",
                    help="write here: a regular file, replaced atomically; anything else "
                         "there (a symbolic link, device, FIFO, directory) is refused "
                         "(default, or -: stdout)")
    ap.add_argument("--module", metavar="PREFIX",
                    help="option name prefix of one SOURCE file (default: from the path, "
                         "torch/_dynamo/config.py -> torch._dynamo.config)")
    ap.add_argument("--merge", metavar="FILE.yaml", action="append", default=[],
                    help="append the options of a schema file (repeatable)")
    ap.add_argument("--format", choices=("yaml", "c", "json"), default="yaml",
                    help="yaml: schema file (default); c: the C table of shmcfg_optdef; "
                         "json: for scripts")
    ap.add_argument("--c-symbol", metavar="NAME", default="shmcfg__default",
                    help="C output: define NAME_opts[] and NAME_nopts (default: %(default)s)")
    ap.add_argument("--c-include", metavar="HEADER", default="internal.h",
                    help="C output: the header to include (default: %(default)s)")
    ap.add_argument("--import-timeout", metavar="SECONDS", type=float,
                    default=importing.IMPORT_TIMEOUT,
                    help="module names: the child Pythons that import them are killed, "
                         "with whatever they started, after SECONDS (default: %(default)g)")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 if anything was skipped")
    ap.add_argument("--comment", metavar="TEXT", action="append", default=[],
                    help="a line for the output's header comment (repeatable), e.g. how "
                         "to regenerate it")
    args = ap.parse_args(argv)

    def warn(msg):
        sys.stderr.write(msg + "\n")

    if not args.sources and not args.merge:
        ap.error("give a config module, --merge FILE.yaml, or both")
    if args.module is not None and len(args.sources) != 1:
        ap.error("--module names the options of one SOURCE")
    if args.module is not None and args.module != "" and not NAME_RE.match(args.module):
        ap.error("--module %r is not a dotted name" % args.module)
    if not 0 < args.import_timeout < 1e9:  # not nan, not inf
        ap.error("--import-timeout %g is not a number of seconds > 0" % args.import_timeout)
    if not IDENT_RE.match(args.c_symbol):
        ap.error("--c-symbol %r is not a C identifier" % args.c_symbol)
    if not re.match(r'[<"]?[A-Za-z0-9_./+-]+[>"]?\Z', args.c_include):
        ap.error("--c-include %r is not a header name" % args.c_include)
    for c in args.comment:
        if any(ord(ch) < 0x20 for ch in c):
            ap.error("--comment %r holds a control character (a line break?)" % c)
    modules = {src for src in args.sources if is_module_name(src)}
    if args.module is not None and modules:
        ap.error("--module is for a source file; a module's options are named by its "
                 "__name__")
    # at once, before modules are imported; checked again as it is written
    why = output_refusal(args.output) if args.output not in (None, "-") else None
    if why is not None:
        warn("%s: %s: %s" % (PROG, args.output, why))
        return 1

    # where module names are looked up: as python -m would
    importing.SEARCH_PATH = search_path if search_path is not None else \
        [os.getcwd()] + [p for p in sys.path[1:] if p]

    options, sources, notes, skipped = [], [], [], 0
    seen = {}

    def add(new):
        """Append the options of one input; a name defined twice is an error."""
        for o in new:
            if o.name in seen:
                first = seen[o.name].where
                raise InputError(o.where[0], o.where[1], "option %s is already defined (%s)"
                                 % (o.name, "%s:%d" % first if first[1] else first[0]))
            seen[o.name] = o
            options.append(o)
    try:
        imported = {src: ImportedModule(src) for src in args.sources if src in modules}
        if imported:
            runs = import_modules(sorted({m.name for m in imported.values()}),
                                  set().union(*(env_names(m.reader.tree)
                                                for m in imported.values())),
                                  any(m.computed for m in imported.values()),
                                  args.import_timeout)
        for src in args.sources:
            if src in imported:
                m = imported[src]
                new, n = m.options(runs, warn)
                add(new)
                skipped += n
                sources.append(m.real_name)
                continue
            prefix = args.module if args.module is not None else derive_prefix(src)
            if prefix and not NAME_RE.match(prefix):
                raise InputError(src, 0, "cannot derive a module prefix; give --module")
            reader = ModuleReader(src, prefix, warn)
            add(reader.read())
            skipped += reader.skipped
            sources.append(display_name(src))
        for path in args.merge:
            add(read_schema_file(path))
            sources.append(display_name(path))
        if args.format == "c" and not options:
            raise InputError((args.sources or args.merge)[0], 0, "no options to write")
    except InputError as e:
        warn("%s: %s" % (PROG, e))
        return 1

    # an alias, read from an imported module, of an option that stays
    # torch's in a module imported here: it stays torch's too
    ours = tuple(m.real_name + "." for m in imported.values())
    while True:
        names = {o.name for o in options}
        gone = [o for o in options if o.alias is not None and o.alias not in names
                and o.name.startswith(ours) and o.alias.startswith(ours)]
        if not gone:
            break
        for o in gone:
            options.remove(o)
            skipped += 1
            warn("skipped %s (%s:%d): an alias of %s, which is not in the schema"
                 % (o.name, o.where[0], o.where[1], o.alias))
    undeclared = set()
    for o in options:
        if o.alias is not None and o.alias not in names:
            warn("warning: %s: alias target %s is not in the schema" % (o.name, o.alias))
            undeclared.add(o.alias)
        for target, _ in o.implies:
            if target not in names:
                warn("warning: %s: implies %s, which is not in the schema" % (o.name, target))
                undeclared.add(target)
    summary = None
    if undeclared:
        # the last line a user sees once the output is written (below): shmctl
        # create refuses such a schema alone
        shown = ", ".join(sorted(undeclared)[:3]) + (", ..." if len(undeclared) > 3 else "")
        summary = ("warning: the schema refers to %d option%s it does not declare (%s): shmctl "
                   "create refuses it alone; import the modules that declare them in the same "
                   "command, or --merge their schema"
                   % (len(undeclared), "s" * (len(undeclared) > 1), shown))

    try:
        return _write(args, options, imported, sources, notes, skipped, warn)
    finally:
        if summary:  # last, whatever became of the output
            warn(summary)


def _write(args, options, imported, sources, notes, skipped, warn):
    """Write the schema main() read: its exit status."""
    versions = sorted({m.version for m in imported.values() if m.version})
    if imported:
        notes.append("Read from %s: each module parsed, and imported without TORCH*/PYTORCH* "
                     "variables." % (join_and(versions) or "Python %s" % sys.version.split()[0]))
    notes.extend(args.comment)
    text = write_yaml(options, sources, notes)
    if args.format == "yaml":
        label = args.output if args.output not in (None, "-") else "<stdout>"
    else:
        label = "<the schema of the output>"
    try:
        self_check(options, text, label)
    except InputError as e:
        warn("%s: %s" % (PROG, e))
        return 1
    if args.format == "c":
        text = write_c(options, sources, args.c_symbol, args.c_include, notes)
    elif args.format == "json":
        text = write_json(options, sources)
    try:
        write_output(args.output, text)
    except OSError as e:
        warn("%s: %s: %s" % (PROG, args.output, e.strerror or e))
        return 1
    if args.strict and skipped:
        warn("%s: %d assignment(s) skipped (--strict)" % (PROG, skipped))
        return 1
    return 0


def run(argv=None, search_path=None):
    """main(), its exit status for sys.exit(): 1 on a closed pipe, 130 on ^C."""
    try:
        return main(argv, search_path)
    except BrokenPipeError:
        return 1
    except KeyboardInterrupt:
        return 130
