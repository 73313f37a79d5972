//! `dplog-query`: lookups over a dplog archive (the `archive` sink's
//! directory), and imports of binary or mmap logs into one.
//!
//! ```text
//! dplog-query --archive DIR --at 2013-05-02T20:20:40Z \
//!     --where postNATSourceIPv4Address=198.51.100.5 --where postNAPTSourceTransportPort=1024
//! dplog-query --archive DIR --between T1 T2 [--where f=v]... [--format json]
//! dplog-query import --archive DIR FILE_OR_MMAP_DIR...
//! dplog-query ddl --clickhouse (--archive DIR | --log FILE) [--record-type T] [--server 18.16]
//! dplog-query ddl --clickhouse --log FILE --at T [--where f=v]...
//! ```
//!
//! `ddl --clickhouse` prints, for each record type of the archive or
//! binary log (or the one named), the `CREATE TABLE` of the ClickHouse
//! sink's table (`dplog_sinks::clickhouse::create_table`); with `--at` it
//! prints instead the `SELECT` answering that `--at` lookup over the
//! table, for each type that declares a lifecycle
//! (`dplog_sinks::clickhouse::lookup_at`). Exit status 0, or 2 on an
//! error (no such record type, a bad `--where`, `--at` where no type
//! declares a lifecycle).
//!
//! Exit status: 0 found, 1 nothing found, 2 error (bad arguments, an
//! unknown field, an unparsable time, an unreadable archive, `--at` on an
//! archive where no record type declares a lifecycle), 3 an
//! answer from an archive with damaged parts: they are reported on
//! stderr with their file and block and skipped, the lookup goes on, and
//! the answer (found or not) may lack what they held. When no readable
//! segment is left to tell a `--where` field's record types (every
//! segment damaged), each damaged segment is named with its byte and
//! reason, nothing is looked up, and the status is 3 as well. Semantics
//! of `--at`: see the library docs (`dplog_query`).
//!
//! `import` exits 0 when every input was imported whole, 2 on an error
//! (an input that is not a binary log or mmap directory, refused before
//! anything is imported; an unreadable input; the archive's write error),
//! 3 when an input was damaged: a log cut inside a frame or with a broken
//! frame is imported up to the damage, a mmap segment whose header is
//! broken is skipped; each is reported on stderr with its file and byte,
//! the other inputs are imported, and the archive lacks what the damaged
//! parts held after the damage. An empty file is a log created and not
//! written yet: no records, named on stderr and skipped (as dplog-cat
//! does).
//!
//! Runs whose record types had other schema ids (a program restarted
//! with its types registered in another order, appending to the same
//! log or archive): a log's `H` frame starts a new schema table, and an
//! import writes each table that redeclares an id to new segments of
//! its own, so each record is archived under its own schema; a query over
//! segments whose runs used an id for different types prints each record
//! under its segment's schema (the output gives the later layout an
//! unused id of its own: one CSV header, one IPFIX template each).
//!
//! TSC-typed fields print as wall time with the calibration the archive
//! kept for each record (as `dplog-cat` prints the binary log it was
//! written from); an archive of format version 1 kept none (the
//! identity: ticks read as ns). A `--where` on a TSC field compares its
//! raw ticks.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use dplog_core::schema::FieldKind;
use dplog_core::Schema;
use dplog_core::Sink;
use dplog_formatters::{BytesEncoding, Format, FormatSpec, TimePrecision, TscCalibration};
use dplog_query::{parse_lookback, parse_time, Lookback, Mode, Query, QueryError};
use dplog_sinks::archive::{ArchiveSink, ArchiveSinkOptions};

