//! `dplogd`: serves the dplog shared-memory rings (`dplog_core::shm`) that
//! dataplane processes create in a directory: drains them in bursts,
//! formats the records with the library's formatters and writes them to
//! its sinks, as configured by the library's TOML (`[format]`, `[sink]`,
//! `[ring] burst` and `batch_bytes`). Records pushed into a ring survive
//! the crash of the process that pushed them.
//!
//! The daemon trusts nothing in a ring file (see `dplog_core::shm`): a
//! ring that breaks the protocol is quarantined with one line on stderr
//! naming it, and the others keep being served. It checkpoints the ring
//! positions together with the output positions (`checkpoint`), so a
//! daemon killed at any instant and restarted writes every record to its
//! file, mmap and archive outputs exactly once.

mod checkpoint;
mod commit;

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use dplog::config::LogConfig;
use dplog_core::shm::{
    ring_file_name, ring_name_ok, OpenRules, ProducerState, ShmError, ShmReader,
    SHM_CONSUMER_SUFFIX, SHM_RING_NAME_MAX,
};
use dplog_core::tsc::TscClock;
use dplog_core::{DropReport, Formatter, RingStats, Schema, Sink, Snapshot, Stats};
use dplog_formatters::conv::push_escaped;
use dplog_formatters::{Escape, Format, SchemaFormatter, SyslogNotice};

use checkpoint::{RingEntry, RingMark, Target};

/// Drains dplog shared-memory rings into the configured format and sinks.
#[derive(Parser, Debug)]
#[command(name = "dplogd", version)]
struct Args {
    /// The library's TOML (`[format]`, `[sink]`, `[ring] burst`,
    /// `batch_bytes`); without it, text lines to `dplogd.log`.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory the producers create their ring files in (e.g.
    /// `/dev/shm/dplog`); watched for new rings.
    #[arg(long)]
    rings: PathBuf,
    /// Checkpoint file (ring and output positions); keep it on the
    /// outputs' filesystem.
    #[arg(long, default_value = "dplogd.checkpoint")]
    checkpoint: PathBuf,
    /// Also serve ring files owned by this uid (repeatable); by default
    /// only this user's.
    #[arg(long = "allow-uid")]
    allow_uid: Vec<u32>,
    /// fsync the outputs and the checkpoint on every checkpoint
    /// (power-loss safety; a process crash needs none).
    #[arg(long)]
    fsync: bool,
    /// How often the directory is scanned and idle producers' liveness
    /// checked, ms.
    #[arg(long, default_value_t = 100)]
    scan_ms: u64,
    /// Serve the counters (OpenMetrics text) on GET /metrics at this
    /// loopback address.
    #[arg(long)]
    metrics: Option<std::net::SocketAddr>,
    /// Write the counters snapshot (the same text) to this file on exit,
    /// an exit with an error (a checkpoint that cannot be written) too.
    #[arg(long)]
    stats_file: Option<PathBuf>,
}

static STOP: AtomicBool = AtomicBool::new(false);
static HUP: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGHUP {
        // Relaxed: a request counter the main loop polls (partner: its
        // Relaxed load); nothing else is published through it.
        HUP.fetch_add(1, Ordering::Relaxed);
    } else {
        // Relaxed: the main loop polls the flag (partner: its Relaxed
        // loads); nothing else is published through it.
        STOP.store(true, Ordering::Relaxed);
    }
}

fn install_signals() {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: installs an async-signal-safe handler (it only stores
        // atomics); the sigaction struct is fully initialised.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, core::ptr::null_mut());
        }
    }
}

/// Why a ring stops being served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    Exited,
    Closed,
    Quarantined,
}

impl Ending {
    /// What the text line says the producer did.
    fn words(self) -> &'static str {
        match self {
            Ending::Exited => "exited",
            Ending::Closed => "closed its ring",
            Ending::Quarantined => "had its ring quarantined",
        }
    }
}

struct Ring {
    reader: ShmReader,
    file: String,
    id: u32,
    fmt: SchemaFormatter,
    /// The output its records (without `split`), drop reports and end
    /// lines go to: an index into `Daemon::outs`.
    out: usize,
    /// CSV with one file per record type: the formatter and output of
    /// each type the ring declares.
    split: Vec<TypeFormatter>,
    /// Set once its last line (exit or quarantine) is in the batch; the
    /// ring is then retired after the checkpoint.
    ending: Option<Ending>,
    last_check: Instant,
    dequeued: u64,
    high_water: u64,
    dropped_reported: u64,
    /// `dropped_reported` by reason (`DropReason::ALL` order); the rest,
    /// drops no reason counter accounts for, is counted as full.
    dropped_by_reason: [u64; 4],
    /// The consumer index last published to the producer: the slots
    /// between it and the reader's head are copied out but still held
    /// until their batch is written and checkpointed.
    published: u64,
}

/// CSV with one file per record type: `(schema id, the formatter of that
/// type alone, the index of its output in `Daemon::outs`)`.
type TypeFormatter = (u16, SchemaFormatter, usize);

/// One output of the daemon: a sink and the batch being built for it.
struct Out {
    sink: dplog_sinks::BoxSink,
    buf: Vec<u8>,
    /// The byte ranges of `buf` that are reports or lines, not records.
    reports: Vec<Range<usize>>,
    /// Records in `buf`.
    records: u64,
    /// Records of written batches the sink holds pending: reported neither
    /// written nor failed by its `poll` yet (an archive's partial blocks,
    /// Kafka's unacknowledged messages).
    pending: u64,
    /// CSV with one file per record type: the type's name and its file
    /// header (a ring declaring that name with other columns is refused).
    typed: Option<(String, Vec<u8>)>,
}

impl Out {
    fn new(sink: dplog_sinks::BoxSink, typed: Option<(String, Vec<u8>)>) -> Self {
        Self {
            sink,
            buf: Vec::new(),
            reports: Vec::new(),
            records: 0,
            pending: 0,
            typed,
        }
    }
}

