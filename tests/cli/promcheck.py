#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reads Prometheus metrics as shmcfg writes them (shmctl stat --format
prometheus, shmcfg-sync --metrics-file), strictly, and prints them as JSON
for the shell tests' checks:

    promcheck.py FILE [--parser]

{"types": {FAMILY: TYPE}, "help": {FAMILY: TEXT},
 "samples": {NAME: {SEGMENT: VALUE}}, "labels": {NAME: [{LABEL: VALUE}]}}

The strict reading, of the text exposition format 0.0.4 and of shmcfg's
conventions: every line is "# HELP", "# TYPE" or a sample; each family once,
HELP then TYPE then its samples; names shmcfg_*; counters end in _total;
every sample has a segment label, once per segment; label values escaped
(backslash, double quote, newline); no timestamps; a newline at the end.

--parser: also prometheus_client's parser must read the same samples
(exit 3 if it is not installed: the caller skips or fails).
Exit 1, with "#   " lines saying why, if anything is wrong.
"""
import json
import re
import sys

NAME = re.compile(r"shmcfg_[a-z][a-z0-9_]*$")
LABEL_VALUE = r'"((?:[^"\\\n]|\\[\\"n])*)"'
SAMPLE = re.compile(r"(shmcfg_[a-z0-9_]+)\{((?:[a-z_]+=" + LABEL_VALUE + r",?)*)\} (\S+)$")
LABEL = re.compile(r"([a-z_]+)=" + LABEL_VALUE + r"(,|$)")


def unescape(v):
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def strict(text):
    errs = []
    out = {"types": {}, "help": {}, "samples": {}, "labels": {}}
    if not text.endswith("\n"):
        errs.append("no newline at the end")
    fam, state = None, None
    for n, line in enumerate(text.splitlines(), 1):
        where = "line %d: %r: " % (n, line)
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not NAME.match(parts[2]):
                errs.append(where + "bad HELP")
                continue
            fam = parts[2]
            if fam in out["help"]:
                errs.append(where + "family %s twice" % fam)
            out["help"][fam] = parts[3]
            state = "help"
        elif line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[2] != fam or state != "help":
                errs.append(where + "TYPE not right after its HELP")
                continue
            if parts[3] not in ("counter", "gauge"):
                errs.append(where + "type %s" % parts[3])
            if parts[3] == "counter" and not fam.endswith("_total"):
                errs.append(where + "a counter not named *_total")
            if parts[3] != "counter" and fam.endswith("_total"):
                errs.append(where + "*_total not a counter")
            out["types"][fam] = parts[3]
            state = "type"
        elif line.startswith("#") or not line:
            errs.append(where + "neither HELP, TYPE nor a sample")
        else:
            m = SAMPLE.match(line)
            if not m:
                errs.append(where + "not a sample of the format (or with a timestamp)")
                continue
            name, labels, value = m.group(1), m.group(2), m.group(4)
            if name != fam or state not in ("type", "sample"):
                errs.append(where + "a sample outside its family (HELP and TYPE first)")
                continue
            state = "sample"
            lab = {}
            for lm in LABEL.finditer(labels):
                if lm.group(1) in lab:
                    errs.append(where + "label %s twice" % lm.group(1))
                lab[lm.group(1)] = unescape(lm.group(2))
            if "segment" not in lab:
                errs.append(where + "no segment label")
                continue
            try:
                v = float(value)
            except ValueError:
                errs.append(where + "value %r" % value)
                continue
            seg = out["samples"].setdefault(name, {})
            if lab["segment"] in seg:
                errs.append(where + "segment %r twice" % lab["segment"])
            seg[lab["segment"]] = v
            out["labels"].setdefault(name, []).append(lab)
    for f in out["help"]:
        if f not in out["samples"]:
            errs.append("family %s has no sample" % f)
    return out, errs


def by_parser(text):
    from prometheus_client.parser import text_string_to_metric_families

    got = {}
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            got.setdefault(s.name, {})[s.labels["segment"]] = s.value
    return got


def main():
    with open(sys.argv[1]) as f:
        text = f.read()
    out, errs = strict(text)
    if "--parser" in sys.argv[2:]:
        try:
            import prometheus_client.parser  # noqa: F401
        except ImportError:
            sys.exit(3)
        try:
            got = by_parser(text)
        except Exception as e:
            errs.append("prometheus_client's parser: %r" % e)
        else:
            if got != out["samples"]:
                errs.append("prometheus_client's parser read other samples: %s" % json.dumps(got)[:600])
    if errs:
        for e in errs[:20]:
            print("#   " + e)
        sys.exit(1)
    print(json.dumps(out))


main()
