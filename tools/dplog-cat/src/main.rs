//! `dplog-cat --format json FILE...`: decodes a dplog binary log (format
//! `binary`) into any other format on stdout, using the schemas stored in
//! the file with their writer's metadata (syslog layout, enum names,
//! fields shown only when; a log written before the metadata travelled
//! prints with the default layouts). A file truncated mid-record decodes up to the last whole
//! record; the byte offset where decoding stopped and why go to stderr and
//! the exit status is 3 (as `dplog-query`'s for damage). A binary log
//! starts with its `H` frame (`dplog_formatters::binary`): an input that
//! does not (a text log, any other file) is refused as not a dplog binary
//! log, exit status 1.
//!
//! **IPFIX.** `--format ipfix` exports each record type's fields with the
//! elements its log carries (IANA, or enterprise ids declared or derived
//! as the writer's metadata says). A log whose types would give one
//! enterprise element two meanings is refused (exit status 1, naming
//! both fields); `--ipfix-ie TYPE.FIELD=ID` declares a field's element for
//! this export, checked as a declaration is.
//!
//! Exit status: 0 every input decoded whole; 1 error (an input that is
//! unreadable or not a dplog log, a bad `--where`, template or
//! `--ipfix-ie`, a failed write); 2 the command line does not parse; 3 damaged input: what comes
//! before the damage (a binary log) or every undamaged block (an archive)
//! is printed and the damage named on stderr. 2 is left to the argument
//! parser so that a script can tell damage from a usage error.
//!
//! **Archives.** `dplog-cat DIR` on a directory of `archive` sink
//! segments (`seg-*.dpa`) prints their records in event-time order,
//! with the same `--format`, `--from`/`--to` and `--where`; a torn or
//! corrupt block is named on stderr (file and block), the rest printed,
//! and the exit status is 3. TSC fields print as wall time with the
//! calibration the archive kept for each record (the one in force when
//! it was written, as from the binary log); an archive of format
//! version 1 kept none, and its TSC fields print as ticks converted with
//! the identity.
//!
//! **Streaming.** The input is read and decoded frame by frame: memory
//! holds a 1 MiB read buffer plus one frame (at most 64 KiB), a 1 MiB
//! output buffer plus one formatted record, the log's schemas and their
//! compiled formats, whatever the log's size (a few MiB in all; a test
//! runs it under a 32 MiB address-space limit on a 48 MiB log). `-` reads
//! standard input (once, in the place it is given).
//!
//! **Selection.** `--from T` and `--to T` keep the records whose event
//! time (the schema's event-time field; TSC ticks converted with the
//! log's calibration) is at or after `--from` and before `--to`; `T` is
//! RFC 3339 UTC (`2026-01-01T00:00:00Z`, a fraction of up to 9 digits,
//! `Z` or `+00:00`) or an integer of nanoseconds since the epoch. Records
//! without an event time are left out when either is given. `--where
//! FIELD=VALUE` (repeatable, all must hold) keeps records that have a
//! field FIELD printing as VALUE in the text format's default converter
//! (an address as `10.0.0.1`, a time in ms since the epoch), or, for an
//! enum field, whose value's name is VALUE. A BYTES field's value is its
//! bytes up to the first NUL, compared byte for byte with VALUE as given
//! (unescaped: `qname=a b`, not the text format's `a\x20b`), as
//! `dplog-query --where` compares it; a VALUE longer than the field is an
//! error.
//!
//! **Drop reports** (binary `D` frames) are printed in the output format's
//! shape, as a logger writing that format prints them (the library's
//! `SchemaFormatter`: e.g. a text line, a JSON object, the binary frame);
//! for a format that has none, a line on stderr gives their count and the
//! records they report.
//! With `--where` they are left out; with `--from`/`--to` those placed on
//! the records' timeline outside the range are too.
//!
//! **Progress.** When standard error is a terminal and the input is
//! larger than 64 MiB (or standard input), a progress line (bytes read,
//! records written) is redrawn on it twice a second and cleared at the end.
//!
//! `--format text` prints every record type in the default `name=value`
//! layout unless given a template: `--template T` for the first record
//! type of the log, `--templates NAME=T` (repeatable) for the type whose
//! schema is called NAME — any record type, the NAT's or one declared in
//! Rust or through the C ABI (a NAME the log has no schema of is an error
//! that lists the log's schemas).
//!
//! `--time-precision s|ms|us|ns` and `--bytes text|hex|base64` render
//! time and BYTES fields in every output format as `[format]
//! time_precision` and `bytes` do for a logger (`docs/time-and-bytes.md`);
//! dplog-query takes the same two options.
//!
//! It also reads the segment files of the mmap sink (`<prefix>-<seq>.dpm`,
//! layout in `dplog_sinks::mmap`, read with the sink's own
//! `dplog_sinks::mmap::reader`): the 4096-byte header is checked (magic
//! `DPLOGMM1`, version 1, header length, segment size equal to the file's,
//! committed length inside the data area) and only the committed data is
//! used; a torn or foreign file is refused with the reason. Several files
//! (e.g. every segment of a directory, in sequence order) are read as one
//! stream. Committed data that is a binary log is decoded like a binary
//! file; formatted lines (text, JSON, ...) are printed as they are. Damage
//! in one of several inputs (segments or files) is named on stderr with
//! that file and the byte offset within it (for a segment: within its
//! committed data, and the file offset), the rest of that input is
//! skipped and decoding goes on with the next one (each segment starts
//! with its schemas); the exit status is then 3.
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

use std::collections::VecDeque;
use std::fs::File;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use dplog_core::schema::FieldKind;
use dplog_core::Formatter;
use dplog_core::{DropReport, Schema};
use dplog_formatters::binary::Frame;
use dplog_formatters::{
    BytesEncoding, Escape, Format, FormatSpec, Program, SchemaFormatter, TimePrecision,
    TscCalibration,
};
use dplog_sinks::archive;
use dplog_sinks::mmap::reader::{self, SegmentData};

mod stream;
use stream::{Chain, Frames, Next, Source, CHUNK};