#[derive(Parser)]
#[command(
    name = "dplog-query",
    about = "Look up records in a dplog archive: what was live at a time, or every record in an interval",
    after_help = "Exit status: 0 found, 1 nothing found, 2 error, 3 damaged parts of the archive were \
                  skipped, each named on stderr with its file and byte (the answer may lack what they \
                  held: everything when every segment is damaged).\n\
                  import: 0 every input imported whole, 2 error (nothing imported when an input is \
                  not a binary log), 3 damaged inputs imported up to the damage.",
    args_conflicts_with_subcommands = true
)]
struct Args {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// The archive directory (the archive sink's `dir`).
    #[arg(long, global = true)]
    archive: Option<PathBuf>,
    /// What was live at this time (the open states of every record type
    /// whose schema declares a lifecycle): RFC 3339
    /// (2013-05-02T20:20:36.616804Z) or an integer with a unit (ms, s, us,
    /// ns; bare: ms).
    #[arg(long, value_parser = parse_time, conflicts_with = "between")]
    at: Option<u64>,
    /// Every matching record from T1 to T2 (inclusive).
    #[arg(long, num_args = 2, value_names = ["T1", "T2"], value_parser = parse_time)]
    between: Option<Vec<u64>>,
    /// A condition FIELD=VALUE on a field of the record type (repeatable,
    /// all must hold), e.g. vip=192.0.2.10.
    #[arg(long = "where", value_name = "FIELD=VALUE", value_parser = parse_cond)]
    conds: Vec<(String, String)>,
    /// How far before --at to look for opens: `all` or a duration (2d,
    /// 12h, 90s). Default: the archive's max_lifetime_ms.
    #[arg(long, value_parser = parse_lookback)]
    lookback: Option<Lookback>,
    /// Output format: text (default), json, csv, rfc5424, rfc3164, ipfix,
    /// binary.
    #[arg(long, default_value = "text")]
    format: Format,
    /// Time fields at this precision: s, ms, us or ns, in every output
    /// format (as `[format] time_precision`). Default: each format's
    /// own (ms for Unix times and RFC 3339).
    #[arg(long, value_name = "P")]
    time_precision: Option<TimePrecision>,
    /// BYTES fields as `text` (up to the first NUL, escaped), `hex` or
    /// `base64` (every byte), as `[format] bytes`.
    #[arg(long, value_name = "ENC", default_value = "text")]
    bytes: BytesEncoding,
    /// After the answer, one line on stderr with what the lookup read:
    /// `segments in window W, ruled out by the summaries P, opened O;
    /// blocks decoded B, skipped by the index S; files opened F, reads R,
    /// bytes read N` (F, R, N: every archive file of the process, the
    /// first and last segments read for the record types and the
    /// summaries included).
    #[arg(long)]
    stats: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Import binary logs (`[format] type = "binary"` files) or mmap
    /// segment directories of binary logs into the archive.
    ///
    /// Exit status: 0 every input imported whole; 2 error (an input that
    /// is not a binary log or mmap directory, refused before anything is
    /// imported; an unreadable input; the archive cannot be written); 3
    /// damaged inputs: a log cut inside a frame or with a broken frame is
    /// imported up to the damage, a mmap segment with a broken header is
    /// skipped, each named on stderr with its byte, and the other inputs
    /// are imported. An empty file (a log not written yet) holds no
    /// records: named on stderr and skipped.
    Import {
        /// Binary log files or mmap segment directories, in order.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Records per block.
        #[arg(long, default_value_t = 16384)]
        block_rows: usize,
        /// Event-time slice per segment, ms (0: by size only).
        #[arg(long, default_value_t = 3_600_000)]
        segment_interval_ms: u64,
    },
    /// Print the ClickHouse table of each record type (CREATE TABLE), or
    /// with --at the SQL answering that lookup over it. The record types
    /// come from --archive DIR or --log FILE (a binary log).
    Ddl(DdlArgs),
}

#[derive(clap::Args)]
struct DdlArgs {
    /// ClickHouse SQL (the only dialect).
    #[arg(long, required = true)]
    clickhouse: bool,
    /// A binary log (`[format] type = "binary"`) whose record types to use.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Only this record type (schema name).
    #[arg(long)]
    record_type: Option<String>,
    /// The table's name; default: the record type's name.
    #[arg(long)]
    table: Option<String>,
    /// Server generation of the types: `current` (DateTime64, IPv4/IPv6,
    /// codecs, TTL) or `18.16` (UInt64 ns times, no codecs, no TTL).
    #[arg(long, default_value = "current", value_parser = ["current", "18.16"])]
    server: String,
    /// The engine clause.
    #[arg(long, default_value = "MergeTree")]
    engine: String,
    /// Rows older than this many days are removed (TTL; current servers).
    #[arg(long)]
    ttl_days: Option<u32>,
    /// The sorting key's fields, comma-separated, instead of the
    /// lifecycle's keys then the event time (e.g. the fields lookups
    /// give, then the time: vip,vport,time).
    #[arg(long, value_delimiter = ',')]
    order_by: Option<Vec<String>>,
    /// Print the SELECT answering `--at T` instead of CREATE TABLE.
    #[arg(long, value_parser = parse_time)]
    at: Option<u64>,
    /// A condition FIELD=VALUE of the lookup (repeatable).
    #[arg(long = "where", value_name = "FIELD=VALUE", value_parser = parse_cond)]
    conds: Vec<(String, String)>,
    /// How far before --at to look for opens: `all` or a duration
    /// (default 1d, the archive sink's default max_lifetime_ms).
    #[arg(long, value_parser = parse_lookback)]
    lookback: Option<Lookback>,
}