struct Daemon {
    args: Args,
    cfg: LogConfig,
    /// The outputs: the one sink configured, or (`split_csv`) one file
    /// sink per record type, opened as rings declare their types.
    outs: Vec<Out>,
    /// CSV to one file sink without the NAT schemas: one file per record
    /// type, each with its own header ([`typed_path`]).
    split_csv: bool,
    targets: Vec<Target>,
    rings: BTreeMap<String, Ring>,
    /// Ring files refused or retired, never opened again.
    refused: HashSet<String>,
    /// Files of the ring directory that are no ring (their names do not
    /// parse), said once each.
    strays: HashSet<String>,
    /// Checkpoint entries of rings not (yet) open again after a restart.
    resume: BTreeMap<String, RingEntry>,
    /// Checkpoint entries of quarantined rings whose files remain: kept,
    /// so a restart does not serve them again from the start.
    kept: BTreeMap<String, RingEntry>,
    next_id: u32,
    slots: Vec<u8>,
    clock: TscClock,
    stats: Stats,
    closed_rings: Vec<RingStats>,
    snapshot: Arc<Mutex<Snapshot>>,
    last_sink_error: Option<Instant>,
    /// With an archive output: the longest a written batch waits for its
    /// checkpoint (the archive's smallest `block_max_age_ms`). Each
    /// checkpoint first writes out the archive's partial blocks (ending
    /// them), so batches are checkpointed together, not one by one
    /// (blocks of a few records otherwise). `None`: every batch is
    /// checkpointed at once.
    commit_every: Option<Duration>,
    /// Batches written since the last checkpoint.
    uncommitted: bool,
    last_commit: Instant,
    /// A checkpoint write failing retryably (a full disk): its backoff.
    ckpt_retry: checkpoint::Retry,
}

fn main() {
    let args = Args::parse();
    std::process::exit(match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("dplogd: {e}");
            1
        }
    });
}

/// Checks the format settings that need no record type: syslog and
/// IPFIX options, a template given to a format other than text. dplogd
/// knows no record type before a ring declares its own: each ring's
/// formatter is built for the schemas its file declares when it opens,
/// and a ring whose types do not suit the settings (a template naming a
/// field they lack, a template for a type it does not declare) is
/// refused then, saying why.
///
/// Errors: the format's error, as a message.
fn check_format(spec: &dplog_formatters::FormatSpec) -> Result<(), String> {
    let mut free = spec.clone();
    // Templates by type name and BYTES renderings by field name apply to
    // the rings whose types have them (see FormatSpec::for_types); a
    // template given to another format than text is refused here.
    if free.kind == dplog_formatters::Format::Text {
        free.templates.clear();
    }
    free.bytes_fields.clear();
    // The syslog options are otherwise checked per record type.
    free.syslog.validate()?;
    free.formatter(&[]).map(drop).map_err(|e| e.to_string())
}

fn run(args: Args) -> Result<(), String> {
    // First: a SIGTERM during start-up stops the daemon cleanly (the
    // main loop sees STOP at its first turn) instead of killing it.
    install_signals();
    let cfg = match &args.config {
        Some(p) => dplog::config::read_toml::<LogConfig>(p).map_err(|e| e.to_string())?,
        None => LogConfig::from_toml_str("[sink]\ntype = \"file\"\npath = \"dplogd.log\"\n")
            .map_err(|e| e.to_string())?,
    };
    check_format(&cfg.format.spec())?;
    if !args.rings.is_dir() {
        return Err(format!(
            "--rings {}: not a directory (create it, mode 0700, or 0770 for a group)",
            args.rings.display()
        ));
    }
    // One daemon per ring directory, taken before anything is cut back
    // or opened; held (the descriptor open) for the daemon's life.
    let _lock = lock_rings(&args.rings)?;
    if let Some(w) = open_dir_warning(&args.rings) {
        eprintln!("dplogd: {w}");
    }
    let targets = checkpoint::targets(&cfg.sink);
    let commit_every = archive_age(&cfg.sink).map(|ms| Duration::from_millis(ms.max(1)));
    // Restart: cut every output back to the checkpoint before its sink
    // opens (and appends).
    let ckpt = checkpoint::load(&args.checkpoint)?;
    let mut resume = BTreeMap::new();
    if let Some(c) = &ckpt {
        for pos in &c.outputs {
            if let Some(m) = checkpoint::truncate_to(pos)
                .map_err(|e| format!("cutting the output back to the checkpoint: {e}"))?
            {
                eprintln!("dplogd: restart: {m}");
            }
        }
        for r in &c.rings {
            resume.insert(r.file.clone(), r.clone());
        }
    }
    // Each ring is formatted with the schemas it declares. CSV to a file
    // without the NAT schemas: one file per record type, each headed by
    // its own columns, opened as rings declare the types. Otherwise one
    // sink, whose file header (CSV) is the NAT one when the config asks
    // for the NAT schemas ([schemas] nat = true), else none.
    let split_csv = cfg.format.kind == Format::Csv
        && !cfg.schemas.nat
        && matches!(cfg.sink, dplog::config::SinkConfig::File(_));
    let mut outs = Vec::new();
    let mut targets = targets;
    if split_csv {
        // The type files the checkpoint names (cut back above) stay
        // checkpointed until their types' rings open again.
        if let Some(c) = &ckpt {
            for pos in &c.outputs {
                if let checkpoint::Pos::File { path, .. } = pos {
                    if !targets.contains(&Target::File(path.clone())) {
                        targets.push(Target::File(path.clone()));
                    }
                }
            }
        }
        // The configured path itself receives nothing.
        targets.retain(|t| !checkpoint::targets(&cfg.sink).contains(t));
    } else {
        let sink = if cfg.schemas.nat {
            cfg.sink.build_for(&cfg.format)
        } else {
            cfg.sink.build()
        }
        .map_err(|e| format!("opening the sink: {e}"))?;
        outs.push(Out::new(sink, None));
    }
    dplog_core::shm::install_sigbus_guard().map_err(|e| format!("SIGBUS guard: {e}"))?;
    let snapshot = Arc::new(Mutex::new(Snapshot::default()));
    let _metrics = match args.metrics {
        Some(addr) => Some(serve_metrics(addr, snapshot.clone())?),
        None => None,
    };
    let mut d = Daemon {
        cfg,
        outs,
        split_csv,
        targets,
        rings: BTreeMap::new(),
        refused: HashSet::new(),
        strays: HashSet::new(),
        resume,
        kept: BTreeMap::new(),
        next_id: 0,
        slots: Vec::new(),
        clock: TscClock::new(Duration::from_millis(10)),
        stats: Stats::default(),
        closed_rings: Vec::new(),
        snapshot,
        last_sink_error: None,
        commit_every,
        uncommitted: false,
        last_commit: Instant::now(),
        ckpt_retry: checkpoint::Retry::default(),
        args,
    };
    for o in &mut d.outs {
        o.buf.reserve(d.cfg.ring.batch_bytes + 65536);
    }
    // The positions the first batch starts from: nothing is read from a
    // ring before they are checkpointed, so a full disk here is waited out.
    while !d.checkpointed()? {
        // Relaxed: the stop flag, as in `serve`.
        if STOP.load(Ordering::Relaxed) {
            return Err(format!(
                "stopped before the checkpoint {} could be written; nothing was read from the rings",
                d.args.checkpoint.display()
            ));
        }
        std::thread::sleep(d.ckpt_retry.wait(Instant::now()));
    }
    d.serve()
}

