#!/usr/bin/env python3
"""`--at` lookups, one dplog-query process per question, against DuckDB on
key-sorted Parquet (zstd) of the same events; bytes/event of both.

Usage (from the repository root, after
`cargo build --release -p dplog-query --bin dplog-query --example nat_archive_gen`
and `pip install duckdb`):

    benches/archive_lookup.py WORKDIR EVENTS[,EVENTS...] [--cold] [--compare] [--keep]

For each EVENTS count it writes, under WORKDIR (keep it on /tmp, removed
at the end unless --keep): the synthetic NAT44 archive of the `archive`
bench (tools/dplog-query/examples/nat_archive_gen.rs: three days, 256
pool addresses, random ports, one-hour segments), the same events as
CSV, turned into Parquet by DuckDB sorted by (post-NAT address, port,
time) with zstd, then the CSV is deleted. It then asks the 200 probes
(100 live sessions, 100 random keys) of the generator:

- dplog-query: one process per probe (`--at T --where addr --where port`,
  default one-day lookback), wall time of the process (start to exit);
- DuckDB: one warm session (a connection kept open, the Parquet file
  cached), the same question in SQL: the newest create of the key in
  [T - 1 day, T] with no delete of it in (create, T).

Warm: two passes, the second timed. Cold (--cold, root): `echo 3 >
/proc/sys/vm/drop_caches` before each probe; DuckDB cold opens a new
connection per probe after the drop. Prints one line per measurement
(bounded output: a few lines per size), and checks that both answer the
same number of probes with a session. The archive's bytes are split into
segments and segment summaries (`summary-*.dps` and `.dpb`, keyed on the post-NAT
address and port by the generator); one untimed pass with `--stats`
gives the mean segments in the window, ruled out by the summaries and
opened, and blocks decoded, per probe. `--compare` also times dplog-query
with the summaries moved aside (every segment of the window opened, as
before them), warm and (with --cold) cold, in the same run. With --cold
it also times 50 cold starts of `dplog-query --help` (binary and
libraries out of the page cache, no archive read): the floor of a cold
query. Above
10,000,000 events no CSV or Parquet is written (its CSV alone would be
about 10 GB at 1e8) and DuckDB is not run.
"""

import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = os.path.join(ROOT, "target", "release")
QUERY = os.path.join(REL, "dplog-query")
GEN = os.path.join(REL, "examples", "nat_archive_gen")
DAY_NS = 86_400 * 10**9

COLS = (
    "time_ns UBIGINT, event UTINYINT, proto UTINYINT, src_addr UINTEGER, "
    "src_port USMALLINT, post_addr UINTEGER, post_port USMALLINT, "
    "dst_addr UINTEGER, dst_port USMALLINT, vrf UINTEGER, ipkts UINTEGER, "
    "rpkts UINTEGER, iocts UBIGINT, rocts UBIGINT"
)

SQL = """
SELECT c.* FROM s c
WHERE c.post_addr = $a AND c.post_port = $p AND c.event = 4
  AND c.time_ns BETWEEN $from AND $t
  AND NOT EXISTS (
    SELECT 1 FROM s d
    WHERE d.post_addr = $a AND d.post_port = $p AND d.event = 5
      AND d.proto = c.proto AND d.src_addr = c.src_addr
      AND d.src_port = c.src_port AND d.dst_addr = c.dst_addr
      AND d.dst_port = c.dst_port
      AND d.time_ns >= c.time_ns AND d.time_ns < $t)
"""