/// `ddl --clickhouse`: the SQL for each record type of the archive or
/// log; the message of an error.
fn ddl(archive: Option<&Path>, a: &DdlArgs) -> Result<String, String> {
    use dplog_sinks::clickhouse::{create_table, lookup_at, Server, TableOptions};
    let schemas: Vec<Schema> = match (archive, &a.log) {
        (_, Some(log)) => {
            let b = std::fs::read(log).map_err(|e| format!("{}: {e}", log.display()))?;
            dplog_formatters::binary::decode(&b).schemas
        }
        (Some(dir), None) => dplog_query::archive_schemas(dir).map_err(|e| e.to_string())?,
        (None, None) => return Err("ddl: give --archive DIR or --log FILE".into()),
    };
    // A log that several runs appended to declares its types once per
    // run: one table each, unless a type changed its fields between runs.
    // (Its schema id may differ from run to run, e.g. types registered in
    // another order: a table does not depend on it.)
    let mut uniq: Vec<Schema> = Vec::new();
    for s in schemas {
        match uniq.iter().find(|u| u.name() == s.name()) {
            Some(u) if u.size() == s.size() && u.fields() == s.fields() && u.meta() == s.meta() => {
            }
            Some(_) => {
                return Err(format!(
                    "ddl: record type {} is declared twice with different fields (runs of \
                     two builds appended to one log); make the table from one run's log",
                    s.name()
                ))
            }
            None => uniq.push(s),
        }
    }
    let schemas = uniq;
    let chosen: Vec<&Schema> = schemas
        .iter()
        .filter(|s| a.record_type.as_deref().map_or(true, |n| s.name() == n))
        .collect();
    if chosen.is_empty() {
        let names: Vec<&str> = schemas.iter().map(|s| s.name()).collect();
        return Err(match &a.record_type {
            Some(n) => format!(
                "ddl: no record type {n:?} (there are: {})",
                names.join(", ")
            ),
            None => "ddl: the input declares no record type".into(),
        });
    }
    let server = if a.server == "18.16" {
        Server::V18
    } else {
        Server::Current
    };
    let mut out = String::new();
    for s in chosen {
        let table = a.table.clone().unwrap_or_else(|| s.name().to_string());
        match a.at {
            None => {
                let mut o = TableOptions::new(table, server);
                o.engine = a.engine.clone();
                o.ttl_days = a.ttl_days;
                if let Some(fields) = &a.order_by {
                    if let Some(f) = fields
                        .iter()
                        .find(|f| !s.fields().iter().any(|x| x.name == **f))
                    {
                        return Err(format!(
                            "ddl: --order-by {f}: record type {} has no such field",
                            s.name()
                        ));
                    }
                    o.order_by = Some(fields.clone());
                }
                out.push_str(&create_table(s, &o));
            }
            Some(at) => {
                let mut conds = Vec::new();
                let mut other_type = false;
                for (f, v) in &a.conds {
                    match s.fields().iter().position(|x| *x.name == **f) {
                        Some(i) => conds.push((
                            i,
                            dplog_query::field_value_bytes(&s.fields()[i], v)
                                .map_err(|e| format!("--where {f}={v}: {e}"))?,
                        )),
                        None => other_type = true,
                    }
                }
                if other_type {
                    continue;
                }
                let lookback = match a.lookback.unwrap_or(Lookback::Default) {
                    Lookback::Default => Some(86_400_000_000_000),
                    Lookback::Ns(n) => Some(n),
                    Lookback::All => None,
                };
                if let Some(sql) = lookup_at(s, &table, server, at, lookback, &conds) {
                    out.push_str(&format!("-- {}\n{sql};\n", s.name()));
                }
            }
        }
    }
    if out.is_empty() {
        return Err(
            "ddl --at: no record type with a lifecycle and an event time has every --where field"
                .into(),
        );
    }
    Ok(out)
}

