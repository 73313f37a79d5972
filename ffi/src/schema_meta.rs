//! The presentation metadata of a registered record type, from C: its
//! syslog layout, IPFIX element by value, field name by value, fields
//! shown only for one event, and enum fields as numbers. The same
//! declarations a Rust `Schema` makes with its `with_*` builders, and like
//! them they travel in the metadata of every log the handle writes
//! (binary, archive, mmap, a ring dplogd drains), so dplog-cat and dplogd
//! print a C program's records exactly as the program does.

use std::borrow::Cow;
use std::ffi::c_char;

use dplog::schema::{FieldValues, IeBy, NameBy, OnlyWhen, SdParam, SyslogMeta};
use dplog::Schema;

use crate::handle::dplog_t;
use crate::result::{dplog_result, fail, guard, DPLOG_ERR_INVALID_ARG, DPLOG_ERR_NULL};
use crate::schema::{c_names, c_values, with_pending_schema};

/// Index of field `name` of `s`, or `DPLOG_ERR_INVALID_ARG` naming it and
/// the schema.
fn field_index(what: &str, s: &Schema, role: &str, name: &str) -> Result<usize, dplog_result> {
    s.field(name).map(|(i, _)| i).ok_or_else(|| {
        fail(
            DPLOG_ERR_INVALID_ARG,
            format!(
                "{what}: schema {}: no field {name:?} (the {role})",
                s.name()
            ),
        )
    })
}

/// The (field, selector) indexes of a rule by value (`_ipfix_ie_by`,
/// `_name_by`) of `n` entries; `None` for `n == 0`, which removes it.
fn by_value(
    what: &str,
    s: &Schema,
    n: usize,
    field: &str,
    selector: &str,
) -> Result<Option<(usize, usize)>, dplog_result> {
    if n == 0 {
        return Ok(None);
    }
    Ok(Some((
        field_index(what, s, "field", field)?,
        field_index(what, s, "selector", selector)?,
    )))
}

/// `s` with `meta` changed by `f`, checked as a Rust schema's metadata is
/// (`Schema::with_meta`: selectors integers, indexes in range, names
/// identifiers); the error names the schema.
fn with_changed_meta(
    what: &str,
    s: Schema,
    f: impl FnOnce(&mut dplog::schema::SchemaMeta),
) -> Result<Schema, dplog_result> {
    let name = s.name().to_string();
    let mut meta = s.meta().clone();
    f(&mut meta);
    s.with_meta(meta)
        .map_err(|e| fail(DPLOG_ERR_INVALID_ARG, format!("{what}: schema {name}: {e}")))
}

/// A NULL-or-string argument as `Option<&str>`.
///
/// # Safety
/// `p` is NULL or NUL-terminated.
unsafe fn c_opt<'a>(
    what: &str,
    arg: &str,
    p: *const c_char,
) -> Result<Option<&'a str>, dplog_result> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: a valid pointer to one non-NULL, NUL-terminated name.
    Ok(Some(unsafe { c_names(what, arg, &p, 1) }?[0]))
}

