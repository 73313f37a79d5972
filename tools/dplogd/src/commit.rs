//! Checkpoints: the written batches made durable as the checkpoint's
//! output positions see them, the checkpoint written (retried with a
//! backoff while its file system is full), then the rings' slots freed
//! (see the `checkpoint` module for the order and the file).

use std::time::Instant;

use dplog_core::Sink;

use crate::checkpoint::{self, Checkpoint, RingEntry, RingMark};
use crate::{ring_stats, say_again, Daemon, Ending};

impl Daemon {
    /// A checkpoint is due: at once without an archive output, else once
    /// `commit_every` has passed since the last.
    pub(crate) fn commit_due(&self) -> bool {
        self.commit_every
            .map_or(true, |d| self.last_commit.elapsed() >= d)
    }

    /// Puts the written batches where the checkpoint's output positions
    /// see them, checkpoints, then frees the rings' slots and retires
    /// ended rings.
    ///
    /// Without `--fsync` the sinks only hand the kernel what they still
    /// hold ([`Sink::write_out`]: an archive's partial blocks written, no
    /// fsync), which is all a restart after a process crash needs; with
    /// it every output is fsync'd ([`Sink::sync_all`], whatever its own
    /// fsync policy) for power loss. Then what each sink reports of its
    /// pending records is booked (an archive's: written by the write-out);
    /// records a network sink still holds unacknowledged (Kafka, syslog
    /// over TCP; their `write_out` only serves delivery reports) are
    /// waited for ([`await_receiver`](Self::await_receiver), up to
    /// `shutdown_timeout_ms` at a time) before the checkpoint, for as
    /// long as that takes: the rings hold what arrives meanwhile and
    /// producers see their policy, as with a full disk. If the write-out
    /// fails nothing is checkpointed: the slots stay held and the next
    /// commit tries again. So too if the checkpoint's own write fails
    /// retryably (its file system full): the next commit waits its
    /// backoff ([`checkpoint::Retry`]) before it tries again.
    ///
    /// Errors: a stop, or a sink error that is not retryable, while
    /// records wait for acknowledgement; a checkpoint error.
    pub(crate) fn commit(&mut self) -> Result<(), String> {
        if !self.ckpt_retry.due(Instant::now()) {
            return Ok(());
        }
        let mut out = Ok(());
        let mut which = String::new();
        for o in &mut self.outs {
            out = if self.args.fsync {
                o.sink.sync_all()
            } else {
                o.sink.write_out()
            };
            if out.is_err() {
                which = o.sink.describe();
                break;
            }
        }
        if let Err(e) = out {
            self.stats.sink_errors += 1;
            let now = Instant::now();
            if say_again(&mut self.last_sink_error, now) {
                let what = if self.args.fsync {
                    "flushing"
                } else {
                    "writing out"
                };
                eprintln!(
                    "dplogd: {what} the sink {which}: {e}; not checkpointed (the rings keep the records); retrying"
                );
            }
            // Not at once again: the next loop or batch retries.
            self.last_commit = now;
            return Ok(());
        }
        for i in 0..self.outs.len() {
            self.poll_out(i);
            if self.outs[i].pending > 0 {
                self.await_receiver(i)?;
                self.poll_out(i);
            }
        }
        self.last_commit = Instant::now();
        if !self.checkpointed()? {
            return Ok(());
        }
        self.uncommitted = false;
        let mut retired = Vec::new();
        for r in self.rings.values_mut() {
            r.reader.publish_head();
            r.published = r.reader.head();
            r.reader.publish_reported();
            if let Some(how) = r.ending {
                retired.push((r.file.clone(), how));
            }
        }
        if retired.is_empty() {
            return Ok(());
        }
        for (file, how) in &retired {
            if let Some(r) = self.rings.remove(file) {
                if *how == Ending::Quarantined {
                    self.kept.insert(
                        file.clone(),
                        RingEntry {
                            mark: RingMark::Quarantined,
                            head: r.reader.head(),
                            drops_reported: r.reader.drops_reported(),
                            nonce: r.reader.info().nonce,
                            file: file.clone(),
                        },
                    );
                } else {
                    r.reader.remove_files();
                }
                self.closed_rings
                    .push(ring_stats(&r, *how == Ending::Quarantined));
                self.refused.insert(file.clone());
            }
        }
        // The removed rings leave the checkpoint (a quarantined one stays,
        // marked, while its file exists); if that write fails, the next
        // commit writes it.
        if !self.checkpointed()? {
            self.uncommitted = true;
        }
        Ok(())
    }

    /// Writes the checkpoint; `Ok(false)` if the write failed retryably (a
    /// full disk: said, and retried after a backoff by the caller).
    ///
    /// Errors: an output's position, or a write error that is not
    /// retryable ([`checkpoint::retryable`]).
    pub(crate) fn checkpointed(&mut self) -> Result<bool, String> {
        match self.try_checkpoint()? {
            Ok(()) => {
                self.ckpt_retry.succeeded(&self.args.checkpoint);
                Ok(true)
            }
            Err(e) if checkpoint::retryable(&e) => {
                let waiting = self.rings.values().map(|r| r.reader.head() - r.published);
                let waiting = waiting.sum();
                self.ckpt_retry
                    .failed(Instant::now(), &self.args.checkpoint, &e, waiting);
                Ok(false)
            }
            Err(e) => Err(self.checkpoint_error(&e)),
        }
    }

    fn checkpoint_error(&self, e: &std::io::Error) -> String {
        format!(
            "writing the checkpoint {}: {e} (the rings keep the records read since the last one; the next dplogd cuts the outputs back to it and reads them again)",
            self.args.checkpoint.display()
        )
    }

    /// Writes the checkpoint now, once.
    ///
    /// Errors: an output's position, or the write's error.
    pub(crate) fn save_checkpoint(&mut self) -> Result<(), String> {
        let r = self.try_checkpoint()?;
        r.map_err(|e| self.checkpoint_error(&e))
    }

    /// The checkpoint of the current positions, written: the outer error is
    /// an output's position, the inner one the write's.
    fn try_checkpoint(&mut self) -> Result<std::io::Result<()>, String> {
        let mut outputs = Vec::new();
        for t in &self.targets {
            outputs.push(checkpoint::position(t).map_err(|e| format!("output position: {e}"))?);
        }
        let mut rings: Vec<RingEntry> = self
            .rings
            .values()
            .map(|r| RingEntry {
                mark: match r.ending {
                    None => RingMark::Live,
                    Some(Ending::Quarantined) => RingMark::Quarantined,
                    Some(_) => RingMark::Closed,
                },
                head: r.reader.head(),
                drops_reported: r.reader.drops_reported(),
                nonce: r.reader.info().nonce,
                file: r.file.clone(),
            })
            .collect();
        // Rings of the previous run not open yet keep their positions.
        rings.extend(self.resume.values().cloned());
        rings.extend(self.kept.values().cloned());
        let c = Checkpoint { outputs, rings };
        Ok(checkpoint::save(&self.args.checkpoint, &c, self.args.fsync))
    }
}
