//! Shared-memory SPSC rings: a producer in one process (the dataplane), the
//! consumer in another (`dplogd`), so records already pushed outlive a
//! crash of the dataplane.
//!
//! A ring is one file in a tmpfs (`/dev/shm`) or hugetlbfs directory,
//! mapped `MAP_SHARED` by both processes. The producer side
//! ([`ShmProducer`], and [`ShmLogProducer`] with the logger's backpressure
//! policy) runs the same protocol as the in-process [`crate::ring`](mod@crate::ring): slot
//! write, then a Release store of the free-running tail index; a private
//! cached copy of the consumer's head, refreshed only when the ring looks
//! full. The consumer side ([`ShmReader`]) trusts nothing in the file: it
//! is written by another process, possibly buggy or hostile.
//!
//! The consumer never writes into the ring file: it maps it read-only
//! (so a ring shared with a group is mode 0640, not 0660), and keeps its
//! position, the drops it reported and its verdict in a file of its own,
//! `<ring file>.consumer`, which the producer maps read-only. Until that
//! file exists (no consumer yet) the producer sees the consumer as away:
//! `block` waits, `drop_newest` counts.
//!
//! # Ring file layout (version 3, native byte order, x86-64/aarch64 little endian)
//!
//! | offset | size | field | written by |
//! |---|---|---|---|
//! | 0 | 8 | magic `DPLOGSHM` | creator, last of the header |
//! | 8 | 4 | layout version ([`SHM_VERSION`]) | creator |
//! | 12 | 4 | header bytes ([`SHM_HEADER_BYTES`]): slots start here | creator |
//! | 16 | 4 | slot bytes (32, 64 or 128) | creator |
//! | 20 | 4 | capacity in slots (power of two, at most [`SHM_MAX_CAPACITY`]) | creator |
//! | 24 | 4 | producer pid | creator |
//! | 28 | 4 | schema descriptors that follow (at most [`SHM_MAX_SCHEMAS`]) | creator |
//! | 32 | 8 | producer start time (`/proc/<pid>/stat` field 22, clock ticks since boot) | creator |
//! | 40 | 8 | lifetime nonce (random; one per created file) | creator |
//! | 48 | 8 | creation time, ns since the Unix epoch | creator |
//! | 56 | 4 | state: 1 live, 2 closed by its producer | producer |
//! | 60 | 4 | bytes of schema descriptions at 8192 (at most [`SHM_MAX_DESC_BYTES`]) | creator |
//! | 128 | 8 | tail: next slot the producer publishes (own 128-byte line) | producer |
//! | 384 | 56 | drop counters: full, degraded, disconnected, stopped, total, first and last drop time (ticks) | producer |
//! | 1024 | 64 × n | schema descriptors: id u16, 0 u16, record size u32, fingerprint u64 ([`schema_fingerprint`]), name (48 bytes, NUL padded) | creator |
//! | 8192 | 4 + … | schema descriptions, one per descriptor in its order: length u16 (little endian), then the schema's description ([`Schema::encode`]: its fields, then its metadata; absent: the defaults) | creator |
//! | 65536 | capacity × slot bytes | the slots | producer |
//!
//! The descriptions let a consumer rebuild every record type exactly (field
//! names, offsets, sizes, kinds, IPFIX ids, enum names), so it serves
//! record types it was not built with. The reader bounds every length
//! and count by the region, decodes each description with
//! [`Schema::decode`] (which validates it as [`Schema::new`] does), and
//! requires its id, name and size to be the descriptor's and its
//! recomputed [`schema_fingerprint`] to be the descriptor's fingerprint.
//!
//! The file is sized to a multiple of its filesystem's block size
//! (hugetlbfs reports the huge page size), so it can live in hugepages:
//! it is sized with one `ftruncate` and written only through its mapping
//! (hugetlbfs files take neither `write` nor a second `ftruncate`).
//!
//! # Drop counters
//!
//! The producer counts the records its policy refused in the ring file
//! (offset 384: one counter per reason, their total, the first and last
//! drop time in ticks); the consumer reports the growth of the total
//! in-band ([`ShmReader::take_drops`]). The total is checked as the tail
//! is, and a violation quarantines the ring:
//!
//! - it never moves backwards (below the drops already reported);
//! - it is at most one drop per nanosecond of the ring's age plus
//!   [`SHM_DROP_SLACK`] (2^32) records: the age is wall-clock time since
//!   the header's creation time at [`ShmReader::open`] (a creation time
//!   in the future counts as the open itself), then monotonic time;
//! - it grows by at most one drop per nanosecond since the reader last
//!   read it (since the ring's creation, the first time) plus
//!   [`SHM_DROP_SLACK`].
//!
//! A dataplane refuses records far below a drop per nanosecond (each
//! refused call costs several nanoseconds); the slack covers bursts
//! refused and counted in one store. (A loop that re-submits a large
//! burst to a full ring for seconds could pass the bound, and is
//! quarantined like a corrupted counter.)
//! The drop times are only clamped: the daemon reports them within the
//! ring's creation time and its own clock, first before last.
//!
//! # Consumer file layout (version 1, native byte order)
//!
//! `<ring file>.consumer`, created by the consumer (under a temporary name,
//! filled, renamed), owned by it, mode 0640 with the ring file's group, so
//! the producer (the ring's owner, a member of that group) can read it.
//! Sized as the ring file (one block of its filesystem, at least 4096
//! bytes).
//!
//! The producer uses it only if the opened file (`fstat`) is a regular
//! file owned by the producer's own uid, root or the daemon's uid it was
//! given ([`ShmOptions::daemon_uid`]), with no group or other write bit:
//! whoever may create files in the ring directory could otherwise plant
//! one (the nonce is in the ring's file name) and move the head (unread
//! records overwritten) or set the verdict (logging stops). A refused
//! file leaves the ring unserved, as an absent one
//! ([`ShmProducer::consumer_refusal`], [`consumer_status`] say why). Its
//! mapping is under the SIGBUS guard ([`install_sigbus_guard`]): cut short,
//! it reads as zeros and is dropped at the next refresh of the head; a
//! head outside the last capacity below the tail is never taken.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `DPLOGCON`, written last |
//! | 8 | 4 | layout version ([`SHM_CONSUMER_VERSION`]) |
//! | 16 | 8 | the ring file's lifetime nonce: a producer maps only a consumer file of its own ring's lifetime |
//! | 128 | 8 | head: next slot the consumer reads (own 128-byte line) |
//! | 256 | 8 | drops already reported in-band |
//! | 384 | 4 | verdict: 0 served, 3 ([`STATE_QUARANTINED`]) quarantined: a blocked producer stops waiting |
//!
//! A consumer that restarts opens the consumer file again if its magic,
//! version and nonce are the ring's (the producer may have it mapped) and
//! otherwise replaces it.
//!
//! # Lifetimes
//!
//! Each [`ShmProducer::create`] makes a new file `<name>.<pid>.<nonce>.ring`
//! (created under a `.tmp` name, filled, then renamed, so a consumer never
//! sees a half-written header): a restarted dataplane never writes into the
//! file of its previous life, whose records the consumer drains and closes
//! on its own. A clean drop of the producer stores state 2 (Release, after
//! its last tail store); a killed producer leaves state 1, and the consumer
//! finds it dead when `/proc/<pid>/stat` no longer shows the recorded start
//! time.
//!
//! # Ordering
//!
//! - producer: slot bytes, then `tail.store(Release)`; the consumer's
//!   `tail.load(Acquire)` pairs with it;
//! - consumer: copies the slots out, then `head.store(Release)` in the
//!   consumer file; the producer's `head.load(Acquire)` of its read-only
//!   mapping of that file pairs with it, so a slot is not
//!   overwritten while it is copied;
//! - producer drop: last `tail` store, then `state.store(2, Release)`; the
//!   consumer's `state.load(Acquire)` pairs with it, so once it sees 2 it
//!   sees every record;
//! - drop counters: as [`crate::ring`](mod@crate::ring)'s (`dropped_total` Release after the
//!   times, `drops_reported` Release by the consumer in its file);
//! - consumer file: its fields, then the magic by a Release store,
//!   then the rename; the producer maps it only after the rename and
//!   checks the magic with an Acquire load.

mod consumer;
mod guard;
mod layout;
mod producer;
mod reader;

pub use consumer::*;
pub use guard::*;
pub use layout::*;
pub use producer::*;
pub use reader::*;

use core::marker::PhantomData;
use core::mem::size_of;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::config::{Backpressure, LoggerConfig};
use crate::policy::Policy;
use crate::record::Record;
use crate::ring::{split_by_reason, Disconnected, DropDelta, DropReason};
use crate::schema::{FieldKind, Schema};
use crate::sync::WaitSteps;
use crate::table::RecordRules;
