//! `dplog-query ddl --clickhouse` against a real ClickHouse
//! (`clickhouse-server` 18.16 on loopback): the `CREATE TABLE` it prints
//! runs, the ClickHouse sink fills the table from the same binary stream
//! an archive is written from, and the `SELECT` it prints for `--at`
//! answers what `dplog-query --at` answers over the archive, record for
//! record, at many times: for a user-declared record type (`lbConn`, a
//! load balancer's connections, re-opened and closed at random) and for
//! a real dplog-nat run (NAT44 sessions, looked up by public address and
//! port).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use dplog_core::{Accepted, Schema, Sink};
use dplog_formatters::binary::{decode, BinaryEncoder};
use dplog_sinks::archive::{ArchiveSink, ArchiveSinkOptions};
use dplog_sinks::clickhouse::ClickHouseOptions;
use dplog_sinks::ClickHouseSink;
use dplog_testkit::clickhouse::ClickHouse;

#[path = "../../../testkit/fixtures/lb_conn.rs"]
mod lb_conn;
use lb_conn::{Conn, CLOSE, OPEN, REJECT, T0};

fn run(args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dplog-query"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `dplog-query ddl --clickhouse --log LOG --server 18.16 ...extra`.
fn ddl(log: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "ddl",
        "--clickhouse",
        "--log",
        log.to_str().unwrap(),
        "--server",
        "18.16",
    ];
    args.extend(extra);
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    String::from_utf8(out).unwrap()
}

/// Feeds the binary log `log` to a ClickHouse sink of `table` (record
/// type `rtype`) and waits until the server took every record of it.
fn insert(ch: &ClickHouse, log: &[u8], table: &str, rtype: &str) -> u64 {
    let mut o = ClickHouseOptions::new(ch.url(), table);
    o.record_type = Some(rtype.into());
    o.batch_rows = 4096;
    let mut sink = ClickHouseSink::new(o).unwrap();
    assert_eq!(sink.write_batch(log).unwrap(), Accepted::Pending);
    sink.drain(Instant::now() + Duration::from_secs(60))
        .unwrap();
    let p = sink.poll();
    assert_eq!(p.failed_records, 0);
    p.delivered_records
}

/// Every field of each record as an integer (the types here have no
/// field wider than 8 bytes), sorted.
fn rows_of(records: &[(usize, &[u8])], schemas: &[Schema], name: &str) -> Vec<Vec<u64>> {
    let mut v: Vec<Vec<u64>> = records
        .iter()
        .filter(|(si, _)| schemas[*si].name() == name)
        .map(|(si, r)| {
            schemas[*si]
                .fields()
                .iter()
                .map(|f| f.read_uint(r))
                .collect()
        })
        .collect();
    v.sort();
    v
}

/// `dplog-query --at` over the archive, answers of type `name` as rows.
fn archive_at(arch: &Path, t_ns: u64, conds: &[String], name: &str) -> Vec<Vec<u64>> {
    let t = format!("{t_ns}ns");
    let mut args = vec![
        "--archive",
        arch.to_str().unwrap(),
        "--at",
        &t,
        "--format",
        "binary",
    ];
    for c in conds {
        args.extend(["--where", c]);
    }
    let (code, out, err) = run(&args);
    assert!(code == 0 || code == 1, "{err}");
    let d = decode(&out);
    assert!(d.stopped.is_none());
    rows_of(&d.records, &d.schemas, name)
}

