//! The metadata setters as a load balancer's C program uses them on its own
//! `lbConn` record: each sets exactly what a Rust schema's builder would,
//! a bad argument changes nothing, and the layout reaches the output.

use std::borrow::Cow;

use dplog::schema::{FieldValues, IeBy, NameBy, OnlyWhen, SchemaMeta, SdParam, SyslogMeta};

use super::*;
use crate::handle::{logger, State};
use crate::result::{DPLOG_ERR_STATE, DPLOG_ERR_UNKNOWN_SCHEMA, DPLOG_OK};
use crate::testutil::{open, start_with_producer};
use crate::tombstone::lock;
use crate::types::{
    dplog_field_desc, DPLOG_FIELD_IPV4, DPLOG_FIELD_NS_TIMESTAMP, DPLOG_FIELD_PORT,
    DPLOG_FIELD_U64, DPLOG_FIELD_U8,
};

/// `lbConn`, 40 bytes: connTime (ns), connEvent (u8), vip, vport, bytes.
const LB_CONN_BYTES: usize = 40;

fn register_lb_conn(h: *mut dplog_t) -> u16 {
    let f = |name: &'static std::ffi::CStr, offset, size, kind| dplog_field_desc {
        name: name.as_ptr(),
        offset,
        size,
        kind,
        ie_id: 0,
        enum_names: core::ptr::null(),
        enum_count: 0,
    };
    let fields = [
        f(c"connTime", 8, 8, DPLOG_FIELD_NS_TIMESTAMP),
        f(c"connEvent", 16, 1, DPLOG_FIELD_U8),
        f(c"vip", 20, 4, DPLOG_FIELD_IPV4),
        f(c"vport", 24, 2, DPLOG_FIELD_PORT),
        f(c"bytes", 32, 8, DPLOG_FIELD_U64),
    ];
    let mut id = 0u16;
    // SAFETY: h is live; the names and descriptors are valid.
    let rc = unsafe {
        crate::dplog_schema_register(
            h,
            c"lbConn".as_ptr(),
            LB_CONN_BYTES,
            fields.as_ptr(),
            5,
            &mut id,
        )
    };
    assert_eq!(rc, DPLOG_OK);
    id
}

/// The metadata of registered schema `id` of `h` (opened, not started).
fn meta_of(h: *mut dplog_t, id: u16) -> SchemaMeta {
    // SAFETY: h is live (the test's own handle).
    let l = unsafe { logger(h) }.unwrap();
    let st = lock(&l.state);
    let State::Opened(p) = &*st else {
        panic!("opened")
    };
    p.schemas
        .iter()
        .find(|s| s.id() == id)
        .unwrap()
        .meta()
        .clone()
}

fn close(h: *mut dplog_t) {
    // SAFETY: h is live; no stats wanted.
    let r = unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
    assert_eq!(r, DPLOG_OK);
}

/// `dplog_schema_set_syslog(h, id, "lb", "connEvent", {1, 2} → {OPEN,
/// CLOSE}, "lb@32473", {vip ← vip, v ← "=1"})`.
fn set_lb_syslog(h: *mut dplog_t, id: u16, vip_source: &std::ffi::CStr) -> dplog_result {
    let values = [1u64, 2];
    let ids = [c"OPEN".as_ptr(), c"CLOSE".as_ptr()];
    let names = [c"vip".as_ptr(), c"v".as_ptr()];
    let sources = [vip_source.as_ptr(), c"=1".as_ptr()];
    // SAFETY: h is live; every array is valid for its count.
    unsafe {
        dplog_schema_set_syslog(
            h,
            id,
            c"lb".as_ptr(),
            c"connEvent".as_ptr(),
            values.as_ptr(),
            ids.as_ptr(),
            2,
            c"lb@32473".as_ptr(),
            names.as_ptr(),
            sources.as_ptr(),
            2,
        )
    }
}