#[derive(Parser)]
#[command(
    name = "dplog-cat",
    about = "Decode a dplog binary log or mmap sink segments into another format",
    after_help = "Exit status: 0 decoded whole; 1 error (an input unreadable or not a dplog log, a \
                  bad --where or template, a failed write); 2 bad command line; 3 damaged input: \
                  decoded up to the damage (a binary log) or its damaged blocks skipped (an \
                  archive), each named on stderr with its byte or block."
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
    /// How IPFIX element 230 (natEvent, RFC 8158) is numbered where a
    /// record type has it: rfc8158 (as recorded) or legacy (create 4
    /// printed as 1, delete 5 as 2). Logs without it are not affected.
    #[arg(long, default_value = "rfc8158", value_parser = |s: &str| EventProfile::from_name(s).ok_or_else(|| format!("unknown profile {s:?}; use rfc8158 or legacy")))]
    profile: EventProfile,
    /// Keep records whose event time is at or after T: RFC 3339 UTC
    /// (`2026-01-01T00:00:00.5Z`) or ns since the Unix epoch.
    #[arg(long, value_name = "T", value_parser = parse_time)]
    from: Option<u64>,
    /// Keep records whose event time is before T (as `--from`).
    #[arg(long, value_name = "T", value_parser = parse_time)]
    to: Option<u64>,
    /// Keep records with field FIELD printing as VALUE (its default text
    /// converter, or an enum value's name); repeat: all must hold.
    #[arg(long = "where", value_name = "FIELD=VALUE", value_parser = parse_where)]
    filters: Vec<(String, String)>,
    /// Time fields at this precision: s, ms, us or ns, in every output
    /// format (as `[format] time_precision`). Default: each format's
    /// own (ms for Unix times and RFC 3339).
    #[arg(long, value_name = "P")]
    time_precision: Option<TimePrecision>,
    /// BYTES fields as `text` (up to the first NUL, escaped), `hex` or
    /// `base64` (every byte), as `[format] bytes`.
    #[arg(long, value_name = "ENC", default_value = "text")]
    bytes: BytesEncoding,
    /// IPFIX element of one field (format ipfix), over the one its log
    /// declares or derives: `TYPE.FIELD=ID` with TYPE a record type (schema
    /// name) of the log; ID an IANA element id (1..=32767, checked against
    /// the field's type) or an enterprise element id as in a declaration,
    /// `0x8000|N` or its value 32768 + N in decimal (N 1..=32767, under
    /// the PEN; e.g. `0x8000|4001` or `36769`), or 0 for none (the
    /// field's enterprise element). Repeat for each field, once each; two
    /// fields of a type on one IANA element are refused. Resolves two
    /// record types whose fields would take one enterprise element
    /// (refused otherwise, naming both).
    #[arg(long = "ipfix-ie", value_name = "TYPE.FIELD=ID", value_parser = parse_ipfix_ie)]
    ipfix_ies: Vec<IpfixIe>,
    /// The binary log (`-`: standard input), or mmap segment files
    /// (`*.dpm`) read in the order given, or a directory of mmap segments
    /// (read in sequence order).
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

/// One `--ipfix-ie`: a field of a record type and the element it goes
/// out as.
#[derive(Clone, Debug)]
struct IpfixIe {
    schema: String,
    field: String,
    /// An IANA element id, or `ENTERPRISE_IE | id`.
    ie: u16,
}

/// `TYPE.FIELD=ID` of `--ipfix-ie`: ID decimal or `0x` hex, or
/// `0x8000|N` (`N` decimal or hex); an IANA id 1..=32767, an enterprise
/// id `0x8000 | 1..=32767`, or 0: no IANA element (the field goes out as
/// its enterprise element, as a declaration's `ie 0`).
fn parse_ipfix_ie(s: &str) -> Result<IpfixIe, String> {
    let bad = |why: &str| format!("{s:?} is not TYPE.FIELD=ID: {why}");
    let (target, id) = s.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let (schema, field) = target
        .split_once('.')
        .filter(|(t, f)| !t.is_empty() && !f.is_empty())
        .ok_or_else(|| bad("no record type and field before `=`"))?;
    let num = |t: &str| -> Option<u32> {
        let t = t.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(h) => u32::from_str_radix(h, 16).ok(),
            None => t.parse().ok(),
        }
    };
    let raw = match id.split_once('|') {
        Some((bit, n)) if num(bit) == Some(0x8000) => num(n)
            .filter(|n| (1..=0x7fff).contains(n))
            .map(|n| 0x8000 | n),
        Some(_) => None,
        None => num(id),
    };
    let ie = raw
        .filter(|&v| v != 0x8000 && v <= 0xffff)
        .ok_or_else(|| {
            bad("ID is an IANA element id 1..=32767, an enterprise one, 0x8000|N with N 1..=32767, or 0 for none (the field's enterprise element)")
        })?;
    Ok(IpfixIe {
        schema: schema.to_string(),
        field: field.to_string(),
        ie: ie as u16,
    })
}

/// The error for a field given more than one `--ipfix-ie` (which one
/// should win is not for dplog-cat to guess), if any.
fn twice_given(ies: &[IpfixIe]) -> Option<String> {
    ies.iter().enumerate().find_map(|(k, a)| {
        ies[..k]
            .iter()
            .find(|b| b.schema == a.schema && b.field == a.field)
            .map(|b| {
                let shown = |ie: u16| {
                    if ie & 0x8000 != 0 {
                        format!("0x8000|{}", ie & 0x7fff)
                    } else {
                        ie.to_string()
                    }
                };
                format!(
                    "--ipfix-ie {}.{} is given twice (={}, then ={}): give each field one element",
                    a.schema,
                    a.field,
                    shown(b.ie),
                    shown(a.ie)
                )
            })
    })
}