/// The SQL of `ddl --at` run on the server, as rows.
fn clickhouse_at(
    ch: &ClickHouse,
    log: &Path,
    table: &str,
    rtype: &str,
    t_ns: u64,
    conds: &[String],
) -> Vec<Vec<u64>> {
    let t = format!("{t_ns}ns");
    let mut extra = vec!["--record-type", rtype, "--table", table, "--at", &t];
    for c in conds {
        extra.extend(["--where", c]);
    }
    let sql = ddl(log, &extra);
    let sql = sql.trim_end().trim_end_matches(';');
    let out = ch.query(&format!("{sql} FORMAT TabSeparated"));
    let mut v: Vec<Vec<u64>> = out
        .lines()
        .map(|l| l.split('\t').map(|x| x.parse().unwrap()).collect())
        .collect();
    v.sort();
    v
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// 3000 events of 40 connections (4 client ports of 10 clients), one
/// every 1 ms: opens (an open may follow an open of the same
/// connection), closes (some of connections never opened), rejects.
fn random_conns() -> Vec<Conn> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    (0..3000u64)
        .map(|i| {
            let k = rng.next(40);
            let event = match rng.next(10) {
                0..=4 => OPEN,
                5..=8 => CLOSE,
                _ => REJECT,
            };
            Conn {
                time_ns: T0 + i * 1_000_000,
                vip: 0xC000_020A,
                vport: 443,
                client: 0xC633_6400 | (k / 4) as u32,
                cport: 40000 + (k % 4) as u16,
                event,
                backend: 0x0A00_0000 | rng.next(8) as u32,
                bytes_in: if event == CLOSE { rng.next(1 << 20) } else { 0 },
                bytes_out: if event == CLOSE { 7 } else { 0 },
            }
        })
        .collect()
}

/// A log two runs appended to declares its record type twice: `ddl`
/// prints one table, and one lookup statement (no server needed).
#[test]
fn a_log_appended_to_by_two_runs_gives_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let schema = lb_conn::schema();
    let mut log = Vec::new();
    for _run in 0..2 {
        let mut enc = BinaryEncoder::try_new(&[&schema]).unwrap();
        for c in random_conns().iter().take(5) {
            assert!(enc.push(&c.bytes(), &mut log));
        }
    }
    assert_eq!(decode(&log).schemas.len(), 2);
    let path = dir.path().join("lb.bin");
    std::fs::write(&path, &log).unwrap();
    let create = ddl(&path, &["--table", "lb"]);
    assert_eq!(create.matches("CREATE TABLE").count(), 1, "{create}");
    let at = ddl(&path, &["--table", "lb", "--at", "1767225600000ms"]);
    assert!(at.contains("SELECT"), "{at}");
    assert_eq!(at.trim_end().matches(';').count(), 1, "{at}");
}

#[test]
fn the_lookup_sql_answers_as_dplog_query_for_a_user_record_type() {
    let dir = tempfile::tempdir().unwrap();
    let schema = lb_conn::schema();
    let mut enc = BinaryEncoder::try_new(&[&schema]).unwrap();
    let mut log = Vec::new();
    for c in random_conns() {
        assert!(enc.push(&c.bytes(), &mut log));
    }
    let log_path = dir.path().join("lb.bin");
    std::fs::write(&log_path, &log).unwrap();
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    let mut a = ArchiveSink::open(
        &arch,
        ArchiveSinkOptions {
            block_rows: 256,
            ..Default::default()
        },
    )
    .unwrap();
    a.write_batch(&log).unwrap();
    a.close().unwrap();

    let ch = ClickHouse::start();
    let create = ddl(&log_path, &["--table", "lb"]);
    assert!(
        create.contains("ORDER BY (`vip`, `vport`, `clientAddr`, `clientPort`, `connTime`)"),
        "{create}"
    );
    ch.query(&create);
    assert_eq!(insert(&ch, &log, "lb", "lbConn"), 3000);

    let mut compared = 0;
    let mut answers = 0;
    for ms in (0..3100).step_by(53).chain([0, 1, 2, 1500, 2999, 3000]) {
        let t = T0 + ms * 1_000_000;
        for conds in [
            vec![],
            vec!["clientPort=40001".to_string()],
            vec![
                "clientAddr=198.51.100.3".to_string(),
                "clientPort=40002".to_string(),
            ],
        ] {
            let want = archive_at(&arch, t, &conds, "lbConn");
            let got = clickhouse_at(&ch, &log_path, "lb", "lbConn", t, &conds);
            assert_eq!(got, want, "--at {ms} ms {conds:?}");
            compared += 1;
            answers += want.len();
        }
    }
    assert!(compared > 180);
    assert!(answers > 700, "{answers} answers");
}

