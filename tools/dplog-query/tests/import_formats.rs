//! Importing binary and mmap logs into an archive; answers in every
//! dplog format; the configuration that writes an archive.

use std::path::Path;
use std::process::Command;

use dplog_core::Schema;
use dplog_formatters::{Format, FormatSpec};

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

/// dplog-nat (in this process) with a `[[sink]]` set from `sinks`.
fn nat(sinks: &str, packets: u64) {
    let toml = format!(
        "[format]\ntype = \"binary\"\n{sinks}\n[synthetic]\npackets = {packets}\nrate_pps = 5000\n\
         [nat]\nudp_timeout_s = 1\ntcp_transitory_timeout_s = 1\ntcp_established_timeout_s = 2\n"
    );
    let cfg = dplog_nat::app::AppConfig::from_toml_str(&toml).unwrap();
    let s = dplog_nat::app::run(&cfg).unwrap();
    assert_eq!(s.records.written, s.records.produced);
}

/// The records of binary log `bin` in `format`, sorted by line (for
/// line formats) as dplog-cat prints them.
fn formatted(bin: &Path, format: Format) -> Vec<u8> {
    let bytes = std::fs::read(bin).unwrap();
    let d = dplog_formatters::binary::decode(&bytes);
    assert!(d.stopped.is_none());
    let mut schemas: Vec<&Schema> = Vec::new();
    for s in &d.schemas {
        if !schemas.iter().any(|k| k.id() == s.id()) {
            schemas.push(s);
        }
    }
    let mut enc = FormatSpec {
        kind: format,
        ..Default::default()
    }
    .encoder(&schemas)
    .unwrap();
    let mut out = Vec::new();
    for (_, r) in &d.records {
        enc.push(r, &mut out);
    }
    out
}

