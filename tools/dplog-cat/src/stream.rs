//! The input as one byte stream of binary-log frames: files, mmap
//! segments' committed data and standard input ([`Source`]s) read one
//! after another ([`Chain`]) and cut into frames in constant memory
//! ([`Frames`]).

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use dplog_core::Schema;
use dplog_formatters::binary::{Frame, StreamDecoder, MAX_FRAME};
use dplog_sinks::mmap::reader;

/// One input of the stream: where its bytes are.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// A whole file (a binary log), `len` bytes.
    File(PathBuf, u64),
    /// An mmap segment's committed data: `len` bytes at `HEADER_BYTES`.
    Segment(PathBuf, u64),
    /// Standard input (length unknown).
    Stdin,
}

impl Source {
    /// Its path as printed (`standard input` for it).
    pub(crate) fn path(&self) -> String {
        match self {
            Source::File(p, _) | Source::Segment(p, _) => p.display().to_string(),
            Source::Stdin => "standard input".into(),
        }
    }

    /// Where in it decoding stopped, `off` bytes into its data, and why.
    pub(crate) fn damage_at(&self, off: u64, reason: &str) -> String {
        match self {
            Source::Segment(_, n) => format!(
                "damaged at byte {off} of its {n} committed data bytes (file offset {}): {reason}",
                off + reader::HEADER_BYTES as u64
            ),
            Source::File(_, n) => format!("damaged at byte {off} of {n}: {reason}"),
            Source::Stdin => format!("damaged at byte {off}: {reason}"),
        }
    }

    pub(crate) fn len(&self) -> Option<u64> {
        match self {
            Source::File(_, n) | Source::Segment(_, n) => Some(*n),
            Source::Stdin => None,
        }
    }

    /// Opens it, positioned at its first byte, limited to its length.
    pub(crate) fn open(&self) -> std::io::Result<Box<dyn Read>> {
        let at = |p: &Path, e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
        };
        Ok(match self {
            Source::File(p, n) => Box::new(File::open(p).map_err(|e| at(p, e))?.take(*n)),
            Source::Segment(p, n) => {
                let mut f = File::open(p).map_err(|e| at(p, e))?;
                std::io::Seek::seek(
                    &mut f,
                    std::io::SeekFrom::Start(reader::HEADER_BYTES as u64),
                )
                .map_err(|e| at(p, e))?;
                Box::new(f.take(*n))
            }
            Source::Stdin => Box::new(std::io::stdin()),
        })
    }
}

/// The sources one after another as one byte stream, counting the bytes
/// read (for progress).
pub(crate) struct Chain {
    pub(crate) sources: VecDeque<Source>,
    pub(crate) cur: Option<Box<dyn Read>>,
    pub(crate) read: u64,
}

impl Read for Chain {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.cur.is_none() {
                match self.sources.pop_front() {
                    Some(s) => self.cur = Some(s.open()?),
                    None => return Ok(0),
                }
            }
            let n = self.cur.as_mut().expect("opened above").read(buf)?;
            if n > 0 {
                self.read += n as u64;
                return Ok(n);
            }
            self.cur = None;
        }
    }
}

/// Read buffer size.
pub(crate) const CHUNK: usize = 1 << 20;

/// What [`Frames::next`] found.
pub(crate) enum Next<'a> {
    /// A record and its schema.
    Record(&'a Schema, &'a [u8]),
    /// A schema (`S` frame).
    Schema(&'a Schema),
    /// Any other frame.
    Frame(Frame<'a>),
    /// The end of the input, at a frame boundary.
    End,
    /// The input does not start as a binary log does (its `H` frame).
    NotALog,
    /// Decoding stopped at stream byte `.0`, for reason `.1`.
    Stopped(u64, String),
}

/// The frames of a binary log read from a byte stream, in constant memory
/// (a [`CHUNK`] buffer plus one frame). Any byte stream will do: files,
/// mmap segments' committed data and standard input are [`Source`]s of a
/// [`Chain`]; another kind of input adds a `Source` variant or hands its
/// own reader to [`Frames::new`].
pub(crate) struct Frames<R> {
    pub(crate) input: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Stream offset of `buf[pos]`.
    offset: u64,
    eof: bool,
    dec: StreamDecoder,
}

impl<R: Read> Frames<R> {
    pub(crate) fn new(input: R) -> Self {
        Self {
            input,
            buf: vec![0; CHUNK + MAX_FRAME],
            pos: 0,
            end: 0,
            offset: 0,
            eof: false,
            dec: StreamDecoder::new(),
        }
    }

    /// True if `b` starts with a whole frame.
    fn whole(b: &[u8]) -> bool {
        b.len() >= 4 && b.len() - 4 >= u16::from_le_bytes([b[2], b[3]]) as usize
    }

    fn refill(&mut self) -> std::io::Result<()> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        while self.end < self.buf.len() {
            let n = match self.input.read(&mut self.buf[self.end..]) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                self.eof = true;
                break;
            }
            self.end += n;
            if self.end >= MAX_FRAME {
                break;
            }
        }
        Ok(())
    }

    /// Skips the stream up to byte `to` (past the damaged rest of an
    /// input), keeping the decoder's schemas; decoding goes on there.
    ///
    /// # Errors
    /// An input that cannot be read.
    pub(crate) fn skip_to(&mut self, to: u64) -> std::io::Result<()> {
        let mut left = to.saturating_sub(self.offset);
        let buffered = (self.end - self.pos) as u64;
        if left <= buffered {
            self.pos += left as usize;
        } else {
            left -= buffered;
            self.pos = self.end;
            std::io::copy(&mut (&mut self.input).take(left), &mut std::io::sink())?;
        }
        self.offset = to.max(self.offset);
        Ok(())
    }

    /// The next frame.
    ///
    /// # Errors
    /// An input that cannot be read.
    pub(crate) fn next(&mut self) -> std::io::Result<Next<'_>> {
        while !self.eof && !Self::whole(&self.buf[self.pos..self.end]) {
            self.refill()?;
        }
        let avail = &self.buf[self.pos..self.end];
        if avail.is_empty() {
            return Ok(Next::End);
        }
        if self.offset == 0 && !dplog_formatters::binary::may_start_log(avail) {
            return Ok(Next::NotALog);
        }
        match self.dec.next(avail) {
            Ok(Some((f, n))) => {
                self.pos += n;
                self.offset += n as u64;
                Ok(match f {
                    Frame::Record(si, rec) => Next::Record(&self.dec.schemas()[si], rec),
                    Frame::Schema(si) => Next::Schema(&self.dec.schemas()[si]),
                    f => Next::Frame(f),
                })
            }
            Ok(None) => Ok(Next::Stopped(self.offset, StreamDecoder::truncated(avail))),
            Err(reason) => Ok(Next::Stopped(self.offset, reason)),
        }
    }
}
