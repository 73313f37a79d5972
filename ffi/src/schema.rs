//! User record types: `dplog_schema_register` and the settings of a
//! registered schema. The table of record sizes by schema id that
//! producers check records against is `crate::sizes`.

use std::ffi::c_char;

use dplog::Schema;

use crate::handle::{dplog_t, logger};
use crate::result::{
    dplog_result, fail, guard, DPLOG_ERR_BAD_LENGTH, DPLOG_ERR_EXISTS, DPLOG_ERR_INVALID_ARG,
    DPLOG_ERR_NULL, DPLOG_ERR_STATE, DPLOG_ERR_UNKNOWN_SCHEMA, DPLOG_OK,
};
use crate::tombstone::lock;
use crate::types::{dplog_field_desc, DPLOG_RECORD_MAX_SIZE, DPLOG_SCHEMA_USER_FIRST};

/// Registers a user record type described by `n_fields` field descriptors
/// and stores its new schema id (`DPLOG_SCHEMA_USER_FIRST`, then +1 per
/// call) in `*schema_id`. Records of that id are then logged like the
/// built-in ones (`dplog_log(p, id, &rec, record_size)`) and formatted by
/// the configured format with the field names given (text, JSON, ...).
/// `name` names the record type (e.g. in templates). Everything is copied;
/// the arrays may be freed after the call.
///
/// The record starts with a `struct dplog_record_header` (8 bytes, filled
/// by dplog), so fields lie in `8..record_size`; `record_size` is at most
/// the logger's slot size (`[ring] slot_bytes`: 32, 64 or 128, default
/// 64; `DPLOG_RECORD_MAX_SIZE` is 128). The type's name may key
/// `[format.templates]` and `[ring.priorities]` (both applied at
/// `dplog_start`); `[format] template` applies to the first type
/// registered.
///
/// Errors: `DPLOG_ERR_NULL` (handle, `name`, `schema_id`, or `fields` with
/// `n_fields > 0`), `DPLOG_ERR_BAD_LENGTH` (`record_size` below 8 or above
/// the logger's slot size; `dplog_last_error` names both sizes and the
/// `[ring] slot_bytes` to set),
/// `DPLOG_ERR_INVALID_ARG` (a field out of bounds, overlapping, of a size
/// that does not suit its kind, an unknown kind, a bad or duplicate name,
/// a reserved name that a format writes as its own key or column:
/// `timestamp`, `recordType`, any name starting with `dplog` or `_dplog`;
/// `dplog_last_error` names the field; no fields, `n_fields == 0`; more
/// fields than the record can hold, `n_fields > record_size - 8`, refused
/// before the descriptors are read), `DPLOG_ERR_EXISTS` (`name` is
/// already registered on this handle or is a built-in NAT schema's name;
/// schema ids are handed out by dplog, never chosen by the caller, so they
/// cannot collide), `DPLOG_ERR_STATE` (after `dplog_start`: register every
/// type first), `DPLOG_ERR_CLOSED`. On any error no id is used up.
/// Thread-safety: any thread.
///
/// # Safety
/// `name` and every string in the descriptors are NULL or NUL-terminated;
/// `fields` is valid for `n_fields` descriptors, each `enum_names` for
/// `enum_count` entries; `schema_id` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_register(
    h: *mut dplog_t,
    name: *const c_char,
    record_size: usize,
    fields: *const dplog_field_desc,
    n_fields: usize,
    schema_id: *mut u16,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if name.is_null() || schema_id.is_null() || (fields.is_null() && n_fields > 0) {
            return fail(DPLOG_ERR_NULL, "dplog_schema_register: NULL argument");
        }
        let slot = l.slot_bytes;
        if record_size < 8 {
            return fail(
                DPLOG_ERR_BAD_LENGTH,
                format!("record size {record_size}: a record has at least its 8-byte header"),
            );
        }
        if record_size > slot {
            let advice = match [32usize, 64, 128].into_iter().find(|&b| b >= record_size) {
                Some(b) => format!("set [ring] slot_bytes = {b} in the config"),
                None => format!("the largest slot is {DPLOG_RECORD_MAX_SIZE} bytes"),
            };
            return fail(
                DPLOG_ERR_BAD_LENGTH,
                format!(
                    "record size {record_size} bytes does not fit this logger's \
                     {slot}-byte ring slots ([ring] slot_bytes = {slot}); {advice}"
                ),
            );
        }
        let mut st = lock(&l.state);
        let pending = match st.opened("dplog_schema_register: register before dplog_start") {
            Ok(p) => p,
            Err(e) => return e,
        };
        let Ok(id) = u16::try_from(usize::from(DPLOG_SCHEMA_USER_FIRST) + pending.schemas.len())
        else {
            return fail(DPLOG_ERR_INVALID_ARG, "too many schemas");
        };
        // SAFETY: the caller's contract above; dplog_field_desc has the
        // layout of DplogFieldDesc (checked at compile time above).
        let schema =
            unsafe { Schema::from_c_descriptors(id, name, record_size, fields.cast(), n_fields) };
        match schema {
            Ok(s) => {
                // Names key templates and formatted output, so two types
                // of one name would be ambiguous. Ids are handed out here,
                // never chosen by the caller, so they cannot collide.
                // Every NAT name is taken, even of a NAT type the slot
                // cannot carry: a config naming it stays unambiguous.
                let nat = dplog::nat::all();
                if let Some(prev) = nat
                    .iter()
                    .copied()
                    .chain(pending.schemas.iter())
                    .find(|p| p.name() == s.name())
                {
                    return fail(
                        DPLOG_ERR_EXISTS,
                        format!(
                            "schema name \"{}\" is already registered (id {})",
                            s.name(),
                            prev.id()
                        ),
                    );
                }
                pending.schemas.push(s);
                // SAFETY: non-NULL (checked), writable (caller contract).
                unsafe { schema_id.write(id) };
                DPLOG_OK
            }
            Err(e) => fail(DPLOG_ERR_INVALID_ARG, format!("schema: {e}")),
        }
    })
}

