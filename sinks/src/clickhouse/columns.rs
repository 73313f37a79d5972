//! A schema's fields as ClickHouse columns: their types on each server
//! generation ([`Server`]), the RowBinary encoding of a record
//! ([`RowEncoder`], one table entry per field, no allocation per
//! record), the check of a table's columns against a schema
//! ([`RowEncoder::for_table`], from `DESCRIBE TABLE`), `CREATE TABLE`
//! ([`create_table`]) and the SQL answering `dplog-query --at`
//! ([`lookup_at`]).
//!
//! RowBinary (ClickHouse's "Formats / RowBinary"): a row is its columns'
//! values one after another with no separator; integers little-endian at
//! their width, `FixedString(N)` its N bytes, `String` a LEB128 length
//! then the bytes, `DateTime` a `UInt32` of seconds, `DateTime64(P)` an
//! `Int64` of 10^-P seconds, `IPv4` a `UInt32`, `IPv6` 16 bytes in
//! network order.
//!
//! | field kind | current server | 18.16 | RowBinary |
//! |---|---|---|---|
//! | `U8` `U16` `U32` `U64`, `Port`, `Protocol`, `Bool` | `UInt8`..`UInt64` | same | the integer, LE (`Bool` 0 or 1) |
//! | `Enum` (1, 2, 4 bytes) | `UInt8`/`UInt16`/`UInt32` | same | the integer: a value without a name is kept (a ClickHouse `Enum` column would refuse the whole insert) |
//! | `Ipv4` | `IPv4` | `UInt32` | the address as a `UInt32` |
//! | `Ipv6` | `IPv6` | `FixedString(16)` | 16 bytes, network order |
//! | `Mac` | `FixedString(6)` | same | 6 bytes, network order |
//! | `NsTimestamp` | `DateTime64(9, 'UTC')` | `UInt64` (ns) | ns since the epoch (18.16 has no sub-second time type) |
//! | `TscTimestamp` | `DateTime64(9, 'UTC')` | `UInt64` (ns) | the ticks as wall-time ns with the stream's calibration (as `dplog-cat` prints them) |
//! | `Bytes` (N) | `FixedString(N)` | same | the N bytes, NUL padding included |
//!
//! A table made otherwise is taken where the bytes allow it without
//! loss or with a loss the user chose: `DateTime` (seconds, the
//! sub-second part dropped), `DateTime64(P)` for any P, `UInt64` for a
//! timestamp; `UInt32` or `IPv4` for an IPv4 address, `FixedString(16)`
//! or `IPv6` for an IPv6 one; `String` for `Bytes` (the trailing NUL
//! padding dropped); `Bool` for a `Bool` field. Anything else is a
//! mismatch, refused naming the column.

use std::fmt::Write as _;

use dplog_core::schema::{FieldDef, FieldKind, Schema};
use dplog_formatters::TscCalibration;

/// Which ClickHouse types `CREATE TABLE` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Server {
    /// A current server (20.1 and later): `DateTime64`, `IPv4`/`IPv6`,
    /// column codecs, table TTL.
    #[default]
    Current,
    /// ClickHouse 18.16 (Debian 12's `clickhouse-server`): no `DateTime64`
    /// (timestamps are `UInt64` ns), no `IPv4`/`IPv6` types, no codecs,
    /// no TTL.
    V18,
}

/// How one field's bytes become its column's RowBinary value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// A host-order unsigned integer of the field's size, written LE.
    Int,
    /// 0 or 1 from a byte (`Bool`).
    Bool,
    /// The field's bytes as they are (`FixedString(size)`).
    Raw,
    /// `String`: LEB128 length, then the bytes without trailing NULs.
    Trimmed,
    /// A ns timestamp as `Int64` of 10^-p s (`DateTime64(p)`): ns / div.
    Ns64 { div: u64 },
    /// A ns timestamp as `UInt32` seconds (`DateTime`).
    NsSecs,
    /// A ns timestamp as `UInt64` ns.
    Ns,
}

/// One column: where its field is in the record and how it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Col {
    offset: usize,
    size: usize,
    op: Op,
    /// A `TscTimestamp` field: ticks converted with the calibration first.
    tsc: bool,
}

