#!/usr/bin/env python3
"""Tests of check.py, the harness's output checker (run.sh runs them first):
a faithful output passes; a changed field, a lost, an extra or a
reordered record, a short line and a reader's failure are each caught.

    python3 benches/peers/test_check.py
"""

import ipaddress
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check  # noqa: E402

N = 500


def line(i, dotted=True):
    v = list(check.event(i))
    out = []
    for k, x in enumerate(v):
        out.append(str(ipaddress.IPv4Address(x)) if k in check.ADDRESS_FIELDS and dotted else str(x))
    return " ".join(out) + "\n"


def run_check(lines, lib="quill", extra=()):
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.writelines(lines)
    try:
        return subprocess.run(
            [sys.executable, os.path.join(HERE, "check.py"), "--lib", lib, *extra, f.name, str(N)],
            capture_output=True,
            text=True,
        )
    finally:
        os.unlink(f.name)


class CheckTest(unittest.TestCase):
    def test_event_values(self):
        # Fixed points of harness_make_event in harness.h.
        self.assertEqual(
            check.event(0),
            (1767225600000000000, 0x0A000000, 1024, 0xC6336400, 1, 6, 0xCB007100, 1024, 4, 0),
        )
        self.assertEqual(
            check.event(2),
            (1767225600000002000, 0x0A000000 + 15838, 1026, 0xC6336402, 63, 17, 0xCB007102, 1050, 4, 2),
        )

    def test_event_matches_harness_h(self):
        # check.py's event() against harness_make_event compiled with cc.
        prog = r"""
#include "harness.h"
int main(void) {
  struct harness_event e;
  for (uint64_t i = 0; i < 100000; i += 7) {
    harness_make_event(i, &e);
    printf("%llu %u %u %u %u %u %u %u %u %u\n", (unsigned long long)e.timestamp_ns, e.src_addr,
           e.src_port, e.dst_addr, e.dst_port, e.protocol, e.post_nat_src_addr,
           e.post_napt_src_port, e.nat_event, e.ingress_vrf_id);
  }
  return 0;
}
"""
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "ev.c"), os.path.join(d, "ev")
            with open(src, "w") as f:
                f.write(prog)
            subprocess.run(["cc", "-std=c11", "-O1", "-I", HERE, src, "-o", exe, "-pthread"], check=True)
            out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines()
        self.assertEqual(len(out), len(range(0, 100000, 7)))
        for i, got in zip(range(0, 100000, 7), out):
            self.assertEqual(tuple(int(x) for x in got.split()), check.event(i), f"event {i}")

    def test_faithful_output_passes(self):
        r = run_check([line(i) for i in range(N)])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_changed_field_fails(self):
        lines = [line(i) for i in range(N)]
        lines[7] = lines[7].replace(" 203.0.113.7 ", " 203.0.113.8 ")
        r = run_check(lines)
        self.assertEqual(r.returncode, 1)
        self.assertIn("record 7: post_nat_src_addr", r.stderr)

    def test_lost_record_fails(self):
        lines = [line(i) for i in range(N)]
        del lines[-1]
        r = run_check(lines)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"{N - 1} records, expected {N}", r.stderr)

    def test_extra_record_fails(self):
        r = run_check([line(i) for i in range(N + 1)])
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"more than {N} records", r.stderr)

    def test_reordered_records_fail(self):
        lines = [line(i) for i in range(N)]
        lines[3], lines[4] = lines[4], lines[3]
        r = run_check(lines)
        self.assertEqual(r.returncode, 1)
        self.assertIn("record 3: timestamp_ns", r.stderr)

    def test_short_line_fails(self):
        lines = [line(i) for i in range(N)]
        lines[10] = lines[10].rsplit(" ", 1)[0] + "\n"
        r = run_check(lines)
        self.assertEqual(r.returncode, 1)
        self.assertIn("line 11: 9 fields", r.stderr)

    def test_reader_output_and_status(self):
        # A stand-in for bread: prints the integer-address lines, then exits
        # with the status given, to show that a reader's failure counts.
        with tempfile.TemporaryDirectory() as d:
            data = os.path.join(d, "lines")
            with open(data, "w") as f:
                f.writelines(line(i, dotted=False) for i in range(N))
            for status, want in ((0, 0), (3, 1)):
                reader = os.path.join(d, f"reader{status}")
                with open(reader, "w") as f:
                    f.write(f'#!/bin/sh\n# -f %m FILE\ncat "$3"\nexit {status}\n')
                os.chmod(reader, stat.S_IRWXU)
                r = subprocess.run(
                    [sys.executable, os.path.join(HERE, "check.py"), "--lib", "binlog", "--bread", reader, data, str(N)],
                    capture_output=True,
                    text=True,
                )
                self.assertEqual(r.returncode, want, r.stderr)


if __name__ == "__main__":
    unittest.main()