/// The registered, not yet started schema `schema_id` of handle `h`, for
/// `f` to change; the errors every `dplog_schema_set_*` shares.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`.
pub(crate) unsafe fn with_pending_schema(
    h: *mut dplog_t,
    what: &str,
    schema_id: u16,
    f: impl FnOnce(Schema) -> Result<Schema, dplog_result>,
) -> dplog_result {
    // SAFETY: caller contract on h.
    let l = match unsafe { logger(h) } {
        Ok(l) => l,
        Err(e) => return e,
    };
    let mut st = lock(&l.state);
    let pending = match st.opened(format!(
        "{what}: declare a schema's metadata before dplog_start or dplog_attach"
    )) {
        Ok(p) => p,
        Err(e) => return e,
    };
    // An attached ring already declared its schemas to dplogd (the lock
    // order of dplog_attach: the state, then the ring ids).
    if !lock(&l.shared.rings).is_empty() {
        return fail(
            DPLOG_ERR_STATE,
            format!("{what}: a ring is attached; declare a schema's metadata before dplog_attach"),
        );
    }
    let Some(slot) = pending.schemas.iter_mut().find(|s| s.id() == schema_id) else {
        return fail(
            DPLOG_ERR_UNKNOWN_SCHEMA,
            format!(
                "{what}: schema id {schema_id} is not registered on this handle \
                 (dplog_schema_register; the NAT schemas' metadata is built in)"
            ),
        );
    };
    match f(slot.clone()) {
        Ok(s) => {
            *slot = s;
            DPLOG_OK
        }
        Err(e) => e,
    }
}

