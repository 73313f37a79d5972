//! A ring in hugepage memory: the test reserves a few 2 MiB hugepages
//! (`/proc/sys/vm/nr_hugepages`, restored afterwards), mounts hugetlbfs on
//! a directory of its own (unmounted afterwards), a producer creates its
//! ring there (one `ftruncate` to whole huge pages, written through its
//! mapping only) and dplogd drains it exactly. Without root, or when the
//! kernel gives no hugepages or the mount fails, it prints why and skips.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";
const FREE: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
const HUGE: u64 = 2 << 20;
/// One page for the ring file, one for the daemon's consumer file, two to
/// spare.
const PAGES: u64 = 4;

fn read_u64(p: &str) -> Result<u64, String> {
    let s = std::fs::read_to_string(p).map_err(|e| format!("cannot read {p}: {e}"))?;
    s.trim().parse().map_err(|e| format!("{p}: {s:?}: {e}"))
}

/// Hugepages reserved and hugetlbfs mounted on a temporary directory;
/// restored and unmounted when dropped.
struct HugeDir {
    previous: Option<u64>,
    dir: tempfile::TempDir,
    mounted: bool,
}

impl HugeDir {
    fn new() -> Result<HugeDir, String> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root (reserving hugepages and mounting need it)".into());
        }
        let mut h = HugeDir {
            previous: None,
            dir: tempfile::tempdir().map_err(|e| e.to_string())?,
            mounted: false,
        };
        let before = read_u64(NR_HUGEPAGES)?;
        let have = read_u64(FREE)?;
        if have < PAGES {
            let want = before + (PAGES - have);
            std::fs::write(NR_HUGEPAGES, format!("{want}\n"))
                .map_err(|e| format!("cannot write {want} to {NR_HUGEPAGES}: {e}"))?;
            h.previous = Some(before);
            let got = read_u64(FREE)?;
            if got < PAGES {
                return Err(format!(
                    "the kernel gave only {got} free 2 MiB hugepages of the {PAGES} asked for"
                ));
            }
        }
        let out = Command::new("mount")
            .args([
                "-t",
                "hugetlbfs",
                "-o",
                "pagesize=2M,size=8M,mode=0700",
                "nodev",
            ])
            .arg(h.dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t hugetlbfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        h.mounted = true;
        Ok(h)
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Huge pages of this mount in use (its `size=` bounds it).
    fn used_pages(&self) -> u64 {
        let c = std::ffi::CString::new(self.dir.path().to_str().unwrap()).unwrap();
        // SAFETY: statvfs fills the zeroed struct for a NUL-terminated path.
        let st = unsafe {
            let mut st: libc::statvfs = core::mem::zeroed();
            assert_eq!(libc::statvfs(c.as_ptr(), &mut st), 0);
            st
        };
        assert_eq!(st.f_bsize, HUGE);
        st.f_blocks - st.f_bfree
    }
}

impl Drop for HugeDir {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(self.dir.path()).status();
        }
        if let Some(n) = self.previous {
            let _ = std::fs::write(NR_HUGEPAGES, format!("{n}\n"));
        }
    }
}

fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect()
}

#[test]
fn a_ring_in_hugetlbfs_is_drained_exactly() {
    let huge = match HugeDir::new() {
        Ok(h) => h,
        Err(why) => {
            eprintln!("SKIPPED: a ring in hugetlbfs: {why}");
            return;
        }
    };
    let s = Setup::new("[sink]\ntype = \"file\"\npath = \"@/out.jsonl\"\n");
    const N: u64 = 50_000;
    assert_eq!(huge.used_pages(), 0);
    // 4096 slots of 64 bytes after the 64 KiB header: 320 KiB, one huge
    // page. The producer waits (block) until the daemon comes.
    let p = Command::new(PRODUCE)
        .arg("--dir")
        .arg(huge.path())
        .args(["--name", "huge", "--tag", "8", "--records", &N.to_string()])
        .args(["--capacity", "4096", "--burst", "32"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(30, "the ring file", || {
        files(huge.path(), ".ring").len() == 1
    });
    let ring = files(huge.path(), ".ring").remove(0);
    let md = std::fs::metadata(&ring).unwrap();
    assert_eq!(md.len(), HUGE, "one whole huge page");
    assert_eq!(md.blksize(), HUGE);
    assert_eq!(huge.used_pages(), 1, "in hugepage memory");
    let mut d = Command::new(DPLOGD)
        .arg("--config")
        .arg(s.path("dplogd.toml"))
        .arg("--rings")
        .arg(huge.path())
        .arg("--checkpoint")
        .arg(s.path("dplogd.checkpoint"))
        .args(["--scan-ms", "20"])
        .stderr(std::fs::File::create(s.path("dplogd.err")).unwrap())
        .spawn()
        .unwrap();
    // The daemon's consumer file: in hugetlbfs too, one huge page.
    wait_for(30, "the consumer file", || {
        files(huge.path(), ".ring.consumer").len() == 1
    });
    let c = files(huge.path(), ".ring.consumer").remove(0);
    assert_eq!(std::fs::metadata(&c).unwrap().len(), HUGE);
    assert_eq!(huge.used_pages(), 2);
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(60, "the ring's end line", || {
        end_of(&parse(&read_lines(&s.path("out.jsonl"))), "huge").is_some()
    });
    let stderr = s.stderr();
    assert_eq!(term(&mut d), 0, "{stderr}");
    let o = parse(&read_lines(&s.path("out.jsonl")));
    assert_exactly(&o.seqs[&8], N, "the hugetlbfs ring");
    assert_eq!(end_of(&o, "huge").unwrap()["records"], N);
    // Ring and consumer file removed, their huge pages free again (the
    // daemon's lock file is empty: no page).
    assert!(ring_dir_files(huge.path()).is_empty());
    assert_eq!(huge.used_pages(), 0);
    // A ring larger than the mount (262144 slots of 64 bytes: 16 MiB and
    // the header, 9 huge pages; size=8M): refused with its size in bytes
    // and what to do, no file left behind.
    let big = Command::new(PRODUCE)
        .arg("--dir")
        .arg(huge.path())
        .args(["--name", "big", "--records", "1", "--capacity", "262144"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&big.stderr);
    assert_eq!(big.status.code(), Some(1), "{err}");
    let bytes = 9 * HUGE;
    assert!(
        err.contains(&format!("a ring file of {bytes} bytes: "))
            && err.contains("vm.nr_hugepages")
            && err.contains("size="),
        "{err}"
    );
    assert!(ring_dir_files(huge.path()).is_empty());
    assert_eq!(huge.used_pages(), 0);
}