/// `s` with the `--ipfix-ie` elements of its fields: an IANA element
/// (checked against the field's type as a declaration is), or an
/// enterprise element id (checked against the schema's other fields).
fn with_ipfix_ies(s: &Schema, ies: &[IpfixIe]) -> Result<Schema, String> {
    use dplog_core::schema::{ENTERPRISE_IE, MAX_ENTERPRISE_IE};
    let mut out = s.clone();
    for o in ies.iter().filter(|o| o.schema == s.name()) {
        let at = |e: String| format!("--ipfix-ie {}.{}: {e}", o.schema, o.field);
        let Some(i) = out.fields().iter().position(|f| f.name == o.field) else {
            let names: Vec<&str> = out.fields().iter().map(|f| &*f.name).collect();
            return Err(at(format!(
                "record type {} has no such field (it has {})",
                o.schema,
                names.join(", ")
            )));
        };
        if o.ie & ENTERPRISE_IE != 0 {
            // Exported as an enterprise element with this id.
            if !out.may_be_enterprise(i) {
                out = set_field_ie(&out, i, 0).map_err(at)?;
            }
            out = out
                .with_ipfix_enterprise_ie(&o.field, o.ie & MAX_ENTERPRISE_IE)
                .map_err(|e| at(e.to_string()))?;
        } else {
            out = set_field_ie(&out, i, o.ie).map_err(at)?;
        }
    }
    // One IANA element per field of a type, as enterprise ids are (checked
    // once every option is applied: their order does not matter).
    for o in ies.iter().filter(|o| o.schema == s.name()) {
        if o.ie == 0 || o.ie & ENTERPRISE_IE != 0 {
            continue;
        }
        let at = |e: String| format!("--ipfix-ie {}.{}: {e}", o.schema, o.field);
        if let Some(f) = out
            .fields()
            .iter()
            .find(|f| f.name != o.field && f.ie_id == o.ie)
        {
            let name = dplog_core::schema::iana_element(o.ie).map_or("", |(n, _)| n);
            return Err(at(format!(
                "IANA element {}{} is already field {}'s in record type {}: a type's fields take one element each (give this one another, or 0 for an enterprise element of its own)",
                o.ie,
                if name.is_empty() { String::new() } else { format!(" ({name})") },
                f.name,
                o.schema
            )));
        }
    }
    Ok(out)
}

/// `s` with field `i`'s IANA element `ie` (0: none), validated as a
/// declaration: the element's type against the field's, the enterprise
/// ids of the other fields.
fn set_field_ie(s: &Schema, i: usize, ie: u16) -> Result<Schema, String> {
    let mut fields = s.fields().to_vec();
    fields[i].ie_id = ie;
    let mut meta = s.meta().clone();
    // A field with an IANA element has no enterprise id of its own.
    meta.ipfix_enterprise.explicit.retain(|&(j, _)| j != i);
    dplog_core::schema::Schema::new(s.id(), s.name().to_string(), s.size(), fields)
        .and_then(|n| n.with_meta(meta))
        .map_err(|e| e.to_string())
}

