//! `dplog-cat --format json FILE...`: decodes a dplog binary log (format
//! `binary`) into any other format on stdout, using the schemas stored in
//! the file. A file truncated mid-record decodes up to the last whole
//! record; the byte offset where decoding stopped and why go to stderr and
//! the exit status is 2. Exit status 1: unreadable file or bad options.
//!
//! `--format text` prints every record type in the default `name=value`
//! layout unless given a template: `--template T` for the first record
//! type of the log, `--templates NAME=T` (repeatable) for the type whose
//! schema is called NAME — any record type, the NAT's or one declared in
//! Rust or through the C ABI (a NAME the log has no schema of is an error
//! that lists the log's schemas).
//!
//! It also reads the segment files of the mmap sink (`<prefix>-<seq>.dpm`,
//! layout in `dplog_sinks::mmap`, read with the sink's own
//! `dplog_sinks::mmap::reader`): the 4096-byte header is checked (magic
//! `DPLOGMM1`, version 1, header length, segment size equal to the file's,
//! committed length inside the data area) and only the committed data is
//! used; a torn or foreign file is refused with the reason. Several files
//! (e.g. every segment of a directory, in sequence order) are read as one
//! stream. Committed data that is a binary log is decoded like a binary
//! file; formatted lines (text, JSON, ...) are printed as they are.
//!
//! A directory stands for the mmap segments in it (`<prefix>-<10
//! digits>.dpm`, in sequence order; one prefix). A segment file that is
//! empty or all zero is headerless: a crash cut its creation short (an
//! older dplog, or a power loss) and it holds no record; it is skipped
//! with a warning on stderr, and the rest decodes (exit status 0).
//!
//! Each segment of a binary log starts with the schema preamble (`H` and
//! `S` frames), so a segment decodes alone and segments decode in any
//! order. A segment of binary frames without the preamble (written by a
//! dplog that kept the schemas only in the first segment) decodes only
//! after the segments before it; given without a binary segment before it
//! it is refused with that reason (exit 1), and so is a mix of binary and
//! formatted-line segments.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use dplog_formatters::{binary, Format, FormatSpec};
use dplog_schema_nat::EventProfile;
use dplog_sinks::mmap::reader::{self, SegmentData};

#[derive(Parser)]
#[command(
    name = "dplog-cat",
    about = "Decode a dplog binary log or mmap sink segments into another format"
)]
struct Args {
    /// Output format: text, json, csv, rfc5424, rfc3164, ipfix, binary.
    /// Default text. Only for binary logs (mmap segments of formatted
    /// lines are printed as they are).
    #[arg(long)]
    format: Option<Format>,
    /// Text template (format text), applied to the first schema.
    #[arg(long)]
    template: Option<String>,
    /// Text template for one record type, `NAME=TEMPLATE` with NAME a
    /// schema name of the log (e.g. `aclDrop={ruleId} {dropReason:name}`);
    /// repeat for each type. Over `--template` for that type; types
    /// without one print the default layout.
    #[arg(long = "templates", value_name = "NAME=TEMPLATE", value_parser = parse_named_template)]
    templates: Vec<(String, String)>,
    /// natEvent numbering: rfc8158 or legacy.
    #[arg(long, default_value = "rfc8158", value_parser = |s: &str| EventProfile::from_name(s).ok_or_else(|| format!("unknown profile {s:?}; use rfc8158 or legacy")))]
    profile: EventProfile,
    /// The binary log, or mmap segment files (`*.dpm`) read in the order
    /// given, or a directory of mmap segments (read in sequence order).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// `NAME=TEMPLATE` of `--templates`, split at the first `=`.
fn parse_named_template(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, t)) if !name.is_empty() && !t.is_empty() => {
            Ok((name.to_string(), t.to_string()))
        }
        _ => Err(format!(
            "{s:?} is not NAME=TEMPLATE (a schema name, `=`, a non-empty template)"
        )),
    }
}