/// When every record type the query looks at (`--at`: those with a
/// lifecycle; `--between`: all) has a TSC-typed event time, `--at` and
/// `--between` compare the time given with raw ticks: a wall time (after
/// 2001-09-09, 10^18 ns) then matches nothing, so say so, with the tick
/// count the archive's last calibration gives for it.
fn tsc_time_note(dir: &Path, schemas: &[Schema], mode: &Mode) -> Option<String> {
    let (t, flag) = match mode {
        Mode::At(t) => (*t, "--at"),
        Mode::Between(t, _) => (*t, "--between"),
    };
    let looked_at: Vec<&Schema> = schemas
        .iter()
        .filter(|s| matches!(mode, Mode::Between(..)) || s.meta().lifecycle.is_some())
        .collect();
    let tsc = |s: &&Schema| {
        s.meta()
            .event_time
            .is_some_and(|i| s.fields()[i].kind == FieldKind::TscTimestamp)
    };
    if t < 1_000_000_000_000_000_000 || looked_at.is_empty() || !looked_at.iter().all(tsc) {
        return None;
    }
    let names: Vec<&str> = looked_at.iter().map(|s| s.name()).collect();
    let ticks = dplog_query::wall_to_ticks(dir, t)?;
    Some(format!(
        "the event time of {} is a TSC tick count, which {flag} compares the time given \
         with: by the archive's last calibration, {t} ns since the epoch is tick {ticks} \
         ({flag} {ticks}ns); or give the record type an NsTimestamp event time",
        names.join(", ")
    ))
}