/// `FIELD=VALUE` of `--where`, split at the first `=`.
fn parse_where(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((f, v)) if !f.is_empty() => Ok((f.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not FIELD=VALUE")),
    }
}

/// `--from`/`--to`: RFC 3339 UTC or integer ns since the epoch.
fn parse_time(s: &str) -> Result<u64, String> {
    if let Ok(ns) = s.parse::<u64>() {
        return Ok(ns);
    }
    let bad = || {
        format!(
            "{s:?} is not a time: RFC 3339 UTC (2026-01-01T00:00:00Z, up to 9 fraction digits) or ns since the epoch"
        )
    };
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        s.get(r)
            .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(bad)
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut rest = &s[19..];
    let mut frac = 0u64;
    if let Some(r) = rest.strip_prefix('.') {
        let digits = r.bytes().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 || digits > 9 {
            return Err(bad());
        }
        frac = r[..digits].parse::<u64>().map_err(|_| bad())? * 10u64.pow(9 - digits as u32);
        rest = &r[digits..];
    }
    if !matches!(rest, "Z" | "z" | "+00:00" | "-00:00") {
        return Err(bad());
    }
    // In range: checked above.
    let days = dplog_formatters::civil::days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec;
    u64::try_from(secs)
        .map(|s| s * 1_000_000_000 + frac)
        .map_err(|_| bad())
}

/// The mmap segments of directory `dir`, in sequence order: files named
/// `<prefix>-<10 digits>.dpm` (temporary `.<name>.tmp` files of a segment
/// being created, and the writer's lock file, are not segments).
///
/// Errors (printed whole): an unreadable directory, no segment in it (an
/// archive directory without segments said as such), or segments of more
/// than one prefix (several logs).
fn dir_segments(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let at = |m: String| format!("{}: {m}", dir.display());
    let mut segs = reader::all_segments(dir).map_err(|e| at(e.to_string()))?;
    // A hidden name is not a log's segment.
    segs.retain(|(p, _, _)| !p.starts_with('.'));
    let mut prefixes: Vec<&str> = segs.iter().map(|(p, _, _)| p.as_str()).collect();
    prefixes.dedup();
    match prefixes.len() {
        // An archive's lock file without segments: an archive nothing
        // was written to yet (a logger that did not start, or wrote
        // nothing).
        0 if dir.join(".archive.lock").exists() => Err(at(
            "an archive directory with no segments yet: nothing was written to it".into(),
        )),
        0 => Err(at(
            "no mmap segments (<prefix>-<10 digits>.dpm) and no archive segments in this \
             directory"
                .into(),
        )),
        1 => Ok(segs.into_iter().map(|(_, _, p)| p).collect()),
        _ => Err(at(format!(
            "mmap segments of several logs (prefixes {}); give the segment files of one",
            prefixes.join(", ")
        ))),
    }
}

/// Why an input that does not start with an `H` frame is refused.
const NOT_A_LOG: &str = "not a dplog binary log (byte 0: no H frame; a binary log, as [format] \
                         type = \"binary\" writes it, starts with its H frame; dplog-cat also \
                         reads mmap segments and archive directories)";

/// What a file contributes to the stream.
enum Payload {
    /// A binary log file or an mmap segment's committed data, and the
    /// first bytes of it (up to 12, to classify it).
    Data(Source, Vec<u8>),
    /// A headerless mmap segment (empty or all zero): no record, skipped;
    /// the warning to print.
    Headerless(String),
}

/// Reads up to `n` bytes from the start of `r`.
fn peek(r: &mut dyn Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut b = Vec::with_capacity(n);
    r.take(n as u64).read_to_end(&mut b)?;
    Ok(b)
}

/// True if every byte `r` has left is zero (read in chunks).
fn all_zero(r: &mut dyn Read) -> std::io::Result<bool> {
    let mut b = vec![0u8; 64 * 1024];
    loop {
        let n = r.read(&mut b)?;
        if n == 0 {
            return Ok(true);
        }
        if b[..n].iter().any(|&x| x != 0) {
            return Ok(false);
        }
    }
}

/// What `path` contributes to the stream: a segment's committed data or
/// the whole file, checked without reading it whole. Errors are printed
/// whole (path and reason).
fn payload(path: &Path) -> Result<Payload, String> {
    let at = |m: String| format!("{}: {m}", path.display());
    // A log is a regular file of known length; reading a device or a FIFO
    // (/dev/zero) would never end (standard input is `-`).
    let meta = std::fs::metadata(path).map_err(|e| at(e.to_string()))?;
    if !meta.is_file() {
        return Err(at(
            "not a regular file (a dplog binary log or mmap segment is one)".into(),
        ));
    }
    let mut f = File::open(path).map_err(|e| at(e.to_string()))?;
    let first = peek(&mut f, reader::MAGIC.len()).map_err(|e| at(e.to_string()))?;
    if first == reader::MAGIC {
        let h = reader::read_header(path).map_err(|e| e.to_string())?;
        let src = Source::Segment(path.to_path_buf(), h.committed_bytes);
        let mut r = src.open().map_err(|e| e.to_string())?;
        let lead = peek(&mut r, 12).map_err(|e| at(e.to_string()))?;
        return Ok(Payload::Data(src, lead));
    }
    if path.extension().is_some_and(|e| e == "dpm") {
        let zero =
            first.iter().all(|&b| b == 0) && all_zero(&mut f).map_err(|e| at(e.to_string()))?;
        if zero {
            let what = if meta.len() == 0 {
                "empty".to_string()
            } else {
                format!("all {} bytes zero", meta.len())
            };
            return Ok(Payload::Headerless(at(format!(
                "skipped: mmap segment without a header ({what}): a crash cut its creation short; it holds no records"
            ))));
        }
        return Err(at(reader::SegmentError::NotASegment.to_string()));
    }
    if meta.len() == 0 {
        // A log a file sink created but has not written yet (it creates
        // the file before its first batch); a file with bytes that is no
        // log is refused.
        return Ok(Payload::Headerless(at(EMPTY_LOG.into())));
    }
    let mut lead = first;
    lead.extend(peek(&mut f, 4).map_err(|e| at(e.to_string()))?);
    Ok(Payload::Data(
        Source::File(path.to_path_buf(), meta.len()),
        lead,
    ))
}

/// What an empty file is said to be: a log not written yet, no records
/// (as `dplog-query import` says it).
const EMPTY_LOG: &str = "empty: no records (a log created and not written yet); skipped";

/// What an empty standard input is said to be.
const EMPTY_STDIN: &str = "empty: no records";

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

/// The progress line on a terminal's standard error.
struct Progress {
    on: bool,
    total: Option<u64>,
    next: Instant,
    shown: bool,
}

impl Progress {
    /// Inputs above this size (or of unknown size) show progress.
    const LARGE: u64 = 64 << 20;

    fn new(total: Option<u64>) -> Self {
        Self {
            on: std::io::stderr().is_terminal() && total.map_or(true, |t| t > Self::LARGE),
            total,
            next: Instant::now() + Duration::from_millis(500),
            shown: false,
        }
    }

    #[inline]
    fn tick(&mut self, read: u64, records: u64) {
        if !self.on || (records & 0xfff) != 0 {
            return;
        }
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + Duration::from_millis(500);
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let line = match self.total {
            Some(t) => format!(
                "dplog-cat: {:.0} of {:.0} MiB ({:.0} %), {records} records",
                mib(read),
                mib(t),
                100.0 * read as f64 / t.max(1) as f64
            ),
            None => format!("dplog-cat: {:.0} MiB, {records} records", mib(read)),
        };
        eprint!("\r{line}\x1b[K");
        self.shown = true;
    }

    fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            self.shown = false;
        }
    }
}

/// How one `--where` condition tests a record.
enum Test {
    /// The program printing the field, whose output must equal the value
    /// (`None`: the field cannot be printed, no record matches).
    Printed(Option<Box<Program>>),
    /// A BYTES field (offset, size): its value, the bytes up to the first
    /// NUL, must equal the value byte for byte (as `dplog-query`
    /// compares it; not the escaped text the format prints).
    Bytes(usize, usize),
    /// An enum field with names (offset, size), given by a name or a
    /// number: its value must be that number (a name is compared as
    /// declared, not as the format escapes it).
    EnumIs(usize, usize, u64),
}

/// `--where` compiled for one schema: per condition, its test.
struct Filter {
    /// Per condition: (test, value); `None` if the schema lacks a
    /// condition's field (no record of it matches).
    conds: Option<Vec<(Test, Vec<u8>)>>,
    /// The event-time field: (offset, TSC).
    time: Option<(usize, bool)>,
}

impl Filter {
    fn new(s: &Schema, wheres: &[(String, String)], opts: dplog_formatters::Options) -> Self {
        let time = s.meta().event_time.map(|i| {
            let f = &s.fields()[i];
            (f.offset as usize, f.kind == FieldKind::TscTimestamp)
        });
        let mut conds = Some(Vec::new());
        for (name, value) in wheres {
            let Some((i, f)) = s.field(name) else {
                conds = None;
                break;
            };
            if f.kind == FieldKind::Bytes {
                if let Some(v) = conds.as_mut() {
                    let t = Test::Bytes(f.offset as usize, f.size as usize);
                    v.push((t, value.as_bytes().to_vec()));
                }
                continue;
            }
            if f.kind == FieldKind::Enum && !f.enum_names.is_empty() {
                let n = f
                    .enum_value(value)
                    .map(u64::from)
                    .or_else(|| value.parse::<u64>().ok());
                match (n, conds.as_mut()) {
                    (Some(n), Some(v)) => {
                        let t = Test::EnumIs(f.offset as usize, f.size as usize, n);
                        v.push((t, Vec::new()));
                        continue;
                    }
                    // Neither a name nor a number of this type's field
                    // (another type's name): no record of it holds it.
                    _ => {
                        conds = None;
                        break;
                    }
                }
            }
            let mut p = Program::new(s, opts);
            let p = p
                .field(s, i, None, Escape::Text)
                .is_ok()
                .then(|| Box::new(p));
            if let Some(v) = conds.as_mut() {
                v.push((Test::Printed(p), value.as_bytes().to_vec()));
            }
        }
        Self { conds, time }
    }