/// The mmap segments of directory `dir`, in sequence order: files named
/// `<prefix>-<10 digits>.dpm` (temporary `.<name>.tmp` files of a segment
/// being created, and the writer's lock file, are not segments).
///
/// Errors (printed whole): an unreadable directory, no segment in it, or
/// segments of more than one prefix (several logs).
fn dir_segments(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let at = |m: String| format!("{}: {m}", dir.display());
    let mut segs = reader::all_segments(dir).map_err(|e| at(e.to_string()))?;
    // A hidden name is not a log's segment.
    segs.retain(|(p, _, _)| !p.starts_with('.'));
    let mut prefixes: Vec<&str> = segs.iter().map(|(p, _, _)| p.as_str()).collect();
    prefixes.dedup();
    match prefixes.len() {
        0 => Err(at(
            "no mmap segments (<prefix>-<10 digits>.dpm) in this directory".into(),
        )),
        1 => Ok(segs.into_iter().map(|(_, _, p)| p).collect()),
        _ => Err(at(format!(
            "mmap segments of several logs (prefixes {}); give the segment files of one",
            prefixes.join(", ")
        ))),
    }
}

/// What a file contributes to the stream.
enum Payload {
    /// A segment's committed data (`true`) or a whole binary log file.
    Data(Vec<u8>, bool),
    /// A headerless mmap segment (empty or all zero): no record, skipped;
    /// the warning to print.
    Headerless(String),
}

/// The bytes `path` contributes to the stream: a segment's committed data
/// or the whole file. Errors are printed whole (path and reason).
fn payload(path: &Path) -> Result<Payload, String> {
    let at = |m: String| format!("{}: {m}", path.display());
    // A log is a regular file of known length; reading a device or a FIFO
    // (/dev/zero) whole would never end.
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            return Err(at(
                "not a regular file (a dplog binary log or mmap segment is one)".into(),
            ))
        }
        _ => {}
    }
    let bytes = std::fs::read(path).map_err(|e| at(e.to_string()))?;
    if bytes.starts_with(reader::MAGIC) {
        let data = reader::committed_data(&bytes)
            .map_err(|e| at(e.to_string()))?
            .to_vec();
        return Ok(Payload::Data(data, true));
    }
    if path.extension().is_some_and(|e| e == "dpm") {
        if bytes.iter().all(|&b| b == 0) {
            let what = if bytes.is_empty() {
                "empty".to_string()
            } else {
                format!("all {} bytes zero", bytes.len())
            };
            return Ok(Payload::Headerless(at(format!(
                "skipped: mmap segment without a header ({what}): a crash cut its creation short; it holds no records"
            ))));
        }
        return Err(at(reader::SegmentError::NotASegment.to_string()));
    }
    Ok(Payload::Data(bytes, false))
}

