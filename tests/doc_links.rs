//! Every relative link of README.md and docs/*.md points at a file that
//! exists, and a `#fragment` at a heading of that file (GitHub's anchors:
//! the heading lower-cased, punctuation dropped, spaces as `-`). External
//! links (`http:`, `https:`, `mailto:`) are not fetched.
//!
//! Guides other branches are writing may be linked before they land: they
//! are listed in `PENDING`, and once one exists its headings are checked
//! like any other file's.
//!
//! Also: every guide is in the index and linked from the README, every
//! code block names its language (a bare one would be compiled as Rust by
//! the doctests that include these files), and every ```toml block parses
//! as the library's configuration.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Guides linked from the README and docs/README.md whose text comes from
/// other branches; a link to one of them is allowed while it is missing.
const PENDING: [&str; 0] = [];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, relative to the repository root.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![PathBuf::from("README.md")];
    let mut guides: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| {
            p.strip_prefix(root())
                .expect("under the root")
                .to_path_buf()
        })
        .collect();
    guides.sort();
    docs.extend(guides);
    docs
}

/// The text outside fenced code blocks and inline code spans, where a
/// Markdown link can be.
fn prose(md: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans (a `](` inside backticks is no link).
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// Targets of `[text](target)` links.
fn links(md: &str) -> Vec<String> {
    let text = prose(md);
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let end = rest.find(')').expect("a link's closing parenthesis");
        found.push(rest[..end].trim().to_string());
        rest = &rest[end..];
    }
    found
}

/// GitHub's anchor for a heading's text.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of every heading of a Markdown document (outside code).
fn anchors(md: &str) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && line.starts_with('#') {
            set.insert(anchor(line.trim_start_matches('#')));
        }
    }
    set
}

/// Resolves `target` (a path relative to `doc`'s folder) lexically.
fn resolve(doc: &Path, target: &str) -> PathBuf {
    let mut p = doc.parent().unwrap_or(Path::new("")).to_path_buf();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                assert!(
                    p.pop(),
                    "{}: link {target} leaves the repository",
                    doc.display()
                );
            }
            part => p.push(part),
        }
    }
    p
}

#[test]
fn every_relative_link_resolves() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(root().join(&doc)).expect("a readable document");
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.clone()
            } else {
                resolve(&doc, path)
            };
            let full = root().join(&file);
            if !full.exists() {
                let pending = PENDING.iter().any(|p| Path::new(p) == file);
                if !pending {
                    problems.push(format!(
                        "{}: {target}: no file {}",
                        doc.display(),
                        file.display()
                    ));
                }
                continue;
            }
            if let Some(fragment) = fragment {
                let md = std::fs::read_to_string(&full).unwrap_or_default();
                if !anchors(&md).contains(fragment) {
                    problems.push(format!(
                        "{}: {target}: no heading with anchor #{fragment} in {}",
                        doc.display(),
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
    // The README and the guides link to each other: far more than a few.
    assert!(checked > 40, "only {checked} relative links found");
}

#[test]
fn every_guide_is_in_the_index_and_linked_from_the_readme() {
    let index = std::fs::read_to_string(root().join("docs/README.md")).expect("docs/README.md");
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let index_links: BTreeSet<String> = links(&index).into_iter().collect();
    let readme_links: BTreeSet<String> = links(&readme).into_iter().collect();
    let mut missing = Vec::new();
    let guides = documents()
        .into_iter()
        .filter(|d| d.starts_with("docs") && d != Path::new("docs/README.md"))
        .map(|d| d.to_string_lossy().into_owned())
        .chain(PENDING.iter().map(|p| p.to_string()))
        .collect::<BTreeSet<_>>();
    for guide in &guides {
        let name = guide.strip_prefix("docs/").expect("a guide under docs/");
        if !index_links.contains(name) {
            missing.push(format!("docs/README.md does not link {name}"));
        }
        if !readme_links.contains(guide.as_str()) {
            missing.push(format!("README.md does not link {guide}"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn code_blocks_name_their_language() {
    // A bare fence would be compiled as Rust by the doctests that include
    // these files; every block says what it is.
    let mut bare = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(root().join(&doc)).expect("a readable document");
        let mut open = false;
        for (n, line) in text.lines().enumerate() {
            let t = line.trim_start();
            if let Some(lang) = t.strip_prefix("```") {
                if !open && lang.trim().is_empty() {
                    bare.push(format!("{}:{}", doc.display(), n + 1));
                }
                open = !open;
            }
        }
        assert!(!open, "{}: a code block is not closed", doc.display());
    }
    assert!(
        bare.is_empty(),
        "code blocks without a language: {}",
        bare.join(", ")
    );
}

#[test]
fn the_anchor_rule_matches_github() {
    assert_eq!(
        anchor(" The `schema!` macro and its field kinds"),
        "the-schema-macro-and-its-field-kinds"
    );
    assert_eq!(
        anchor(" Escaping: byte strings and enum names"),
        "escaping-byte-strings-and-enum-names"
    );
    assert_eq!(
        anchor(" Logging that outlives the dataplane: dplogd"),
        "logging-that-outlives-the-dataplane-dplogd"
    );
    assert_eq!(
        links("see [a](x.md#y) and `[b](no.md)`\n```sh\n[c](no.md)\n```\n"),
        vec!["x.md#y".to_string()]
    );
}

/// The ```toml blocks of README.md and docs/*.md, with where each starts.
fn toml_blocks() -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(root().join(&doc)).expect("a readable document");
        let mut current: Option<(String, String)> = None;
        for (n, line) in text.lines().enumerate() {
            let t = line.trim_start();
            if let Some((at, body)) = current.as_mut() {
                if t.starts_with("```") {
                    blocks.push((at.clone(), std::mem::take(body)));
                    current = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            } else if t == "```toml" {
                current = Some((format!("{}:{}", doc.display(), n + 1), String::new()));
            }
        }
    }
    blocks
}

#[cfg(all(feature = "config", feature = "kafka"))]
#[test]
fn every_toml_block_is_a_valid_config() {
    // Each block is a configuration a reader may copy: the library's TOML
    // (every key checked, unknown ones refused with their line).
    let blocks = toml_blocks();
    let mut bad = Vec::new();
    for (at, body) in &blocks {
        if let Err(e) = dplog::config::LogConfig::from_toml_str(body) {
            bad.push(format!("{at}: {e}"));
        }
    }
    assert!(bad.is_empty(), "invalid config blocks:\n{}", bad.join("\n"));
    assert!(blocks.len() >= 9, "only {} toml blocks found", blocks.len());
}