impl Daemon {
    fn serve(&mut self) -> Result<(), String> {
        let scan_every = Duration::from_millis(self.args.scan_ms.max(1));
        let mut last_scan = Instant::now() - scan_every;
        let mut hup_seen = 0;
        let mut idle_sleep = Duration::from_micros(100);
        loop {
            // Relaxed: pairs with the handler's Relaxed store (a flag).
            let stopping = STOP.load(Ordering::Relaxed);
            let now = Instant::now();
            if now.duration_since(last_scan) >= scan_every {
                last_scan = now;
                self.scan();
                self.publish_snapshot();
            }
            // Relaxed: pairs with the handler's Relaxed increment.
            let hup = HUP.load(Ordering::Relaxed);
            if hup != hup_seen {
                hup_seen = hup;
                for o in &mut self.outs {
                    if let Err(e) = o.sink.reopen() {
                        eprintln!(
                            "dplogd: SIGHUP: reopening the sink {}: {e}",
                            o.sink.describe()
                        );
                    }
                }
            }
            let got = self.drain_once(scan_every);
            let ending = self.rings.values().any(|r| r.ending.is_some());
            // A ring half held by the pending batch: write it now, or its
            // producer would wait for the whole batch to fill.
            let held = self.rings.values().any(|r| {
                (r.reader.head() - r.published) * 2 >= u64::from(r.reader.info().capacity)
            });
            let pending = self.outs.iter().map(|o| o.buf.len()).sum::<usize>();
            let full = held || pending >= self.cfg.ring.batch_bytes;
            if ending || (pending > 0 && (full || got == 0 || stopping)) {
                self.write_batch(ending || held || stopping)?;
            } else if self.uncommitted && (held || self.commit_due()) {
                self.commit()?;
            }
            if stopping && got == 0 {
                break;
            }
            if got == 0 {
                std::thread::sleep(idle_sleep);
                idle_sleep = (idle_sleep * 2).min(Duration::from_millis(2));
            } else {
                idle_sleep = Duration::from_micros(100);
            }
            for i in 0..self.outs.len() {
                let _ = self.outs[i].sink.tick(Instant::now());
                self.poll_out(i);
            }
        }
        let end = self.finish();
        // The final counters, whether or not the last checkpoint could
        // be written: a run that ends in an error is still counted.
        self.publish_snapshot();
        if let Some(p) = &self.args.stats_file {
            let text = self
                .snapshot
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .to_prometheus();
            if let Err(e) = std::fs::write(p, text) {
                let e = format!("{}: {e}", p.display());
                // The run's own error is the one returned; this one is
                // said on stderr.
                return match end {
                    Ok(()) => Err(e),
                    Err(first) => {
                        eprintln!("dplogd: {e}");
                        Err(first)
                    }
                };
            }
        }
        end
    }

    /// The end of a run: the last batch written and committed, the sinks
    /// drained and closed, the last checkpoint.
    fn finish(&mut self) -> Result<(), String> {
        self.write_batch(true)?;
        let deadline =
            Instant::now() + Duration::from_millis(self.cfg.ring.shutdown_timeout_ms.max(1));
        for i in 0..self.outs.len() {
            let o = &mut self.outs[i];
            let _ = o.sink.drain(deadline);
            if let Err(e) = o.sink.close() {
                eprintln!("dplogd: closing the sink {}: {e}", o.sink.describe());
            }
            // What the close wrote, or gave up on (an archive on a full
            // disk: counted dropped).
            self.poll_out(i);
        }
        self.save_checkpoint()
    }