/// Encodes records of one schema as RowBinary rows of its table's
/// columns: a table of per-field entries built once ([`for_schema`] for
/// the types [`create_table`] makes, [`for_table`] for a table's own
/// columns); [`push`] appends a row without allocating (beyond `out`'s
/// growth).
///
/// [`for_schema`]: RowEncoder::for_schema
/// [`for_table`]: RowEncoder::for_table
/// [`push`]: RowEncoder::push
///
/// # Examples
///
/// ```
/// use dplog_core::schema::{FieldDef, FieldKind, Schema};
/// use dplog_sinks::clickhouse::{RowEncoder, Server};
///
/// let s = Schema::new(600, "probe", 24, vec![
///     FieldDef::new("addr", 8, 4, FieldKind::Ipv4, 0),
///     FieldDef::new("port", 12, 2, FieldKind::Port, 0),
/// ])?;
/// let enc = RowEncoder::for_schema(&s, Server::V18);
/// let mut rec = [0u8; 24];
/// rec[8..12].copy_from_slice(&0x0A00_0001u32.to_ne_bytes()); // 10.0.0.1
/// rec[12..14].copy_from_slice(&53u16.to_ne_bytes());
/// let mut row = Vec::new();
/// enc.push(&rec, &Default::default(), &mut row);
/// assert_eq!(row, [0x01, 0x00, 0x00, 0x0A, 53, 0]);
/// assert_eq!(enc.column_list(), "(`addr`, `port`)");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowEncoder {
    cols: Vec<Col>,
    names: String,
}

/// The column type `CREATE TABLE` gives field `f` on `server`.
pub fn column_type(f: &FieldDef, server: Server) -> String {
    let cur = server == Server::Current;
    match f.kind {
        FieldKind::Ipv4 if cur => "IPv4".into(),
        FieldKind::Ipv6 if cur => "IPv6".into(),
        FieldKind::Ipv6 => "FixedString(16)".into(),
        FieldKind::Mac => "FixedString(6)".into(),
        FieldKind::Bytes => format!("FixedString({})", f.size),
        FieldKind::NsTimestamp | FieldKind::TscTimestamp if cur => "DateTime64(9, 'UTC')".into(),
        FieldKind::NsTimestamp | FieldKind::TscTimestamp => "UInt64".into(),
        _ => format!("UInt{}", f.size * 8),
    }
}