/// Declares the syslog layout of registered record type `schema_id`, what
/// the `rfc5424` and `rfc3164` formats print for it by default:
/// - `app_name`: the APP-NAME (RFC 5424 section 6.2.5; RFC 3164's TAG);
///   NULL: the config's `[format.syslog] app_name`.
/// - `msgid_field`, with `msgid_values[i]` → `msgids[i]` for `i <
///   n_msgids`: the MSGID (section 6.2.7) chosen by the value of integer
///   field `msgid_field` (another value: the value in decimal); NULL
///   `msgid_field` (with `n_msgids == 0`): the record type's name.
/// - `sd_id`, with `param_names[i]` ← `param_sources[i]` for `i <
///   n_params`: one SD-ELEMENT (section 6.3) `[sd_id name="value" ...]`;
///   a source names a field (its value in the default text converter) or,
///   starting with `=`, is a constant (`"=1"`). NULL `sd_id`: every field
///   as a parameter under the config's SD-ID.
///
/// Names and values must be what RFC 5424 allows (printable US-ASCII, no
/// space, `=`, `]` or `"` in an SD-ID or parameter name); a bad one is
/// refused by `dplog_start` with its message. A second call replaces the
/// layout. Everything is copied.
///
/// Errors: `DPLOG_ERR_NULL` (handle; `msgid_field` NULL with `n_msgids >
/// 0`; an array NULL with a non-zero count, or a NULL entry in it; an
/// SD parameter without `sd_id`), `DPLOG_ERR_UNKNOWN_SCHEMA`,
/// `DPLOG_ERR_INVALID_ARG` (an unknown field, a `msgid_field` that is no
/// integer of at most 8 bytes, a MSGID value the field cannot hold or one
/// listed twice, a name that is not UTF-8; `dplog_last_error` names it), `DPLOG_ERR_STATE` (after `dplog_start`
/// or `dplog_attach`), `DPLOG_ERR_CLOSED`. On an error the schema keeps
/// what it declared before. Thread-safety: any thread.
///
/// # Safety
/// Every string is NULL or NUL-terminated; each array is NULL or valid
/// for its count.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_set_syslog(
    h: *mut dplog_t,
    schema_id: u16,
    app_name: *const c_char,
    msgid_field: *const c_char,
    msgid_values: *const u64,
    msgids: *const *const c_char,
    n_msgids: usize,
    sd_id: *const c_char,
    param_names: *const *const c_char,
    param_sources: *const *const c_char,
    n_params: usize,
) -> dplog_result {
    guard(|| {
        const WHAT: &str = "dplog_schema_set_syslog";
        // SAFETY: the caller's contract on every pointer.
        let args = unsafe {
            (|| {
                let field = c_opt(WHAT, "msgid_field", msgid_field)?;
                if field.is_none() && n_msgids > 0 {
                    return Err(fail(
                        DPLOG_ERR_NULL,
                        format!("{WHAT}: msgid_field is NULL with {n_msgids} MSGIDs"),
                    ));
                }
                let sd = c_opt(WHAT, "sd_id", sd_id)?;
                if sd.is_none() && n_params > 0 {
                    return Err(fail(
                        DPLOG_ERR_NULL,
                        format!("{WHAT}: sd_id is NULL with {n_params} parameters"),
                    ));
                }
                Ok::<_, dplog_result>((
                    c_opt(WHAT, "app_name", app_name)?,
                    field,
                    c_values(WHAT, "msgid_values", msgid_values, n_msgids)?,
                    c_names(WHAT, "msgids", msgids, n_msgids)?,
                    sd,
                    c_names(WHAT, "param_names", param_names, n_params)?,
                    c_names(WHAT, "param_sources", param_sources, n_params)?,
                ))
            })()
        };
        let (app, field, values, ids, sd, names, sources) = match args {
            Ok(a) => a,
            Err(e) => return e,
        };
        // SAFETY: caller contract on h.
        unsafe {
            with_pending_schema(h, WHAT, schema_id, |s| {
                let msgid_by = match field {
                    None => None,
                    Some(f) => Some(FieldValues {
                        field: field_index(WHAT, &s, "msgid_field", f)?,
                        values: values
                            .iter()
                            .zip(&ids)
                            .map(|(&v, &m)| (v, Cow::Owned(m.to_string())))
                            .collect(),
                    }),
                };
                let params = names
                    .iter()
                    .zip(&sources)
                    .map(|(&n, &src)| {
                        let v = match src.strip_prefix('=') {
                            Some(c) => SdParam::Const(Cow::Owned(c.to_string())),
                            None => SdParam::Field(field_index(WHAT, &s, "SD parameter", src)?),
                        };
                        Ok((Cow::Owned(n.to_string()), v))
                    })
                    .collect::<Result<Vec<_>, dplog_result>>()?;
                let layout = SyslogMeta {
                    app_name: app.map(|a| Cow::Owned(a.to_string())),
                    msgid_by,
                    sd_id: sd.map(|d| Cow::Owned(d.to_string())),
                    params,
                    profiles: s.meta().syslog.profiles.clone(),
                };
                with_changed_meta(WHAT, s, |m| m.syslog = layout)
            })
        }
    })
}