    /// Opens the ring files that appeared.
    fn scan(&mut self) {
        let entries = match std::fs::read_dir(&self.args.rings) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("dplogd: reading {}: {e}", self.args.rings.display());
                return;
            }
        };
        let mut present = HashSet::new();
        let mut consumers = Vec::new();
        for e in entries.flatten() {
            let path = e.path();
            if ring_file_name(&path).is_none() {
                // This daemon's consumer files (`<ring>.consumer`).
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(ring) = name.strip_suffix(SHM_CONSUMER_SUFFIX) {
                    if ring_file_name(Path::new(ring)).is_some() {
                        consumers.push((ring.to_string(), path));
                        continue;
                    }
                }
                // Dot files are the producers' temporaries and this
                // daemon's lock; anything else is said once.
                if !name.starts_with('.') {
                    present.insert(name.clone());
                    if self.strays.insert(name.clone()) {
                        eprintln!(
                            "dplogd: {}/{}: not a ring file (a ring is <name>.<pid>.<16 hex digits>.ring, made by a producer); ignored",
                            self.args.rings.display(),
                            shown(&name)
                        );
                    }
                }
                continue;
            }
            let file = e.file_name().to_string_lossy().into_owned();
            present.insert(file.clone());
            if self.rings.contains_key(&file) || self.refused.contains(&file) {
                continue;
            }
            self.open_ring(&path, file);
        }
        // Checkpoint entries of rings that are gone stay only until the
        // next checkpoint; names of files gone are forgotten (a ring
        // file's name is never used again: its nonce).
        // A consumer file whose ring is gone (removed while this daemon
        // was down) is removed: no ring name is used twice.
        for (ring, path) in consumers {
            if !present.contains(&ring) {
                let _ = std::fs::remove_file(path);
            }
        }
        self.resume.retain(|f, _| present.contains(f));
        self.refused.retain(|f| present.contains(f));
        self.kept.retain(|f, _| present.contains(f));
        self.strays.retain(|f| present.contains(f));
    }

    fn open_ring(&mut self, path: &Path, file: String) {
        let rules = OpenRules {
            allow_uids: self.args.allow_uid.clone(),
        };
        let refuse = |d: &mut Daemon, why: String| {
            eprintln!("dplogd: ring {}: refused: {why}", shown(&file));
            d.refused.insert(file.clone());
            d.stats.rings_stopped += 1;
        };
        // A name no producer creates: the file was renamed (by whoever may
        // create files in the directory). Its name would reach the output
        // and the terminal; it is not opened.
        if !ring_file_name(path).is_some_and(ring_name_ok) {
            return refuse(
                self,
                format!(
                    "its name part is not a ring name a producer creates (1 to {SHM_RING_NAME_MAX} letters, digits, '_' or '-'); renamed? not served"
                ),
            );
        }
        let mut reader = match ShmReader::open(path, &rules) {
            Ok(r) => r,
            Err(e @ ShmError::Schema(_)) => {
                // The reader marked it quarantined in the file.
                eprintln!(
                    "dplogd: ring {}: quarantined: {e}; not served",
                    shown(&file)
                );
                self.refused.insert(file);
                self.stats.rings_stopped += 1;
                return;
            }
            Err(e) => return refuse(self, e.to_string()),
        };
        let resumed = self.resume.remove(&file);
        if let Some(r) = &resumed {
            if r.nonce != reader.info().nonce {
                return refuse(
                    self,
                    format!(
                        "its lifetime nonce {:016x} is not the checkpoint's {:016x}",
                        reader.info().nonce,
                        r.nonce
                    ),
                );
            }
            match r.mark {
                RingMark::Closed => {
                    // Its exit line is written: only the removal was left.
                    reader.remove_files();
                    self.refused.insert(file);
                    return;
                }
                RingMark::Quarantined => {
                    eprintln!(
                        "dplogd: ring {}: quarantined before the restart; not served",
                        shown(&file)
                    );
                    reader.quarantine();
                    self.kept.insert(file.clone(), r.clone());
                    self.refused.insert(file);
                    return;
                }
                RingMark::Live => {}
            }
        }
        // Its consumer file (this daemon's, of this ring lifetime) says
        // quarantined though no checkpoint does (stopped between the
        // verdict and the checkpoint): the producer has stopped, so the
        // verdict stands; it is never cleared.
        if reader.quarantined() {
            eprintln!(
                "dplogd: ring {}: quarantined before the restart (its consumer file says so); not served",
                shown(&file)
            );
            self.refused.insert(file);
            return;
        }
        // Each record type as the ring file describes it (checked by the
        // reader against its fingerprint): its fields and the metadata
        // its producer declared (syslog layout, priorities, names by
        // value), whatever package it comes from.
        let owned: Vec<Schema> = reader
            .info()
            .schemas
            .iter()
            .map(|d| d.schema.clone())
            .collect();
        let schemas: Vec<&Schema> = owned.iter().collect();
        if schemas.is_empty() {
            return refuse(self, "it declares no schema".into());
        }
        if let Some(r) = &resumed {
            if let Err(e) = reader.resume_at(r.head, r.drops_reported) {
                reader.quarantine();
                return refuse(self, format!("resuming at the checkpoint: {e}"));
            }
            // The checkpointed position is written: free its slots (a
            // daemon killed between its checkpoint and this store left
            // them held).
            reader.publish_head();
            reader.publish_reported();
        } else if reader.head() > 0 {
            // No checkpoint names the ring (another --checkpoint, a lost
            // file) but its consumer file shows an earlier daemon's
            // progress: resume there; what that daemon wrote after its
            // last checkpoint cannot be cut back without one.
            eprintln!(
                "dplogd: ring {}: no checkpoint names it; resuming at index {} where its consumer file says an earlier daemon freed it (records that daemon wrote after its last checkpoint may be written again)",
                shown(&file),
                reader.head()
            );
        }
        let spec = self.cfg.format.spec().for_types(&schemas);
        let mut fmt = match spec
            .formatter(&schemas)
            .map_err(|e| format!("[format]: {e}"))
        {
            Ok(f) => f,
            Err(e) => return refuse(self, e.to_string()),
        };
        if let Some(c) = self.clock.calibration() {
            Formatter::<dplog_core::Slot64>::tsc_calibration(&mut fmt, &c);
        }
        let (out, split) = if self.split_csv {
            match self.type_outputs(&schemas) {
                Ok(Some(v)) => (v[0].2, v),
                // Not now: retried at the next scan.
                Ok(None) => return,
                Err(e) => return refuse(self, e),
            }
        } else {
            (0, Vec::new())
        };
        let head = reader.head();
        let id = self.next_id;
        self.next_id += 1;
        self.stats.rings += 1;
        self.rings.insert(
            file.clone(),
            Ring {
                reader,
                file,
                id,
                fmt,
                out,
                split,
                ending: None,
                last_check: Instant::now(),
                dequeued: 0,
                high_water: 0,
                dropped_reported: 0,
                dropped_by_reason: [0; 4],
                published: head,
            },
        );
    }

    /// CSV with one file per record type: the formatter of each of
    /// `schemas` alone and the index of its type's output, opening the
    /// outputs of types not seen before. A new output is checkpointed (at
    /// its empty length) before anything is written to it, so a restart
    /// cuts it back as it cuts the others: the pending batch is written
    /// and checkpointed first. `Ok(None)`: that checkpoint could not be
    /// taken now (a write-out failed); the ring is opened at a later scan.
    ///
    /// Errors: a type whose columns differ from those of an output of the
    /// same name (another producer's type of that name), a formatter's
    /// error, a file that does not open.
    fn type_outputs(&mut self, schemas: &[&Schema]) -> Result<Option<Vec<TypeFormatter>>, String> {
        let spec = self.cfg.format.spec();
        let mut v = Vec::new();
        let mut new = Vec::new();
        for s in schemas {
            let header = spec.file_header(&[s]).unwrap_or_default();
            let known = self
                .outs
                .iter()
                .position(|o| o.typed.as_ref().is_some_and(|(n, _)| n == s.name()));
            let out = match known {
                Some(i) if self.outs[i].typed.as_ref().is_some_and(|(_, h)| *h == header) => i,
                Some(i) => {
                    return Err(format!(
                        "its record type {} has other columns than the type of that name already written to {}; not served",
                        shown(s.name()),
                        self.outs[i].sink.describe()
                    ))
                }
                None => match new.iter().position(|(n, _)| n == s.name()) {
                    Some(k) => self.outs.len() + k,
                    None => {
                        new.push((s.name().to_string(), header));
                        self.outs.len() + new.len() - 1
                    }
                },
            };
            let mut fmt = self
                .cfg
                .format
                .spec()
                .for_types(&[s])
                .formatter(&[s])
                .map_err(|e| format!("[format]: {e}"))?;
            // The type's file sink heads the file (once, when empty).
            fmt.csv_header_written();
            if let Some(c) = self.clock.calibration() {
                Formatter::<dplog_core::Slot64>::tsc_calibration(&mut fmt, &c);
            }
            v.push((s.id(), fmt, out));
        }
        if new.is_empty() {
            return Ok(Some(v));
        }
        self.write_batch(true)?;
        if self.uncommitted {
            return Ok(None);
        }
        let dplog::config::SinkConfig::File(file) = &self.cfg.sink else {
            unreachable!("split CSV writes to a file sink");
        };
        let (outs_before, targets_before) = (self.outs.len(), self.targets.len());
        for (name, header) in new {
            let mut f = file.clone();
            f.path = typed_path(&file.path, &name);
            let cfg = dplog::config::SinkConfig::File(f);
            let sink = cfg
                .build_for_schema(
                    &self.cfg.format,
                    &schemas
                        .iter()
                        .copied()
                        .filter(|s| s.name() == name)
                        .take(1)
                        .collect::<Vec<_>>(),
                )
                .map_err(|e| format!("opening {}: {e}", typed_path(&file.path, &name).display()))?;
            let mut o = Out::new(sink, Some((name, header)));
            o.buf.reserve(self.cfg.ring.batch_bytes + 65536);
            self.outs.push(o);
            for t in checkpoint::targets(&cfg) {
                if !self.targets.contains(&t) {
                    self.targets.push(t);
                }
            }
        }
        if !self.checkpointed()? {
            // Not checkpointed (a full disk): the new outputs close and
            // open again at the next scan, so none holds records that no
            // checkpoint names.
            self.outs.truncate(outs_before);
            self.targets.truncate(targets_before);
            return Ok(None);
        }
        Ok(Some(v))
    }

    /// One burst from every ring; returns the records read.
    fn drain_once(&mut self, check_every: Duration) -> usize {
        let burst = self.cfg.ring.burst.max(1);
        let format = self.cfg.format.kind;
        let mut total = 0;
        let now = Instant::now();
        for r in self.rings.values_mut() {
            if r.ending.is_some() {
                continue;
            }
            // The producer's state is read before the poll: a producer seen
            // closed or dead publishes nothing after, so a poll that then
            // drains the ring has every record it committed.
            let state = if now.duration_since(r.last_check) >= check_every {
                r.last_check = now;
                Some(r.reader.producer_state())
            } else {
                None
            };
            let res = r.reader.poll(burst, &mut self.slots);
            let sb = r.reader.info().slot_bytes as usize;
            let n = self.slots.len() / sb;
            for s in self.slots.chunks_exact(sb) {
                // The header's length was checked (8..=slot bytes).
                let len = usize::from(u16::from_ne_bytes([s[0], s[1]]));
                let id = u16::from_ne_bytes([s[2], s[3]]);
                // With a file per type, the type's own formatter and file;
                // an id the ring does not declare is refused by its
                // formatter.
                let (fmt, out) = match r.split.iter_mut().find(|t| t.0 == id) {
                    Some((_, f, o)) => (f, &mut self.outs[*o]),
                    None => (&mut r.fmt, &mut self.outs[r.out]),
                };
                let before = out.buf.len();
                if fmt.push_bytes(&s[..len], &mut out.buf) {
                    self.stats.formatted += 1;
                    out.records += 1;
                } else {
                    out.buf.truncate(before);
                    self.stats.dropped_format += 1;
                }
            }
            r.reader.consume(n);
            r.dequeued += n as u64;
            self.stats.dequeued += n as u64;
            total += n;
            r.high_water = r
                .high_water
                .max(r.reader.tail().saturating_sub(r.reader.head() - n as u64));
            // The drop counters are checked as the index is: a violation
            // quarantines the ring below, and its count is never reported.
            let res = res.and_then(|_| r.reader.take_drops());
            if let Ok(Some(d)) = &res {
                // The producer's drop times, within the ring's life: not
                // before its creation time (itself not after now), not
                // after now, the first not after the last.
                let now_ticks = dplog_core::tsc::now_ticks();
                let now_ns = dplog_core::tsc::realtime_ns();
                let born = r.reader.info().created_ns.min(now_ns);
                let last = self
                    .clock
                    .to_utc_ns(d.last_ns.min(now_ticks))
                    .clamp(born, now_ns);
                let first = self
                    .clock
                    .to_utc_ns(d.first_ns.min(now_ticks))
                    .clamp(born, last);
                let base = DropReport::new(r.id, 0, first, last);
                // One report per reason; a count the ring's reason
                // counters do not account for (a corrupted file) as the
                // ring's, without a reason.
                let reps = d
                    .reasons()
                    .map(|(reason, n)| DropReport {
                        dropped: n,
                        ..base.with_reason(reason)
                    })
                    .chain((d.unattributed() > 0).then_some(DropReport {
                        dropped: d.unattributed(),
                        ..base
                    }));
                // With a file per type: in the file of the ring's first
                // type, in its columns.
                let fmt = match r.split.first_mut() {
                    Some((_, f, _)) => f,
                    None => &mut r.fmt,
                };
                let out = &mut self.outs[r.out];
                for rep in reps {
                    let start = out.buf.len();
                    Formatter::<dplog_core::Slot64>::format_drop_report(fmt, &rep, &mut out.buf);
                    if out.buf.len() > start {
                        out.reports.push(start..out.buf.len());
                        self.stats.drop_reports += 1;
                    }
                }
                r.dropped_reported = r.dropped_reported.saturating_add(d.dropped);
                for (sum, n) in r.dropped_by_reason.iter_mut().zip(d.by_reason) {
                    *sum = sum.saturating_add(n);
                }
            }
            if let Err(e) = res {
                let e = match e {
                    ShmError::Protocol(m) => m,
                    other => other.to_string(),
                };
                eprintln!(
                    "dplogd: ring {}: quarantined: {e}; {} records written from it before; the other rings are still served",
                    shown(&r.file),
                    r.reader.head()
                );
                r.reader.quarantine();
                let out = &mut self.outs[r.out];
                line(
                    format,
                    &r.fmt,
                    &mut out.buf,
                    &mut out.reports,
                    &r.file,
                    r.reader.info().pid,
                    r.reader.head(),
                    Ending::Quarantined,
                );
                r.ending = Some(Ending::Quarantined);
                self.stats.rings_stopped += 1;
                continue;
            }
            if let Some(st) = state {
                if st != ProducerState::Running && r.reader.head() == r.reader.tail() && n < burst {
                    let how = if st == ProducerState::Closed {
                        Ending::Closed
                    } else {
                        Ending::Exited
                    };
                    let out = &mut self.outs[r.out];
                    if !line(
                        format,
                        &r.fmt,
                        &mut out.buf,
                        &mut out.reports,
                        &r.file,
                        r.reader.info().pid,
                        r.reader.head(),
                        how,
                    ) {
                        // No in-band line in this format: stderr says it,
                        // as the text format's line.
                        let mut l = Vec::new();
                        text_end_line(&mut l, &r.file, r.reader.info().pid, r.reader.head(), how);
                        eprint!("{}", String::from_utf8_lossy(&l));
                    }
                    r.ending = Some(how);
                }
            }
        }
        total
    }

    /// Writes the batch (retrying while the sink fails retryably), then,
    /// if `force` or due ([`commit_due`](Self::commit_due)), commits it.
    fn write_batch(&mut self, force: bool) -> Result<(), String> {
        for i in 0..self.outs.len() {
            self.write_out_batch(i)?;
        }
        if force || self.commit_due() {
            self.commit()?;
        }
        Ok(())
    }

    /// Writes the batch of output `i`, if any (see
    /// [`write_batch`](Self::write_batch)).
    fn write_out_batch(&mut self, i: usize) -> Result<(), String> {
        if !self.outs[i].buf.is_empty() {
            let mut backoff = Duration::from_millis(10);
            // The sink may take the buffer on success and give another
            // back (a sealed file sink's hasher thread).
            let len = self.outs[i].buf.len() as u64;
            loop {
                let o = &mut self.outs[i];
                let res = o.sink.write_batch_owned(&mut o.buf, &o.reports);
                match res {
                    Ok(accepted) => {
                        if accepted == dplog_core::Accepted::Delivered {
                            self.stats.written_records += self.outs[i].records;
                            self.stats.written_bytes += len;
                        } else {
                            // Counted as the sink reports them (`poll_out`);
                            // the checkpoint waits for every one
                            // (`commit`).
                            self.outs[i].pending += self.outs[i].records;
                        }
                        self.stats.batches += 1;
                        self.poll_out(i);
                        break;
                    }
                    // Relaxed: the stop flag, as in `serve`.
                    Err(e) if e.is_retryable() && !STOP.load(Ordering::Relaxed) => {
                        self.stats.sink_errors += 1;
                        self.stats.sink_retries += 1;
                        if say_again(&mut self.last_sink_error, Instant::now()) {
                            eprintln!(
                                "dplogd: sink {} failing: {e}; {} records waiting; retrying (the rings hold the rest, producers see their policy)",
                                self.outs[i].sink.describe(),
                                self.outs[i].records
                            );
                        }
                        std::thread::sleep(backoff);
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                    }
                    Err(e) => {
                        self.stats.sink_errors += 1;
                        let kept = {
                            let o = &mut self.outs[i];
                            o.sink.kept_of_refused(&o.buf, &o.reports)
                        };
                        self.stats.written_records += kept.records;
                        self.stats.dropped_sink +=
                            self.outs[i].records - kept.records.min(self.outs[i].records);
                        eprintln!(
                            "dplogd: sink {}: {e}; {} records of the batch dropped",
                            self.outs[i].sink.describe(),
                            self.outs[i].records - kept.records.min(self.outs[i].records)
                        );
                        self.outs[i].sink.abandon();
                        break;
                    }
                }
            }
            self.outs[i].buf.clear();
            self.outs[i].reports.clear();
            self.outs[i].records = 0;
            self.uncommitted = true;
        }
        Ok(())
    }

    /// Waits, `shutdown_timeout_ms` at a time, until the sink of output
    /// `i` has an outcome for every pending record ([`Sink::drain`]),
    /// saying every 5 s that it waits. A stop request while the receiver is away ends the
    /// daemon without a checkpoint of the batch: the rings still hold its
    /// records, and the next dplogd sends them again (at least once).
    ///
    /// Errors: the stop while records are unacknowledged, or a sink error
    /// that is not retryable.
    pub(crate) fn await_receiver(&mut self, i: usize) -> Result<(), String> {
        let mut said: Option<Instant> = None;
        loop {
            let deadline =
                Instant::now() + Duration::from_millis(self.cfg.ring.shutdown_timeout_ms.max(1));
            match self.outs[i].sink.drain(deadline) {
                Ok(()) => {
                    if said.is_some() {
                        eprintln!(
                            "dplogd: sink {}: the receiver acknowledged the waiting batch",
                            self.outs[i].sink.describe()
                        );
                    }
                    return Ok(());
                }
                // Relaxed: the stop flag, as in `serve`.
                Err(e) if e.is_retryable() && !STOP.load(Ordering::Relaxed) => {
                    self.stats.sink_errors += 1;
                    if say_again(&mut said, Instant::now()) {
                        eprintln!(
                            "dplogd: sink {}: {e}; {} records wait for acknowledgement and are not checkpointed; waiting (the rings hold the rest, producers see their policy)",
                            self.outs[i].sink.describe(),
                            self.outs[i].pending
                        );
                    }
                }
                Err(e) => {
                    self.stats.sink_errors += 1;
                    return Err(format!(
                        "sink {}: {e}; stopping with {} records unacknowledged, not checkpointed (the next dplogd sends them again)",
                        self.outs[i].sink.describe(),
                        self.outs[i].pending
                    ));
                }
            }
        }
    }

    /// Books what output `i`'s sink reports of its pending records
    /// ([`Sink::poll`]): written (with their bytes) or dropped.
    fn poll_out(&mut self, i: usize) {
        let p = self.outs[i].sink.poll();
        self.stats.written_records += p.delivered_records;
        self.stats.written_bytes += p.delivered_bytes;
        self.stats.dropped_sink += p.failed_records;
        let o = &mut self.outs[i];
        o.pending = o
            .pending
            .saturating_sub(p.delivered_records + p.failed_records);
        self.stats.sink_pending = self.outs.iter().map(|o| o.pending).sum();
    }

    fn publish_snapshot(&self) {
        let mut rings: Vec<RingStats> = self.closed_rings.clone();
        rings.extend(self.rings.values().map(|r| ring_stats(r, false)));
        rings.sort_by_key(|r| r.id);
        let mut s = self.stats;
        // Saturating: the counts come from the producers' files.
        let sum = |f: fn(&RingStats) -> u64| rings.iter().map(f).fold(0u64, u64::saturating_add);
        s.enqueued = sum(|r| r.enqueued);
        s.dropped_full = sum(|r| r.dropped_full);
        s.dropped_degraded = sum(|r| r.dropped_degraded);
        s.dropped_disconnected = sum(|r| r.dropped_disconnected);
        s.dropped_stopped = sum(|r| r.dropped_stopped);
        s.produced = [
            s.dropped_full,
            s.dropped_degraded,
            s.dropped_disconnected,
            s.dropped_stopped,
        ]
        .into_iter()
        .fold(s.enqueued, u64::saturating_add);
        s.high_water = rings.iter().map(|r| r.high_water).max().unwrap_or(0);
        let snap = Snapshot {
            consumer: s,
            rings,
            latency: Default::default(),
        };
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = snap;
    }
}