fn parse_cond(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((f, v)) if !f.is_empty() && !v.is_empty() => Ok((f.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not FIELD=VALUE")),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Cmd::Ddl(a)) = &args.cmd {
        return match ddl(args.archive.as_deref(), a) {
            Ok(sql) => {
                print!("{sql}");
                ExitCode::SUCCESS
            }
            Err(m) => {
                eprintln!("dplog-query: {m}");
                ExitCode::from(2)
            }
        };
    }
    let Some(dir) = args.archive.clone() else {
        eprintln!("dplog-query: --archive DIR is required");
        return ExitCode::from(2);
    };
    if let Some(Cmd::Import {
        inputs,
        block_rows,
        segment_interval_ms,
    }) = &args.cmd
    {
        return match import(&dir, inputs, *block_rows, *segment_interval_ms) {
            Ok(Imported {
                records,
                damaged: 0,
            }) => {
                eprintln!(
                    "dplog-query: imported {records} records into {}",
                    dir.display()
                );
                ExitCode::SUCCESS
            }
            Ok(Imported { records, damaged }) => {
                eprintln!(
                    "dplog-query: imported {records} records into {}; {damaged} damaged part(s) \
                     of the input (above): what they held after the damage is not in the archive",
                    dir.display()
                );
                ExitCode::from(3)
            }
            Err(m) => {
                eprintln!("dplog-query: {m}");
                ExitCode::from(2)
            }
        };
    }
    let mode = match (&args.at, &args.between) {
        (Some(t), None) => Mode::At(*t),
        (None, Some(v)) if v.len() == 2 && v[0] <= v[1] => Mode::Between(v[0], v[1]),
        (None, Some(_)) => {
            eprintln!("dplog-query: --between T1 T2 needs T1 <= T2");
            return ExitCode::from(2);
        }
        _ => {
            eprintln!("dplog-query: give --at T or --between T1 T2 (or the import subcommand)");
            return ExitCode::from(2);
        }
    };
    let q = Query {
        mode,
        conds: args.conds.clone(),
        lookback: args.lookback.unwrap_or(Lookback::Default),
    };
    // The listing and the first and last segments' schemas, read once:
    // the encoder's schemas, then the lookup's.
    let archive = match dplog_query::Archive::open(&dir) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("dplog-query: {e}");
            return ExitCode::from(2);
        }
    };
    let schemas = archive.schemas();
    if let Some(note) = tsc_time_note(&dir, schemas, &q.mode) {
        eprintln!("dplog-query: note: {note}");
    }
    let mut spec = FormatSpec {
        kind: args.format,
        time_precision: args.time_precision,
        bytes: args.bytes,
        ..Default::default()
    };
    spec.ipfix.export_clock = dplog_formatters::ExportClock::Record;
    // The encoder's schemas: one per id. Segments written by runs whose
    // record types had other ids (registered in another order) hold
    // another layout under a known id: that schema gets an output id of
    // its own and its records are given it, so one encoder (one CSV
    // header) serves every record.
    let mut table = OutputSchemas::default();
    for s in schemas {
        table.place(s);
    }
    let refs: Vec<&Schema> = table.out.iter().collect();
    let mut enc = match spec.encoder(&refs) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("dplog-query: {e}");
            return ExitCode::from(2);
        }
    };
    let mut out = Vec::with_capacity(1 << 16);
    let mut stdout = std::io::stdout().lock();
    let mut write_err = None;
    let streaming = args.format != Format::Ipfix;
    // The calibration set on the encoder (its own is the identity).
    let mut enc_cal = TscCalibration::IDENTITY;
    let mut renumbered = Vec::new();
    // The schemas `run` gave, by address, and their output ids.
    let mut seen: Vec<(*const Schema, u16)> = Vec::new();
    let mut emit = |s: &Schema, rec: &[u8], cal: TscCalibration| {
        // `run` gives each layout one `&Schema` for the whole run: its
        // address finds its output id without comparing schemas.
        let id = match seen.iter().find(|(p, _)| std::ptr::eq(*p, s)) {
            Some(&(_, id)) => id,
            None => {
                let Some((id, fresh)) = table.place(s) else {
                    return;
                };
                seen.push((s as *const Schema, id));
                // A record type the first and last segments lack: the
                // encoder again, with it.
                if fresh {
                    let refs: Vec<&Schema> = table.out.iter().collect();
                    if let Ok(e) = spec.encoder(&refs) {
                        enc = e;
                        enc_cal = TscCalibration::IDENTITY;
                    }
                }
                id
            }
        };
        // TSC fields print with the calibration the archive kept for the
        // record, as dplog-cat applies a binary log's `C` frames.
        // (Records without a TSC field print the same with any.)
        if cal != enc_cal && dplog_sinks::archive::format::has_tsc(s) {
            enc.set_tsc_calibration(cal);
            enc_cal = cal;
        }
        let rec = if id == s.id() {
            rec
        } else {
            renumbered.clear();
            renumbered.extend_from_slice(rec);
            renumbered[2..4].copy_from_slice(&id.to_ne_bytes());
            &renumbered[..]
        };
        enc.push(rec, &mut out);
        if streaming && out.len() >= 1 << 16 && write_err.is_none() {
            write_err = stdout.write_all(&out).err();
            out.clear();
        }
    };
    let tty = std::io::stderr().is_terminal();
    // The first segment done shows the line; then at most every 200 ms.
    let mut last = Instant::now()
        .checked_sub(Duration::from_secs(1))
        .unwrap_or_else(Instant::now);
    let mut shown = false;
    let mut progress = |p: &dplog_query::Progress| {
        if tty && last.elapsed() >= Duration::from_millis(200) {
            last = Instant::now();
            shown = true;
            eprint!(
                "\rdplog-query: segment {}/{} ({} ruled out by the summaries), {} blocks read, \
                 {} skipped by the index ",
                p.segments_done, p.segments, p.segments_pruned, p.blocks_read, p.blocks_skipped
            );
        }
    };
    let r = archive.run(&q, &mut emit, &mut progress);
    if shown {
        eprint!("\r\x1b[K");
    }
    let outcome = match r {
        Ok(o) => o,
        Err(e) => {
            // The damaged segments first, each with its file, byte and
            // reason, then what they left undecidable.
            for p in e.problems() {
                eprintln!("dplog-query: {p}");
            }
            eprintln!("dplog-query: {e}");
            return match e {
                // Damage is why nothing could be looked up.
                QueryError::NoRecordTypes { problems, .. } if !problems.is_empty() => {
                    ExitCode::from(3)
                }
                // An archive of empty segments: nothing to find.
                QueryError::NoRecordTypes { .. } => ExitCode::from(1),
                _ => ExitCode::from(2),
            };
        }
    };
    if write_err.is_none() {
        write_err = stdout.write_all(&out).and_then(|_| stdout.flush()).err();
    }
    if let Some(e) = write_err {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("dplog-query: writing the output: {e}");
            return ExitCode::from(2);
        }
    }
    if args.stats {
        let p = &outcome.progress;
        let io = dplog_sinks::archive::counted::read_counts();
        eprintln!(
            "dplog-query: segments in window {}, ruled out by the summaries {}, opened {}; \
             blocks decoded {}, skipped by the index {}; files opened {}, reads {}, bytes read {}",
            p.segments + p.segments_pruned,
            p.segments_pruned,
            p.segments_opened,
            p.blocks_read,
            p.blocks_skipped,
            io.files_opened,
            io.reads,
            io.bytes
        );
    }
    // A damaged summary costs time, not records: said, not an exit code.
    for p in &outcome.summary_problems {
        eprintln!("dplog-query: {p}");
    }
    for p in &outcome.problems {
        eprintln!("dplog-query: {p}");
    }
    if !outcome.problems.is_empty() {
        eprintln!(
            "dplog-query: {} damaged part(s) of the archive skipped: the answer covers the rest",
            outcome.problems.len()
        );
    }
    if !outcome.problems.is_empty() {
        // Found or not, the answer may lack what the damaged parts held
        // (a delete there makes its session look live): a script must
        // be able to tell.
        ExitCode::from(3)
    } else if outcome.found > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The schemas of an answer's output encoder: one per output id. A