#[test]
fn each_setter_declares_what_the_rust_builder_would_and_a_bad_call_changes_nothing() {
    let h = open("[sink]\ntype = \"file\"\npath = \"/dev/null\"\n");
    let id = register_lb_conn(h);
    let default = meta_of(h, id);

    // Syslog: an unknown parameter source is refused, naming it.
    assert_eq!(set_lb_syslog(h, id, c"vipp"), DPLOG_ERR_INVALID_ARG);
    assert!(crate::testutil::last_error().contains("no field \"vipp\" (the SD parameter)"));
    assert_eq!(meta_of(h, id), default);
    assert_eq!(set_lb_syslog(h, id, c"vip"), DPLOG_OK);
    let want = SyslogMeta {
        app_name: Some(Cow::Borrowed("lb")),
        msgid_by: Some(FieldValues {
            field: 1,
            values: vec![(1, Cow::Borrowed("OPEN")), (2, Cow::Borrowed("CLOSE"))],
        }),
        sd_id: Some(Cow::Borrowed("lb@32473")),
        params: vec![
            (Cow::Borrowed("vip"), SdParam::Field(2)),
            (Cow::Borrowed("v"), SdParam::Const(Cow::Borrowed("1"))),
        ],
        profiles: Vec::new(),
    };
    assert_eq!(meta_of(h, id).syslog, want);
    // MSGIDs without their field: NULL.
    let values = [1u64];
    let ids = [c"OPEN".as_ptr()];
    // SAFETY: h is live; the arrays hold one entry each.
    let r = unsafe {
        dplog_schema_set_syslog(
            h,
            id,
            core::ptr::null(),
            core::ptr::null(),
            values.as_ptr(),
            ids.as_ptr(),
            1,
            core::ptr::null(),
            core::ptr::null(),
            core::ptr::null(),
            0,
        )
    };
    assert_eq!(r, DPLOG_ERR_NULL);
    assert_eq!(meta_of(h, id).syslog, want);

    // IPFIX element by value: 32768 and above are refused.
    let sel = [1u32, 2];
    let ies = [471u16, 40000];
    // SAFETY: h is live; the arrays hold two entries.
    let r = unsafe {
        dplog_schema_set_ipfix_ie_by(
            h,
            id,
            c"bytes".as_ptr(),
            c"connEvent".as_ptr(),
            sel.as_ptr(),
            ies.as_ptr(),
            2,
        )
    };
    assert_eq!(r, DPLOG_ERR_INVALID_ARG);
    assert_eq!(meta_of(h, id).ipfix_ie_by, None);
    // An IANA element the field cannot carry: the u64 `bytes` as
    // sourceIPv4Address (8, ipv4Address).
    let ies = [471u16, 8];
    // SAFETY: as above.
    let r = unsafe {
        dplog_schema_set_ipfix_ie_by(
            h,
            id,
            c"bytes".as_ptr(),
            c"connEvent".as_ptr(),
            sel.as_ptr(),
            ies.as_ptr(),
            2,
        )
    };
    assert_eq!(r, DPLOG_ERR_INVALID_ARG);
    assert_eq!(meta_of(h, id).ipfix_ie_by, None);
    let ies = [471u16, 472];
    // SAFETY: as above.
    let r = unsafe {
        dplog_schema_set_ipfix_ie_by(
            h,
            id,
            c"bytes".as_ptr(),
            c"connEvent".as_ptr(),
            sel.as_ptr(),
            ies.as_ptr(),
            2,
        )
    };
    assert_eq!(r, DPLOG_OK);
    assert_eq!(
        meta_of(h, id).ipfix_ie_by,
        Some(IeBy {
            field: 4,
            selector: 1,
            ies: vec![(1, 471), (2, 472)]
        })
    );

    // Name by value: a name that is no identifier is refused.
    let bad = [c"bytesIn".as_ptr(), c"bytes out".as_ptr()];
    // SAFETY: h is live; the arrays hold two entries.
    let r = unsafe {
        dplog_schema_set_name_by(
            h,
            id,
            c"bytes".as_ptr(),
            c"connEvent".as_ptr(),
            sel.as_ptr(),
            bad.as_ptr(),
            2,
        )
    };
    assert_eq!(r, DPLOG_ERR_INVALID_ARG);
    assert_eq!(meta_of(h, id).name_by, None);
    // So is a name the formats keep for their own keys and columns.
    for reserved in [c"timestamp", c"recordType", c"dplogDropped", c"_dplogEv"] {
        let bad = [c"bytesIn".as_ptr(), reserved.as_ptr()];
        // SAFETY: h is live; the arrays hold two entries.
        let r = unsafe {
            dplog_schema_set_name_by(
                h,
                id,
                c"bytes".as_ptr(),
                c"connEvent".as_ptr(),
                sel.as_ptr(),
                bad.as_ptr(),
                2,
            )
        };
        assert_eq!(r, DPLOG_ERR_INVALID_ARG);
        let msg = crate::testutil::last_error();
        let name = reserved.to_str().unwrap();
        assert!(
            msg.starts_with(&format!(
                "dplog_schema_set_name_by: schema lbConn: name by value: field bytes: name {name} for value 2 is reserved ("
            )) && msg.ends_with("; choose another name"),
            "{msg}"
        );
        assert_eq!(meta_of(h, id).name_by, None);
    }
    let good = [c"bytesIn".as_ptr(), c"bytesOut".as_ptr()];
    // SAFETY: as above.
    let r = unsafe {
        dplog_schema_set_name_by(
            h,
            id,
            c"bytes".as_ptr(),
            c"connEvent".as_ptr(),
            sel.as_ptr(),
            good.as_ptr(),
            2,
        )
    };
    assert_eq!(r, DPLOG_OK);
    assert_eq!(
        meta_of(h, id).name_by,
        Some(NameBy {
            field: 4,
            selector: 1,
            names: vec![
                (1, Cow::Borrowed("bytesIn")),
                (2, Cow::Borrowed("bytesOut"))
            ]
        })
    );

    // Fields only when: a non-integer `when` (the address is one; an
    // unknown name is not) is refused.
    let fields = [c"bytes".as_ptr()];
    // SAFETY: h is live; `fields` holds one name.
    let r = unsafe {
        dplog_schema_set_fields_only_when(h, id, c"event".as_ptr(), 2, fields.as_ptr(), 1)
    };
    assert_eq!(r, DPLOG_ERR_INVALID_ARG);
    assert_eq!(meta_of(h, id).only_when, None);
    // SAFETY: as above.
    let r = unsafe {
        dplog_schema_set_fields_only_when(h, id, c"connEvent".as_ptr(), 2, fields.as_ptr(), 1)
    };
    assert_eq!(r, DPLOG_OK);
    assert_eq!(
        meta_of(h, id).only_when,
        Some(OnlyWhen {
            field: 1,
            equals: 2,
            fields: vec![4]
        })
    );
    // n == 0 removes it, `when` may be NULL then.
    // SAFETY: h is live; nothing is read with n == 0.
    let r = unsafe {
        dplog_schema_set_fields_only_when(h, id, core::ptr::null(), 0, core::ptr::null(), 0)
    };
    assert_eq!(r, DPLOG_OK);
    assert_eq!(meta_of(h, id).only_when, None);

    // SAFETY: h is live.
    assert_eq!(unsafe { dplog_schema_set_enum_numbers(h, id, 1) }, DPLOG_OK);
    assert!(meta_of(h, id).enum_numbers);
    // SAFETY: h is live.
    let r = unsafe { dplog_schema_set_enum_numbers(h, id + 1, 1) };
    assert_eq!(r, DPLOG_ERR_UNKNOWN_SCHEMA);
    close(h);
}

