//! Fixed-size binary records and their header.
//!
//! Every record starts with a [`RecordHeader`] that carries the record's total
//! length in bytes and its schema id, so a consumer (or a file of binary
//! records) can tell record types apart without out-of-band knowledge.
//! Records are `#[repr(C)]`, `Copy` and contain no pointers: a producer copies
//! them into ring slots by value.

use crate::rules::SchemaTable;

/// Header at offset 0 of every record. 8 bytes.
///
/// | offset | size | field       | meaning                                        |
/// |--------|------|-------------|------------------------------------------------|
/// | 0      | 2    | `len`       | total record length in bytes, header included  |
/// | 2      | 2    | `schema_id` | which schema describes the bytes that follow   |
/// | 4      | 2    | `flags`     | reserved for record-level flags, 0 today       |
/// | 6      | 2    | `reserved`  | must be 0                                      |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RecordHeader {
    /// Total record length in bytes, this header included.
    pub len: u16,
    /// Schema id: which [`Schema`](crate::Schema) describes the record.
    pub schema_id: u16,
    /// Record flags; 0 today.
    pub flags: u16,
    /// Reserved; 0.
    pub reserved: u16,
}

impl RecordHeader {
    /// The header for a record of type `R`.
    pub const fn of<R: Record>() -> Self {
        Self {
            len: core::mem::size_of::<R>() as u16,
            schema_id: R::SCHEMA_ID,
            flags: 0,
            reserved: 0,
        }
    }
}

/// A fixed-size record that can travel through a dplog ring.
///
/// Implementors are `#[repr(C)]`, `Copy`, pointer-free, start with a
/// [`RecordHeader`] and are at most 128 bytes long.
///
/// To be formatted a record type also needs a schema
/// ([`HasSchema`](crate::HasSchema), built with [`schema!`](crate::schema!));
/// the `dplog` crate's quick start shows both.
///
/// # Examples
///
/// A load balancer's health-check result, whose "backend down" records
/// outrank routine ones under the `degrade` backpressure policy:
///
/// ```
/// use dplog_core::{Record, RecordHeader, PRIORITY_HIGH, PRIORITY_NORMAL};
///
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct HealthCheck {
///     header: RecordHeader, // first, always
///     time_ns: u64,
///     backend: u32,         // IPv4, host order
///     up: u8,
///     _pad: [u8; 3],        // explicit: 24 bytes, no implicit padding
/// }
///
/// impl Record for HealthCheck {
///     const SCHEMA_ID: u16 = 700; // unique among a logger's record types
///     fn header(&self) -> &RecordHeader {
///         &self.header
///     }
///     fn priority(&self) -> u8 {
///         if self.up == 0 { PRIORITY_HIGH } else { PRIORITY_NORMAL }
///     }
/// }
///
/// let down = HealthCheck {
///     header: RecordHeader::of::<HealthCheck>(),
///     time_ns: 1_767_225_600_000_000_000,
///     backend: 0x0A00_0105,
///     up: 0,
///     _pad: [0; 3],
/// };
/// assert_eq!((down.header().len, down.header().schema_id), (24, 700));
/// assert_eq!(down.priority(), PRIORITY_HIGH);
/// ```
pub trait Record: Copy + Send + 'static {
    /// The schema id written into [`RecordHeader::schema_id`].
    const SCHEMA_ID: u16;
    /// The record's header.
    fn header(&self) -> &RecordHeader;
    /// Priority under the `degrade` backpressure policy: above the high
    /// watermark only records with `priority() >=` the configured minimum
    /// are accepted. Default [`PRIORITY_NORMAL`].
    fn priority(&self) -> u8 {
        PRIORITY_NORMAL
    }
    /// Event time for the consumer's reorder window (the record's
    /// timestamp, in the unit the producer stamps, normally ns since the
    /// Unix epoch). Default 0: no time, the window passes the record through
    /// in ring order.
    fn event_time(&self) -> u64 {
        0
    }
    /// Priority under `degrade` with the logger's [`SchemaTable`]: the
    /// table's rule for this record's schema (declared by the schema,
    /// overridable per record type in config) when it has one, else
    /// [`priority`](Self::priority). Slots ([`Slot64`](crate::Slot64) & co)
    /// read the rule against their bytes.
    #[inline]
    fn priority_in(&self, table: &SchemaTable) -> u8 {
        table
            .priority_of_type(self.header().schema_id)
            .unwrap_or_else(|| self.priority())
    }
    /// Event time with the logger's [`SchemaTable`]: by default
    /// [`event_time`](Self::event_time); slots read the schema's event-time
    /// field from their bytes.
    #[inline]
    fn event_time_in(&self, table: &SchemaTable) -> u64 {
        let _ = table;
        self.event_time()
    }
}

/// A record whose bytes (header first, `header.len` of them) can be read:
/// every [`HasSchema`](crate::HasSchema) type and the slot types. The
/// formatters take records through it.
pub trait RecordBytes: Record {
    /// The record's bytes, header included.
    fn record_bytes(&self) -> &[u8];
}

/// Record priority for `degrade`: routine records (the default of every
/// schema).
pub const PRIORITY_NORMAL: u8 = 1;
/// Record priority for `degrade`: records that outrank routine ones (e.g. a
/// session delete with its counters; the default minimum accepted while
/// degraded).
pub const PRIORITY_HIGH: u8 = 2;

const _: () = assert!(core::mem::size_of::<RecordHeader>() == 8);

#[cfg(test)]
pub(crate) mod test_record {
    //! A 64-byte record for the unit tests of the rings and the runtime
    //! (the NAT44 session layout, without the NAT crate, which depends on
    //! this one).
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub(crate) struct TestRecord {
        pub header: RecordHeader,
        pub timestamp_ns: u64,
        pub src_addr: u32,
        pub post_nat_src_addr: u32,
        pub dst_addr: u32,
        pub src_port: u16,
        pub post_napt_src_port: u16,
        pub dst_port: u16,
        pub protocol: u8,
        pub nat_event: u8,
        pub ingress_vrf_id: u32,
        pub initiator_packets: u32,
        pub responder_packets: u32,
        pub initiator_octets: u64,
        pub responder_octets: u64,
    }
    const _: () = assert!(core::mem::size_of::<TestRecord>() == 64);

    pub(crate) const TEST_SCHEMA_ID: u16 = 1;
    pub(crate) const CREATE: u8 = 4;
    pub(crate) const DELETE: u8 = 5;

    impl Default for TestRecord {
        fn default() -> Self {
            // SAFETY: repr(C) plain integers; all-zero is a valid value.
            let mut r: Self = unsafe { core::mem::zeroed() };
            r.header = RecordHeader::of::<Self>();
            r
        }
    }

    impl Record for TestRecord {
        const SCHEMA_ID: u16 = TEST_SCHEMA_ID;
        fn header(&self) -> &RecordHeader {
            &self.header
        }
        fn priority(&self) -> u8 {
            if self.nat_event == CREATE {
                PRIORITY_NORMAL
            } else {
                PRIORITY_HIGH
            }
        }
        fn event_time(&self) -> u64 {
            self.timestamp_ns
        }
    }
}