/// The `n` NUL-terminated strings of `names` as `&str`s.
///
/// # Safety
/// `names` is NULL (only with `n == 0`) or valid for `n` pointers, each
/// NULL or NUL-terminated.
pub(crate) unsafe fn c_names<'a>(
    what: &str,
    list: &str,
    names: *const *const c_char,
    n: usize,
) -> Result<Vec<&'a str>, dplog_result> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if names.is_null() {
        return Err(fail(
            DPLOG_ERR_NULL,
            format!("{what}: {list} is NULL with {n} entries"),
        ));
    }
    too_long(what, list, n)?;
    // SAFETY: non-NULL, valid for n pointers (caller contract).
    let ptrs = unsafe { std::slice::from_raw_parts(names, n) };
    ptrs.iter()
        .enumerate()
        .map(|(i, &p)| {
            if p.is_null() {
                return Err(fail(DPLOG_ERR_NULL, format!("{what}: {list}[{i}] is NULL")));
            }
            // SAFETY: non-NULL and NUL-terminated (caller contract).
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_str()
                .map_err(|_| {
                    fail(
                        DPLOG_ERR_INVALID_ARG,
                        format!("{what}: {list}[{i}] is not UTF-8"),
                    )
                })
        })
        .collect()
}

/// Longest list a schema's metadata can hold: its encoding counts
/// entries in 16 bits (and a schema has fewer fields).
const LIST_MAX: usize = u16::MAX as usize;

/// `DPLOG_ERR_INVALID_ARG` for a list of more than [`LIST_MAX`] entries,
/// checked before the list is read (a count of `SIZE_MAX` is no list).
fn too_long(what: &str, list: &str, n: usize) -> Result<(), dplog_result> {
    if n > LIST_MAX {
        return Err(fail(
            DPLOG_ERR_INVALID_ARG,
            format!("{what}: {list} has {n} entries, at most {LIST_MAX}"),
        ));
    }
    Ok(())
}

/// The `n` values of `values` (NULL only with `n == 0`).
///
/// # Safety
/// `values` is NULL or valid for `n` values.
pub(crate) unsafe fn c_values<'a, T>(
    what: &str,
    list: &str,
    values: *const T,
    n: usize,
) -> Result<&'a [T], dplog_result> {
    if n == 0 {
        return Ok(&[]);
    }
    if values.is_null() {
        return Err(fail(
            DPLOG_ERR_NULL,
            format!("{what}: {list} is NULL with {n} entries"),
        ));
    }
    too_long(what, list, n)?;
    // SAFETY: non-NULL, valid for n values (caller contract).
    Ok(unsafe { std::slice::from_raw_parts(values, n) })
}