/// A failed write of the output: a reader that went away (`dplog-cat … |
/// head`) ends the run quietly and successfully, as a pipeline expects;
/// any other error is reported, exit 1.
fn output_failed(e: std::io::Error) -> ExitCode {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("dplog-cat: writing the output: {e}");
    ExitCode::from(1)
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Directories stand for their segments.
    let mut files = Vec::new();
    for f in &args.files {
        if f.is_dir() {
            match dir_segments(f) {
                Ok(v) => files.extend(v),
                Err(m) => {
                    eprintln!("dplog-cat: {m}");
                    return ExitCode::from(1);
                }
            }
        } else {
            files.push(f.clone());
        }
    }
    let mut bytes = Vec::new();
    let mut segments = 0usize;
    // A binary segment (or file) came before; the first segment of
    // formatted lines.
    let (mut binary_before, mut lines_at) = (false, None);
    for f in &files {
        match payload(f) {
            Ok(Payload::Headerless(warning)) => eprintln!("dplog-cat: {warning}"),
            Ok(Payload::Data(b, seg)) => {
                if seg {
                    match reader::segment_data_kind(&b) {
                        SegmentData::Empty => {}
                        SegmentData::Binary => binary_before = true,
                        SegmentData::Headless if !binary_before => {
                            eprintln!(
                                "dplog-cat: {}: binary frames without the schema preamble: this mmap segment continues an earlier one (written by a dplog that kept the schemas only in the first segment); give it after the segments before it, from the first",
                                f.display()
                            );
                            return ExitCode::from(1);
                        }
                        SegmentData::Headless => {}
                        SegmentData::Lines => {
                            lines_at.get_or_insert(f);
                        }
                    }
                    if let (true, Some(l)) = (binary_before, lines_at) {
                        eprintln!(
                            "dplog-cat: {} holds formatted lines and {} a binary log; give the segments of one log",
                            l.display(),
                            if std::ptr::eq(l, f) { "an earlier segment" } else { "a later segment" }
                        );
                        return ExitCode::from(1);
                    }
                } else {
                    binary_before |= reader::starts_binary_log(&b);
                }
                bytes.extend_from_slice(&b);
                segments += usize::from(seg);
            }
            Err(m) => {
                eprintln!("dplog-cat: {m}");
                return ExitCode::from(1);
            }
        }
    }
    let what = match (&args.files[..], &files[..]) {
        ([a], [f]) if !a.is_dir() => f.display().to_string(),
        ([a], _) if a.is_dir() => format!("{} ({} segments)", a.display(), files.len()),
        _ => format!("{} files", files.len()),
    };
    if lines_at.is_some() {
        // Formatted lines: nothing to decode.
        if let Some(f) = args.format {
            eprintln!(
                "dplog-cat: {what}: the mmap segment holds formatted lines, not a binary log; --format {} cannot convert them (leave it out to print them as they are)",
                f.name()
            );
            return ExitCode::from(1);
        }
        let mut stdout = std::io::stdout().lock();
        if let Err(e) = stdout.write_all(&bytes).and_then(|_| stdout.flush()) {
            return output_failed(e);
        }
        return ExitCode::SUCCESS;
    }
    let d = binary::decode(&bytes);
    // Every segment repeats the schemas: each id once (the first seen).
    // The preamble carries layouts only; a schema of a known package (the
    // NAT's) is formatted with that package's metadata (its syslog layout,
    // conditional fields), as the program that wrote the log did.
    let mut schemas: Vec<&dplog_core::Schema> = Vec::new();
    for s in &d.schemas {
        if !schemas.iter().any(|k| k.id() == s.id()) {
            schemas.push(known_schema(s).unwrap_or(s));
        }
    }
    let mut spec = FormatSpec {
        kind: args.format.unwrap_or(Format::Text),
        template: args.template,
        templates: args.templates.into_iter().collect(),
        renumber: args.profile.renumber(),
        ..Default::default()
    };
    spec.ipfix.export_clock = dplog_formatters::ExportClock::Record;
    let mut out = Vec::with_capacity(1 << 20);
    if !schemas.is_empty() {
        let mut enc = match spec.encoder(&schemas) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("dplog-cat: {e}");
                return ExitCode::from(1);
            }
        };
        let mut stdout = std::io::stdout().lock();
        for (_, rec) in &d.records {
            enc.push(rec, &mut out);
            if out.len() >= 1 << 20 && spec.kind != Format::Ipfix {
                if let Err(e) = stdout.write_all(&out) {
                    return output_failed(e);
                }
                out.clear();
            }
        }
        if let Err(e) = stdout.write_all(&out).and_then(|_| stdout.flush()) {
            return output_failed(e);
        }
    }
    match d.stopped {
        None => ExitCode::SUCCESS,
        Some(s) => {
            let of = if segments > 0 {
                "of the committed data"
            } else {
                "of"
            };
            eprintln!(
                "dplog-cat: {what}: stopped at byte {} {of} {}: {}; decoded {} whole records",
                s.offset,
                bytes.len(),
                s.reason,
                d.records.len()
            );
            ExitCode::from(2)
        }
    }
}

/// The schema of a known package with the same id, name and fields as
/// `s` (read from a log's preamble), which also has the package's
/// metadata.
fn known_schema(s: &dplog_core::Schema) -> Option<&'static dplog_core::Schema> {
    dplog_schema_nat::by_id(s.id())
        .filter(|k| k.name() == s.name() && k.size() == s.size() && k.fields() == s.fields())
}
