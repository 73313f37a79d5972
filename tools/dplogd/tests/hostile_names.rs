//! A ring file renamed to a name no producer creates (by whoever may
//! create files in the ring directory) forges no line: dplogd refuses it,
//! naming it escaped on stderr.

mod common;

use common::*;

/// The name part of the renamed ring: a line break, then a forged RFC
/// 3164 message.
const HOSTILE: &str = "x\n<13>Jan  1 00:00:00 evil su: root";

#[test]
fn a_ring_renamed_to_a_hostile_name_is_refused_and_forges_no_line() {
    let s = Setup::with_config(
        "[format]\ntype = \"text\"\n[ring]\nburst = 64\n[sink]\ntype = \"file\"\npath = \"@/out.log\"\n",
    );
    const N: u64 = 20;
    // Both producers end before dplogd starts: their rings wait, closed.
    for (name, tag) in [("good", 1), ("victim", 2)] {
        let mut p = s.producer(
            name,
            tag,
            &["--records", &N.to_string(), "--capacity", "64"],
        );
        assert!(p.wait().unwrap().success());
    }
    let victim = ring_dir_files(&s.rings())
        .into_iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .find(|f| f.starts_with("victim."))
        .expect("the victim's ring file");
    let renamed = victim.replacen("victim", HOSTILE, 1);
    std::fs::rename(s.rings().join(&victim), s.rings().join(&renamed)).unwrap();
    let mut d = s.daemon();
    let out = s.path("out.log");
    // The good ring's end line, and the renamed ring refused (or, served,
    // its end line written).
    wait_for(
        60,
        "the good ring's end and the renamed ring's verdict",
        || {
            let o = read(&out);
            o.contains("dplogd: producer of ring good.")
                && (s.stderr().contains("refused") || o.contains("evil"))
        },
    );
    assert_eq!(term(&mut d), 0, "stderr:\n{}", s.stderr());
    let text = read(&out);
    let lines: Vec<&str> = text.lines().collect();
    // The good ring's records and its end line, nothing else.
    assert_eq!(lines.len() as u64, N + 1, "{text}");
    assert!(
        lines.iter().all(|l| !l.starts_with("<13>")),
        "a forged line: {text}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("dplogd: producer of ring good."))
            .count(),
        1,
        "{text}"
    );
    let err = s.stderr();
    let escaped = HOSTILE.replace('\n', "\\n").replace(' ', "\\x20");
    assert!(
        err.contains(&format!(
            "dplogd: ring {}",
            renamed.replacen(HOSTILE, &escaped, 1)
        )) && err.contains("refused: its name part is not a ring name a producer creates"),
        "stderr:\n{err}"
    );
    assert!(
        err.lines().all(|l| l.starts_with("dplogd: ")),
        "a line on stderr not dplogd's:\n{err}"
    );
    // Refused, not served: the file is left alone.
    assert!(s.rings().join(&renamed).exists());
}