const SYNTHETIC: &str = "[synthetic]\npackets = 20000\nrate_pps = 4000\nsubscribers = 100\n\
    [nat]\nudp_timeout_s = 2\ntcp_transitory_timeout_s = 1\ntcp_established_timeout_s = 3\nicmp_timeout_s = 1\n";

#[test]
fn the_lookup_sql_answers_as_dplog_query_for_nat_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    let bin = dir.path().join("nat.bin");
    let toml = format!(
        "[format]\ntype = \"binary\"\n\
         [[sink]]\ntype = \"archive\"\ndir = \"{}\"\nblock_rows = 512\n\
         [[sink]]\ntype = \"file\"\npath = \"{}\"\n{SYNTHETIC}",
        arch.display(),
        bin.display()
    );
    let cfg = dplog_nat::app::AppConfig::from_toml_str(&toml).unwrap();
    let summary = dplog_nat::app::run(&cfg).unwrap();
    assert_eq!(summary.records.written, summary.records.produced);
    let log = std::fs::read(&bin).unwrap();
    let d = decode(&log);
    let sessions = rows_of(&d.records, &d.schemas, "nat44Session");
    assert!(sessions.len() > 1000, "{} session records", sessions.len());

    let ch = ClickHouse::start();
    // Sorted by what the lookups give: the public address and port.
    let create = ddl(
        &bin,
        &[
            "--record-type",
            "nat44Session",
            "--table",
            "nat",
            "--order-by",
            "postNATSourceIPv4Address,postNAPTSourceTransportPort,observationTimeMilliseconds",
        ],
    );
    assert!(create.contains(
        "ORDER BY (`postNATSourceIPv4Address`, `postNAPTSourceTransportPort`, `observationTimeMilliseconds`)"
    ));
    ch.query(&create);
    assert_eq!(
        insert(&ch, &log, "nat", "nat44Session"),
        d.records.len() as u64
    );
    let n: usize = ch.query("SELECT count() FROM nat").trim().parse().unwrap();
    assert_eq!(n, sessions.len());

    // Probes: the public address and port of every 50th session record,
    // at its time, just before it and 1.5 s after.
    let f = |n: &str| {
        d.schemas
            .iter()
            .find(|s| s.name() == "nat44Session")
            .unwrap()
            .fields()
            .iter()
            .position(|x| x.name == n)
            .unwrap()
    };
    let (ft, fa, fp) = (
        f("observationTimeMilliseconds"),
        f("postNATSourceIPv4Address"),
        f("postNAPTSourceTransportPort"),
    );
    let mut answers = 0;
    let mut compared = 0;
    for s in sessions.iter().step_by(50) {
        let a = std::net::Ipv4Addr::from(s[fa] as u32);
        let conds = vec![
            format!("postNATSourceIPv4Address={a}"),
            format!("postNAPTSourceTransportPort={}", s[fp]),
        ];
        for t in [s[ft], s[ft] - 1, s[ft] + 1_500_000_000] {
            let want = archive_at(&arch, t, &conds, "nat44Session");
            let got = clickhouse_at(&ch, &bin, "nat", "nat44Session", t, &conds);
            assert_eq!(got, want, "--at {t} {conds:?}");
            answers += want.len();
            compared += 1;
        }
    }
    assert!(compared > 60);
    assert!(answers > 30, "{answers} answers");
}