/// The layout declared from C is what the handle's own rfc5424 sink prints,
/// and after `dplog_start` the setters refuse.
#[test]
fn a_syslog_layout_set_from_c_is_what_the_sink_prints() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lb.log");
    let h = open(&format!(
        "[format]\ntype = \"rfc5424\"\n[sink]\ntype = \"file\"\npath = {:?}\n",
        path.to_str().unwrap()
    ));
    let id = register_lb_conn(h);
    assert_eq!(set_lb_syslog(h, id, c"vip"), DPLOG_OK);
    let p = start_with_producer(h);
    assert_eq!(set_lb_syslog(h, id, c"vip"), DPLOG_ERR_STATE);
    let mut rec = [0u8; LB_CONN_BYTES];
    rec[0..2].copy_from_slice(&(LB_CONN_BYTES as u16).to_ne_bytes());
    rec[2..4].copy_from_slice(&id.to_ne_bytes());
    rec[8..16].copy_from_slice(&1_767_225_600_000_000_000u64.to_ne_bytes());
    rec[16] = 2;
    rec[20..24].copy_from_slice(&0xC000_020Au32.to_ne_bytes());
    rec[24..26].copy_from_slice(&443u16.to_ne_bytes());
    // SAFETY: p is live; rec holds one record.
    let r = unsafe { crate::dplog_log(p, id, rec.as_ptr().cast(), LB_CONN_BYTES) };
    assert_eq!(r, DPLOG_OK);
    // SAFETY: p is live, freed once.
    assert_eq!(unsafe { crate::dplog_producer_free(p) }, DPLOG_OK);
    close(h);
    let out = std::fs::read_to_string(&path).unwrap();
    let line = out.lines().next().unwrap();
    // <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID [SD]
    let parts: Vec<&str> = line.splitn(8, ' ').collect();
    assert_eq!(parts[3], "lb", "{line}");
    assert_eq!(parts[5], "CLOSE", "{line}");
    assert_eq!(parts[6], "[lb@32473", "{line}");
    assert!(
        parts[7].starts_with("vip=\"192.0.2.10\" v=\"1\"]"),
        "{line}"
    );
}