/// `name` quoted as a ClickHouse identifier (backquotes; a backquote or
/// backslash in it escaped).
pub fn ident(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push('`');
    for c in name.chars() {
        if c == '`' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('`');
    s
}

/// `s` as a ClickHouse string literal (single quotes, `'` and `\`
/// escaped).
pub fn literal(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('\'');
    for c in s.chars() {
        if c == '\'' || c == '\\' {
            o.push('\\');
        }
        o.push(c);
    }
    o.push('\'');
    o
}

/// The operation writing field `f` into a column of type `ty` (as
/// `DESCRIBE TABLE` prints it), or why the two do not go together.
fn op_for(f: &FieldDef, ty: &str) -> Result<Op, String> {
    let size = f.size as usize;
    let uint = format!("UInt{}", size * 8);
    let time = matches!(f.kind, FieldKind::NsTimestamp | FieldKind::TscTimestamp);
    let ok = match f.kind {
        _ if time => {
            if ty == "UInt64" {
                Some(Op::Ns)
            } else if ty == "DateTime" || ty.starts_with("DateTime(") {
                Some(Op::NsSecs)
            } else if let Some(rest) = ty.strip_prefix("DateTime64(") {
                let p: Option<u32> = rest
                    .split([',', ')'])
                    .next()
                    .and_then(|p| p.trim().parse().ok());
                p.filter(|p| *p <= 9).map(|p| Op::Ns64 {
                    div: 10u64.pow(9 - p),
                })
            } else {
                None
            }
        }
        FieldKind::Ipv4 => (ty == "UInt32" || ty == "IPv4").then_some(Op::Int),
        FieldKind::Ipv6 => (ty == "FixedString(16)" || ty == "IPv6").then_some(Op::Raw),
        FieldKind::Mac => (ty == "FixedString(6)").then_some(Op::Raw),
        FieldKind::Bytes if ty == "String" => Some(Op::Trimmed),
        FieldKind::Bytes => (ty == format!("FixedString({size})")).then_some(Op::Raw),
        FieldKind::Bool if ty == "Bool" || ty == "UInt8" => Some(Op::Bool),
        _ => (ty == uint).then_some(Op::Int),
    };
    ok.ok_or_else(|| {
        format!(
            "column {} is {ty}, which cannot hold field {} ({:?}, {size} bytes): make it {}",
            ident(&f.name),
            f.name,
            f.kind,
            column_type(f, Server::Current)
                + &match column_type(f, Server::V18) {
                    t if t != column_type(f, Server::Current) => format!(" (or {t})"),
                    _ => String::new(),
                }
        )
    })
}

impl RowEncoder {
    fn build(s: &Schema, ops: Vec<Op>) -> Self {
        let cols = s
            .fields()
            .iter()
            .zip(ops)
            .map(|(f, op)| Col {
                offset: f.offset as usize,
                size: f.size as usize,
                op,
                tsc: f.kind == FieldKind::TscTimestamp,
            })
            .collect();
        let names: Vec<String> = s.fields().iter().map(|f| ident(&f.name)).collect();
        Self {
            cols,
            names: format!("({})", names.join(", ")),
        }
    }

    /// The encoder for the columns [`create_table`] makes for `s` on
    /// `server`.
    pub fn for_schema(s: &Schema, server: Server) -> Self {
        let ops = s
            .fields()
            .iter()
            .map(|f| op_for(f, &column_type(f, server)).expect("create_table's own types"))
            .collect();
        Self::build(s, ops)
    }

    /// The encoder for a table whose columns are `columns`, as `DESCRIBE
    /// TABLE` lists them: `(name, type, default kind)` (the default kind
    /// `""`, `DEFAULT`, `MATERIALIZED` or `ALIAS`). Every field of `s`
    /// must be a column of a type that can hold it (see the module docs);
    /// a column that is no field must have a default (the server fills
    /// it), or the records would leave it empty.
    ///
    /// # Errors
    /// Every mismatch, one per line, each naming the column: a field with
    /// no column, a column of a type that cannot hold its field, a column
    /// that is no field and has no default.
    pub fn for_table(s: &Schema, columns: &[(String, String, String)]) -> Result<Self, String> {
        let mut why = Vec::new();
        let mut ops = Vec::new();
        for f in s.fields() {
            match columns.iter().find(|c| c.0 == *f.name) {
                None => why.push(format!(
                    "field {} has no column (add {} {})",
                    f.name,
                    ident(&f.name),
                    column_type(f, Server::Current)
                )),
                Some((_, _, d)) if d == "MATERIALIZED" || d == "ALIAS" => why.push(format!(
                    "column {} is {d}: it cannot be inserted into",
                    ident(&f.name)
                )),
                Some((_, ty, _)) => match op_for(f, ty) {
                    Ok(op) => ops.push(op),
                    Err(w) => why.push(w),
                },
            }
        }
        for (name, ty, d) in columns {
            if d.is_empty() && !s.fields().iter().any(|f| *f.name == *name) {
                why.push(format!(
                    "column {} ({ty}) is no field of {} and has no DEFAULT",
                    ident(name),
                    s.name()
                ));
            }
        }
        if why.is_empty() {
            Ok(Self::build(s, ops))
        } else {
            Err(why.join("; "))
        }
    }

    /// `(`a`, `b`, ...)`: the column list of the `INSERT`.
    pub fn column_list(&self) -> &str {
        &self.names
    }

    /// Appends the RowBinary row of `rec` (a whole record of the schema,
    /// header included) to `out`; `cal` converts `TscTimestamp` fields.
    ///
    /// # Panics
    /// If `rec` is shorter than the schema's fields reach (the binary
    /// stream's decoder checks every record's size first).
    #[inline]
    pub fn push(&self, rec: &[u8], cal: &TscCalibration, out: &mut Vec<u8>) {
        for c in &self.cols {
            let b = &rec[c.offset..c.offset + c.size];
            let int = || {
                let mut v = [0u8; 8];
                v[..c.size].copy_from_slice(b);
                if cfg!(target_endian = "little") {
                    u64::from_le_bytes(v)
                } else {
                    u64::from_be_bytes(v) >> (64 - 8 * c.size)
                }
            };
            let ns = || if c.tsc { cal.to_ns(int()) } else { int() };
            match c.op {
                Op::Int => out.extend_from_slice(&int().to_le_bytes()[..c.size]),
                Op::Bool => out.push(u8::from(b[0] != 0)),
                Op::Raw => out.extend_from_slice(b),
                Op::Trimmed => {
                    let n = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
                    // Bytes fields are at most 255 bytes: one or two
                    // LEB128 bytes.
                    if n < 0x80 {
                        out.push(n as u8);
                    } else {
                        out.extend_from_slice(&[(n as u8) | 0x80, (n >> 7) as u8]);
                    }
                    out.extend_from_slice(&b[..n]);
                }
                Op::Ns64 { div } => out.extend_from_slice(&((ns() / div) as i64).to_le_bytes()),
                Op::NsSecs => {
                    let s = (ns() / 1_000_000_000).min(u32::MAX as u64) as u32;
                    out.extend_from_slice(&s.to_le_bytes())
                }
                Op::Ns => out.extend_from_slice(&ns().to_le_bytes()),
            }
        }
    }
}

/// What [`create_table`] makes besides the columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// The table's name (may be `db.table`; each part quoted).
    pub table: String,
    /// Server generation of the types.
    pub server: Server,
    /// The engine clause, e.g. `MergeTree` (default) or
    /// `ReplicatedMergeTree('/clickhouse/tables/{shard}/dns', '{replica}')`.
    pub engine: String,
    /// Rows older than this many days (event time) are removed (`TTL`;
    /// current servers only; on 18.16 drop old partitions yourself).
    pub ttl_days: Option<u32>,
    /// The sorting key's fields, in order, instead of the lifecycle's
    /// keys then the event time: the fields lookups give first (the
    /// NAT's public address and port) make the primary index find them.
    pub order_by: Option<Vec<String>>,
}