    fn set_tsc_calibration(&mut self, cal: TscCalibration) {
        for (t, _) in self.conds.iter_mut().flatten() {
            if let Test::Printed(Some(p)) = t {
                p.set_tsc_calibration(cal);
            }
        }
    }

    /// The record's event time in ns, if its schema has one.
    fn time(&self, rec: &[u8], cal: &TscCalibration) -> Option<u64> {
        let (off, tsc) = self.time?;
        let v = u64::from_ne_bytes(rec.get(off..off + 8)?.try_into().ok()?);
        Some(if tsc { cal.to_ns(v) } else { v })
    }

    fn matches(&mut self, rec: &[u8], tmp: &mut Vec<u8>) -> bool {
        let Some(conds) = self.conds.as_mut() else {
            return false;
        };
        conds.iter_mut().all(|(t, want)| match t {
            Test::Printed(p) => p.as_mut().is_some_and(|p| {
                tmp.clear();
                p.run(rec, tmp) && tmp == want
            }),
            Test::Bytes(off, size) => rec
                .get(*off..*off + *size)
                .is_some_and(|f| dplog_formatters::conv::bytes_field_is(f, want)),
            Test::EnumIs(off, size, n) => {
                rec.len() >= *off + *size && dplog_core::schema::read_uint(rec, *off, *size) == *n
            }
        })
    }
}

/// `--where` conditions that can never hold in a log of `schemas`: a
/// field no record type has (a typo would otherwise print nothing and
/// look like "no such record"), an address that is not one, an enum
/// value that is neither a name nor a number of the field, a value
/// longer than a BYTES field.
fn check_wheres(schemas: &[&Schema], wheres: &[(String, String)]) -> Result<(), String> {
    for (name, value) in wheres {
        let fields: Vec<_> = schemas.iter().filter_map(|s| s.field(name)).collect();
        if fields.is_empty() {
            let mut all: Vec<&str> = schemas
                .iter()
                .flat_map(|s| s.fields().iter().map(|f| f.name.as_ref()))
                .collect();
            all.sort_unstable();
            all.dedup();
            return Err(format!(
                "--where {name}={value}: no record type of this log has a field {name:?}; its fields: {}",
                all.join(", ")
            ));
        }
        let fits = fields.iter().any(|(_, f)| match f.kind {
            FieldKind::Ipv4 => value.parse::<std::net::Ipv4Addr>().is_ok(),
            FieldKind::Ipv6 => value.parse::<std::net::Ipv6Addr>().is_ok(),
            FieldKind::Enum if !f.enum_names.is_empty() => {
                value.parse::<u64>().is_ok() || f.enum_value(value).is_some()
            }
            FieldKind::Bytes => value.len() <= f.size as usize,
            _ => true,
        });
        if !fits {
            let (_, f) = fields[0];
            return Err(format!(
                "--where {name}={value}: {value:?} is not a value of {name} ({})",
                match f.kind {
                    FieldKind::Ipv4 => "an IPv4 address such as 10.0.0.1".to_string(),
                    FieldKind::Ipv6 => "an IPv6 address".to_string(),
                    FieldKind::Bytes => format!(
                        "longer than the field's {} bytes: no record can hold it",
                        f.size
                    ),
                    _ => f.enum_names_hint(value),
                }
            ));
        }
    }
    Ok(())
}

/// The output side: the encoder (built at the first record, rebuilt when
/// a record of a schema id it lacks arrives), the selection, counts.
struct Output<'a> {
    args: &'a Args,
    spec: FormatSpec,
    /// Schemas in force (one per id, the last declared); the encoder is
    /// built for the first `built` of them (`enc` is `None` when one of
    /// those changed).
    schemas: Vec<Schema>,
    /// An archive's schemas that share an id with another of its
    /// schemas (segments of runs whose record types had other ids): each
    /// such schema as the archive declares it and the index of its copy
    /// in `schemas`, under an id of its own for the output (records are
    /// given that id before they are formatted). Empty for a binary log,
    /// whose records come under the table of their last `H` frame,
    /// which [`Output::schema`] follows.
    aliases: Vec<(Schema, usize)>,
    /// A record given its output id.
    renumbered: Vec<u8>,
    built: usize,
    /// The library's formatter: records, and drop reports in the format's
    /// own shape, exactly as a logger writes them.
    enc: Option<SchemaFormatter>,
    filters: Vec<Filter>,
    cal: TscCalibration,
    out: Vec<u8>,
    tmp: Vec<u8>,
    records: u64,
    selected: u64,
    /// Drop reports the output format carries none of, and their records.
    unshown_reports: (u64, u64),
}

impl<'a> Output<'a> {
    /// The output of `args`' format, before any record.
    fn new(args: &'a Args) -> Self {
        let mut spec = FormatSpec {
            kind: args.format.unwrap_or(Format::Text),
            template: args.template.clone(),
            templates: args.templates.iter().cloned().collect(),
            renumber: args.profile.renumber(),
            time_precision: args.time_precision,
            bytes: args.bytes,
            ..Default::default()
        };
        spec.ipfix.export_clock = dplog_formatters::ExportClock::Record;
        Output {
            args,
            spec,
            schemas: Vec::new(),
            aliases: Vec::new(),
            renumbered: Vec::new(),
            built: 0,
            enc: None,
            filters: Vec::new(),
            cal: TscCalibration::IDENTITY,
            out: Vec::with_capacity(CHUNK + (64 << 10)),
            tmp: Vec::new(),
            records: 0,
            selected: 0,
            unshown_reports: (0, 0),
        }
    }