def ip(s):
    a, b, c, d = (int(x) for x in s.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def drop_caches():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def pct(v, p):
    v = sorted(v)
    return v[round((len(v) - 1) * p)]


def dir_bytes(d, prefix=""):
    return sum(
        os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.startswith(prefix)
    )


STATS = re.compile(
    r"segments in window (\d+), ruled out by the summaries (\d+), opened (\d+); "
    r"blocks decoded (\d+), skipped by the index (\d+)"
)


def run_size(work, events, cold, compare):
    arch = os.path.join(work, f"a{events}")
    csv = os.path.join(work, f"e{events}.csv")
    probes_f = os.path.join(work, f"p{events}.txt")
    parquet = os.path.join(work, f"e{events}.parquet")
    shutil.rmtree(arch, ignore_errors=True)
    duck_too = events <= 10_000_000
    t0 = time.time()
    subprocess.run([GEN, arch, str(events), csv if duck_too else "", probes_f], check=True)
    gen_s = time.time() - t0
    if duck_too:
        make_parquet(csv, parquet)
    probes = []
    with open(probes_f) as f:
        for line in f:
            t, a, p = line.split()
            probes.append((int(t), a, int(p)))
    ab = dir_bytes(arch)
    pb = os.path.getsize(parquet) if duck_too else 0
    sb = dir_bytes(arch, "summary-")
    print(
        f"{events} events: archive {ab} bytes ({ab / events:.2f} B/event: segments "
        f"{(ab - sb) / events:.2f}, summaries {sb / events:.2f}), "
        + (f"parquet zstd key-sorted {pb} bytes ({pb / events:.2f} B/event); "
           if duck_too else "no parquet; ")
        + f"written in {gen_s:.1f} s"
    )
    lookups(work, arch, parquet if duck_too else None, events, probes, cold, compare)


def make_parquet(csv, parquet):
    import duckdb

    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT * FROM read_csv('{csv}', header=false, columns="
        f"{{{', '.join(repr(c.split()[0]) + ': ' + repr(c.split()[1]) for c in COLS.split(', '))}}})"
        f" ORDER BY post_addr, post_port, time_ns) TO '{parquet}' "
        "(FORMAT parquet, COMPRESSION zstd)"
    )
    con.close()
    os.remove(csv)


def lookups(work, arch, parquet, events, probes, cold, compare):
    import duckdb

    def dplog(t, a, p):
        r = subprocess.run(
            [QUERY, "--archive", arch, "--at", f"{t}ns",
             "--where", f"postNATSourceIPv4Address={a}",
             "--where", f"postNAPTSourceTransportPort={p}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        if r.returncode not in (0, 1):
            raise SystemExit(f"dplog-query exit {r.returncode} on {t} {a} {p}")
        return len(r.stdout.splitlines())

    def duck(con, t, a, p):
        return len(con.execute(
            SQL.replace(" s ", f" read_parquet('{parquet}') "),
            {"a": ip(a), "p": p, "t": t, "from": t - DAY_NS},
        ).fetchall())

    def timed(f, *args):
        s = time.perf_counter()
        n = f(*args)
        return time.perf_counter() - s, n

    def report(name, ts, found):
        ms = [x * 1000 for x in ts]
        print(
            f"  {name:<26} p50 {pct(ms, 0.5):7.2f} ms  p99 {pct(ms, 0.99):7.2f} ms  "
            f"max {max(ms):7.2f} ms  ({found} of {len(ts)} probes answered)"
        )

    sums = [0] * 5
    for t, a, p in probes:
        r = subprocess.run(
            [QUERY, "--archive", arch, "--at", f"{t}ns", "--stats",
             "--where", f"postNATSourceIPv4Address={a}",
             "--where", f"postNAPTSourceTransportPort={p}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        m = STATS.search(r.stderr)
        if m is None:
            raise SystemExit(f"no --stats line: {r.stderr[:300]}")
        sums = [x + int(y) for x, y in zip(sums, m.groups())]
    n = len(probes)
    print(
        f"  per probe: segments in window {sums[0] / n:.1f}, ruled out {sums[1] / n:.1f}, "
        f"opened {sums[2] / n:.2f}; blocks decoded {sums[3] / n:.2f}"
    )
    for _ in range(2):
        res = [timed(dplog, *q) for q in probes]
    report("dplog-query warm", [r[0] for r in res], sum(1 for r in res if r[1]))
    want = [r[1] for r in res]
    if compare:
        aside = os.path.join(work, f"aside{events}")
        os.makedirs(aside, exist_ok=True)
        moved = [n for n in os.listdir(arch) if n.startswith("summary-")]
        for n in moved:
            os.rename(os.path.join(arch, n), os.path.join(aside, n))
        try:
            for _ in range(2):
                res = [timed(dplog, *q) for q in probes]
            report("  without summaries, warm", [r[0] for r in res], sum(1 for r in res if r[1]))
            if [r[1] for r in res] != want:
                print("  ANSWERS DIFFER without the summaries")
            if cold:
                ts = []
                for q in probes:
                    drop_caches()
                    ts.append(timed(dplog, *q)[0])
                report("  without summaries, cold", ts, sum(1 for n in want if n))
        finally:
            for n in moved:
                os.rename(os.path.join(aside, n), os.path.join(arch, n))
    if cold:
        # The floor of a cold query: the process started with its binary
        # and libraries out of the page cache, reading no archive.
        ts = []
        for _ in range(50):
            drop_caches()
            ts.append(timed(lambda: subprocess.run([QUERY, "--help"], stdout=subprocess.DEVNULL))[0])
        report("cold start (--help)", ts, 0)
    if parquet is None:
        if cold:
            ts = []
            for q in probes:
                drop_caches()
                ts.append(timed(dplog, *q)[0])
            report("dplog-query cold", ts, sum(1 for n in want if n))
        return
    con = duckdb.connect()
    for _ in range(2):
        res = [timed(duck, con, *q) for q in probes]
    report("duckdb warm (one session)", [r[0] for r in res], sum(1 for r in res if r[1]))
    if [r[1] for r in res] != want:
        diff = sum(1 for x, y in zip(want, (r[1] for r in res)) if x != y)
        print(f"  ANSWERS DIFFER on {diff} probes")
    con.close()
    if cold:
        ts = []
        for q in probes:
            drop_caches()
            ts.append(timed(dplog, *q)[0])
        report("dplog-query cold", ts, sum(1 for n in want if n))
        ts = []
        for q in probes:
            drop_caches()
            s = time.perf_counter()
            c = duckdb.connect()
            duck(c, *q)
            c.close()
            ts.append(time.perf_counter() - s)
        report("duckdb cold (new conn)", ts, sum(1 for n in want if n))


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    work = sys.argv[1]
    cold = "--cold" in sys.argv
    os.makedirs(work, exist_ok=True)
    try:
        for n in sys.argv[2].split(","):
            run_size(work, int(n), cold, "--compare" in sys.argv)
    finally:
        if "--keep" not in sys.argv:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