/// schema with the id of another layout already there (segments of runs
/// whose record types had other ids) gets an unused id of its own.
#[derive(Default)]
struct OutputSchemas {
    out: Vec<Schema>,
    /// Each schema placed under another id than its own, and that id.
    aliases: Vec<(Schema, u16)>,
}

impl OutputSchemas {
    /// The output id of `s`'s records, and whether `s` is new to the
    /// output (the encoder is to be built again).
    fn place(&mut self, s: &Schema) -> Option<(u16, bool)> {
        if let Some((_, id)) = self.aliases.iter().find(|(k, _)| k == s) {
            return Some((*id, false));
        }
        match self.out.iter().find(|k| k.id() == s.id()) {
            Some(k) if k == s => Some((s.id(), false)),
            None => {
                self.out.push(s.clone());
                Some((s.id(), true))
            }
            Some(_) => {
                // Template ids of IPFIX start at 256.
                let copy = (256..=u16::MAX)
                    .find(|&id| !self.out.iter().any(|k| k.id() == id))
                    .and_then(|id| {
                        Schema::new(id, s.name().to_string(), s.size(), s.fields().to_vec())
                            .and_then(|c| c.with_meta(s.meta().clone()))
                            .ok()
                    });
                let Some(copy) = copy else {
                    // No id left (or a schema that is no longer valid
                    // under another id): it takes its id's place.
                    let k = self.out.iter().position(|k| k.id() == s.id())?;
                    self.out[k] = s.clone();
                    return Some((s.id(), true));
                };
                let id = copy.id();
                self.out.push(copy);
                self.aliases.push((s.clone(), id));
                Some((id, true))
            }
        }
    }
}

/// What an import did: records imported, and damaged parts of the input
/// (logs imported up to their damage, mmap segments skipped), each
/// reported on stderr as it was found.
struct Imported {
    records: u64,
    damaged: usize,
}

