//! The logger's per-record-type table: priority under `degrade` and where
//! the event time is, by schema id.
//!
//! Built once from the [`Schema`]s a logger serves (and per-type priority
//! overrides from config) and shared by the producers (read only while a
//! ring is above its `degrade` watermark) and the consumer (event time for
//! the reorder window and drop reports). A ring of slots
//! ([`Slot64`](crate::Slot64) & co) carries records of several types; the
//! table is how the runtime reads them without knowing their Rust types.
//!
//! The table's type and its lookups live in a leaf module (`rules`), below
//! [`Record`](crate::Record) (whose methods take a table) and the schemas;
//! this module builds a table from [`Schema`]s and holds [`RecordRules`],
//! which needs records and schemas both.

use std::sync::Arc;

use crate::rules::Entry;
pub use crate::rules::SchemaTable;
use crate::schema::{FieldKind, Schema};

/// A priority override for a record type that is not in the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownType(pub String);

impl core::fmt::Display for UnknownType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "no record type {:?} in this logger's schemas", self.0)
    }
}

impl std::error::Error for UnknownType {}

impl SchemaTable {
    /// The rules `schemas` declare ([`Schema::meta`]). A later schema with
    /// the id of an earlier one replaces it.
    pub fn new<'a>(schemas: impl IntoIterator<Item = &'a Schema>) -> Self {
        let mut entries: Vec<Entry> = Vec::new();
        for s in schemas {
            let m = s.meta();
            let f = |i: usize| &s.fields()[i];
            let e = Entry {
                id: s.id(),
                priority: m.priority,
                priority_by: m.priority_by.as_ref().map(|p| {
                    let fd = f(p.field);
                    (fd.offset, fd.size as u8, p.values.clone())
                }),
                time_off: m
                    .event_time
                    .filter(|&i| {
                        matches!(f(i).kind, FieldKind::NsTimestamp | FieldKind::TscTimestamp)
                    })
                    .map(|i| f(i).offset),
                overridden: false,
            };
            match entries.iter_mut().find(|x| x.id == e.id) {
                Some(x) => *x = e,
                None => entries.push(e),
            }
        }
        Self {
            entries: Arc::new(entries),
        }
    }

    /// Sets the priority of every record of type `name` (a schema name
    /// among `schemas`, the same list given to [`SchemaTable::new`]),
    /// replacing the schema's own rule. Config's per-type priorities.
    ///
    /// Errors: [`UnknownType`] if no schema has that name.
    pub fn with_priority(
        mut self,
        schemas: &[&Schema],
        name: &str,
        priority: u8,
    ) -> Result<Self, UnknownType> {
        let id = schemas
            .iter()
            .find(|s| s.name() == name)
            .map(|s| s.id())
            .ok_or_else(|| UnknownType(name.to_string()))?;
        let entries = Arc::make_mut(&mut self.entries);
        let e = entries
            .iter_mut()
            .find(|e| e.id == id)
            .ok_or_else(|| UnknownType(name.to_string()))?;
        e.priority = priority;
        e.priority_by = None;
        e.overridden = true;
        Ok(self)
    }
}

/// How a logger reads a record's priority (under `degrade`) and event
/// time (reorder window, drop reports) with its [`SchemaTable`]: two
/// function pointers chosen once when the logger starts.
///
/// [`RecordRules::own`] (what [`Logger::start`](crate::Logger::start)
/// uses) asks the record ([`Record::priority_in`](crate::Record::priority_in),
/// [`Record::event_time_in`](crate::Record::event_time_in)): slots read their schema's rules from the
/// table, typed records use their own `priority()` / `event_time()`
/// unless config overrides the type's priority. [`RecordRules::by_schema`]
/// reads a typed record's bytes against its schema's declared rules, so a
/// record type needs no `priority()` of its own.
pub struct RecordRules<R> {
    /// The record's priority under `degrade`.
    pub priority: fn(&R, &SchemaTable) -> u8,
    /// The record's event time (the unit its schema's field has).
    pub event_time: fn(&R, &SchemaTable) -> u64,
}

impl<R> Clone for RecordRules<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for RecordRules<R> {}

impl<R> core::fmt::Debug for RecordRules<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RecordRules").finish_non_exhaustive()
    }
}

impl<R: crate::Record> RecordRules<R> {
    /// The record's own answers ([`Record::priority_in`](crate::Record::priority_in),
    /// [`Record::event_time_in`](crate::Record::event_time_in)).
    pub fn own() -> Self {
        Self {
            priority: |r, t| r.priority_in(t),
            event_time: |r, t| r.event_time_in(t),
        }
    }
}

impl<R: crate::HasSchema> RecordRules<R> {
    /// The rules of the record's schema in the table, read from its bytes
    /// (a `[ring.priorities]` override first); the record's own
    /// `priority()` / `event_time()` when the table has no entry for it.
    pub fn by_schema() -> Self {
        Self {
            priority: |r, t| {
                t.priority_of_type(r.header().schema_id)
                    .or_else(|| t.priority(r.as_bytes()))
                    .unwrap_or_else(|| r.priority())
            },
            event_time: |r, t| t.event_time(r.as_bytes()).unwrap_or_else(|| r.event_time()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_record::TestRecord;
    use crate::record::{PRIORITY_HIGH, PRIORITY_NORMAL};
    use crate::{Record, Slot64};

    fn schema() -> Schema {
        crate::schema!(TestRecord, id = 1, name = "testSession", [
            timestamp_ns => "ts": NsTimestamp, ie 0;
            nat_event => "event": U8, ie 0;
        ])
        .unwrap()
        .with_priority(PRIORITY_NORMAL, Some(("event", &[(5, PRIORITY_HIGH)])))
        .unwrap()
    }

    fn bytes(r: &TestRecord) -> &[u8] {
        // SAFETY: TestRecord is repr(C) without padding (64 bytes of
        // integers, size asserted), so every byte is initialised.
        unsafe {
            core::slice::from_raw_parts(
                (r as *const TestRecord).cast::<u8>(),
                size_of::<TestRecord>(),
            )
        }
    }

    #[test]
    fn priorities_and_event_times_come_from_the_schema_and_config() {
        let s = schema();
        let t = SchemaTable::new([&s]);
        let mut r = TestRecord {
            timestamp_ns: 77,
            nat_event: 4,
            ..Default::default()
        };
        assert_eq!(t.priority(bytes(&r)), Some(PRIORITY_NORMAL));
        assert_eq!(t.event_time(bytes(&r)), Some(77));
        r.nat_event = 5;
        assert_eq!(t.priority(bytes(&r)), Some(PRIORITY_HIGH));
        // A slot reads the same rules from its bytes.
        let slot = Slot64::pack(&r).unwrap();
        assert_eq!(slot.priority_in(&t), PRIORITY_HIGH);
        assert_eq!(slot.event_time_in(&t), 77);
        // An unknown schema id: no rule.
        let mut other = r;
        other.header.schema_id = 9;
        assert_eq!(t.priority(bytes(&other)), None);
        assert_eq!(
            Slot64::pack(&other).unwrap().priority_in(&t),
            PRIORITY_NORMAL
        );
        // Config overrides the whole rule, for slots and typed records.
        let o = t.clone().with_priority(&[&s], "testSession", 7).unwrap();
        assert_eq!(o.priority(bytes(&r)), Some(7));
        assert_eq!(r.priority_in(&o), 7);
        assert_eq!(r.priority_in(&t), r.priority());
        assert_eq!(
            t.with_priority(&[&s], "nope", 1).unwrap_err(),
            UnknownType("nope".into())
        );
    }
}