/// Declares the lifecycle of registered record type `schema_id`: its
/// records open and close states (a load balancer's connections, a
/// firewall's flows), and the declaration travels in the metadata of every
/// log the handle writes (binary, archive, mmap, a ring dplogd drains), so
/// `dplog-query --at T` answers what was live at T from the log alone.
///
/// `event_field` names an integer field (an enum, a `U8`..`U64`, at most
/// 8 bytes) whose value says what a record does: the `n_opens` values of
/// `opens` open a state, the `n_closes` values of `closes` close one, any
/// other value is neither (e.g. a refused connection). The `n_keys` field
/// names of `keys` identify a state (a close belongs to the latest open
/// before it with the same key values); the `n_close_only` names of
/// `close_only` are fields only a close carries (byte counters). Field
/// names are those given to `dplog_schema_register`. A second call
/// replaces the lifecycle. Everything is copied.
///
/// Errors: `DPLOG_ERR_NULL` (handle, `event_field`, an array with a
/// non-zero count, or a NULL name in it), `DPLOG_ERR_UNKNOWN_SCHEMA`
/// (`schema_id` not registered on this handle), `DPLOG_ERR_INVALID_ARG`
/// (an unknown field name, an event field that is no integer of at most
/// 8 bytes, no opening or closing value, a value both opening and
/// closing or too large for the field, no key, a field listed twice;
/// `dplog_last_error` names it), `DPLOG_ERR_STATE` (after `dplog_start`
/// or `dplog_attach`), `DPLOG_ERR_CLOSED`. On an error the schema keeps
/// what it declared before. Thread-safety: any thread.
///
/// # Safety
/// `event_field` and every name are NULL or NUL-terminated; each array is
/// NULL or valid for its count.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_set_lifecycle(
    h: *mut dplog_t,
    schema_id: u16,
    event_field: *const c_char,
    opens: *const u64,
    n_opens: usize,
    closes: *const u64,
    n_closes: usize,
    keys: *const *const c_char,
    n_keys: usize,
    close_only: *const *const c_char,
    n_close_only: usize,
) -> dplog_result {
    guard(|| {
        const WHAT: &str = "dplog_schema_set_lifecycle";
        // A NULL or closed handle is reported before the arguments.
        // SAFETY: caller contract on h.
        if let Err(e) = unsafe { logger(h) } {
            return e;
        }
        // SAFETY: the caller's contract on every pointer.
        let args = unsafe {
            (|| {
                let field = c_names(WHAT, "event_field", &event_field, 1)?[0];
                Ok::<_, dplog_result>((
                    field,
                    c_values(WHAT, "opens", opens, n_opens)?,
                    c_values(WHAT, "closes", closes, n_closes)?,
                    c_names(WHAT, "keys", keys, n_keys)?,
                    c_names(WHAT, "close_only", close_only, n_close_only)?,
                ))
            })()
        };
        let (field, opens, closes, keys, close_only) = match args {
            Ok(a) => a,
            Err(e) => return e,
        };
        // SAFETY: caller contract on h.
        unsafe {
            with_pending_schema(h, WHAT, schema_id, |s| {
                let name = s.name().to_string();
                s.with_lifecycle(field, opens, closes, &keys, &close_only)
                    .map_err(|e| fail(DPLOG_ERR_INVALID_ARG, format!("{WHAT}: schema {name}: {e}")))
            })
        }
    })
}

/// Declares which field of registered record type `schema_id` is its
/// event time: `field` names a `DPLOG_FIELD_NS_TIMESTAMP` or
/// `DPLOG_FIELD_TSC_TIMESTAMP` field, or is NULL for a record without one.
/// Default: the first timestamp field. The formats' message time, the
/// reorder window and `dplog-query` read it, and it travels in the
/// metadata of every log the handle writes.
///
/// Errors: `DPLOG_ERR_NULL` (handle), `DPLOG_ERR_UNKNOWN_SCHEMA`
/// (`schema_id` not registered on this handle), `DPLOG_ERR_INVALID_ARG`
/// (no such field, or not a timestamp), `DPLOG_ERR_STATE` (after
/// `dplog_start` or `dplog_attach`), `DPLOG_ERR_CLOSED`. Thread-safety:
/// any thread.
///
/// # Safety
/// `field` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_set_event_time(
    h: *mut dplog_t,
    schema_id: u16,
    field: *const c_char,
) -> dplog_result {
    guard(|| {
        const WHAT: &str = "dplog_schema_set_event_time";
        let name = if field.is_null() {
            None
        } else {
            // SAFETY: non-NULL, a valid pointer to one NUL-terminated name.
            match unsafe { c_names(WHAT, "field", &field, 1) } {
                Ok(v) => Some(v[0]),
                Err(e) => return e,
            }
        };
        // SAFETY: caller contract on h.
        unsafe {
            with_pending_schema(h, WHAT, schema_id, |s| {
                let schema = s.name().to_string();
                s.with_event_time(name).map_err(|e| {
                    fail(
                        DPLOG_ERR_INVALID_ARG,
                        format!("{WHAT}: schema {schema}: {e} (a NS or TSC timestamp field)"),
                    )
                })
            })
        }
    })
}

