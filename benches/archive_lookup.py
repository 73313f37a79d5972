#!/usr/bin/env python3
"""`--at` lookups, one dplog-query process per question, against DuckDB on
key-sorted Parquet (zstd) of the same events; bytes/event of both.

Usage (from the repository root, after
`cargo build --release -p dplog-query --bin dplog-query --example nat_archive_gen`
and `pip install duckdb`):

    benches/archive_lookup.py WORKDIR EVENTS[,EVENTS...] [--cold] [--compare] [--keep]
        [--baseline OTHER_DPLOG_QUERY] [--index pair|lifecycle] [--format 3|4]

For each EVENTS count it writes, under WORKDIR (keep it on /tmp, removed
at the end unless --keep): the synthetic NAT44 archive of the `archive`
bench (tools/dplog-query/examples/nat_archive_gen.rs: three days, 256
pool addresses, random ports, one-hour segments), the same events as
CSV, turned into Parquet by DuckDB sorted by (post-NAT address, port,
time) with zstd, then the CSV is deleted. The archive is written as
`docs/archive-and-query.md` tells a NAT operator to configure it: segment
summaries and the block index both keyed on the (post-NAT address, port)
pair (`--index pair`, the default); `--index lifecycle` keeps the sink's
default block index instead (each of the session's eight lifecycle keys
on its own), with the same summaries. `--format 3` seals every segment
as format version 3 (the writer's default, 4, rewrites each segment of
the pair index sorted by key when sealing it: the index pages are then
0 and the blocks' key ranges are in the footers). It then asks the 200 probes
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
address and port by the generator), and the segments further, from
their footers, into data blocks, key index pages and the rest (schema
blocks, headers, footers); one untimed pass with `--stats`
gives the mean segments in the window, ruled out by the summaries and
opened, and blocks decoded, per probe. `--compare` also times dplog-query
with the summaries moved aside (every segment of the window opened, as
before them), warm and (with --cold) cold, in the same run. With --cold
it also times 50 cold starts of `dplog-query --help` (binary and
libraries out of the page cache, no archive read): the floor of a cold
query. Each cold line also gives the mean kB the process read from disk
(its rusage `ru_inblock`: the binary, libraries and archive pages it
faulted in or read) and the load average. The warm line is followed by
the processes' CPU time (user + system, from their rusage): what the
lookups cost themselves, where a loaded machine adds waiting for a core
to the wall time. `--baseline PATH` times
another `dplog-query` binary (e.g. one built from main) cold in the same
run, start and lookups, each probe with both binaries one right after the
other: before / after under about the same load. The
`--stats` pass also gives the mean archive files opened, reads and bytes
read per probe (the whole process). Above
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
BASELINE = None
INDEX = "pair"
FORMAT = "4"

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
    # (dplog-query before its read counts: none)
    r"(?:; files opened (\d+), reads (\d+), bytes read (\d+))?"
)


def cold_run(cmd):
    """One process after dropping the page cache: (seconds, kB read
    from disk, stdout lines)."""
    drop_caches()
    s = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    t = time.perf_counter() - s
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{cmd[0]} exit {code}")
    return t, ru.ru_inblock * 512 / 1024, len(out.splitlines())


def run_size(work, events, cold, compare):
    arch = os.path.join(work, f"a{events}")
    csv = os.path.join(work, f"e{events}.csv")
    probes_f = os.path.join(work, f"p{events}.txt")
    parquet = os.path.join(work, f"e{events}.parquet")
    shutil.rmtree(arch, ignore_errors=True)
    duck_too = events <= 10_000_000
    t0 = time.time()
    env = dict(os.environ, NAT_ARCHIVE_GEN_INDEX=INDEX, NAT_ARCHIVE_GEN_FORMAT=FORMAT)
    gen = subprocess.run([GEN, arch, str(events), csv if duck_too else "", probes_f],
                         check=True, env=env, stdout=subprocess.PIPE, text=True)
    gen_s = time.time() - t0
    m = re.search(r"split: data blocks (\d+), schema and calibration blocks (\d+), "
                  r"index pages (\d+), headers and footers (\d+), segments (\d+)", gen.stdout)
    if m is None:
        raise SystemExit(f"no split line from {GEN}: {gen.stdout[:300]}")
    data, other, index, rest, _ = (int(x) for x in m.groups())
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
        + f"written in {gen_s:.1f} s (index {INDEX}, format {FORMAT})"
    )
    print(
        f"  segments split: data blocks {data / events:.2f}, key index {index / events:.2f}, "
        f"schema blocks, headers and footers {(other + rest) / events:.3f} B/event"
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

    cpu = []

    def dplog(t, a, p):
        # The process's CPU time (user + system, from its rusage) is
        # kept too: on a loaded machine it is what the lookup itself
        # cost, where the wall time includes waiting for a core.
        c = subprocess.Popen(
            [QUERY, "--archive", arch, "--at", f"{t}ns",
             "--where", f"postNATSourceIPv4Address={a}",
             "--where", f"postNAPTSourceTransportPort={p}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        out = c.stdout.read()
        _, status, ru = os.wait4(c.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            raise SystemExit(f"dplog-query exit {code} on {t} {a} {p}")
        cpu.append(ru.ru_utime + ru.ru_stime)
        return len(out.splitlines())

    def duck(con, t, a, p):
        return len(con.execute(
            SQL.replace(" s ", f" read_parquet('{parquet}') "),
            {"a": ip(a), "p": p, "t": t, "from": t - DAY_NS},
        ).fetchall())

    def timed(f, *args):
        s = time.perf_counter()
        n = f(*args)
        return time.perf_counter() - s, n

    def report(name, ts, found, kb=None):
        ms = [x * 1000 for x in ts]
        what = f"{found} of {len(ts)} probes answered" if found is not None else f"{len(ts)} runs"
        extra = f", {sum(kb) / len(kb):.0f} kB read" if kb else ""
        print(
            f"  {name:<26} p50 {pct(ms, 0.5):7.2f} ms  p99 {pct(ms, 0.99):7.2f} ms  "
            f"max {max(ms):7.2f} ms  ({what}{extra}; load {os.getloadavg()[0]:.1f})"
        )

    def probe_cmd(q, t, a, p):
        return [q, "--archive", arch, "--at", f"{t}ns",
                "--where", f"postNATSourceIPv4Address={a}",
                "--where", f"postNAPTSourceTransportPort={p}"]

    def interleaved(cmds_of, n, names, answers=True):
        # With --baseline (and a name for it), each item runs cold with
        # both binaries, one right after the other (the first to run
        # alternates), so that both see about the same load on a shared
        # machine.
        qs = [QUERY] + ([BASELINE] if BASELINE and names[1] else [])
        rs = [[] for _ in qs]
        for i in range(n):
            order = list(range(len(qs)))
            if i % 2:
                order.reverse()
            for j in order:
                rs[j].append(cold_run(cmds_of(qs[j], i)))
        for name, r in zip(names, rs):
            found = sum(1 for x in r if x[2]) if answers else None
            report(name, [x[0] for x in r], found, [x[1] for x in r])
        return [[x[2] for x in r] for r in rs]

    def cold_probes(name, baseline_name):
        return interleaved(lambda q, i: probe_cmd(q, *probes[i]), len(probes),
                           [name, baseline_name])

    def cold_starts():
        # The floor of a cold query: the process started with its binary
        # and libraries out of the page cache, reading no archive.
        interleaved(lambda q, i: [q, "--help"], 50,
                    ["cold start (--help)", "baseline cold start"], answers=False)

    def check_cold():
        got = cold_probes("dplog-query cold", "baseline cold")
        for g in got:
            if g != want:
                print("  ANSWERS DIFFER cold")

    sums = [0] * 8
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
        sums = [x + int(y or 0) for x, y in zip(sums, m.groups())]
    n = len(probes)
    print(
        f"  per probe: segments in window {sums[0] / n:.1f}, ruled out {sums[1] / n:.1f}, "
        f"opened {sums[2] / n:.2f}; blocks decoded {sums[3] / n:.2f}; files opened "
        f"{sums[5] / n:.2f}, reads {sums[6] / n:.1f}, kB read {sums[7] / n / 1024:.1f}"
    )
    for _ in range(2):
        cpu.clear()
        res = [timed(dplog, *q) for q in probes]
    report("dplog-query warm", [r[0] for r in res], sum(1 for r in res if r[1]))
    report("  its CPU time (user+sys)", cpu, None)
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
                cold_probes("  without summaries, cold", None)
        finally:
            for n in moved:
                os.rename(os.path.join(aside, n), os.path.join(arch, n))
    if cold:
        cold_starts()
    if parquet is None:
        if cold:
            check_cold()
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
        check_cold()
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
    global BASELINE, INDEX, FORMAT
    work = sys.argv[1]
    cold = "--cold" in sys.argv
    if "--index" in sys.argv:
        INDEX = sys.argv[sys.argv.index("--index") + 1]
        if INDEX not in ("pair", "lifecycle"):
            raise SystemExit("--index: pair or lifecycle")
    if "--format" in sys.argv:
        FORMAT = sys.argv[sys.argv.index("--format") + 1]
        if FORMAT not in ("3", "4"):
            raise SystemExit("--format: 3 or 4")
    if "--baseline" in sys.argv:
        BASELINE = os.path.abspath(sys.argv[sys.argv.index("--baseline") + 1])
    os.makedirs(work, exist_ok=True)
    try:
        for n in sys.argv[2].split(","):
            run_size(work, int(n), cold, "--compare" in sys.argv)
    finally:
        if "--keep" not in sys.argv:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
