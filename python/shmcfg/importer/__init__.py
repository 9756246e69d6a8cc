# SPDX-License-Identifier: MIT
"""shmcfg.importer: turn PyTorch-style config modules into a shmcfg schema
(the shmcfg-import command; `python3 -m shmcfg.importer` runs it too).

A SOURCE is a Python file or a module name. A file is parsed with `ast`
(never imported or executed): every module-level (and nested-class)
assignment whose type can be told from its annotation or its literal value
becomes an option named `<module prefix>.<name>`; anything else is skipped
with one line on stderr:

    skipped NAME (FILE:LINE): REASON

A module name (`torch._inductor.config`: a dotted name, not ending in .py,
that names nothing in the file system, not even a broken symbolic link; any
other SOURCE is a file path, never imported) is found as the import system
finds it, and its source file is parsed the same way; the module is then
also imported, in a child Python (this interpreter) whose environment has
no TORCH*/PYTORCH* variable and none of the variables the source names, and
its `_config` (torch.utils._config_module) decides: a default the source
computes (`f()`, `'1' if not is_fbcode() else '0'`) is the import's, when a
schema can hold it and it is the same in a second import made as on another
machine (other directories, user and CPU count) and names no directory of
the installation; every other option must agree with the import (type,
default, alias, justknob, deprecation), else it is an error at its
FILE:LINE and nothing is written; what the import has and a schema cannot
hold stays torch's, one `skipped` line each. `torch.fx.experimental.config`
means torch.fx.experimental._config; options are named by the module's
__name__. Several sources are merged into one schema, as --merge files are.
The child runs in a process group of its own, killed when it is done (what
the module started goes with it) or after --import-timeout seconds (default
120: a module that blocks is an error naming it).

Outputs: the schema file (YAML, format 1; see doc/schema-format.md), the C
table the library embeds (`--format c`), or JSON (`--format json`, for scripts
and tests). `--merge FILE.yaml` appends the options of a schema file (it can
also be used without a Python source, to convert a schema file).

The importer translates Python and writes; libshmcfg does the rest, through
the binding's public schema API (shmcfg.Schema, shmcfg.schema_yaml()): it
checks each option as it is declared, reads and checks the schema files of
--merge, and loads the schema written (and builds a private segment of it)
before anything is written, so that what the library would refuse is an
error here, named FILE:LINE.

Exit status: 0 success; 1 an input that does not parse, cannot be read or is
invalid (a SOURCE is a regular file of at most 16 MiB, a --merge file one of
at most 64 MiB: a FIFO or a device is refused, not read), a module that
cannot be found or imported (within --import-timeout) or is no config
module, a disagreement with an import (one line each, naming FILE:LINE or
the module), an output file (-o) that is not a regular file (a symbolic
link, a device, a FIFO: refused, not replaced); 2 a usage error. With
--strict, any skipped assignment also gives 1.

Python standard library, and the library built (lib/.libs of the build
tree, $SHMCFG_LIBRARY, or where the binding was installed); a module name
needs what importing it needs (torch).

Modules, by concern: files (inputs read whole and bounded), model (the
Option, what is skipped, what fails), reader (a source parsed with `ast`
and evaluated without running it), imported (module names: found, and
imported in a child Python), library (the library's checks, through
shmcfg.Schema), writers (YAML through shmcfg.schema_yaml(), the C table,
JSON), cli (the command line: main()).
"""

from .cli import main, run

__all__ = ["main", "run"]