/// Declares that the IPFIX information element of field `field` of
/// registered record type `schema_id` is chosen by the value of integer
/// field `selector`: value `values[i]` exports it as element `ies[i]` for
/// `i < n` (enterprise 0, RFC 7012); a record whose selector has another
/// value exports no such element. One template per value (RFC 7011
/// section 3.4.1). E.g. RFC 8158's natQuotaExceededEvent choosing which
/// limit element it carries. A second call replaces the rule; `n == 0`
/// removes it. Everything is copied.
///
/// Errors: `DPLOG_ERR_NULL` (handle, `field`, `selector`, an array NULL
/// with `n > 0`), `DPLOG_ERR_UNKNOWN_SCHEMA`, `DPLOG_ERR_INVALID_ARG` (an
/// unknown field, a selector that is no integer of at most 8 bytes, a
/// selector value it cannot hold or one listed twice, an element id above
/// 32767), `DPLOG_ERR_STATE`, `DPLOG_ERR_CLOSED`. On an
/// error the schema keeps what it declared before. Thread-safety: any
/// thread.
///
/// # Safety
/// `field` and `selector` are NULL or NUL-terminated; `values` and `ies`
/// are NULL or valid for `n` entries.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_set_ipfix_ie_by(
    h: *mut dplog_t,
    schema_id: u16,
    field: *const c_char,
    selector: *const c_char,
    values: *const u32,
    ies: *const u16,
    n: usize,
) -> dplog_result {
    guard(|| {
        const WHAT: &str = "dplog_schema_set_ipfix_ie_by";
        // SAFETY: the caller's contract on every pointer.
        let args = unsafe {
            (|| {
                Ok::<_, dplog_result>((
                    c_names(WHAT, "field", &field, 1)?[0],
                    c_names(WHAT, "selector", &selector, 1)?[0],
                    c_values(WHAT, "values", values, n)?,
                    c_values(WHAT, "ies", ies, n)?,
                ))
            })()
        };
        let (field, selector, values, ies) = match args {
            Ok(a) => a,
            Err(e) => return e,
        };
        if let Some(ie) = ies.iter().find(|&&ie| ie > 0x7fff) {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!("{WHAT}: element id {ie} is above 32767 (enterprise 0 only)"),
            );
        }
        // SAFETY: caller contract on h.
        unsafe {
            with_pending_schema(h, WHAT, schema_id, |s| {
                let rule = by_value(WHAT, &s, n, field, selector)?.map(|(field, selector)| IeBy {
                    field,
                    selector,
                    ies: values.iter().copied().zip(ies.iter().copied()).collect(),
                });
                with_changed_meta(WHAT, s, |m| m.ipfix_ie_by = rule)
            })
        }
    })
}

/// Declares that the default text, JSON, CSV and syslog layouts name
/// field `field` of registered record type `schema_id` by the value of
/// integer field `selector`: value `values[i]` names it `names[i]` for
/// `i < n` (an identifier); a record whose selector has another value
/// leaves the field out. The field keeps its own name in templates. The
/// text-format twin of `dplog_schema_set_ipfix_ie_by`. A second call
/// replaces the rule; `n == 0` removes it. Everything is copied.
///
/// Errors: `DPLOG_ERR_NULL` (handle, `field`, `selector`, an array NULL
/// with `n > 0` or a NULL name), `DPLOG_ERR_UNKNOWN_SCHEMA`,
/// `DPLOG_ERR_INVALID_ARG` (an unknown field, a selector that is no
/// integer of at most 8 bytes, a selector value it cannot hold or one
/// listed twice, a name that is no identifier or that a declared field
/// could not take either: `timestamp`, `recordType`, `dplog*`, `_dplog*`,
/// the formats' own keys and columns; `dplog_last_error` names it),
/// `DPLOG_ERR_STATE`, `DPLOG_ERR_CLOSED`. On an error the schema keeps
/// what it declared before. Thread-safety: any thread.
///
/// # Safety
/// `field`, `selector` and each name are NULL or NUL-terminated; `values`
/// and `names` are NULL or valid for `n` entries.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_set_name_by(
    h: *mut dplog_t,
    schema_id: u16,
    field: *const c_char,
    selector: *const c_char,
    values: *const u32,
    names: *const *const c_char,
    n: usize,
) -> dplog_result {
    guard(|| {
        const WHAT: &str = "dplog_schema_set_name_by";
        // SAFETY: the caller's contract on every pointer.
        let args = unsafe {
            (|| {
                Ok::<_, dplog_result>((
                    c_names(WHAT, "field", &field, 1)?[0],
                    c_names(WHAT, "selector", &selector, 1)?[0],
                    c_values(WHAT, "values", values, n)?,
                    c_names(WHAT, "names", names, n)?,
                ))
            })()
        };
        let (field, selector, values, names) = match args {
            Ok(a) => a,
            Err(e) => return e,
        };
        // SAFETY: caller contract on h.
        unsafe {
            with_pending_schema(h, WHAT, schema_id, |s| {
                let rule =
                    by_value(WHAT, &s, n, field, selector)?.map(|(field, selector)| NameBy {
                        field,
                        selector,
                        names: values
                            .iter()
                            .zip(&names)
                            .map(|(&v, &n)| (v, Cow::Owned(n.to_string())))
                            .collect(),
                    });
                with_changed_meta(WHAT, s, |m| m.name_by = rule)
            })
        }
    })
}