fn sorted_lines(b: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(b)
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn binary_and_mmap_logs_import_into_an_archive() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir(p.join("mm")).unwrap();
    nat(
        &format!(
            "[[sink]]\ntype = \"file\"\npath = \"{}\"\n[[sink]]\ntype = \"mmap\"\ndir = \"{}\"\nsegment_bytes = 65536\n",
            p.join("nat.bin").display(),
            p.join("mm").display()
        ),
        30000,
    );
    let want = sorted_lines(&formatted(&p.join("nat.bin"), Format::Json));
    assert!(want.len() > 5000);
    for (name, input) in [("a1", p.join("nat.bin")), ("a2", p.join("mm"))] {
        let arch = p.join(name);
        std::fs::create_dir(&arch).unwrap();
        let (code, _, err) = run(&[
            "import",
            "--archive",
            arch.to_str().unwrap(),
            "--segment-interval-ms",
            "1000",
            input.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains(&format!("imported {} records", want.len())),
            "{err}"
        );
        assert!(dplog_sinks::archive::list_segments(&arch).unwrap().len() >= 5);
        let (code, out, err) = run(&[
            "--archive",
            arch.to_str().unwrap(),
            "--format",
            "json",
            "--between",
            "0",
            "4000000000000",
        ]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(sorted_lines(&out), want, "import of {}", input.display());
    }
    // A log cut inside its last record: the records before it.
    let bin = std::fs::read(p.join("nat.bin")).unwrap();
    std::fs::write(p.join("cut.bin"), &bin[..bin.len() - 10]).unwrap();
    std::fs::create_dir(p.join("a4")).unwrap();
    let (code, _, err) = run(&[
        "import",
        "--archive",
        p.join("a4").to_str().unwrap(),
        p.join("cut.bin").to_str().unwrap(),
    ]);
    // Records were lost: exit status 3, as for a damaged archive.
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("cut inside the frame"), "{err}");
    assert!(
        err.contains(&format!("imported {} records", want.len() - 1)),
        "{err}"
    );
    // Not a binary log.
    std::fs::write(p.join("text.log"), "natEvent=4\n").unwrap();
    std::fs::create_dir(p.join("a3")).unwrap();
    let (code, _, err) = run(&[
        "import",
        "--archive",
        p.join("a3").to_str().unwrap(),
        p.join("text.log").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a dplog binary log"), "{err}");
}

#[test]
fn answers_come_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir(p.join("arch")).unwrap();
    nat(
        &format!(
            "[[sink]]\ntype = \"archive\"\ndir = \"{}\"\n[[sink]]\ntype = \"file\"\npath = \"{}\"\n",
            p.join("arch").display(),
            p.join("nat.bin").display()
        ),
        3000,
    );
    let arch = p.join("arch");
    for (name, format) in [
        ("text", Format::Text),
        ("json", Format::Json),
        ("csv", Format::Csv),
        ("rfc5424", Format::Rfc5424),
        ("rfc3164", Format::Rfc3164),
    ] {
        let (code, out, err) = run(&[
            "--archive",
            arch.to_str().unwrap(),
            "--format",
            name,
            "--between",
            "0",
            "4000000000000",
        ]);
        assert_eq!(code, 0, "{name}: {err}");
        let want = formatted(&p.join("nat.bin"), format);
        let (mut a, mut b) = (sorted_lines(&out), sorted_lines(&want));
        // Syslog lines carry the time they were written and the writer's
        // pid (PROCID; RFC 3164's TAG[pid]): compare from after the pid.
        if name.starts_with("rfc") {
            let cut = |v: &mut Vec<String>| {
                for l in v.iter_mut() {
                    let rest = l.split_once(" NAT").map_or(l.clone(), |x| x.1.to_string());
                    let rest = rest.trim_start_matches(['[', ' ']);
                    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
                    *l = rest.to_string();
                }
                v.sort();
            };
            cut(&mut a);
            cut(&mut b);
        }
        assert_eq!(a.len(), b.len(), "{name}");
        assert_eq!(a, b, "{name}");
    }
    // Binary output decodes back to the same records.
    let (code, out, _) = run(&[
        "--archive",
        arch.to_str().unwrap(),
        "--format",
        "binary",
        "--between",
        "0",
        "4000000000000",
    ]);
    assert_eq!(code, 0);
    let d = dplog_formatters::binary::decode(&out);
    assert!(d.stopped.is_none());
    let bin = std::fs::read(p.join("nat.bin")).unwrap();
    let mut a: Vec<&[u8]> = d.records.iter().map(|r| r.1).collect();
    let src = dplog_formatters::binary::decode(&bin);
    let mut b: Vec<&[u8]> = src.records.iter().map(|r| r.1).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    // IPFIX: messages of RFC 7011 (version 10).
    let (code, out, _) = run(&[
        "--archive",
        arch.to_str().unwrap(),
        "--format",
        "ipfix",
        "--between",
        "0",
        "4000000000000",
    ]);
    assert_eq!(code, 0);
    assert_eq!(&out[..2], &[0, 10]);
}

#[test]
fn the_configuration_writes_an_archive_only_of_binary_records() {
    let e = dplog::config::LogConfig::from_toml_str(
        "[format]\ntype = \"json\"\n\n[[sink]]\ntype = \"archive\"\ndir = \"a\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("line 5") && e.contains("set [format] type = \"binary\""),
        "{e}"
    );
    let c = dplog::config::LogConfig::from_toml_str(
        "[format]\ntype = \"binary\"\n[sink]\ntype = \"archive\"\ndir = \"a\"\nblock_rows = 4096\nretention_bytes = 1000000000\n",
    )
    .unwrap();
    assert_eq!(c.sink.describe_each(), vec!["archive a".to_string()]);
    let e = dplog::config::LogConfig::from_toml_str(
        "[format]\ntype = \"binary\"\n[sink]\ntype = \"archive\"\nbogus = 1\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("bogus") && e.contains("line 5"), "{e}");
}

#[test]
fn a_record_type_only_in_a_middle_segment_is_printed() {
    use dplog_core::schema::{FieldDef, FieldKind};
    use dplog_core::Sink;
    let dir = tempfile::tempdir().unwrap();
    let mk = |id: u16, name: &'static str| {
        Schema::new(
            id,
            name,
            24,
            vec![
                FieldDef::new("eventTime", 8, 8, FieldKind::NsTimestamp, 0),
                FieldDef::new("ruleId", 16, 4, FieldKind::U32, 0),
                FieldDef::new("vlanId", 20, 2, FieldKind::U16, 0),
            ],
        )
        .unwrap()
    };
    let (a, b) = (mk(301, "aclDrop"), mk(302, "aclAllow"));
    let rec = |id: u16, t: u64, rule: u32| {
        let mut r = vec![0u8; 24];
        r[0..2].copy_from_slice(&24u16.to_ne_bytes());
        r[2..4].copy_from_slice(&id.to_ne_bytes());
        r[8..16].copy_from_slice(&t.to_ne_bytes());
        r[16..20].copy_from_slice(&rule.to_ne_bytes());
        r
    };
    let t0 = 1_767_225_600_000_000_000u64;
    let mut sink = dplog_sinks::archive::ArchiveSink::open(
        dir.path(),
        dplog_sinks::archive::ArchiveSinkOptions {
            segment_interval_ms: Some(1000),
            ..Default::default()
        },
    )
    .unwrap();
    let mut enc = dplog_formatters::binary::BinaryEncoder::new(&[&a, &b]);
    let mut batch = Vec::new();
    for s in 0..3u64 {
        let t = t0 + s * 1_000_000_000;
        enc.push(&rec(301, t, 1), &mut batch);
        if s == 1 {
            enc.push(&rec(302, t + 5, 2), &mut batch);
        }
    }
    sink.write_batch(&batch).unwrap();
    sink.close().unwrap();
    assert_eq!(
        dplog_sinks::archive::list_segments(dir.path())
            .unwrap()
            .len(),
        3
    );
    let (code, out, err) = run(&[
        "--archive",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
        "--between",
        "0",
        "4000000000000",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(
        text.lines().nth(2).unwrap().contains("\"ruleId\":2"),
        "{text}"
    );
    // The condition on a field of both types finds both.
    let (code, out, _) = run(&[
        "--archive",
        dir.path().to_str().unwrap(),
        "--between",
        "0",
        "4000000000000",
        "--where",
        "ruleId=2",
    ]);
    assert_eq!(code, 0);
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
    // A field only the middle segment's record type has is known.
    let b2 = mk2();
    let dir2 = tempfile::tempdir().unwrap();
    let mut sink = dplog_sinks::archive::ArchiveSink::open(
        dir2.path(),
        dplog_sinks::archive::ArchiveSinkOptions {
            segment_interval_ms: Some(1000),
            ..Default::default()
        },
    )
    .unwrap();
    let mut enc = dplog_formatters::binary::BinaryEncoder::new(&[&a, &b2]);
    let mut batch = Vec::new();
    for s in 0..3u64 {
        let t = t0 + s * 1_000_000_000;
        enc.push(&rec(301, t, 1), &mut batch);
        if s == 1 {
            enc.push(&rec(303, t + 5, 7), &mut batch);
        }
    }
    sink.write_batch(&batch).unwrap();
    sink.close().unwrap();
    let (code, out, err) = run(&[
        "--archive",
        dir2.path().to_str().unwrap(),
        "--between",
        "0",
        "4000000000000",
        "--where",
        "policyId=7",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
}

/// A record type with a field the others lack (`policyId`).
fn mk2() -> Schema {
    use dplog_core::schema::{FieldDef, FieldKind};
    Schema::new(
        303,
        "aclPolicy",
        24,
        vec![
            FieldDef::new("eventTime", 8, 8, FieldKind::NsTimestamp, 0),
            FieldDef::new("policyId", 16, 4, FieldKind::U32, 0),
        ],
    )
    .unwrap()
}

/// `(byte offset, kind)` of every frame of binary log `b`.
fn frames(b: &[u8]) -> Vec<(usize, u8)> {
    let mut v = Vec::new();
    let mut off = 0;
    while off + 4 <= b.len() {
        v.push((off, b[off]));
        off += 4 + u16::from_le_bytes([b[off + 2], b[off + 3]]) as usize;
    }
    assert_eq!(off, b.len(), "whole frames");
    v
}

/// Every record of archive `arch`, as JSON lines, sorted.
fn archived(arch: &Path) -> Vec<String> {
    let (code, out, err) = run(&[
        "--archive",
        arch.to_str().unwrap(),
        "--format",
        "json",
        "--between",
        "0",
        "4000000000000",
    ]);
    assert!(code == 0 || code == 1, "{err}");
    sorted_lines(&out)
}

fn import_into(arch: &Path, inputs: &[&Path]) -> (i32, String) {
    std::fs::create_dir(arch).unwrap();
    let mut args = vec!["import", "--archive", arch.to_str().unwrap()];
    args.extend(inputs.iter().map(|p| p.to_str().unwrap()));
    let (code, _, err) = run(&args);
    (code, err)
}

#[test]
fn damaged_inputs_are_imported_up_to_the_damage_and_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir(p.join("mm")).unwrap();
    nat(
        &format!(
            "[[sink]]\ntype = \"file\"\npath = \"{}\"\n[[sink]]\ntype = \"mmap\"\ndir = \"{}\"\nsegment_bytes = 65536\n",
            p.join("nat.bin").display(),
            p.join("mm").display()
        ),
        6000,
    );
    let bin = std::fs::read(p.join("nat.bin")).unwrap();
    let fr = frames(&bin);
    let records = fr.iter().filter(|f| f.1 == b'R').count();
    let all = sorted_lines(&formatted(&p.join("nat.bin"), Format::Json));
    assert_eq!(all.len(), records);
    assert!(records > 1000, "{records}");

    // A frame in the middle that is none: the records before it, then
    // the next input whole.
    let (mid, _) = fr[fr.len() / 2];
    let before = fr[..fr.len() / 2].iter().filter(|f| f.1 == b'R').count();
    let mut broken = bin.clone();
    broken[mid] = 0xee;
    std::fs::write(p.join("broken.bin"), &broken).unwrap();
    let whole = p.join("nat.bin");
    let (code, err) = import_into(&p.join("a1"), &[&p.join("broken.bin"), &whole]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!(
            "broken.bin: no binary frame at byte {mid} (bytes ee 00; file of {}): damaged; \
             imported the {before} records before it",
            bin.len()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("imported {} records into", before + records)),
        "{err}"
    );
    assert!(err.contains("1 damaged part(s) of the input"), "{err}");
    assert_eq!(archived(&p.join("a1")).len(), before + records);

    // Cut inside a frame header (2 of its 4 bytes).
    let (last, _) = fr[fr.len() - 1];
    std::fs::write(p.join("cut.bin"), &bin[..last + 2]).unwrap();
    let (code, err) = import_into(&p.join("a2"), &[&p.join("cut.bin")]);
    assert_eq!(code, 3, "{err}");
    let before = fr[..fr.len() - 1].iter().filter(|f| f.1 == b'R').count();
    assert!(
        err.contains(&format!(
            "cut inside a frame header at byte {last} (2 of 4 bytes, file of {}); imported \
             the {before} records before it",
            last + 2
        )),
        "{err}"
    );
    assert_eq!(archived(&p.join("a2")).len(), before);

    // An mmap segment with a broken header is skipped, the others are
    // imported (the first: the check that the directory holds a binary
    // log reads the next).
    let segs = dplog_sinks::mmap::reader::all_segments(&p.join("mm")).unwrap();
    assert!(segs.len() >= 2, "{}", segs.len());
    let victim = &segs[0].2;
    let lost = {
        let d = dplog_sinks::mmap::reader::read_segment(victim).unwrap();
        frames(&d).iter().filter(|f| f.1 == b'R').count()
    };
    assert!(lost > 0);
    let mut seg = std::fs::read(victim).unwrap();
    seg[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(victim, &seg).unwrap();
    let (code, err) = import_into(&p.join("a3"), &[&p.join("mm")]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(&victim.display().to_string()), "{err}");
    assert!(err.contains("skipped this segment"), "{err}");
    assert!(
        err.contains(&format!("imported {} records into", records - lost)),
        "{err}"
    );
    assert_eq!(archived(&p.join("a3")).len(), records - lost);

    // A whole log: exit status 0.
    let (code, err) = import_into(&p.join("a4"), &[&whole]);
    assert_eq!(code, 0, "{err}");
    // An input that is no binary log is refused before anything is
    // imported, even after a good one.
    std::fs::write(p.join("text.log"), "natEvent=4\n").unwrap();
    let (code, err) = import_into(&p.join("a5"), &[&whole, &p.join("text.log")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("text.log: not a dplog binary log"), "{err}");
    assert!(dplog_sinks::archive::list_segments(&p.join("a5"))
        .unwrap()
        .is_empty());
    // So is an mmap directory of text lines.
    std::fs::create_dir(p.join("mmtext")).unwrap();
    let cfg = dplog::config::LogConfig::from_toml_str(&format!(
        "[sink]\ntype = \"mmap\"\ndir = \"{}\"\nsegment_bytes = 65536\n",
        p.join("mmtext").display()
    ))
    .unwrap();
    let logger = cfg.start_nat44().unwrap();
    let mut prod = logger.producer().unwrap();
    assert!(prod.log(Default::default()));
    drop(prod);
    assert_eq!(logger.shutdown().unwrap().written_records, 1);
    let (code, err) = import_into(&p.join("a6"), &[&whole, &p.join("mmtext")]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not a segment of a dplog binary log (byte 0: no H frame;"),
        "{err}"
    );
    assert!(dplog_sinks::archive::list_segments(&p.join("a6"))
        .unwrap()
        .is_empty());
    // The statuses are in the help.
    let (code, out, _) = run(&["import", "--help"]);
    assert_eq!(code, 0);
    let help = String::from_utf8(out).unwrap();
    assert!(
        help.contains("Exit status: 0 every input imported whole;"),
        "{help}"
    );
    assert!(help.contains("; 3 damaged inputs:"), "{help}");
}

/// An empty file is a log a file sink created and has not written yet: no
/// records, said on stderr and skipped (exit 0), as dplog-cat says it;
/// a file with bytes that is no log is refused (above).
#[test]
fn an_empty_file_is_a_log_not_written_yet_said_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    nat(
        &format!(
            "[sink]\ntype = \"file\"\npath = \"{}\"\n",
            p.join("nat.bin").display()
        ),
        300,
    );
    let records = sorted_lines(&formatted(&p.join("nat.bin"), Format::Json)).len();
    assert!(records > 0);
    std::fs::write(p.join("empty.bin"), b"").unwrap();
    let (code, err) = import_into(&p.join("a"), &[&p.join("empty.bin"), &p.join("nat.bin")]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "dplog-query: {}: empty: no records (a log created and not written yet); skipped",
            p.join("empty.bin").display()
        )),
        "{err}"
    );
    assert_eq!(archived(&p.join("a")).len(), records);
}