/// Whether a repeated message is due at `now`: the first time, or 5 s
/// after `last` (then set to `now`), so a failure that lasts says so
/// every 5 s, not on every retry.
fn say_again(last: &mut Option<Instant>, now: Instant) -> bool {
    let due = last.map_or(true, |t| now.duration_since(t) >= Duration::from_secs(5));
    if due {
        *last = Some(now);
    }
    due
}

/// A warning for a ring directory others may write (mode `o+w`): any
/// local user can then create files in it. Producers refuse consumer
/// files they do not trust and the daemon refuses rings of uids it does
/// not serve, but another user can still take a ring's file names or fill
/// the directory; the README's set-up is 0700, or 0770 with a group.
/// `None` for a directory only its owner and group may write.
fn open_dir_warning(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(dir).ok()?;
    let mode = md.mode() & 0o7777;
    (mode & 0o002 != 0).then(|| {
        format!(
            "--rings {}: mode {mode:04o} lets every local user create files in it{}; use 0700, or 0770 with a group (docs/dplogd.md, \"Running it\")",
            dir.display(),
            if mode & 0o1000 != 0 {
                " (sticky: they cannot replace others' files)"
            } else {
                ", rename or remove ring files"
            }
        )
    })
}

/// The lock file of a ring directory: one daemon serves it.
const LOCK_FILE: &str = ".dplogd.lock";

