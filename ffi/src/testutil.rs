//! The C calls the unit tests make as a user would: open a handle from a
//! config text, declare a record type of their own (a DNS query: the
//! 8-byte header, then `qtype`, a u32; 16 bytes), start, take a producer
//! and log.

use crate::handle::dplog_t;
use crate::producer::dplog_producer_t;
use crate::result::{dplog_result, DPLOG_OK};
use crate::types::{dplog_field_desc, DPLOG_FIELD_U32};

/// Size of a [`register_dns_query`] record, bytes.
pub(crate) const DNS_QUERY_BYTES: usize = 16;

/// A handle opened from the config `text`; panics if it is refused.
pub(crate) fn open(text: &str) -> *mut dplog_t {
    let text = std::ffi::CString::new(text).unwrap();
    let mut h: *mut dplog_t = core::ptr::null_mut();
    // SAFETY: the text is NUL-terminated; h is writable.
    let rc = unsafe { crate::dplog_open_str(text.as_ptr(), &mut h) };
    assert_eq!(rc, DPLOG_OK);
    h
}

/// Registers a record type `name` of `size` bytes on `h` (opened, not
/// started) with one field `field` (8 bytes of header before it, `field_size`
/// bytes of `kind`); its id.
pub(crate) fn register_one_field(
    h: *mut dplog_t,
    name: &std::ffi::CStr,
    size: usize,
    field: &std::ffi::CStr,
    field_size: u32,
    kind: u32,
) -> u16 {
    let fields = [dplog_field_desc {
        name: field.as_ptr(),
        offset: 8,
        size: field_size,
        kind,
        ie_id: 0,
        enum_names: core::ptr::null(),
        enum_count: 0,
    }];
    let mut id = 0u16;
    // SAFETY: h is live (caller); the names and descriptor are valid.
    let rc = unsafe {
        crate::dplog_schema_register(h, name.as_ptr(), size, fields.as_ptr(), 1, &mut id)
    };
    assert_eq!(rc, DPLOG_OK);
    id
}

/// Registers the `dnsQuery` type on `h` (opened, not started); its id.
pub(crate) fn register_dns_query(h: *mut dplog_t) -> u16 {
    register_one_field(
        h,
        c"dnsQuery",
        DNS_QUERY_BYTES,
        c"qtype",
        4,
        DPLOG_FIELD_U32,
    )
}

/// Starts `h` (one consumer) and returns a producer of ring 0.
pub(crate) fn start_with_producer(h: *mut dplog_t) -> *mut dplog_producer_t {
    // SAFETY: h is live (caller).
    let rc = unsafe { crate::dplog_start(h, core::ptr::null(), 0) };
    assert_eq!(rc, DPLOG_OK);
    let mut p: *mut dplog_producer_t = core::ptr::null_mut();
    // SAFETY: h is live; p is writable.
    let rc = unsafe { crate::dplog_producer_new(h, 0, &mut p) };
    assert_eq!(rc, DPLOG_OK);
    p
}

/// Logs one `dnsQuery` record of type `id` with `qtype` on `p`.
pub(crate) fn log_dns_query(p: *mut dplog_producer_t, id: u16, qtype: u32) -> dplog_result {
    let mut rec = [0u8; DNS_QUERY_BYTES];
    rec[8..12].copy_from_slice(&qtype.to_ne_bytes());
    // SAFETY: p is a live producer (caller); rec holds the record.
    unsafe { crate::dplog_log(p, id, rec.as_ptr().cast(), DNS_QUERY_BYTES) }
}

/// This thread's `dplog_last_error` message.
pub(crate) fn last_error() -> String {
    let mut buf = [0 as std::ffi::c_char; 1024];
    // SAFETY: buf is valid for its length; no length wanted.
    let rc = unsafe { crate::dplog_last_error(buf.as_mut_ptr(), buf.len(), core::ptr::null_mut()) };
    assert_eq!(rc, DPLOG_OK);
    // SAFETY: dplog_last_error NUL-terminated it within buf.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}