/// Runs `statements` in one chdb session (ClickHouse's current engine
/// in-process, Python package `chdb`, installed by `scripts/setup.sh`)
/// and returns each one's TabSeparated output.
fn chdb(dir: &Path, statements: &[String]) -> Vec<String> {
    let input = dir.join("statements.json");
    std::fs::write(&input, serde_json::to_vec(statements).unwrap()).unwrap();
    let script = r#"
import json, sys
try:
    from chdb import session
except ImportError as e:
    sys.exit("chdb is not installed (run scripts/setup.sh): %s" % e)
s = session.Session()
for q in json.load(open(sys.argv[1])):
    r = s.query(q, "TabSeparated")
    err = r.error_message() if hasattr(r, "error_message") else ""
    if err:
        sys.exit("chdb: %s\n%s" % (err, q))
    sys.stdout.write(str(r))
    sys.stdout.write("\x1e\n")
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&input)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut v: Vec<String> = text.split("\x1e\n").map(str::to_string).collect();
    v.pop();
    assert_eq!(v.len(), statements.len());
    v
}

#[test]
fn the_current_servers_ddl_rowbinary_and_lookup_run_on_chdb_as_dplog_query_answers() {
    use dplog_sinks::clickhouse::{column_type, RowEncoder, Server};
    let dir = tempfile::tempdir().unwrap();
    let schema = lb_conn::schema();
    let mut enc = BinaryEncoder::try_new(&[&schema]).unwrap();
    let rows = RowEncoder::for_schema(&schema, Server::Current);
    let (mut log, mut rowbinary) = (Vec::new(), Vec::new());
    for c in random_conns() {
        assert!(enc.push(&c.bytes(), &mut log));
        rows.push(&c.bytes(), &Default::default(), &mut rowbinary);
    }
    let log_path = dir.path().join("lb.bin");
    std::fs::write(&log_path, &log).unwrap();
    let rb_path = dir.path().join("lb.rowbinary");
    std::fs::write(&rb_path, &rowbinary).unwrap();
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    let mut a = ArchiveSink::open(&arch, ArchiveSinkOptions::default()).unwrap();
    a.write_batch(&log).unwrap();
    a.close().unwrap();

    // The current server's DDL: DateTime64, IPv4, codecs, TTL (ten
    // years: the records are from 2026-01-01 and a TTL would drop them).
    let (code, create, err) = run(&[
        "ddl",
        "--clickhouse",
        "--log",
        log_path.to_str().unwrap(),
        "--table",
        "lb",
        "--ttl-days",
        "3650",
    ]);
    assert_eq!(code, 0, "{err}");
    let create = String::from_utf8(create).unwrap();
    assert!(
        create.contains("`connTime` DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1))"),
        "{create}"
    );
    assert!(
        create.contains("TTL toDateTime(`connTime`) + INTERVAL 3650 DAY"),
        "{create}"
    );
    let structure: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("`{}` {}", f.name, column_type(f, Server::Current)))
        .collect();
    let as_ints: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| match column_type(f, Server::Current).as_str() {
            "IPv4" => format!("toUInt32(`{}`)", f.name),
            t if t.starts_with("DateTime64") => format!("toUnixTimestamp64Nano(`{}`)", f.name),
            _ => format!("`{}`", f.name),
        })
        .collect();
    let mut statements = vec![
        create.trim_end().trim_end_matches(';').to_string(),
        format!(
            "INSERT INTO lb SELECT * FROM file('{}', 'RowBinary', '{}')",
            rb_path.display(),
            structure.join(", ").replace('\'', "\\'")
        ),
        format!("SELECT {} FROM lb ORDER BY connTime", as_ints.join(", ")),
    ];
    let mut probes = Vec::new();
    for ms in (0..3100).step_by(97) {
        for conds in [vec![], vec!["clientAddr=198.51.100.3".to_string()]] {
            let t = format!("{}ns", T0 + ms * 1_000_000);
            let mut args = vec![
                "ddl",
                "--clickhouse",
                "--log",
                log_path.to_str().unwrap(),
                "--table",
                "lb",
                "--at",
                &t,
            ];
            for c in &conds {
                args.extend(["--where", c]);
            }
            let (code, sql, err) = run(&args);
            assert_eq!(code, 0, "{err}");
            let sql = String::from_utf8(sql).unwrap();
            statements.push(format!(
                "SELECT {} FROM ({})",
                as_ints.join(", "),
                sql.trim_end().trim_end_matches(';')
            ));
            probes.push((T0 + ms * 1_000_000, conds));
        }
    }
    let out = chdb(dir.path(), &statements);
    let parse = |s: &str| -> Vec<Vec<u64>> {
        let mut v: Vec<Vec<u64>> = s
            .lines()
            .map(|l| l.split('\t').map(|x| x.parse().unwrap()).collect())
            .collect();
        v.sort();
        v
    };
    // Every record read back from the RowBinary bytes.
    let d = decode(&log);
    assert_eq!(parse(&out[2]), rows_of(&d.records, &d.schemas, "lbConn"));
    let mut answers = 0;
    for ((t, conds), got) in probes.iter().zip(&out[3..]) {
        let want = archive_at(&arch, *t, conds, "lbConn");
        assert_eq!(parse(got), want, "--at {t} {conds:?}");
        answers += want.len();
    }
    assert!(answers > 300, "{answers} answers");
}