/// Takes an exclusive `flock(2)` on `<dir>/.dplogd.lock` (created mode
/// 0640; opened read-only if it is another user's, which `flock` allows)
/// and writes this process's pid into it. Two daemons on one directory
/// would both drain its rings (records twice, or a blocked producer
/// released by one while the other holds its slots).
///
/// Errors: the lock is held (the message names the directory and the
/// holder's pid as written in the file) or cannot be opened (a directory
/// this user may not write: named with its owner and mode).
fn lock_rings(dir: &Path) -> Result<std::fs::File, String> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(LOCK_FILE);
    let open = |write: bool| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .create(write)
            .truncate(false)
            .mode(0o640)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
    };
    let (mut file, writable) = match open(true) {
        Ok(f) => (f, true),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => match open(false) {
            Ok(f) => (f, false),
            Err(_) => {
                use std::os::unix::fs::MetadataExt;
                let owner = std::fs::metadata(dir).map_or_else(
                    |e| format!("its owner and mode unknown: {e}"),
                    |m| {
                        format!(
                            "owned by uid {} gid {}, mode {:04o}",
                            m.uid(),
                            m.gid(),
                            m.mode() & 0o7777
                        )
                    },
                );
                // SAFETY: geteuid and getegid cannot fail; no memory passed.
                let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
                return Err(format!(
                    "--rings {}: lock {}: {e}: dplogd needs write access to the ring directory \
                     (it creates its lock and consumer files there); {} is {owner}, and this \
                     dplogd runs as uid {uid} gid {gid}",
                    dir.display(),
                    path.display(),
                    dir.display()
                ));
            }
        },
        Err(e) => {
            return Err(format!(
                "--rings {}: lock {}: {e}",
                dir.display(),
                path.display()
            ))
        }
    };
    // SAFETY: flock on a descriptor this function owns; no memory passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(format!(
                "--rings {}: lock {}: {e}",
                dir.display(),
                path.display()
            ));
        }
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let holder = match text.trim().parse::<u32>() {
            Ok(pid) => format!("pid {pid}"),
            Err(_) => "pid unknown".to_string(),
        };
        return Err(format!(
            "--rings {}: another dplogd ({holder}) serves this directory (it holds {}); one daemon per ring directory: stop it, or give this one another --rings",
            dir.display(),
            path.display()
        ));
    }
    if writable {
        let pid = format!("{}\n", std::process::id());
        let _ = file
            .set_len(0)
            .and_then(|_| std::os::unix::fs::FileExt::write_all_at(&file, pid.as_bytes(), 0));
    }
    Ok(file)
}

