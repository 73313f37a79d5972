//! Every CSV file dplog-nat writes reads with Python's `csv` module in
//! strict mode (RFC 4180 quoting, an error on anything malformed), in every
//! port-allocation mode, with quota and exhaustion events: one header, every
//! row as wide as it, and each row's cells equal to the JSON of the same
//! record (the same run in `--format json`: one worker and a seeded
//! synthetic mix give the same records in the same order), empty where
//! the JSON has no key (a session create's counters).

use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dplog-nat"))
}

/// Reads `csv` strictly and compares it with `jsonl` row by row; prints
/// `rows <n> types <recordType>=<count>,...` on success, exits 1 with the
/// first difference otherwise.
const CHECK: &str = r#"
import csv, json, sys
csv_path, json_path = sys.argv[1], sys.argv[2]
with open(json_path) as f:
    recs = [json.loads(l) for l in f]
with open(csv_path, newline="") as f:
    rows = list(csv.reader(f, strict=True))
header, rows = rows[0], rows[1:]
assert header[:2] == ["recordType", "timestamp"], header
assert len(set(header)) == len(header), "a column twice"
assert header not in rows, "a second header"
assert len(rows) == len(recs), (len(rows), len(recs))
types = {4: "nat44Session", 5: "nat44Session", 16: "natPortBlock", 17: "natPortBlock",
         3: "natAddressesExhausted", 12: "natPortsExhausted", 13: "natQuotaExceeded"}
seen = {}
for i, (row, rec) in enumerate(zip(rows, recs)):
    if len(row) != len(header):
        sys.exit(f"row {i + 2}: {len(row)} cells under {len(header)} columns")
    cells = dict(zip(header, row))
    want_type = types[rec["natEvent"]]
    if cells["recordType"] != want_type:
        sys.exit(f"row {i + 2}: recordType {cells['recordType']} for natEvent {rec['natEvent']}")
    seen[want_type] = seen.get(want_type, 0) + 1
    for col, cell in cells.items():
        if col == "recordType":
            continue
        if col in rec:
            if cell != str(rec[col]):
                sys.exit(f"row {i + 2}: {col} = {cell!r}, JSON {rec[col]!r}")
        elif cell != "":
            sys.exit(f"row {i + 2}: {col} = {cell!r}, not in the JSON {rec}")
    for key in rec:
        if key not in header:
            sys.exit(f"JSON key {key} has no CSV column")
print("rows", len(rows), "types", ",".join(f"{k}={v}" for k, v in sorted(seen.items())))
"#;

/// Runs dplog-nat on `toml` in `format` into `out`.
fn run(dir: &Path, toml: &str, format: &str, out: &str) {
    let o = bin()
        .args(["--config", toml, "--format", format, "-o", out])
        .args(["--summary", "none"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{format}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn python_csv_strict_reads_every_port_allocation_mode_with_quota_events() {
    let dir = tempfile::tempdir().unwrap();
    // A /30 pool, one 1024-port block per subscriber and 5 sessions per
    // user: quota events in every mode, and under PBA exhausted addresses
    // and ports too.
    for mode in ["sequential", "random", "pba", "deterministic"] {
        let toml = format!("{mode}.toml");
        std::fs::write(
            dir.path().join(&toml),
            format!(
                "[nat]\nport_allocation = \"{mode}\"\npool = \"198.51.100.0/30\"\n\
                 inside = [\"10.0.0.0/22\"]\nport_block_size = 1024\nmax_blocks_per_user = 1\n\
                 max_sessions_per_user = 5\nevent_log_interval_ms = 1\n\
                 [synthetic]\npackets = 30000\nsubscribers = 1000\n"
            ),
        )
        .unwrap();
        run(dir.path(), &toml, "json", &format!("{mode}.jsonl"));
        run(dir.path(), &toml, "csv", &format!("{mode}.csv"));
        let o = Command::new("python3")
            .args([
                "-c",
                CHECK,
                &format!("{mode}.csv"),
                &format!("{mode}.jsonl"),
            ])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{mode}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        eprintln!("{mode}: {out}");
        assert!(out.contains("natQuotaExceeded="), "{mode}: {out}");
        let want = match mode {
            "pba" | "deterministic" => "natPortBlock=",
            _ => "nat44Session=",
        };
        assert!(out.contains(want), "{mode}: {out}");
    }
}
