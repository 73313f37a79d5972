//! Fixed-size slots of 32, 64 and 128 bytes for rings that carry records of
//! several types and sizes.
//!
//! A ring's slot size is its element size, so `ring::<Slot64>(n)` is a ring
//! of n 64-byte slots. A record of at most the slot size is packed into a
//! slot with [`Slot64::pack`]; the record's own [`RecordHeader`] (first 8
//! bytes) says how many bytes are valid (`len`) and which schema they follow
//! (`schema_id`), and [`Slot64::unpack`] gives the record back. Bytes after
//! `len` are unspecified.

use core::mem::{align_of, size_of, MaybeUninit};

use crate::record::{Record, RecordHeader};

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

        impl Record for $name {
            /// A slot carries any schema; read [`RecordHeader::schema_id`].
            const SCHEMA_ID: u16 = 0;
            fn header(&self) -> &RecordHeader {
                &self.header
            }
        }
    };
}

slot_type!(Slot32, 32);
slot_type!(Slot64, 64);
slot_type!(Slot128, 128);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::record::{Nat44SessionRecord, SCHEMA_NAT44_SESSION};
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
        let nat = Nat44SessionRecord {
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
        assert_eq!(
            (a.header().schema_id, a.header().len),
            (SCHEMA_NAT44_SESSION, 64)
        );
        assert_eq!((b.header().schema_id, b.header().len), (900, 16));
        // SAFETY: both slots were packed from the types named here, whose
        // schema ids are unique in this test.
        unsafe {
            assert_eq!(a.unpack::<Nat44SessionRecord>(), Some(nat));
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
