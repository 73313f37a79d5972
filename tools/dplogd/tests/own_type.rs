//! A record type dplogd was not built with: `dplogd-produce --record acl`
//! logs ACL drops (its own `aclDrop` schema, id 300) into a ring, and
//! dplogd formats them from the ring file's schema description alone.

mod common;

use common::*;

#[test]
fn a_record_type_of_the_producers_own_is_written_with_its_exact_values() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    let mut d = s.daemon();
    const N: u64 = 300;
    let mut p = s.producer(
        "acl",
        77,
        &[
            "--record",
            "acl",
            "--records",
            &N.to_string(),
            "--capacity",
            "64",
            "--burst",
            "16",
        ],
    );
    assert!(p.wait().unwrap().success());
    let lines = || -> Vec<serde_json::Value> {
        read(&s.path("out.jsonl"))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect()
    };
    wait_for(60, "the ACL ring's end line", || {
        lines().iter().any(|v| v.get("dplogd").is_some())
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let lines = lines();
    let (ends, recs): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) =
        lines.iter().partition(|v| v.get("dplogd").is_some());
    assert_eq!(recs.len() as u64, N);
    for (i, r) in recs.iter().enumerate() {
        let seq = i as u64;
        let reason = ["NO_RULE", "DENY", "RATE_LIMIT"][i % 3];
        let want = serde_json::json!({
            "dropTime": 1_767_225_600_000u64 + seq,
            "timestamp": format!("2026-01-01T00:00:00.{seq:03}000Z"),
            "sequence": seq,
            "sourceMacAddress": format!("02:00:5e:00:53:{:02x}", seq as u8),
            "vlanId": 10,
            "sourceIPv6Address": if seq % 256 == 0 {
                "2001:db8::".to_string()
            } else {
                format!("2001:db8::{:x}", seq % 256)
            },
            "protocolIdentifier": 6,
            "sourceTransportPort": 1024 + seq,
            "destinationTransportPort": 443,
            "dropReason": reason,
            "ruleId": 77,
        });
        assert_eq!(**r, want, "record {i}");
    }
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["dplogd"], "producer_closed");
    assert!(ends[0]["ring"].as_str().unwrap().starts_with("acl."));
    assert_eq!(ends[0]["records"], N);
    assert!(!s.stderr().contains("refused"), "{}", s.stderr());
}

/// The type's metadata travels in the ring file: dplogd writes RFC 5424
/// with the producer's syslog layout (APP-NAME, MSGID by value, SD-ID and
/// parameters), not the default one from the fields.
#[test]
fn a_record_type_of_the_producers_own_keeps_its_syslog_layout() {
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.log\"\n");
    std::fs::write(
        s.path("dplogd.toml"),
        format!(
            "[format]\ntype = \"rfc5424\"\n[format.syslog]\nhostname = \"h\"\nprocid = \"p\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
            s.path("out.log").display()
        ),
    )
    .unwrap();
    let mut d = s.daemon();
    const N: u64 = 30;
    let mut p = s.producer("acl", 77, &["--record", "acl", "--records", &N.to_string()]);
    assert!(p.wait().unwrap().success());
    wait_for(60, "the ACL ring's end line", || {
        read(&s.path("out.log")).contains(" RING_CLOSED ")
    });
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let text = read(&s.path("out.log"));
    let (ends, recs): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| l.contains(" RING_CLOSED "));
    assert_eq!(recs.len() as u64, N, "{text}");
    // The ring's end is an RFC 5424 message in the records' header
    // (facility local0, severity informational, the type's APP-NAME).
    assert_eq!(ends.len(), 1, "{text}");
    let pid = p.id();
    assert!(
        ends[0].starts_with("<134>1 ")
            && ends[0].contains(&format!(
                "Z h acl p RING_CLOSED [dplogRing@32473 ring=\"acl.{pid}."
            ))
            && ends[0].ends_with(&format!(".ring\" pid=\"{pid}\" records=\"{N}\"]")),
        "{}",
        ends[0]
    );
    for (i, l) in recs.iter().enumerate() {
        let seq = i as u64;
        let msgid = ["NORULE", "DENY", "RATELIMIT"][i % 3];
        let src = if seq % 256 == 0 {
            "2001:db8::".to_string()
        } else {
            format!("2001:db8::{:x}", seq % 256)
        };
        let want = format!(
            "1 2026-01-01T00:00:00.{seq:03}000Z h acl p {msgid} [acl@32473 rule=\"77\" src=\"{src}\" sport=\"{}\" v=\"1\"]",
            1024 + seq
        );
        assert!(l.ends_with(&want), "record {i}: {l}\nwant …{want}");
    }
}