impl TableOptions {
    /// A `MergeTree` table named `table` for `server`, no TTL.
    pub fn new(table: impl Into<String>, server: Server) -> Self {
        Self {
            table: table.into(),
            server,
            engine: "MergeTree".into(),
            ttl_days: None,
            order_by: None,
        }
    }
}

/// `db.table` or `table` with each part quoted.
pub fn table_ident(table: &str) -> String {
    table.split('.').map(ident).collect::<Vec<_>>().join(".")
}

/// The event-time field of `s`: its declared one, else none.
fn event_time(s: &Schema) -> Option<&FieldDef> {
    s.meta().event_time.and_then(|i| s.fields().get(i))
}

/// The expression giving the `DateTime` of the event-time column `t` on
/// `server` (for `PARTITION BY` and `TTL`).
fn date_time_of(t: &FieldDef, server: Server) -> String {
    match server {
        Server::Current => format!("toDateTime({})", ident(&t.name)),
        Server::V18 => format!("toDateTime(intDiv({}, 1000000000))", ident(&t.name)),
    }
}

/// `CREATE TABLE` for records of `s`: one column per field (types as in
/// the module docs; on a current server with codecs: `Delta, ZSTD(1)`
/// for the event time, `ZSTD(1)` for the others), `PARTITION BY` the day
/// of the event time, `ORDER BY` the lifecycle's key fields then the
/// event time (the event time alone without a lifecycle; `tuple()`
/// without either) unless [`TableOptions::order_by`] names the fields,
/// and `TTL` when asked (current servers).
///
/// # Examples
///
/// ```
/// use dplog_core::schema::{FieldDef, FieldKind, Schema};
/// use dplog_sinks::clickhouse::{create_table, Server, TableOptions};
///
/// let s = Schema::new(601, "dnsQuery", 24, vec![
///     FieldDef::new("t", 8, 8, FieldKind::NsTimestamp, 0),
///     FieldDef::new("client", 16, 4, FieldKind::Ipv4, 0),
/// ])?;
/// let sql = create_table(&s, &TableOptions::new("dns", Server::V18));
/// assert!(sql.contains("`client` UInt32"));
/// assert!(sql.contains("PARTITION BY toYYYYMMDD(toDateTime(intDiv(`t`, 1000000000)))"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn create_table(s: &Schema, o: &TableOptions) -> String {
    let cur = o.server == Server::Current;
    let t = event_time(s);
    let mut sql = format!("CREATE TABLE {}\n(\n", table_ident(&o.table));
    let n = s.fields().len();
    for (i, f) in s.fields().iter().enumerate() {
        let _ = write!(sql, "    {} {}", ident(&f.name), column_type(f, o.server));
        if cur {
            let is_t = t.is_some_and(|t| t.name == f.name);
            sql.push_str(if is_t {
                " CODEC(Delta, ZSTD(1))"
            } else {
                " CODEC(ZSTD(1))"
            });
        }
        sql.push_str(if i + 1 < n { ",\n" } else { "\n" });
    }
    let _ = write!(sql, ")\nENGINE = {}\n", o.engine);
    if let Some(t) = t {
        let _ = writeln!(
            sql,
            "PARTITION BY toYYYYMMDD({})",
            date_time_of(t, o.server)
        );
    }
    let mut order: Vec<String> = s
        .meta()
        .lifecycle
        .as_ref()
        .map(|l| l.keys.iter().map(|&k| ident(&s.fields()[k].name)).collect())
        .unwrap_or_default();
    if let Some(t) = t {
        order.push(ident(&t.name));
    }
    if let Some(o) = &o.order_by {
        order = o.iter().map(|f| ident(f)).collect();
    }
    if order.is_empty() {
        sql.push_str("ORDER BY tuple()");
    } else {
        let _ = write!(sql, "ORDER BY ({})", order.join(", "));
    }
    match (o.ttl_days, t) {
        (Some(d), Some(t)) if cur => {
            let _ = write!(
                sql,
                "\nTTL {} + INTERVAL {d} DAY",
                date_time_of(t, o.server)
            );
        }
        (Some(d), Some(_)) => {
            let _ = write!(
                sql,
                "\n-- retention {d} days: ClickHouse 18.16 has no TTL; drop the old days' partitions \
                 (ALTER TABLE {} DROP PARTITION YYYYMMDD)",
                table_ident(&o.table)
            );
        }
        _ => {}
    }
    sql.push_str(";\n");
    sql
}