/// Imports binary logs or mmap directories of them into the archive in
/// `dir`. The frames go to the archive sink as they are (it reads the `H`
/// and `S` frames itself), in batches of about 1 MiB: memory is one
/// batch, plus one mmap segment's committed data.
///
/// Every input is checked first (a file must start with a binary log's
/// `H` frame, a directory must hold mmap segments), so a wrong input
/// imports nothing. Damage found while importing (a log cut inside a
/// frame, a broken frame, a segment with a broken header) is reported and
/// counted, and the import goes on with the next segment or input.
///
/// Errors: an input that is not a binary log or mmap directory, or cannot
/// be read; the archive's open or write error.
fn import(
    dir: &Path,
    inputs: &[PathBuf],
    block_rows: usize,
    interval: u64,
) -> Result<Imported, String> {
    // Per input: `None` for a binary log file, the segment files of an
    // mmap directory.
    let mut segments = Vec::with_capacity(inputs.len());
    for input in inputs {
        let at = |e: String| format!("{}: {e}", input.display());
        if input.is_dir() {
            let segs =
                dplog_sinks::mmap::reader::all_segments(input).map_err(|e| at(e.to_string()))?;
            if segs.is_empty() {
                return Err(at("no mmap segments in this directory".into()));
            }
            // A directory of text segments, say: its first readable
            // segment tells (damaged ones are reported below).
            let first = segs.iter().find_map(|(_, _, p)| {
                dplog_sinks::mmap::reader::read_segment(p)
                    .ok()
                    .map(|d| (p, d))
            });
            if let Some((p, _)) = first.filter(|(_, d)| !dplog_formatters::binary::may_start_log(d))
            {
                return Err(format!(
                    "{}: not a segment of a dplog binary log (byte 0: no H frame; an mmap \
                     directory imports when its sink wrote [format] type = \"binary\")",
                    p.display()
                ));
            }
            segments.push(Some(
                segs.into_iter().map(|(_, _, p)| p).collect::<Vec<_>>(),
            ));
        } else {
            let mut f = std::fs::File::open(input).map_err(|e| at(e.to_string()))?;
            let mut head = [0u8; 12];
            let got = read_full(&mut f, &mut head).map_err(|e| at(e.to_string()))?;
            if got == 0 {
                // A log a file sink created and has not written yet (as
                // dplog-cat says it); a file with bytes that is no log is
                // refused.
                eprintln!(
                    "dplog-query: {}",
                    at("empty: no records (a log created and not written yet); skipped".into())
                );
                segments.push(Some(Vec::new()));
                continue;
            }
            if !dplog_formatters::binary::may_start_log(&head[..got]) {
                return Err(at(
                    "not a dplog binary log (byte 0: no binary frame; a log starts with its H \
                     frame)"
                        .into(),
                ));
            }
            segments.push(None);
        }
    }
    let opts = ArchiveSinkOptions {
        block_rows,
        segment_interval_ms: (interval > 0).then_some(interval),
        ..Default::default()
    };
    let mut sink = Target {
        sink: Some(
            ArchiveSink::open(dir, opts.clone()).map_err(|e| format!("{}: {e}", dir.display()))?,
        ),
        dir,
        opts,
        declared: Vec::new(),
        preamble: Vec::new(),
        calibration: Vec::new(),
    };
    let mut done = Imported {
        records: 0,
        damaged: 0,
    };
    let mut damaged = |what: String| {
        eprintln!("dplog-query: {what}");
        1
    };
    for (input, segs) in inputs.iter().zip(segments) {
        // A binary log file; else the segments of an mmap directory.
        let Some(segs) = segs else {
            let f = std::fs::File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
            let len = f.metadata().map_or(0, |m| m.len());
            let (n, damage) = feed(
                &mut sink,
                input,
                &mut std::io::BufReader::with_capacity(1 << 20, f),
                len,
            )?;
            done.records += n;
            done.damaged += damage.map_or(0, &mut damaged);
            continue;
        };
        for p in segs {
            let data = match dplog_sinks::mmap::reader::read_segment(&p) {
                Ok(d) => d,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    done.damaged += damaged(format!("{e}; skipped this segment"));
                    continue;
                }
                Err(e) => return Err(format!("{}: {e}", p.display())),
            };
            let (n, damage) = feed(&mut sink, &p, &mut &data[..], data.len() as u64)?;
            done.records += n;
            done.damaged += damage.map_or(0, &mut damaged);
        }
    }
    sink.sink()
        .close()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(done)
}

/// The schema id of schema frame payload `body`, if it is one.
fn schema_id(body: &[u8]) -> Option<u16> {
    dplog_formatters::binary::parse_schema(body)
        .ok()
        .map(|s| s.id())
}

/// The archive an import writes to, and the schema table it was given.
///
/// The archive sink keeps one schema per id; a log appended to by runs
/// whose record types had other ids (registered in another order), or
/// inputs written by such runs, redeclare an id with another layout after
/// an `H` frame. Each such table goes to a sink of its own (closed, then
/// opened again on the directory: new segments), which is given the
/// table's `H` and schema frames and the calibration in force, so every
/// segment holds one layout per id and its records under it.
struct Target<'a> {
    /// Always `Some` but while it is reopened.
    sink: Option<ArchiveSink>,
    dir: &'a Path,
    opts: ArchiveSinkOptions,
    /// Every schema frame the sink was given: id and payload.
    declared: Vec<(u16, Vec<u8>)>,
    /// The last `H` frame and the schema frames after it.
    preamble: Vec<u8>,
    /// The last `C` frame.
    calibration: Vec<u8>,
}

