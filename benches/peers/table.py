#!/usr/bin/env python3
"""Prints run.sh's table from its result lines.

Each line is `rep=R lib=L n=N rtt_ns=.. p50_ns=.. p99_ns=.. p999_ns=..
max_ns=.. slow_pct=.. rec_per_s=.. bytes=.. tsc_ghz=.. check=ok|FAILED` (key=value,
one space apart, as harness_report in harness.h prints them). Prints every
run, then the median over the repetitions per library and dplog's ratios
to the peers named in benches/peers/README.md.
"""

import statistics
import sys

TEXT_PEERS = ["quill"]
BINARY_PEERS = ["binlog"]


def load(path):
    runs = []
    with open(path, encoding="ascii") as f:
        for line in f:
            kv = dict(tok.split("=", 1) for tok in line.split())
            runs.append(kv)
    return runs


def row(cells, widths):
    return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"


def table(header, rows):
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(header)]
    print(row(header, widths))
    print("|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    for r in rows:
        print(row(r, widths))


def main():
    runs = load(sys.argv[1])
    print()
    print("Every run (latency per call in ns; M rec/s from the first call until the file holds every record):")
    print()
    table(
        ["rep", "library", "RTT ns", "p50", "p99", "p99.9", "max", "% >100ns", "M rec/s", "B/rec", "check"],
        [
            [
                r["rep"],
                r["lib"],
                f"{float(r['rtt_ns']):.0f}",
                f"{float(r['p50_ns']):.0f}",
                f"{float(r['p99_ns']):.0f}",
                f"{float(r['p999_ns']):.0f}",
                f"{float(r['max_ns']):.0f}",
                f"{float(r['slow_pct']):.2f}",
                f"{float(r['rec_per_s']) / 1e6:.2f}",
                f"{int(r['bytes']) / int(r['n']):.1f}",
                r["check"],
            ]
            for r in runs
        ],
    )
    libs = list(dict.fromkeys(r["lib"] for r in runs))
    med = {}
    for lib in libs:
        mine = [r for r in runs if r["lib"] == lib]
        med[lib] = {
            k: statistics.median(float(r[k]) for r in mine)
            for k in ("rtt_ns", "p50_ns", "p99_ns", "p999_ns", "slow_pct", "rec_per_s")
        }
    print()
    print(f"Median of {len(runs) // max(len(libs), 1)} repetitions:")
    print()
    table(
        ["library", "RTT ns", "p50", "p99", "p99.9", "% >100ns", "M rec/s"],
        [
            [
                lib,
                f"{m['rtt_ns']:.0f}",
                f"{m['p50_ns']:.0f}",
                f"{m['p99_ns']:.0f}",
                f"{m['p999_ns']:.0f}",
                f"{m['slow_pct']:.2f}",
                f"{m['rec_per_s'] / 1e6:.2f}",
            ]
            for lib, m in med.items()
        ],
    )
    print()
    if "quill" in med:
        q = med["quill"]
        for lib in ("dplog-text", "dplog-binary"):
            if lib in med:
                d = med[lib]
                print(
                    f"{lib}: p50 {d['p50_ns']:.0f} vs Quill {q['p50_ns']:.0f} ns, "
                    f"p99.9 {d['p999_ns']:.0f} vs Quill {q['p999_ns']:.0f} ns"
                )
    best_text = max((med[p]["rec_per_s"] for p in TEXT_PEERS if p in med), default=None)
    if best_text and "dplog-text" in med:
        print(f"dplog-text throughput / best text peer: {med['dplog-text']['rec_per_s'] / best_text:.2f}x")
    best_bin = max((med[p]["rec_per_s"] for p in BINARY_PEERS if p in med), default=None)
    if best_bin and "dplog-binary" in med:
        print(f"dplog-binary throughput / binlog: {med['dplog-binary']['rec_per_s'] / best_bin:.2f}x")
    failed = [f"{r['lib']} rep {r['rep']}" for r in runs if r["check"] != "ok"]
    print("outputs checked: " + ("all identical to the events" if not failed else "FAILED: " + ", ".join(failed)))


if __name__ == "__main__":
    main()
