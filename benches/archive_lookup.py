#!/usr/bin/env python3
"""`--at` lookups, one dplog-query process per question, against DuckDB on
key-sorted Parquet (zstd) of the same events; bytes/event of both.

Usage (from the repository root, after
`cargo build --release -p dplog-query --bin dplog-query --example nat_archive_gen`
and `pip install duckdb`):

    benches/archive_lookup.py WORKDIR EVENTS[,EVENTS...] [--cold] [--keep]

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
same number of probes with a session.
"""

import os
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


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))


def run_size(work, events, cold):
    import duckdb

    arch = os.path.join(work, f"a{events}")
    csv = os.path.join(work, f"e{events}.csv")
    probes_f = os.path.join(work, f"p{events}.txt")
    parquet = os.path.join(work, f"e{events}.parquet")
    shutil.rmtree(arch, ignore_errors=True)
    t0 = time.time()
    subprocess.run([GEN, arch, str(events), csv, probes_f], check=True)
    gen_s = time.time() - t0
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT * FROM read_csv('{csv}', header=false, columns="
        f"{{{', '.join(repr(c.split()[0]) + ': ' + repr(c.split()[1]) for c in COLS.split(', '))}}})"
        f" ORDER BY post_addr, post_port, time_ns) TO '{parquet}' "
        "(FORMAT parquet, COMPRESSION zstd)"
    )
    con.close()
    os.remove(csv)
    probes = []
    with open(probes_f) as f:
        for line in f:
            t, a, p = line.split()
            probes.append((int(t), a, int(p)))
    ab, pb = dir_bytes(arch), os.path.getsize(parquet)
    print(
        f"{events} events: archive {ab} bytes ({ab / events:.2f} B/event), "
        f"parquet zstd key-sorted {pb} bytes ({pb / events:.2f} B/event); "
        f"written in {gen_s:.1f} s"
    )

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

    for _ in range(2):
        res = [timed(dplog, *q) for q in probes]
    report("dplog-query warm", [r[0] for r in res], sum(1 for r in res if r[1]))
    want = [r[1] for r in res]
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
            run_size(work, int(n), cold)
    finally:
        if "--keep" not in sys.argv:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
