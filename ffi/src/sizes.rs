//! The table of record sizes by schema id that producers check records
//! against (and the inline window reads), and what a producer is told for
//! a schema id its handle does not serve.

use dplog::Schema;

use crate::result::{dplog_result, fail, DPLOG_ERR_UNKNOWN_SCHEMA};
use crate::types::DPLOG_RECORD_MAX_SIZE;

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
        let msg = unknown_nat_schema(schema_id, self.nat, self.slot_bytes).unwrap_or_else(|| {
            format!(
                "unknown schema id {schema_id}: not registered on this logger \
                     (dplog_schema_register)"
            )
        });
        fail(DPLOG_ERR_UNKNOWN_SCHEMA, msg)
    }
}

/// The message of `DPLOG_ERR_UNKNOWN_SCHEMA` for `schema_id` on a handle
/// that does not serve it: how to ask for a NAT schema, or why it is not
/// served; `None` for an id that is no NAT schema's.
pub(crate) fn unknown_nat_schema(schema_id: u16, asked: bool, slot_bytes: usize) -> Option<String> {
    let s = dplog::nat::by_id(schema_id)?;
    Some(if asked {
        format!(
            "schema id {schema_id} ({}, {} bytes) does not fit this logger's {slot_bytes}-byte \
             ring slots; set [ring] slot_bytes = {} in the config",
            s.name(),
            s.size(),
            if s.size() <= 64 { 64 } else { 128 }
        )
    } else {
        format!(
            "schema id {schema_id} ({}) is a built-in NAT schema, which this logger does not \
             serve: call dplog_register_nat_schemas(h) before dplog_start, or set \
             [schemas] nat = true in the config",
            s.name()
        )
    })
}