impl Target<'_> {
    fn sink(&mut self) -> &mut ArchiveSink {
        self.sink.as_mut().expect("an import's sink is open")
    }

    /// Takes note of `frame` (whole, 4-byte header included) before it
    /// is added to `batch`; when it declares a known id with another
    /// layout, `batch` is written and the sink reopened first, and
    /// `batch` starts again with the table so far.
    fn frame(&mut self, frame: &[u8], batch: &mut Vec<u8>) -> Result<(), String> {
        match frame[0] {
            b'H' => {
                self.preamble.clear();
                self.preamble.extend_from_slice(frame);
            }
            b'C' => {
                self.calibration.clear();
                self.calibration.extend_from_slice(frame);
            }
            b'S' => {
                let body = &frame[4..];
                // A bad schema frame is the sink's to refuse.
                let Some(id) = schema_id(body) else {
                    return Ok(());
                };
                let known = self.declared.iter().find(|(k, _)| *k == id);
                if known.is_some_and(|(_, raw)| raw != body) {
                    self.reopen(batch)?;
                }
                if !self.declared.iter().any(|(k, raw)| *k == id && raw == body) {
                    self.declared.push((id, body.to_vec()));
                }
                self.preamble.extend_from_slice(frame);
            }
            _ => {}
        }
        Ok(())
    }

    /// Writes `batch`, closes the sink and opens it again on the
    /// directory; `batch` then holds the current table's `H` and schema
    /// frames and the calibration in force.
    fn reopen(&mut self, batch: &mut Vec<u8>) -> Result<(), String> {
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", self.dir.display());
        let sink = self.sink.as_mut().expect("an import's sink is open");
        if !batch.is_empty() {
            sink.write_batch(batch).map_err(|e| at(&e))?;
        }
        sink.close().map_err(|e| at(&e))?;
        // Dropped first: it holds the directory's lock.
        self.sink = None;
        self.sink = Some(ArchiveSink::open(self.dir, self.opts.clone()).map_err(|e| at(&e))?);
        self.declared.clear();
        batch.clear();
        batch.extend_from_slice(&self.preamble);
        batch.extend_from_slice(&self.calibration);
        let mut p = 0;
        while p + 4 <= self.preamble.len() {
            let len = u16::from_le_bytes([self.preamble[p + 2], self.preamble[p + 3]]) as usize;
            let f = &self.preamble[p..p + 4 + len];
            if let (b'S', Some(id)) = (f[0], schema_id(&f[4..])) {
                self.declared.push((id, f[4..].to_vec()));
            }
            p += 4 + len;
        }
        Ok(())
    }
}

/// Feeds the binary frames of `r` (`len` bytes, from `path`) to `sink`;
/// returns the records, and where and how the log is damaged if it is (cut
/// inside a frame, or a frame that is none): the frames before the damage
/// are imported, nothing after it (frames carry no marker to resume at).
///
/// Errors: a read error; the sink's error.
fn feed(
    sink: &mut Target<'_>,
    path: &Path,
    r: &mut dyn std::io::Read,
    len: u64,
) -> Result<(u64, Option<String>), String> {
    let at = |m: String| format!("{}: {m}", path.display());
    let mut batch = Vec::with_capacity(1 << 20);
    let (mut n, mut off) = (0u64, 0u64);
    let mut head = [0u8; 4];
    let damage = loop {
        match read_full(r, &mut head).map_err(|e| at(e.to_string()))? {
            0 => break None,
            4 => {}
            got => {
                break Some(at(format!(
                    "cut inside a frame header at byte {off} ({got} of 4 bytes, file of {len}); \
                     imported the {n} records before it"
                )));
            }
        }
        let kind = head[0];
        // (The first input of each kind was checked to start with its H
        // frame: one that does not here is damaged.)
        if off == 0 && kind != b'H'
            || !dplog_sinks::archive::FRAME_KINDS.contains(&kind)
            || head[1] != 0
        {
            break Some(at(format!(
                "no binary frame at byte {off} (bytes {:02x} {:02x}; file of {len}): damaged; \
                 imported the {n} records before it",
                head[0], head[1]
            )));
        }
        let flen = u16::from_le_bytes([head[2], head[3]]) as usize;
        let start = batch.len();
        batch.extend_from_slice(&head);
        batch.resize(start + 4 + flen, 0);
        let got = read_full(r, &mut batch[start + 4..]).map_err(|e| at(e.to_string()))?;
        if got < flen {
            batch.truncate(start);
            break Some(at(format!(
                "cut inside the frame at byte {off} ({got} of {flen} bytes, file of {len}); \
                 imported the {n} records before it"
            )));
        }
        if kind != b'R' {
            // (Moved off the batch while the sink takes note of it: the
            // sink may write the batch before it.)
            let frame = batch.split_off(start);
            sink.frame(&frame, &mut batch)?;
            batch.extend_from_slice(&frame);
        }
        n += u64::from(kind == b'R');
        off += 4 + flen as u64;
        if batch.len() >= 1 << 20 {
            sink.sink()
                .write_batch(&batch)
                .map_err(|e| at(e.to_string()))?;
            batch.clear();
        }
    };
    if !batch.is_empty() {
        sink.sink()
            .write_batch(&batch)
            .map_err(|e| at(e.to_string()))?;
    }
    Ok((n, damage))
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(r: &mut dyn std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
