# SPDX-License-Identifier: MIT
"""shmctl(1)'s SYNOPSIS against shmctl's command table (tests/cli/manpage.sh).

Usage: mancheck.py MANPAGE SHMCTL... (the command that runs shmctl).
Prints one line per disagreement (nothing when they agree): a command or
subcommand of the table the SYNOPSIS does not show, or one it shows that
the table lacks; a flag of a command's table entry
(as its --help lists it) that the command's SYNOPSIS lines do not name, or
one they name that the table does not have. A flag counts as named when its
long or its short form is. --help, and --owner of the commands that attach,
are in the SYNOPSIS lines of every command ("shmctl command ..."); the
cluster subcommands' connection flags in those of "shmctl cluster
subcommand".
"""
import re
import subprocess
import sys

manpage, shmctl = sys.argv[1], sys.argv[2:]


def run(*args):
    return subprocess.run([*shmctl, *args], capture_output=True, text=True, check=True).stdout


def help_flags(*cmd):
    """{long: short} of the flags --help of cmd lists (--wait=all is --wait)"""
    flags = {}
    for line in run(*cmd, "--help").splitlines():
        m = re.match(r"^ +(?:-([A-Za-z]), )?--([a-z][a-z-]*)", line)
        if m:
            flags[m.group(2)] = m.group(1)
    return flags


# ---- the table, as shmctl tells it ------------------------------------------
table = {}  # "cmd" or "cluster sub" -> {long: short}
for cmd in run("__complete", "commands").split():
    if cmd == "help":
        continue
    subs = run("__complete", "commands", cmd).split()
    for sub in subs or [None]:
        key = cmd if sub is None else f"{cmd} {sub}"
        table[key] = help_flags(*key.split())
common = {"help"}  # every command: the "shmctl command --help" line
owner = {"owner"}  # the commands that attach: "shmctl command ... --owner USER"

# ---- the SYNOPSIS, as roff ----------------------------------------------------
text = open(manpage, encoding="utf-8").read()
synopsis = text[text.index("\n.SH SYNOPSIS\n") :]
synopsis = synopsis[: synopsis.index("\n.SH ", 1)]


def plain(line):
    """a roff line as the text it prints"""
    m = re.match(r"^\.(B|I|BR|RB|IR|RI|BI|IB)\s+(.*)$", line)
    if not m:
        return "" if line.startswith(".") else line
    args = re.findall(r'"[^"]*"|\S+', m.group(2))
    args = [a.strip('"') for a in args]
    joined = " ".join(args) if len(m.group(1)) == 1 else "".join(args)
    joined = re.sub(r"\\f[BIRP]", "", joined)
    return joined.replace("\\-", "-").replace("\\&", "").replace("\\(aq", "'")


blocks = []  # each usage line's text
for chunk in re.split(r"\n\.(?:br|PP)\n", synopsis):
    words = " ".join(plain(line) for line in chunk.splitlines())
    if words.strip().startswith("shmctl"):
        blocks.append(words)

problems = []
shown = {}  # table key -> the flags its lines name (long and short)
generic = set()  # the lines of "shmctl command": flags every command takes
cluster_generic = set()


def named(words):
    return set(re.findall(r"(?<![\w-])--?([A-Za-z][\w-]*)", words))


for b in blocks:
    rest = b.split(None, 1)[1] if " " in b else ""
    first = rest.split(None, 1)[0] if rest else ""
    if first in ("command", "") or first.startswith(("[", "-")):
        generic |= named(b)
        continue
    names = first.split("|")
    if first == "cluster":
        second = rest.split()[1]
        if second == "subcommand":
            cluster_generic |= named(b)
            continue
        names = [f"cluster {s}" for s in second.split("|")]
    for n in names:
        if n not in table:
            problems.append(f"SYNOPSIS shows 'shmctl {n}', which the command table does not have")
            continue
        shown.setdefault(n, set()).update(named(b))

for key, flags in table.items():
    if key not in shown:
        problems.append(f"command '{key}' of the table: not in the SYNOPSIS")
        continue
    have = shown[key] | (common & generic) | (owner & generic)
    if key.startswith("cluster "):
        have |= cluster_generic
    for long, short in flags.items():
        if long not in have and (not short or short not in have):
            problems.append(f"{key}: flag --{long} of the table is not in its SYNOPSIS")
    longs = set(flags) | {s for s in flags.values() if s}
    for n in sorted(shown[key] - longs):
        problems.append(f"{key}: SYNOPSIS names -{'-' if len(n) > 1 else ''}{n}, which the table does not have")

print("\n".join(problems))