/// Sets the default priority of registered record type `schema_id` under
/// the `degrade` backpressure policy: 1 (routine records, the default),
/// 2 or above for records that must outlast an overload (2 is the
/// default minimum a degraded ring accepts); 0 ranks below routine ones.
/// `[ring.priorities]` in the config overrides it per type. It travels in
/// the metadata of every log the handle writes.
///
/// Errors: `DPLOG_ERR_NULL` (handle), `DPLOG_ERR_UNKNOWN_SCHEMA`
/// (`schema_id` not registered on this handle), `DPLOG_ERR_STATE` (after
/// `dplog_start` or `dplog_attach`), `DPLOG_ERR_CLOSED`. Thread-safety:
/// any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_set_priority(
    h: *mut dplog_t,
    schema_id: u16,
    priority: u8,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        unsafe {
            with_pending_schema(h, "dplog_schema_set_priority", schema_id, |s| {
                let mut meta = s.meta().clone();
                meta.priority = priority;
                s.with_meta(meta).map_err(|e| {
                    fail(
                        DPLOG_ERR_INVALID_ARG,
                        format!("dplog_schema_set_priority: {e}"),
                    )
                })
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::State;
    use crate::testutil::{open, register_dns_query};

    /// The metadata of registered schema `id` of `h` (opened, not started).
    fn meta_of(h: *mut dplog_t, id: u16) -> dplog::schema::SchemaMeta {
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

    #[test]
    fn the_setters_change_the_registered_schema_and_an_error_changes_nothing() {
        let h = open("[sink]\ntype = \"file\"\npath = \"/dev/null\"\n");
        let id = register_dns_query(h);
        let keys = [c"qtype".as_ptr()];
        let (opens, closes) = ([1u64], [2u64]);
        // The event field cannot be its own key: refused, nothing set.
        // SAFETY: h is live; every array is valid for its count.
        let r = unsafe {
            dplog_schema_set_lifecycle(
                h,
                id,
                c"qtype".as_ptr(),
                opens.as_ptr(),
                1,
                closes.as_ptr(),
                1,
                keys.as_ptr(),
                1,
                core::ptr::null(),
                0,
            )
        };
        assert_eq!(r, DPLOG_ERR_INVALID_ARG);
        assert_eq!(meta_of(h, id).lifecycle, None);
        // SAFETY: h is live.
        assert_eq!(unsafe { dplog_schema_set_priority(h, id, 3) }, DPLOG_OK);
        assert_eq!(meta_of(h, id).priority, 3);
        // A field that is no timestamp: refused, the default kept.
        // SAFETY: h is live; the name is NUL-terminated.
        let r = unsafe { dplog_schema_set_event_time(h, id, c"qtype".as_ptr()) };
        assert_eq!(r, DPLOG_ERR_INVALID_ARG);
        assert_eq!(meta_of(h, id).event_time, None);
        // SAFETY: h is live; no stats wanted.
        let r = unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
        assert_eq!(r, DPLOG_OK);
    }

    #[test]
    fn a_priority_set_from_c_reaches_the_started_loggers_table() {
        let h = open(
            "[ring]\nbackpressure = \"degrade\"\n[sink]\ntype = \"file\"\npath = \"/dev/null\"\n",
        );
        let id = register_dns_query(h);
        // SAFETY: h is live.
        assert_eq!(unsafe { dplog_schema_set_priority(h, id, 3) }, DPLOG_OK);
        // SAFETY: h is live.
        let r = unsafe { crate::dplog_start(h, core::ptr::null(), 0) };
        assert_eq!(r, DPLOG_OK);
        let mut rec = [0u8; crate::testutil::DNS_QUERY_BYTES];
        rec[0..2].copy_from_slice(&(crate::testutil::DNS_QUERY_BYTES as u16).to_ne_bytes());
        rec[2..4].copy_from_slice(&id.to_ne_bytes());
        {
            // SAFETY: h is live (closed below).
            let l = unsafe { logger(h) }.unwrap();
            let st = lock(&l.state);
            let State::Started(run) = &*st else {
                panic!("started")
            };
            assert_eq!(run.loggers[0].schemas().priority(&rec), Some(3));
        }
        // SAFETY: h is live.
        let r = unsafe { dplog_schema_set_priority(h, id, 1) };
        assert_eq!(r, DPLOG_ERR_STATE);
        // SAFETY: h is live; no stats wanted.
        let r = unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
        assert_eq!(r, DPLOG_OK);
    }
}