    fn selecting(&self) -> bool {
        self.args.from.is_some() || self.args.to.is_some() || !self.args.filters.is_empty()
    }

    /// (Re)builds the encoder for `self.schemas`.
    fn build(&mut self) -> Result<(), String> {
        // Each schema as its log declares it: fields and the writer's
        // metadata (syslog layout, priorities, names by value).
        let refs: Vec<&Schema> = self.schemas.iter().collect();
        // Against the schemas known at the first record (a binary log's
        // first table, every schema of an archive): a later table that
        // lacks a field only has no record that matches.
        if self.enc.is_none() && self.built == 0 {
            check_wheres(&refs, &self.args.filters)?;
            if let Some(o) = self
                .args
                .ipfix_ies
                .iter()
                .find(|o| !refs.iter().any(|s| s.name() == o.schema))
            {
                let names: Vec<&str> = refs.iter().map(|s| s.name()).collect();
                return Err(format!(
                    "--ipfix-ie {}.{}: the log has no record type {} (it has {})",
                    o.schema,
                    o.field,
                    o.schema,
                    names.join(", ")
                ));
            }
        }
        let mut enc = if self.args.ipfix_ies.is_empty() {
            self.spec.formatter(&refs)
        } else {
            let declared = refs
                .iter()
                .map(|s| with_ipfix_ies(s, &self.args.ipfix_ies))
                .collect::<Result<Vec<Schema>, String>>()?;
            self.spec.formatter(&declared.iter().collect::<Vec<_>>())
        }
        .map_err(|e| e.to_string())?;
        enc.set_tsc_calibration(self.cal);
        let opts = self.spec.options();
        self.filters = refs
            .iter()
            .map(|s| {
                let mut f = Filter::new(s, &self.args.filters, opts);
                f.set_tsc_calibration(self.cal);
                f
            })
            .collect();
        self.enc = Some(enc);
        self.built = self.schemas.len();
        Ok(())
    }

    /// A schema of a binary log (an `S` frame). An id
    /// the output knows with another layout (a program restarted with its
    /// types registered in another order, appending to the same log: its
    /// `H` frame starts a new schema table) replaces the old one, and the
    /// encoder is rebuilt at the next record, so each record is printed
    /// under the schema its own part of the log declared (a CSV output
    /// gets a new header line there).
    fn schema(&mut self, s: &Schema) {
        match self.schemas.iter().position(|k| k.id() == s.id()) {
            None => self.schemas.push(s.clone()),
            Some(i) if self.schemas[i] != *s => {
                self.schemas[i] = s.clone();
                self.enc = None;
            }
            Some(_) => {}
        }
    }

    fn calibration(&mut self, cal: TscCalibration) {
        self.cal = cal;
        if let Some(e) = self.enc.as_mut() {
            e.set_tsc_calibration(cal);
        }
        for f in &mut self.filters {
            f.set_tsc_calibration(cal);
        }
    }

    /// Formats `rec` (of decoder schema `s`) if it is selected.
    fn record(&mut self, s: &Schema, rec: &[u8]) -> Result<(), String> {
        self.records += 1;
        // An archive's record of an id two of its schemas share: under its
        // own schema's output id.
        let mut renumbered = std::mem::take(&mut self.renumbered);
        let mut rec = rec;
        let alias = if self.aliases.iter().any(|(k, _)| k.id() == s.id()) {
            // (By layout, as the archive reader tells its schemas apart.)
            self.aliases
                .iter()
                .find(|(k, _)| k.id() == s.id() && k.fields() == s.fields())
                .map(|&(_, i)| i)
        } else {
            None
        };
        let i = match alias {
            Some(i) => {
                renumbered.clear();
                renumbered.extend_from_slice(rec);
                renumbered[2..4].copy_from_slice(&self.schemas[i].id().to_ne_bytes());
                rec = &renumbered;
                i
            }
            None => match self.schemas.iter().position(|k| k.id() == s.id()) {
                // The binary decoder hands a record only under a schema
                // the current table declared (`schema` saw it).
                Some(i) => i,
                None => {
                    self.schemas.push(s.clone());
                    self.schemas.len() - 1
                }
            },
        };
        let r = self.format(i, rec);
        self.renumbered = renumbered;
        r
    }

    /// Formats `rec`, of `self.schemas[i]`, if it is selected.
    fn format(&mut self, i: usize, rec: &[u8]) -> Result<(), String> {
        // Built at the first record, over the schemas of the preamble;
        // rebuilt if a later `S` frame brought a new id or another layout
        // for a known one.
        if self.enc.is_none() || i >= self.built {
            self.build()?;
        }
        if self.selecting() {
            let f = &mut self.filters[i];
            if self.args.from.is_some() || self.args.to.is_some() {
                let Some(t) = f.time(rec, &self.cal) else {
                    return Ok(());
                };
                if self.args.from.is_some_and(|from| t < from)
                    || self.args.to.is_some_and(|to| t >= to)
                {
                    return Ok(());
                }
            }
            if !self.args.filters.is_empty() && !f.matches(rec, &mut self.tmp) {
                return Ok(());
            }
        }
        self.selected += 1;
        self.enc
            .as_mut()
            .expect("built above")
            .push_bytes(rec, &mut self.out);
        Ok(())
    }

    /// The schemas of an archive, before its first record: one per id
    /// as they are; a schema whose id an earlier one of another layout
    /// has (the segments of runs whose record types had other ids) is
    /// given an id of its own, unused by any of `all`, for the output, so
    /// one encoder (one CSV header) serves every record.
    fn archive_schemas(&mut self, all: &[Schema]) -> Result<(), String> {
        for s in all {
            match self.schemas.iter().position(|k| k.id() == s.id()) {
                None => self.schemas.push(s.clone()),
                Some(i) if self.schemas[i].fields() == s.fields() => {}
                Some(_) => {
                    let used = |id: u16| {
                        all.iter().any(|k| k.id() == id)
                            || self.schemas.iter().any(|k| k.id() == id)
                    };
                    // Template ids of IPFIX start at 256.
                    let id = (256..=u16::MAX).find(|&id| !used(id)).ok_or_else(|| {
                        "the archive's schemas use every schema id: they cannot be told apart"
                            .to_string()
                    })?;
                    let copy = Schema::new(id, s.name().to_string(), s.size(), s.fields().to_vec())
                        .and_then(|c| c.with_meta(s.meta().clone()))
                        .map_err(|e| format!("schema {}: {e}", s.name()))?;
                    self.schemas.push(copy);
                    self.aliases.push((s.clone(), self.schemas.len() - 1));
                }
            }
        }
        // The first of each shared id is looked up like the others.
        for i in 0..self.aliases.len() {
            let id = self.aliases[i].0.id();
            if let Some(k) = self.schemas.iter().position(|k| k.id() == id) {
                if !self.aliases.iter().any(|(_, j)| *j == k) {
                    self.aliases.push((self.schemas[k].clone(), k));
                }
            }
        }
        Ok(())
    }

