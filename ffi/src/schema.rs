//! User record types: `dplog_schema_register`, and the table of record
//! sizes by schema id that producers check records against.

use std::ffi::c_char;

use dplog::Schema;

use crate::handle::{dplog_t, logger, State};
use crate::result::{
    dplog_result, fail, guard, DPLOG_ERR_BAD_LENGTH, DPLOG_ERR_CLOSED, DPLOG_ERR_EXISTS,
    DPLOG_ERR_INVALID_ARG, DPLOG_ERR_NULL, DPLOG_ERR_STATE, DPLOG_ERR_UNKNOWN_SCHEMA, DPLOG_OK,
};
use crate::tombstone::lock;
use crate::types::{dplog_field_desc, DPLOG_RECORD_MAX_SIZE, DPLOG_SCHEMA_USER_FIRST};

/// Record size by schema id, for the schemas the handle serves (the
/// consumer can format), and what an unknown id is told.
pub(crate) struct SchemaSizes {
    sizes: Vec<u8>,
    /// The NAT schemas were asked for.
    nat: bool,
    /// The logger's slot size.
    slot_bytes: usize,
}

impl SchemaSizes {
    /// The table of `schemas` (those that fit a `slot_bytes`-byte slot);
    /// `nat`: the handle asked for the NAT schemas.
    pub(crate) fn new<'a>(
        schemas: impl Iterator<Item = &'a Schema>,
        nat: bool,
        slot_bytes: usize,
    ) -> Self {
        let mut v = Vec::new();
        for s in schemas {
            let id = usize::from(s.id());
            if v.len() <= id {
                v.resize(id + 1, 0);
            }
            // Callers pass only schemas that fit the slot (at most 128
            // bytes).
            v[id] = s.size().min(DPLOG_RECORD_MAX_SIZE) as u8;
        }
        Self {
            sizes: v,
            nat,
            slot_bytes,
        }
    }

    /// The record size of `schema_id`; 0 if unknown.
    #[inline(always)]
    pub(crate) fn get(&self, schema_id: u16) -> usize {
        self.sizes
            .get(usize::from(schema_id))
            .map_or(0, |&n| usize::from(n))
    }

    /// The table itself: entry `i` is the record size of schema id `i`,
    /// 0 for an id not served (the inline window's `sizes`).
    pub(crate) fn table(&self) -> &[u8] {
        &self.sizes
    }

    /// The `DPLOG_ERR_UNKNOWN_SCHEMA` error for `schema_id` (not served):
    /// for a NAT schema's id, how to ask for it (or which slot it needs).
    #[cold]
    #[inline(never)]
    pub(crate) fn unknown(&self, schema_id: u16) -> dplog_result {
        let msg = crate::nat::unknown_nat_schema(schema_id, self.nat, self.slot_bytes)
            .unwrap_or_else(|| {
                format!(
                    "unknown schema id {schema_id}: not registered on this logger \
                     (dplog_schema_register)"
                )
            });
        fail(DPLOG_ERR_UNKNOWN_SCHEMA, msg)
    }
}

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
/// that does not suit its kind, an unknown kind, a bad or duplicate name;
/// `dplog_last_error` names the field), `DPLOG_ERR_EXISTS` (`name` is
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
        let pending = match &mut *st {
            State::Opened(p) => p,
            State::Started(_) => {
                return fail(
                    DPLOG_ERR_STATE,
                    "dplog_schema_register: register before dplog_start",
                )
            }
            State::Closed => return fail(DPLOG_ERR_CLOSED, "dplog handle is closed"),
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