/// A SQL value of field `f` from the bytes `v` the field stores it as
/// (host-order integers, network-order addresses; for a `Bytes` field
/// its bytes without the padding), for a column [`create_table`] made on
/// `server`.
pub fn value_sql(f: &FieldDef, v: &[u8], server: Server) -> String {
    let cur = server == Server::Current;
    let int = || {
        let mut b = [0u8; 8];
        b[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
        u64::from_ne_bytes(b)
    };
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    match f.kind {
        FieldKind::Ipv4 if cur => {
            format!("toIPv4('{}')", std::net::Ipv4Addr::from(int() as u32))
        }
        FieldKind::Ipv6 if cur => {
            let mut o = [0u8; 16];
            o.copy_from_slice(&v[..16]);
            format!("toIPv6('{}')", std::net::Ipv6Addr::from(o))
        }
        FieldKind::Ipv6 | FieldKind::Mac => format!("unhex('{}')", hex(v)),
        FieldKind::Bytes => {
            let mut p = v.to_vec();
            p.resize(f.size as usize, 0);
            format!("unhex('{}')", hex(&p))
        }
        FieldKind::NsTimestamp | FieldKind::TscTimestamp => time_sql(int(), server),
        // Stored as 0 or 1, whatever non-zero byte the record held.
        FieldKind::Bool => u8::from(int() != 0).to_string(),
        _ => int().to_string(),
    }
}

/// The SQL of `ns` (ns since the epoch) for a timestamp column on
/// `server`.
pub fn time_sql(ns: u64, server: Server) -> String {
    match server {
        Server::Current => format!("fromUnixTimestamp64Nano(toInt64({ns}), 'UTC')"),
        Server::V18 => ns.to_string(),
    }
}

/// The `SELECT` answering `dplog-query --at at_ns` with `conds` (field
/// index in `s`, value as [`value_sql`] takes it) over a table
/// [`create_table`] made for `s`: the open records of the states live at
/// `at_ns` whose open is at most `lookback_ns` before it (`None`: any),
/// ordered by event time. `None` if `s` declares no lifecycle or no
/// event time.
///
/// The semantics are `dplog-query`'s: a close closes the most recent
/// open before it of the same key that is still open (a close with none
/// closes nothing); a state is live at T when its open is at or before T
/// and no close of it is before T. Per key the SQL sorts the opens and
/// closes (within the lookback, up to T) by time and keeps each open
/// after which the running count of opens minus closes never drops below
/// its own. Records of one key with equal event times are ordered close
/// first (the archive orders them as written; a close written after an
/// open of the same nanosecond is the one case that differs). Runs on
/// 18.16 (arrays and lambdas, no window functions).
pub fn lookup_at(
    s: &Schema,
    table: &str,
    server: Server,
    at_ns: u64,
    lookback_ns: Option<u64>,
    conds: &[(usize, Vec<u8>)],
) -> Option<String> {
    let l = s.meta().lifecycle.as_ref()?;
    let t = event_time(s)?;
    let fields = s.fields();
    let ev = ident(&fields[l.field].name);
    let tn = ident(&t.name);
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let keys: Vec<String> = l.keys.iter().map(|&k| ident(&fields[k].name)).collect();
    let keys = keys.join(", ");
    let mut filter = Vec::new();
    for (i, v) in conds {
        let f = &fields[*i];
        filter.push(format!("{} = {}", ident(&f.name), value_sql(f, v, server)));
    }
    if let Some(lb) = lookback_ns {
        filter.push(format!(
            "{tn} >= {}",
            time_sql(at_ns.saturating_sub(lb), server)
        ));
    }
    let at = time_sql(at_ns, server);
    let tab = table_ident(table);
    let cond = |extra: &str| {
        let mut c = filter.clone();
        c.push(extra.to_string());
        c.join(" AND ")
    };
    let events = cond(&format!(
        "(({ev} IN ({o}) AND {tn} <= {at}) OR ({ev} IN ({c}) AND {tn} < {at}))",
        o = list(&l.opens),
        c = list(&l.closes)
    ));
    let opens = cond(&format!("{ev} IN ({}) AND {tn} <= {at}", list(&l.opens)));
    // Per key: its events up to T sorted by time (a close first at equal
    // times), `_dplog_b` the running count of opens minus closes. An open
    // at i is closed when the count after it drops below its own: a
    // later close found no later open still open to take.
    Some(format!(
        "SELECT * FROM {tab}\n\
         WHERE {opens}\n  \
         AND ({keys}, {tn}) IN (\n    \
             SELECT {keys}, tupleElement(_dplog_ev[_dplog_i], 1)\n    \
             FROM (\n        \
                 SELECT {keys}, _dplog_ev,\n            \
                     arrayCumSum(arrayMap(e -> if(tupleElement(e, 2) = 1, 1, -1), _dplog_ev)) AS _dplog_b\n        \
                 FROM (\n            \
                     SELECT {keys}, arraySort(groupArray(({tn}, {ev} IN ({o})))) AS _dplog_ev\n            \
                     FROM {tab}\n            \
                     WHERE {events}\n            \
                     GROUP BY {keys}\n        \
                 )\n    \
             )\n    \
             ARRAY JOIN arrayEnumerate(_dplog_ev) AS _dplog_i\n    \
             WHERE tupleElement(_dplog_ev[_dplog_i], 2) = 1\n      \
               AND NOT arrayExists(b -> b < _dplog_b[_dplog_i], arraySlice(_dplog_b, _dplog_i + 1))\n  \
         )\n\
         ORDER BY {tn}",
        o = list(&l.opens),
    ))
}
