//! `dplog-cat --format json FILE`: decodes a dplog binary file (format
//! `binary`) into any other format on stdout, using the schemas stored in
//! the file. A file truncated mid-record decodes up to the last whole
//! record; the byte offset where decoding stopped and why go to stderr and
//! the exit status is 2. Exit status 1: unreadable file or bad options.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use dplog_formatters::{binary, EventProfile, Format, FormatSpec};

#[derive(Parser)]
#[command(
    name = "dplog-cat",
    about = "Decode a dplog binary log into another format"
)]
struct Args {
    /// Output format: text, json, csv, rfc5424, rfc3164, ipfix, binary.
    #[arg(long, default_value = "text")]
    format: Format,
    /// Text template (format text), applied to the first schema.
    #[arg(long)]
    template: Option<String>,
    /// natEvent numbering: rfc8158 or legacy.
    #[arg(long, default_value = "rfc8158", value_parser = |s: &str| EventProfile::from_name(s).ok_or_else(|| format!("unknown profile {s:?}; use rfc8158 or legacy")))]
    profile: EventProfile,
    /// The binary file.
    file: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // A binary log is a regular file of known length; reading a device or a
    // FIFO (/dev/zero) whole would never end.
    match std::fs::metadata(&args.file) {
        Ok(m) if !m.is_file() => {
            eprintln!(
                "dplog-cat: {}: not a regular file (a dplog binary log is one)",
                args.file.display()
            );
            return ExitCode::from(1);
        }
        _ => {}
    }
    let bytes = match std::fs::read(&args.file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("dplog-cat: {}: {e}", args.file.display());
            return ExitCode::from(1);
        }
    };
    let d = binary::decode(&bytes);
    let schemas: Vec<&dplog_core::Schema> = d.schemas.iter().collect();
    let mut spec = FormatSpec {
        kind: args.format,
        template: args.template,
        profile: args.profile,
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
                    eprintln!("dplog-cat: writing the output: {e}");
                    return ExitCode::from(1);
                }
                out.clear();
            }
        }
        if let Err(e) = stdout.write_all(&out).and_then(|_| stdout.flush()) {
            eprintln!("dplog-cat: writing the output: {e}");
            return ExitCode::from(1);
        }
    }
    match d.stopped {
        None => ExitCode::SUCCESS,
        Some(s) => {
            eprintln!(
                "dplog-cat: {}: stopped at byte {} of {}: {}; decoded {} whole records",
                args.file.display(),
                s.offset,
                bytes.len(),
                s.reason,
                d.records.len()
            );
            ExitCode::from(2)
        }
    }
}
