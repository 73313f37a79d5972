//! Fixed-size slots of 32, 64 and 128 bytes for rings that carry records of
//! several types and sizes.
//!
//! A ring's slot size is its element size, so `ring::<Slot64>(n)` is a ring
//! of n 64-byte slots. A record of at most the slot size is packed into a
//! slot with [`Slot64::pack`]; the record's own [`RecordHeader`] (first 8
//! bytes) says how many bytes are valid (`len`) and which schema they follow
//! (`schema_id`), and [`Slot64::unpack`] gives the record back. Bytes after
//! `len` are unspecified.
//!
//! ```
//! use dplog_core::{Record, RecordHeader, Slot32, Slot64};
//!
//! #[repr(C)]
//! #[derive(Clone, Copy)]
//! struct LinkEvent { header: RecordHeader, time_ns: u64, port: u16, up: u8, _pad: [u8; 5] }
//! impl Record for LinkEvent {
//!     const SCHEMA_ID: u16 = 301;
//!     fn header(&self) -> &RecordHeader { &self.header }
//! }
//!
//! #[repr(C)]
//! #[derive(Clone, Copy)]
//! struct Wide { header: RecordHeader, bytes: [u8; 48] }
//! impl Record for Wide {
//!     const SCHEMA_ID: u16 = 302;
//!     fn header(&self) -> &RecordHeader { &self.header }
//! }
//!
//! let link = LinkEvent {
//!     header: RecordHeader::of::<LinkEvent>(),
//!     time_ns: 1_767_225_600_000_000_000,
//!     port: 7,
//!     up: 1,
//!     _pad: [0; 5],
//! };
//! let slot = Slot64::pack(&link)?;
//! assert_eq!(slot.header().schema_id, 301);
//! // SAFETY: the slot was packed from a LinkEvent, whose schema id no
//! // other type uses.
//! let back: LinkEvent = unsafe { slot.unpack() }.expect("a LinkEvent");
//! assert_eq!((back.port, back.up), (7, 1));
//! // A 56-byte record does not fit a 32-byte slot.
//! let wide = Wide { header: RecordHeader::of::<Wide>(), bytes: [0; 48] };
//! assert_eq!(Slot32::pack(&wide).unwrap_err().record, 56);
//! # Ok::<(), dplog_core::SlotTooSmall>(())
//! ```

use core::mem::{align_of, size_of, MaybeUninit};

use crate::record::{Record, RecordHeader};
use crate::table::SchemaTable;

/// Why a record cannot be packed into a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotTooSmall {
    /// Size of the record, bytes.
    pub record: usize,
    /// Size of the slot, bytes.
    pub slot: usize,
}

impl core::fmt::Display for SlotTooSmall {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "record of {} bytes does not fit a {}-byte slot",
            self.record, self.slot
        )
    }
}

impl std::error::Error for SlotTooSmall {}