    fn drop_report(&mut self, r: &DropReport) {
        if !self.args.filters.is_empty() {
            return;
        }
        let t = r.record_time_ns;
        if t != 0
            && (self.args.from.is_some_and(|from| t < from)
                || self.args.to.is_some_and(|to| t >= to))
        {
            return;
        }
        if self.enc.is_none() && self.build().is_err() {
            self.unshown_reports.0 += 1;
            self.unshown_reports.1 += r.dropped;
            return;
        }
        // The logger's own shape for the format (nothing where the format
        // has none); the slot type does not matter for a report.
        let before = self.out.len();
        Formatter::<dplog_core::Slot128>::format_drop_report(
            self.enc.as_mut().expect("built above"),
            r,
            &mut self.out,
        );
        if self.out.len() == before {
            self.unshown_reports.0 += 1;
            self.unshown_reports.1 += r.dropped;
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(m) = twice_given(&args.ipfix_ies) {
        eprintln!("dplog-cat: {m}");
        return ExitCode::from(1);
    }
    if let [dir] = &args.files[..] {
        if dir.is_dir() {
            match archive::list_segments(dir) {
                Ok(segs) if !segs.is_empty() => return cat_archive(&args, dir),
                _ => {}
            }
        }
    }
    // Directories stand for their segments.
    let mut files = Vec::new();
    for f in &args.files {
        if f.as_os_str() == "-" {
            files.push(f.clone());
        } else if f.is_dir() {
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
    let mut sources = VecDeque::new();
    let mut segments = 0usize;
    // A binary segment (or file) came before; the first segment of
    // formatted lines.
    let (mut binary_before, mut lines_at) = (false, None);
    for f in &files {
        if f.as_os_str() == "-" {
            // Read as a binary log (checked by the decoder).
            binary_before = true;
            sources.push_back(Source::Stdin);
            continue;
        }
        match payload(f) {
            Ok(Payload::Headerless(warning)) => eprintln!("dplog-cat: {warning}"),
            Ok(Payload::Data(src, lead)) => {
                let seg = matches!(src, Source::Segment(..));
                if seg {
                    match reader::segment_data_kind(&lead) {
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
                    // The first of the stream must start a log (a later
                    // file may continue the one before it).
                    if !binary_before && !dplog_formatters::binary::may_start_log(&lead) {
                        eprintln!("dplog-cat: {}: {NOT_A_LOG}", f.display());
                        return ExitCode::from(1);
                    }
                    binary_before |= reader::starts_binary_log(&lead);
                }
                sources.push_back(src);
                segments += usize::from(seg);
            }
            Err(m) => {
                eprintln!("dplog-cat: {m}");
                return ExitCode::from(1);
            }
        }
    }
    let what = match (&args.files[..], &files[..]) {
        ([a], [f]) if !a.is_dir() => {
            if f.as_os_str() == "-" {
                "standard input".to_string()
            } else {
                f.display().to_string()
            }
        }
        ([a], _) if a.is_dir() => format!("{} ({} segments)", a.display(), files.len()),
        _ => format!("{} files", files.len()),
    };
    let total: Option<u64> = sources.iter().map(Source::len).sum();
    // Where each of several inputs starts in the stream (all of known
    // length: files and segments), to name the file of a damage and go on
    // after it; a single input stops at its damage.
    let bounds: Option<Vec<(Source, u64)>> = total.filter(|_| sources.len() > 1).map(|_| {
        let mut at = 0;
        sources
            .iter()
            .map(|src| {
                let start = at;
                at += src.len().unwrap_or(0);
                (src.clone(), start)
            })
            .collect()
    });
    let mut chain = Chain {
        sources,
        cur: None,
        read: 0,
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
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match chain.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    eprintln!("dplog-cat: {e}");
                    return ExitCode::from(1);
                }
            };
            if let Err(e) = stdout.write_all(&buf[..n]) {
                return output_failed(e);
            }
        }
        if let Err(e) = stdout.flush() {
            return output_failed(e);
        }
        return ExitCode::SUCCESS;
    }
    let mut o = Output::new(&args);
    let mut progress = Progress::new(total);
    let mut frames = Frames::new(chain);
    let mut stdout = std::io::stdout().lock();
    let mut damaged = 0usize;
    let stopped = loop {
        let next = match frames.next() {
            Ok(n) => n,
            Err(e) => {
                progress.clear();
                eprintln!("dplog-cat: {e}");
                return ExitCode::from(1);
            }
        };
        let r = match next {
            Next::End => break None,
            // Standard input (a file is checked before this).
            Next::NotALog => {
                progress.clear();
                eprintln!("dplog-cat: {what}: {NOT_A_LOG}");
                return ExitCode::from(1);
            }
            Next::Stopped(off, reason) => {
                let Some(bounds) = &bounds else {
                    break Some((off, reason));
                };
                // Name the input and the offset within it, then go on at
                // the next input (each segment starts with its schemas).
                progress.clear();
                damaged += 1;
                let i = bounds.partition_point(|(_, start)| *start <= off).max(1) - 1;
                let (src, start) = &bounds[i];
                let end = start + src.len().unwrap_or(0);
                let next = bounds.get(i + 1).map(|(n, _)| n.path());
                eprintln!(
                    "dplog-cat: {}: {}; {}",
                    src.path(),
                    src.damage_at(off - start, &reason),
                    match &next {
                        Some(n) => format!("the rest of it skipped, going on with {n}"),
                        None => "the rest of it skipped (the last input)".to_string(),
                    }
                );
                if next.is_none() {
                    break None;
                }
                if let Err(e) = frames.skip_to(end) {
                    eprintln!("dplog-cat: {e}");
                    return ExitCode::from(1);
                }
                Ok(())
            }
            Next::Record(schema, rec) => o.record(schema, rec),
            Next::Frame(Frame::Calibration(c)) => {
                o.calibration(c);
                Ok(())
            }
            Next::Frame(Frame::DropReport(r)) => {
                o.drop_report(&r);
                Ok(())
            }
            Next::Schema(schema) => {
                o.schema(schema);
                Ok(())
            }
            Next::Frame(Frame::Header | Frame::Schema(_) | Frame::Record(..)) => Ok(()),
        };
        if let Err(e) = r {
            progress.clear();
            eprintln!("dplog-cat: {e}");
            return ExitCode::from(1);
        }
        if o.out.len() >= CHUNK {
            if let Err(e) = stdout.write_all(&o.out) {
                progress.clear();
                return output_failed(e);
            }
            o.out.clear();
        }
        progress.tick(frames.input.read, o.records);
    };
    progress.clear();
    if let Err(e) = stdout.write_all(&o.out).and_then(|_| stdout.flush()) {
        return output_failed(e);
    }
    // Nothing came at all: said as for an empty file (files are checked,
    // and said, before the stream is read).
    if frames.input.read == 0 && files.iter().any(|f| f.as_os_str() == "-") {
        eprintln!("dplog-cat: standard input: {EMPTY_STDIN}");
    }
    if o.unshown_reports.0 > 0 {
        eprintln!(
            "dplog-cat: the log holds {} drop report(s) of {} record(s) in all; {} output carries no drop reports",
            o.unshown_reports.0,
            o.unshown_reports.1,
            o.spec.kind.name()
        );
    }
    if damaged > 0 {
        eprintln!(
            "dplog-cat: {what}: {damaged} damaged input(s), named above; decoded {} whole records",
            o.records
        );
        return ExitCode::from(3);
    }
    match stopped {
        None => ExitCode::SUCCESS,
        Some((offset, reason)) => {
            let of = if segments > 0 {
                "of the committed data"
            } else {
                "of"
            };
            let total = total.map_or_else(|| "the input".to_string(), |t| t.to_string());
            eprintln!(
                "dplog-cat: {what}: stopped at byte {offset} {of} {total}: {reason}; decoded {} whole records",
                o.records
            );
            ExitCode::from(3)
        }
    }
}

/// An archive directory (the `archive` sink's segments): its records in
/// event-time order, through the same output and selection as a binary
/// log, each formatted with the TSC calibration the archive kept for it
/// (as a binary log's `C` frames). `--from`/`--to` also choose the
/// segments read (unless a record type has a TSC event time: the archive
/// orders those by ticks, so every segment is read and the records
/// selected by their converted time). Damage (a torn or corrupt block, a
/// bad footer) is reported on stderr with its file and block, the rest
/// is printed, and the exit status is 3.
fn cat_archive(args: &Args, dir: &Path) -> ExitCode {
    let mut ar = match archive::ArchiveReader::open(dir) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("dplog-cat: {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    };
    let mut o = Output::new(args);
    let mut tsc_time = false;
    let all = ar.schemas();
    for s in &all {
        tsc_time |= s
            .meta()
            .event_time
            .is_some_and(|i| s.fields()[i].kind == FieldKind::TscTimestamp);
    }
    if let Err(e) = o.archive_schemas(&all) {
        eprintln!("dplog-cat: {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    let (from, to) = if tsc_time {
        (0, u64::MAX)
    } else {
        (
            args.from.unwrap_or(0),
            args.to.map_or(u64::MAX, |t| t.saturating_sub(1)),
        )
    };
    let mut stdout = std::io::stdout().lock();
    let mut failed: Option<ExitCode> = None;
    let r = ar.for_each_calibrated(from, to, |schema, rec, cal| {
        // Records without a TSC field print the same with any: the
        // output keeps the calibration of the last one that has.
        if cal != o.cal && archive::format::has_tsc(schema) {
            o.calibration(cal);
        }
        if let Err(e) = o.record(schema, rec) {
            eprintln!("dplog-cat: {e}");
            failed = Some(ExitCode::from(1));
            return false;
        }
        if o.out.len() >= CHUNK {
            if let Err(e) = stdout.write_all(&o.out) {
                failed = Some(output_failed(e));
                return false;
            }
            o.out.clear();
        }
        true
    });
    if let Some(code) = failed {
        return code;
    }
    if let Err(e) = r {
        eprintln!("dplog-cat: {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    if let Err(e) = stdout.write_all(&o.out).and_then(|_| stdout.flush()) {
        return output_failed(e);
    }
    // (A segment that cannot be opened is met when the reader opens and
    // again when it reads: named once.)
    let mut named: Vec<&archive::Problem> = Vec::new();
    for p in ar.problems() {
        if !named.contains(&p) {
            eprintln!("dplog-cat: {p}");
            named.push(p);
        }
    }
    if ar.problems().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    }
}

/// How the natEvent field (IANA IPFIX element 230, RFC 8158) is printed:
/// the recorded numbers, or the historic ones older collectors expect.
/// A number rule on an element, not a schema: it applies to any log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventProfile {
    /// RFC 8158 numbers as recorded.
    Rfc8158,
    /// Session create 4 printed as 1, delete 5 as 2.
    Legacy,
}

impl EventProfile {
    fn from_name(s: &str) -> Option<Self> {
        match s {
            "rfc8158" => Some(EventProfile::Rfc8158),
            "legacy" => Some(EventProfile::Legacy),
            _ => None,
        }
    }

    /// The formatters' renumbering for this profile.
    fn renumber(self) -> Option<dplog_formatters::Renumber> {
        match self {
            EventProfile::Rfc8158 => None,
            EventProfile::Legacy => Some(dplog_formatters::Renumber::new(230, &[(4, 1), (5, 2)])),
        }
    }
}