#[test]
fn a_two_shard_distributed_table_takes_the_inserts_and_answers_the_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let schema = lb_conn::schema();
    let mut enc = BinaryEncoder::try_new(&[&schema]).unwrap();
    let mut log = Vec::new();
    for c in random_conns() {
        assert!(enc.push(&c.bytes(), &mut log));
    }
    let log_path = dir.path().join("lb.bin");
    std::fs::write(&log_path, &log).unwrap();
    let arch = dir.path().join("arch");
    std::fs::create_dir(&arch).unwrap();
    let mut a = ArchiveSink::open(&arch, ArchiveSinkOptions::default()).unwrap();
    a.write_batch(&log).unwrap();
    a.close().unwrap();

    // Each shard: the local table; the Distributed table over both,
    // sharded by the lifecycle's key fields (a connection's records on
    // one shard), on each.
    let shards = ClickHouse::start_shards(2);
    let local = ddl(&log_path, &["--table", "lb_local"]);
    let dist = "CREATE TABLE lb AS lb_local ENGINE = Distributed(shards, default, lb_local, \
                cityHash64(vip, vport, clientAddr, clientPort))";
    for s in &shards {
        s.query(&local);
        s.query(dist);
    }
    // The sink inserts into the Distributed table of shard 0; the server
    // forwards each row to its shard.
    assert_eq!(insert(&shards[0], &log, "lb", "lbConn"), 3000);
    let counts = || -> Vec<u64> {
        shards
            .iter()
            .map(|s| {
                s.query("SELECT count() FROM lb_local")
                    .trim()
                    .parse()
                    .unwrap()
            })
            .collect()
    };
    let t0 = Instant::now();
    while counts().iter().sum::<u64>() < 3000 {
        assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", counts());
        std::thread::sleep(Duration::from_millis(100));
    }
    let c = counts();
    assert_eq!(c.iter().sum::<u64>(), 3000);
    assert!(c.iter().all(|&n| n > 500), "{c:?}");
    // The lookup over the Distributed table, its IN subquery run on each
    // shard's own rows (`distributed_product_mode = 'local'`: right
    // because a key's records are on one shard), from either shard.
    for (k, ms) in (0..3100).step_by(211).enumerate() {
        let t = T0 + ms * 1_000_000;
        let want = archive_at(&arch, t, &[], "lbConn");
        let tt = format!("{t}ns");
        let sql = ddl(&log_path, &["--table", "lb", "--at", &tt]);
        let sql = format!(
            "{} SETTINGS distributed_product_mode = 'local' FORMAT TabSeparated",
            sql.trim_end().trim_end_matches(';')
        );
        let out = shards[k % 2].query(&sql);
        let mut got: Vec<Vec<u64>> = out
            .lines()
            .map(|l| l.split('\t').map(|x| x.parse().unwrap()).collect())
            .collect();
        got.sort();
        assert_eq!(got, want, "--at {ms} ms");
    }
}