macro_rules! slot_type {
    ($name:ident, $size:literal) => {
        #[doc = concat!("A ", stringify!($size), "-byte ring slot (see the module docs).")]
        #[repr(C, align($size))]
        #[derive(Clone, Copy)]
        pub struct $name {
            header: RecordHeader,
            body: [MaybeUninit<u8>; $size - 8],
        }

        const _: () = assert!(size_of::<$name>() == $size);

        impl $name {
            /// Slot size in bytes.
            pub const SIZE: usize = $size;

            /// Copies `rec` into a slot. Errors: [`SlotTooSmall`] if `R` is
            /// larger than the slot (or more strictly aligned).
            #[inline]
            pub fn pack<R: Record>(rec: &R) -> Result<Self, SlotTooSmall> {
                if size_of::<R>() > $size || align_of::<R>() > $size || size_of::<R>() < 8 {
                    return Err(SlotTooSmall {
                        record: size_of::<R>(),
                        slot: $size,
                    });
                }
                let mut s = MaybeUninit::<Self>::uninit();
                // SAFETY: `R` fits (checked); copying its bytes (padding
                // included) into the slot's storage is a plain byte copy into
                // `MaybeUninit` memory. The header is the record's first 8
                // bytes (the `Record` contract), so it is initialised; the
                // body is `MaybeUninit<u8>`, valid for any bytes.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        (rec as *const R).cast::<u8>(),
                        s.as_mut_ptr().cast::<u8>(),
                        size_of::<R>(),
                    );
                    Ok(s.assume_init())
                }
            }

            /// The record header at the start of the slot.
            #[inline]
            pub fn header(&self) -> &RecordHeader {
                &self.header
            }

            /// The record's bytes: `header.len` of them, clamped to
            /// `8..=SIZE`.
            #[inline]
            pub fn as_bytes(&self) -> &[u8] {
                let len = usize::from(self.header.len).clamp(8, $size);
                // SAFETY: a slot is made by `pack` or `from_bytes`, which
                // initialise the header and `header.len` bytes; `len` is
                // clamped to the slot, and the borrow keeps `self` alive.
                unsafe { core::slice::from_raw_parts((self as *const Self).cast::<u8>(), len) }
            }

            /// Copies a record given as bytes (header first) into a slot:
            /// `None` if `bytes` is shorter than 8 or longer than the slot,
            /// or its header's `len` disagrees with `bytes.len()`. Bytes
            /// after the record are zero.
            pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
                if !(8..=$size).contains(&bytes.len()) {
                    return None;
                }
                if usize::from(u16::from_ne_bytes([bytes[0], bytes[1]])) != bytes.len() {
                    return None;
                }
                let mut s = MaybeUninit::<Self>::zeroed();
                // SAFETY: `bytes.len()` is at most the slot size; the
                // storage is zeroed, so every byte is initialised, and a
                // header is four u16 (any bit pattern valid).
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        s.as_mut_ptr().cast::<u8>(),
                        bytes.len(),
                    );
                    Some(s.assume_init())
                }
            }

            /// The record, if the header says it is an `R` (schema id and
            /// length match); `None` otherwise.
            ///
            /// # Safety
            /// The slot must have been made by [`pack`](Self::pack) from a
            /// record whose schema id belongs to `R` alone (no two record
            /// types share a schema id), so the bytes are a valid `R`.
            #[inline]
            pub unsafe fn unpack<R: Record>(&self) -> Option<R> {
                let h = self.header;
                if h.schema_id != R::SCHEMA_ID
                    || usize::from(h.len) != size_of::<R>()
                    || size_of::<R>() > $size
                {
                    return None;
                }
                // SAFETY: the caller guarantees the bytes came from an `R`;
                // size and alignment fit (slot alignment = slot size ≥ R's).
                Some(unsafe { core::ptr::read((self as *const Self).cast::<R>()) })
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("header", &self.header)
                    .finish_non_exhaustive()
            }
        }

        impl Slot for $name {
            const BYTES: usize = $size;
            #[inline]
            fn pack_record<R: Record>(rec: &R) -> Result<Self, SlotTooSmall> {
                Self::pack(rec)
            }
            #[inline]
            fn from_record_bytes(bytes: &[u8]) -> Option<Self> {
                Self::from_bytes(bytes)
            }
        }

        impl PartialEq for $name {
            /// Equal when the record bytes (`header.len` of them) are.
            fn eq(&self, other: &Self) -> bool {
                self.as_bytes() == other.as_bytes()
            }
        }

        impl Eq for $name {}

        impl crate::record::RecordBytes for $name {
            #[inline(always)]
            fn record_bytes(&self) -> &[u8] {
                self.as_bytes()
            }
        }

        impl Record for $name {
            /// A slot carries any schema; read [`RecordHeader::schema_id`].
            const SCHEMA_ID: u16 = 0;
            fn header(&self) -> &RecordHeader {
                &self.header
            }
            /// The rule of the record's schema in the logger's table;
            /// [`PRIORITY_NORMAL`](crate::record::PRIORITY_NORMAL) for a
            /// schema the table does not know.
            #[inline]
            fn priority_in(&self, table: &SchemaTable) -> u8 {
                table
                    .priority(self.as_bytes())
                    .unwrap_or(crate::record::PRIORITY_NORMAL)
            }
            /// The schema's event-time field; 0 when it has none.
            #[inline]
            fn event_time_in(&self, table: &SchemaTable) -> u64 {
                table.event_time(self.as_bytes()).unwrap_or(0)
            }
        }
    };
}

/// A ring slot type ([`Slot32`], [`Slot64`], [`Slot128`]): a fixed-size
/// cell that carries any record of at most its size. Lets code be generic
/// over the slot size a config chooses (`[ring] slot_bytes`).
pub trait Slot: Record + crate::record::RecordBytes + PartialEq + core::fmt::Debug {
    /// Slot size in bytes.
    const BYTES: usize;
    /// Copies `rec` into a slot; see [`Slot64::pack`].
    ///
    /// # Errors
    /// [`SlotTooSmall`] if `R` does not fit.
    fn pack_record<R: Record>(rec: &R) -> Result<Self, SlotTooSmall>;
    /// Copies a record given as bytes into a slot; see
    /// [`Slot64::from_bytes`].
    fn from_record_bytes(bytes: &[u8]) -> Option<Self>;
}

slot_type!(Slot32, 32);
slot_type!(Slot64, 64);
slot_type!(Slot128, 128);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::record::test_record::{TestRecord, TEST_SCHEMA_ID};
    use crate::ring::ring;

    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Small {
        header: RecordHeader,
        v: u64,
    }
    impl Record for Small {
        const SCHEMA_ID: u16 = 900;
        fn header(&self) -> &RecordHeader {
            &self.header
        }
    }

    #[test]
    fn mixed_records_share_a_64_byte_ring() {
        let (mut p, mut c) = ring::<Slot64>(4).unwrap();
        let nat = TestRecord {
            src_port: 4242,
            ..Default::default()
        };
        let small = Small {
            header: RecordHeader::of::<Small>(),
            v: 7,
        };
        p.try_push(Slot64::pack(&nat).unwrap()).unwrap();
        p.try_push(Slot64::pack(&small).unwrap()).unwrap();
        let a = c.pop().unwrap();
        let b = c.pop().unwrap();
        assert_eq!((a.header().schema_id, a.header().len), (TEST_SCHEMA_ID, 64));
        assert_eq!((b.header().schema_id, b.header().len), (900, 16));
        // SAFETY: both slots were packed from the types named here, whose
        // schema ids are unique in this test.
        unsafe {
            assert_eq!(a.unpack::<TestRecord>(), Some(nat));
            assert_eq!(a.unpack::<Small>(), None);
            assert_eq!(b.unpack::<Small>(), Some(small));
        }
        assert_eq!(
            Slot32::pack(&nat).err(),
            Some(SlotTooSmall {
                record: 64,
                slot: 32
            })
        );
        assert!(Slot128::pack(&nat).is_ok());
        assert_eq!(size_of::<Slot32>(), 32);
        assert_eq!(size_of::<Slot128>(), 128);
    }
}
