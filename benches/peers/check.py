#!/usr/bin/env python3
"""Checks one driver's output against the events it was given.

    check.py --lib quill|dplog-text|dplog-own-text FILE N
    check.py --lib binlog --bread BREAD FILE N
    check.py --lib dplog-binary|dplog-own-binary --dplog-cat DPLOG_CAT --template T FILE N

The output is decoded by the library's own reader where it has one
(binlog's `bread -f %m`, `dplog-cat --format text --template T`; the text
files of Quill and dplog are read as they are) into lines of the ten
fields in `harness.h`'s order, one space apart. Line i must be event i
field by field (addresses dotted, or as integers for binlog, which has
no formatting of its own for them), and there must be exactly N lines.
Exit status 0 if so; 1 with the first difference on stderr otherwise.
"""

import argparse
import ipaddress
import subprocess
import sys

T0_NS = 1767225600000000000
FIELDS = (
    "timestamp_ns",
    "src_addr",
    "src_port",
    "dst_addr",
    "dst_port",
    "protocol",
    "post_nat_src_addr",
    "post_napt_src_port",
    "nat_event",
    "ingress_vrf_id",
)
ADDRESS_FIELDS = {1, 3, 6}


def event(i):
    """Event i: the same formula as harness_make_event in harness.h."""
    return (
        T0_NS + i * 1000,
        0x0A000000 + (i * 7919) % 16777216,
        1024 + i % 64511,
        0xC6336400 + i % 256,
        1 + (i * 31) % 65535,
        17 if i % 3 == 2 else 6,
        0xCB007100 + i % 16,
        1024 + (i * 13) % 64512,
        5 if i % 2 else 4,
        i % 4,
    )


def parse(line, dotted):
    """The ten values of one line, or a ValueError saying what is wrong."""
    tokens = line.rstrip("\n").split(" ")
    if len(tokens) != len(FIELDS):
        raise ValueError(f"{len(tokens)} fields, expected {len(FIELDS)}")
    values = []
    for k, tok in enumerate(tokens):
        if k in ADDRESS_FIELDS and dotted:
            values.append(int(ipaddress.IPv4Address(tok)))
        elif tok.isdigit():
            values.append(int(tok))
        else:
            raise ValueError(f"{FIELDS[k]} is {tok!r}, not a decimal integer")
    return tuple(values)


def check(lines, n, dotted, name):
    count = 0
    for i, line in enumerate(lines):
        if i >= n:
            print(f"{name}: more than {n} records (line {i + 1}: {line.rstrip()!r})", file=sys.stderr)
            return False
        try:
            got = parse(line, dotted)
        except ValueError as e:
            print(f"{name}: line {i + 1}: {e}: {line.rstrip()!r}", file=sys.stderr)
            return False
        want = event(i)
        if got != want:
            k = next(k for k in range(len(FIELDS)) if got[k] != want[k])
            print(
                f"{name}: record {i}: {FIELDS[k]} is {got[k]}, expected {want[k]} ({line.rstrip()!r})",
                file=sys.stderr,
            )
            return False
        count += 1
    if count != n:
        print(f"{name}: {count} records, expected {n}", file=sys.stderr)
        return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, choices=["quill", "dplog-text", "dplog-own-text", "binlog", "dplog-binary", "dplog-own-binary"])
    ap.add_argument("--bread", help="binlog's reader (for --lib binlog)")
    ap.add_argument("--dplog-cat", help="dplog-cat (for --lib dplog-binary)")
    ap.add_argument("--template", help="the text template dplog-cat prints with")
    ap.add_argument("file")
    ap.add_argument("n", type=int)
    a = ap.parse_args()

    if a.lib in ("quill", "dplog-text", "dplog-own-text"):
        with open(a.file, encoding="ascii") as f:
            ok = check(f, a.n, True, a.lib)
        sys.exit(0 if ok else 1)

    if a.lib == "binlog":
        if not a.bread:
            ap.error("--lib binlog needs --bread")
        cmd = [a.bread, "-f", "%m", a.file]
        dotted = False
    else:
        if not (a.dplog_cat and a.template):
            ap.error(f"--lib {a.lib} needs --dplog-cat and --template")
        cmd = [a.dplog_cat, "--format", "text", "--template", a.template, a.file]
        dotted = True
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, encoding="ascii") as p:
        ok = check(p.stdout, a.n, dotted, a.lib)
        if not ok:
            p.kill()
        p.stdout.read()
        rc = p.wait()
    if ok and rc != 0:
        print(f"{a.lib}: {cmd[0]} exited with status {rc}", file=sys.stderr)
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
