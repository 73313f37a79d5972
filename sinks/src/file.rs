//! The file sink: appends formatted batches to a file.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use dplog_core::Sink;

/// File mode of a newly created log file: owner read/write, group read
/// (0640). An existing file keeps its mode.
pub const FILE_MODE: u32 = 0o640;

/// Appends batches to one file.
///
/// Opened with `O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC` and mode
/// [`FILE_MODE`]: every batch lands at the end of the file even when another
/// writer appends too, and the descriptor does not leak into child
/// processes. Each batch is one `write_all` (one `write(2)` unless the
/// kernel writes it short). [`Sink::close`] fsyncs.
#[derive(Debug)]
pub struct FileSink {
    path: PathBuf,
    file: Option<File>,
}

impl FileSink {
    /// Opens (creating if needed) `path` for appending.
    ///
    /// Errors: the `open(2)` error, e.g. `NotFound` for a missing directory
    /// or `PermissionDenied`, with the path in the message.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(FILE_MODE)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(Self {
            path,
            file: Some(file),
        })
    }

    /// The path this sink writes to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&mut self) -> io::Result<&mut File> {
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "file sink is closed"))
    }
}

impl Sink for FileSink {
    fn write_batch(&mut self, batch: &[u8]) -> io::Result<()> {
        self.file()?.write_all(batch)
    }

    fn flush(&mut self) -> io::Result<()> {
        // Writes go straight to the kernel; nothing is buffered here.
        self.file().map(|_| ())
    }

    fn close(&mut self) -> io::Result<()> {
        match self.file.take() {
            Some(f) => f.sync_all(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn appends_batches_with_mode_0640_and_cloexec() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        std::fs::write(&path, b"old\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut s = FileSink::open(&path).unwrap();
        s.write_batch(b"one\n").unwrap();
        s.write_batch(b"two\n").unwrap();
        s.close().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"old\none\ntwo\n");
        // An existing file keeps its mode.
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );

        let fresh = dir.path().join("b.log");
        let mut s = FileSink::open(&fresh).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(s.file.as_ref().unwrap());
        // SAFETY: fcntl(F_GETFD) on a descriptor we own reads its flags only.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        // SAFETY: as above, F_GETFL reads the status flags.
        let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        assert_eq!(fl & libc::O_APPEND, libc::O_APPEND);
        s.close().unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        // The umask can only clear bits.
        assert_eq!(mode & !0o640, 0);
        assert_eq!(mode & 0o600, 0o600);
    }

    #[test]
    fn missing_directory_is_a_clear_error() {
        let e = FileSink::open("/nonexistent-dir/x.log").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("/nonexistent-dir/x.log"));
    }

    #[test]
    fn writes_after_close_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileSink::open(dir.path().join("c.log")).unwrap();
        s.close().unwrap();
        assert!(s.write_batch(b"x").is_err());
        assert!(s.close().is_ok());
    }

    #[test]
    fn a_full_device_is_an_error_not_a_panic() {
        // /dev/full answers every write with ENOSPC.
        let mut s = FileSink::open("/dev/full").unwrap();
        let e = s.write_batch(b"line\n").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    }
}