/// The smallest `block_max_age_ms` of the archive sinks in `cfg`; `None`
/// without one.
fn archive_age(cfg: &dplog::config::SinkConfig) -> Option<u64> {
    use dplog::config::SinkConfig;
    match cfg {
        SinkConfig::Archive(a) => Some(a.block_max_age_ms),
        SinkConfig::Set(v) => v.iter().filter_map(archive_age).min(),
        _ => None,
    }
}

fn ring_stats(r: &Ring, stopped: bool) -> RingStats {
    let [full, degraded, disconnected, ring_stopped] = r.dropped_by_reason;
    let attributed = [degraded, disconnected, ring_stopped]
        .into_iter()
        .fold(full, u64::saturating_add);
    RingStats {
        id: r.id,
        capacity: u64::from(r.reader.info().capacity),
        fill: r.reader.tail() - r.reader.head(),
        produced: r.reader.tail().saturating_add(r.dropped_reported),
        enqueued: r.reader.tail(),
        dropped_full: full.saturating_add(r.dropped_reported.saturating_sub(attributed)),
        dropped_degraded: degraded,
        dropped_disconnected: disconnected,
        dropped_stopped: ring_stopped,
        stopped,
        dequeued: r.dequeued,
        high_water: r.high_water,
        tail_polls: 0,
    }
}

