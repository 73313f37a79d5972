//! A tmpfs of a given size mounted on a fresh temp dir, for the full-disk
//! tests of the sinks and dplogd; unmounted on drop.

use std::io::Write;
use std::path::Path;
use std::process::Command;

/// A mounted tmpfs (see the module docs).
#[derive(Debug)]
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=`, e.g. `"64k"`);
    /// `None` (with a SKIPPED line on stderr) without the privilege to
    /// mount (root / CAP_SYS_ADMIN).
    pub fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Self { dir }),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs (need root / CAP_SYS_ADMIN): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount: {e}");
                None
            }
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills it with file `name` (zeros written until `ENOSPC`); returns
    /// the bytes written. Panics on any other write error.
    pub fn fill(&self, name: &str) -> u64 {
        let mut f = std::fs::File::create(self.path().join(name)).unwrap();
        let block = vec![0u8; 4096];
        let mut n = 0u64;
        loop {
            match f.write(&block) {
                Ok(0) => break,
                Ok(k) => n += k as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling the tmpfs: {e}"),
            }
        }
        n
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