/// Declares fields of registered record type `schema_id` that the default
/// text and JSON layouts print only when integer field `when` equals
/// `equals` (e.g. a connection's byte counters only on its close); CSV
/// leaves their cells empty otherwise, as JSON leaves their keys out.
/// Syslog, IPFIX and binary print every field. `n == 0` removes the rule
/// (`when` may then be NULL). A second call replaces it. Everything is
/// copied.
///
/// Errors: `DPLOG_ERR_NULL` (handle, `when` with `n > 0`, `fields` NULL
/// with `n > 0` or a NULL name), `DPLOG_ERR_UNKNOWN_SCHEMA`,
/// `DPLOG_ERR_INVALID_ARG` (an unknown field, a `when` that is no integer
/// of at most 8 bytes), `DPLOG_ERR_STATE`, `DPLOG_ERR_CLOSED`. On an
/// error the schema keeps what it declared before. Thread-safety: any
/// thread.
///
/// # Safety
/// `when` and each name are NULL or NUL-terminated; `fields` is NULL or
/// valid for `n` pointers.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_set_fields_only_when(
    h: *mut dplog_t,
    schema_id: u16,
    when: *const c_char,
    equals: u64,
    fields: *const *const c_char,
    n: usize,
) -> dplog_result {
    guard(|| {
        const WHAT: &str = "dplog_schema_set_fields_only_when";
        // SAFETY: the caller's contract on every pointer.
        let args = unsafe {
            (|| {
                if n == 0 {
                    return Ok(None);
                }
                Ok::<_, dplog_result>(Some((
                    c_names(WHAT, "when", &when, 1)?[0],
                    c_names(WHAT, "fields", fields, n)?,
                )))
            })()
        };
        let args = match args {
            Ok(a) => a,
            Err(e) => return e,
        };
        // SAFETY: caller contract on h.
        unsafe {
            with_pending_schema(h, WHAT, schema_id, |s| {
                let rule = match &args {
                    None => None,
                    Some((when, names)) => Some(OnlyWhen {
                        field: field_index(WHAT, &s, "when field", when)?,
                        equals,
                        fields: names
                            .iter()
                            .map(|n| field_index(WHAT, &s, "fields", n))
                            .collect::<Result<_, _>>()?,
                    }),
                };
                with_changed_meta(WHAT, s, |m| m.only_when = rule)
            })
        }
    })
}

/// Makes the default layouts of registered record type `schema_id` print
/// its enum fields as numbers (`numbers != 0`) or by name (0, the
/// default). Templates choose per field (`{f:name}`, `{f}`).
///
/// Errors: `DPLOG_ERR_NULL` (handle), `DPLOG_ERR_UNKNOWN_SCHEMA`,
/// `DPLOG_ERR_STATE`, `DPLOG_ERR_CLOSED`. Thread-safety: any thread.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`.
#[no_mangle]
pub unsafe extern "C" fn dplog_schema_set_enum_numbers(
    h: *mut dplog_t,
    schema_id: u16,
    numbers: i32,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        unsafe {
            with_pending_schema(h, "dplog_schema_set_enum_numbers", schema_id, |s| {
                Ok(s.with_enum_numbers(numbers != 0))
            })
        }
    })
}

#[cfg(test)]
mod tests;