/// The in-band line that ends a ring, in the output format's own shape,
/// every value escaped as a record's byte string is in that format
/// ([`Escape`]); returns whether it wrote one.
///
/// - `text`: `dplogd: producer of ring R (pid P) closed its ring after N
///   records` (`exited`, `had its ring quarantined`).
/// - `json`: `{"dplogd":"producer_closed","ring":"R","pid":P,"records":N}`
///   (`producer_exited`, `ring_quarantined`).
/// - `rfc5424`, `rfc3164`: a syslog message with the records' header
///   ([`SchemaFormatter::format_syslog_notice`]), MSGID `RING_CLOSED`
///   (severity 6), `RING_EXITED` (4) or `RING_QUARANTINED` (3), and the
///   parameters `ring`, `pid`, `records` (SD-ID `dplogRing@<enterprise>`).
/// - CSV, IPFIX, binary: nothing (a foreign line would corrupt them; the
///   caller says it on stderr, the counters count it).
#[allow(clippy::too_many_arguments)]
fn line(
    format: Format,
    fmt: &SchemaFormatter,
    buf: &mut Vec<u8>,
    reports: &mut Vec<Range<usize>>,
    file: &str,
    pid: u32,
    records: u64,
    how: Ending,
) -> bool {
    let (key, msgid, severity) = match how {
        Ending::Exited => ("producer_exited", "RING_EXITED", 4),
        Ending::Closed => ("producer_closed", "RING_CLOSED", 6),
        Ending::Quarantined => ("ring_quarantined", "RING_QUARANTINED", 3),
    };
    let start = buf.len();
    match format {
        Format::Json => {
            buf.extend_from_slice(format!("{{\"dplogd\":\"{key}\",\"ring\":\"").as_bytes());
            push_escaped(buf, file.as_bytes(), Escape::Json);
            buf.extend_from_slice(format!("\",\"pid\":{pid},\"records\":{records}}}\n").as_bytes());
        }
        Format::Text => text_end_line(buf, file, pid, records, how),
        Format::Rfc5424 | Format::Rfc3164 => {
            let time_ns = dplog_core::tsc::realtime_ns();
            let (pid, records) = (pid.to_string(), records.to_string());
            let params: [(&str, &[u8]); 3] = [
                ("ring", file.as_bytes()),
                ("pid", pid.as_bytes()),
                ("records", records.as_bytes()),
            ];
            fmt.format_syslog_notice(
                &SyslogNotice {
                    time_ns,
                    severity,
                    msgid,
                    sd_name: "dplogRing",
                    params: &params,
                },
                buf,
            );
        }
        _ => {}
    }
    if buf.len() > start {
        reports.push(start..buf.len());
        true
    } else {
        false
    }
}

/// The file of record type `name` when CSV goes to one file per type:
/// `path` with `.name` inserted before its extension (`out.csv` ->
/// `out.dnsQuery.csv`), or appended when it has none (`out` ->
/// `out.dnsQuery`). Type names are identifiers (letters, digits, `_`),
/// so the name adds no separator of its own.
fn typed_path(path: &Path, name: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let file = match path.extension() {
        Some(ext) => format!("{stem}.{name}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{name}"),
    };
    path.with_file_name(file)
}

/// The text format's end-of-ring line (see [`line()`]), the ring's name
/// escaped ([`Escape::Text`]).
fn text_end_line(buf: &mut Vec<u8>, file: &str, pid: u32, records: u64, how: Ending) {
    buf.extend_from_slice(b"dplogd: producer of ring ");
    push_escaped(buf, file.as_bytes(), Escape::Text);
    buf.extend_from_slice(
        format!(" (pid {pid}) {} after {records} records\n", how.words()).as_bytes(),
    );
}

/// `s` as stderr shows it: escaped as the text format escapes a byte
/// string ([`Escape::Text`]), so a name from a ring directory cannot
/// write a control sequence or a line of its own onto a terminal.
fn shown(s: &str) -> String {
    let mut v = Vec::with_capacity(s.len());
    push_escaped(&mut v, s.as_bytes(), Escape::Text);
    // Text escaping writes valid UTF-8 as is and every other byte as
    // `\xNN`: the result is UTF-8.
    String::from_utf8_lossy(&v).into_owned()
}

fn serve_metrics(
    addr: std::net::SocketAddr,
    snap: Arc<Mutex<Snapshot>>,
) -> Result<std::thread::JoinHandle<()>, String> {
    if !addr.ip().is_loopback() {
        return Err(format!("--metrics {addr}: not a loopback address"));
    }
    let server = tiny_http::Server::http(addr).map_err(|e| format!("--metrics {addr}: {e}"))?;
    std::thread::Builder::new()
        .name("dplogd-metrics".into())
        .spawn(move || {
            for req in server.incoming_requests() {
                let resp = if req.url() == "/metrics" {
                    let body = snap
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .to_prometheus();
                    tiny_http::Response::from_string(body)
                } else {
                    tiny_http::Response::from_string("not found\n").with_status_code(404)
                };
                let _ = req.respond(resp);
            }
        })
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
