//! A logger's per-record-type rules table ([`SchemaTable`]): its type and
//! the lookups the producers and the consumer make per record, and the
//! byte reader they use ([`read_uint`]).
//!
//! A leaf module: [`Record`](crate::Record)'s methods take a table, the
//! schemas and [`crate::table`] (which builds a table from schemas) sit
//! above it, so none of them needs another in a circle. The public paths
//! are `dplog_core::table::SchemaTable` and `dplog_core::schema::read_uint`.

use std::sync::Arc;

/// Reads a host-order unsigned integer of `size` (1, 2, 4 or 8; other sizes
/// read 0) bytes at `off`.
#[inline(always)]
pub fn read_uint(rec: &[u8], off: usize, size: usize) -> u64 {
    match size {
        1 => rec[off] as u64,
        2 => u16::from_ne_bytes([rec[off], rec[off + 1]]) as u64,
        4 => u32::from_ne_bytes(rec[off..off + 4].try_into().unwrap_or([0; 4])) as u64,
        8 => u64::from_ne_bytes(rec[off..off + 8].try_into().unwrap_or([0; 8])),
        _ => 0,
    }
}

/// The field that decides a priority: offset, size, `(value, priority)`.
pub(crate) type PriorityBy = (u16, u8, Vec<(u64, u8)>);

/// How one record type's priority and event time are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) id: u16,
    pub(crate) priority: u8,
    /// `(offset, size, [(value, priority)])` of the field that decides.
    pub(crate) priority_by: Option<PriorityBy>,
    /// Offset of the 8-byte event-time field.
    pub(crate) time_off: Option<u16>,
    /// The whole rule came from config: it applies to typed records too.
    pub(crate) overridden: bool,
}

/// Per-record-type priority and event-time rules, by schema id. Cheap to
/// clone (an `Arc`). Empty by default: records then use their own
/// [`Record::priority`](crate::Record::priority) and
/// [`Record::event_time`](crate::Record::event_time).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaTable {
    pub(crate) entries: Arc<Vec<Entry>>,
}

impl SchemaTable {
    /// True when the table has no rules.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    #[inline]
    fn entry(&self, id: u16) -> Option<&Entry> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// A config override of type `id`'s priority, which applies to typed
    /// records over their own [`Record::priority`](crate::Record::priority).
    #[inline]
    pub fn priority_of_type(&self, id: u16) -> Option<u8> {
        self.entry(id).filter(|e| e.overridden).map(|e| e.priority)
    }

    /// The priority of the record in `rec` (header first) by its schema's
    /// rule; `None` when the table has no rule for its schema id.
    #[inline]
    pub fn priority(&self, rec: &[u8]) -> Option<u8> {
        let id = u16::from_ne_bytes([*rec.get(2)?, *rec.get(3)?]);
        let e = self.entry(id)?;
        if let Some((off, size, values)) = &e.priority_by {
            let (off, size) = (*off as usize, *size as usize);
            if off + size <= rec.len() {
                let v = read_uint(rec, off, size);
                if let Some((_, p)) = values.iter().find(|(x, _)| *x == v) {
                    return Some(*p);
                }
            }
        }
        Some(e.priority)
    }

    /// The event time of the record in `rec` (its schema's event-time
    /// field, in the field's unit: ns since the epoch or TSC ticks); `None`
    /// when its schema has none or is not in the table.
    #[inline]
    pub fn event_time(&self, rec: &[u8]) -> Option<u64> {
        let id = u16::from_ne_bytes([*rec.get(2)?, *rec.get(3)?]);
        let off = self.entry(id)?.time_off? as usize;
        (off + 8 <= rec.len()).then(|| read_uint(rec, off, 8))
    }
}
