//! The schema codec: one encoding of a schema's identity, fields and
//! metadata, shared by every container that carries schemas (a binary
//! log's `S` frames, and so an mmap segment's preamble and an archive's
//! schema blocks; a shared-memory ring's schema descriptions).
//!
//! The encoding is described in the [`schema`](super) module docs.

use std::borrow::Cow;

use super::{
    EnumName, FieldDef, FieldKind, FieldValues, IeBy, Lifecycle, NameBy, OnlyWhen, Schema,
    SchemaError, SchemaMeta, SdParam, SyslogMeta,
};

impl Schema {
    /// The schema's description: its fields and its metadata, in the
    /// encoding of the module docs ([`encode_fields`](Self::encode_fields)
    /// then [`encode_meta`]). What [`Schema::decode`] gives back equals
    /// `self` (checked here: an encoding that would not is an error, not
    /// a loss).
    ///
    /// # Errors
    /// [`SchemaError::NotEncodable`] naming what does not fit the
    /// encoding (a name above 255 bytes, more than 65535 fields or enum
    /// names, a metadata string above 255 bytes, nested syslog profiles)
    /// or what a reader would refuse (e.g. an APP-NAME with a space).
    ///
    /// # Examples
    /// ```
    /// use dplog_core::schema::{FieldDef, FieldKind, Schema};
    /// let s = Schema::new(7, "aclDrop", 16, vec![FieldDef::new("rule", 8, 4, FieldKind::U32, 0)])
    ///     .unwrap()
    ///     .with_priority(6, None)
    ///     .unwrap();
    /// let b = s.encode().unwrap();
    /// assert_eq!(Schema::decode(&b).unwrap(), s);
    /// ```
    pub fn encode(&self) -> Result<Vec<u8>, SchemaError> {
        let bad = |why: String| SchemaError::NotEncodable(format!("schema {}: {why}", self.name()));
        let mut b = self.encode_fields().ok_or_else(|| {
            bad("a name above 255 bytes or more than 65535 fields or enum names".into())
        })?;
        let meta = encode_meta(self.meta()).ok_or_else(|| {
            bad(
                "its metadata does not fit the encoding (a string above 255 bytes, a field \
                 index above 65535, nested syslog profiles?)"
                    .into(),
            )
        })?;
        b.extend_from_slice(&meta);
        match Schema::decode(&b) {
            Ok(d) if d == *self => Ok(b),
            Ok(_) => Err(bad("it does not survive its encoding".into())),
            Err(e) => Err(bad(format!(
                "its encoding would be refused by a reader: {e}"
            ))),
        }
    }

    /// Decodes a whole description written by [`Schema::encode`], or a
    /// fields-only one (what binary logs, mmap segments, archives and
    /// ring files held before the metadata travelled; it takes the
    /// default [`SchemaMeta`]), and validates it as [`Schema::new`] and
    /// [`Schema::with_meta`] do, except that a schema without fields or
    /// with a reserved field name ([`reserved_field_name`](super::reserved_field_name), refused where
    /// a schema is declared) reads as it was written. Pure and bounded: it reads only `b`, and
    /// allocates at most in proportion to `b.len()`.
    ///
    /// Errors: a message naming what ended early, a bad kind, name or
    /// metadata, a metadata version this reader does not know (newer
    /// than [`META_VERSION`]), or the [`SchemaError`] of the decoded
    /// schema.
    pub fn decode(b: &[u8]) -> Result<Schema, String> {
        let (mut s, used) = Schema::decode_fields(b)?;
        if used == b.len() {
            // Written before metadata travelled: its writer exported each
            // field's position as its enterprise element id.
            s.meta.ipfix_enterprise.by_position = true;
            return Ok(s);
        }
        let name = s.name().to_string();
        let m = decode_meta(&b[used..]).map_err(|e| format!("schema {name}: metadata: {e}"))?;
        s.with_meta_read(m)
            .map_err(|e| format!("schema {name}: metadata: {e}"))
    }

    /// The fields part of the description (see the module docs), `None`
    /// if a name is above 255 bytes or a count above 65535.
    pub fn encode_fields(&self) -> Option<Vec<u8>> {
        fn put_name(b: &mut Vec<u8>, s: &str) -> Option<()> {
            b.push(u8::try_from(s.len()).ok()?);
            b.extend_from_slice(s.as_bytes());
            Some(())
        }
        let count = |n: usize| u16::try_from(n).ok().map(u16::to_le_bytes);
        let mut b = Vec::new();
        b.extend_from_slice(&self.id.to_le_bytes());
        b.extend_from_slice(&self.size.to_le_bytes());
        put_name(&mut b, &self.name)?;
        b.extend_from_slice(&count(self.fields.len())?);
        for f in &self.fields {
            put_name(&mut b, &f.name)?;
            b.extend_from_slice(&f.offset.to_le_bytes());
            b.extend_from_slice(&f.size.to_le_bytes());
            b.push(f.kind as u32 as u8);
            b.extend_from_slice(&f.ie_id.to_le_bytes());
            b.extend_from_slice(&count(f.enum_names.len())?);
            for e in &f.enum_names {
                b.extend_from_slice(&e.value.to_le_bytes());
                put_name(&mut b, &e.name)?;
            }
        }
        Some(b)
    }

    /// Decodes the fields part of a description from the start of `b`
    /// and validates it as [`Schema::decode`] says; returns the schema (default
    /// metadata) and the bytes it took (the rest is the metadata, if
    /// any).
    ///
    /// Errors: as [`Schema::decode`].
    pub fn decode_fields(b: &[u8]) -> Result<(Schema, usize), String> {
        struct Rd<'a> {
            b: &'a [u8],
            p: usize,
        }
        impl<'a> Rd<'a> {
            fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
                if n > self.b.len() - self.p {
                    return Err("schema description ends early".into());
                }
                let s = &self.b[self.p..self.p + n];
                self.p += n;
                Ok(s)
            }
            fn u8(&mut self) -> Result<u8, String> {
                Ok(self.take(1)?[0])
            }
            fn u16(&mut self) -> Result<u16, String> {
                let s = self.take(2)?;
                Ok(u16::from_le_bytes([s[0], s[1]]))
            }
            fn u32(&mut self) -> Result<u32, String> {
                let s = self.take(4)?;
                Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
            }
            fn name(&mut self) -> Result<String, String> {
                let n = self.u8()? as usize;
                String::from_utf8(self.take(n)?.to_vec())
                    .map_err(|_| "name is not UTF-8".to_string())
            }
        }
        let mut r = Rd { b, p: 0 };
        let id = r.u16()?;
        let size = r.u16()? as usize;
        let name = r.name()?;
        let n = r.u16()?;
        // Every field takes at least 10 bytes: no allocation beyond the input.
        let mut fields = Vec::with_capacity((n as usize).min(b.len() / 10));
        for _ in 0..n {
            let fname = r.name()?;
            let offset = r.u16()? as usize;
            let fsize = r.u16()? as usize;
            let k = r.u8()?;
            let kind = FieldKind::from_u32(k as u32)
                .ok_or_else(|| format!("field {fname}: unknown kind {k}"))?;
            let ie = r.u16()?;
            let ne = r.u16()?;
            let mut f = FieldDef::new(fname, offset, fsize, kind, ie);
            for _ in 0..ne {
                let value = r.u32()?;
                f.enum_names.push(EnumName {
                    value,
                    name: Cow::Owned(r.name()?),
                });
            }
            fields.push(f);
        }
        // As written: a log from before a check of `Schema::new` (no
        // fields, a reserved name) still reads.
        let s = Schema::build(id, name, size, fields).map_err(|e| e.to_string())?;
        Ok((s, r.p))
    }
}

/// A syslog profile name in an encoded description: 1 to 47 ASCII
/// letters, digits or `_`.
fn profile_name_ok(n: &str) -> bool {
    !n.is_empty() && n.len() < 48 && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Most syslog profile layouts nested in a schema's metadata: a
/// profile's layout has no profiles of its own.
const META_MAX_DEPTH: usize = 1;
/// The newest version of the metadata encoding this code writes and
/// reads (see the module docs): 4, whose enum fields derive their IPFIX
/// enterprise element ids as a class of their own; 3 added those ids to
/// version 2 (which added the lifecycle to version 1).
pub const META_VERSION: u8 = 4;

/// Encodes a schema's [`SchemaMeta`] (little endian), the tail of its
/// description ([`Schema::encode`]): `version u8` (4), `event time u16
/// (field index, 0xffff none)`, `priority u8`, then, each behind a
/// presence byte (0/1): priority by value (`field u16`, `count u16`,
/// `(value u64, priority u8)…`), fields only when (`field u16`, `equals
/// u64`, `count u16`, `field u16…`), the syslog layout (below), the IPFIX
/// element by value (`field u16`, `selector u16`, `count u16`, `(value
/// u32, element u16)…`), the name by value (`field u16`, `selector u16`,
/// `count u16`, `(value u32, name)…`); then `enum numbers u8`. A syslog
/// layout: `app name?`, MSGID by value? (`field u16`, `count u16`,
/// `(value u64, msgid)…`), `SD-ID?`, `count u16` parameters `(name, 0
/// field u16 | 1 constant)`, `count u16` profiles `(name, layout)` (a
/// profile's layout has no profiles). A string is a length byte and that
/// many UTF-8 bytes; `x?` is a presence byte then `x`. Version 2 then
/// has the lifecycle (`field u16`, `count u16` opening values `u64…`,
/// `count u16` closing values `u64…`, `count u16` key fields `u16…`,
/// `count u16` close-only fields `u16…`); version 3 has it behind a
/// presence byte, then the IPFIX enterprise element ids
/// ([`EnterpriseIes`](super::EnterpriseIes): `by position u8`, `count
/// u16`, `(field u16, id u16)…`); version 4 is version 3 with the `by
/// position` byte a set of flags: bit 0 [`by_position`](super::EnterpriseIes::by_position),
/// bit 1 [`enums_as_unsigned`](super::EnterpriseIes::enums_as_unsigned).
/// Versions 1 and 2 carry no ids: their schemas read with
/// [`EnterpriseIes::by_position`](super::EnterpriseIes::by_position)
/// set, the ids their writers exported; version 3 derived an enum's id as
/// an unsigned integer's, so a schema without `by position` reads with
/// [`EnterpriseIes::enums_as_unsigned`](super::EnterpriseIes::enums_as_unsigned)
/// set.
///
/// Returns `None` if something does not fit the encoding (a string above
/// 255 bytes, a count or index above 65535, nested profiles).
pub fn encode_meta(m: &SchemaMeta) -> Option<Vec<u8>> {
    struct W(Vec<u8>);
    impl W {
        fn u8(&mut self, v: u8) {
            self.0.push(v);
        }
        fn u16(&mut self, v: usize) -> Option<()> {
            self.0
                .extend_from_slice(&u16::try_from(v).ok()?.to_le_bytes());
            Some(())
        }
        fn u32(&mut self, v: u32) {
            self.0.extend_from_slice(&v.to_le_bytes());
        }
        fn u64(&mut self, v: u64) {
            self.0.extend_from_slice(&v.to_le_bytes());
        }
        fn str(&mut self, s: &str) -> Option<()> {
            self.0.push(u8::try_from(s.len()).ok()?);
            self.0.extend_from_slice(s.as_bytes());
            Some(())
        }
        fn opt_str(&mut self, s: Option<&str>) -> Option<()> {
            match s {
                None => self.u8(0),
                Some(s) => {
                    self.u8(1);
                    self.str(s)?;
                }
            }
            Some(())
        }
        fn syslog(&mut self, m: &SyslogMeta, depth: usize) -> Option<()> {
            self.opt_str(m.app_name.as_deref())?;
            match &m.msgid_by {
                None => self.u8(0),
                Some(v) => {
                    self.u8(1);
                    self.u16(v.field)?;
                    self.u16(v.values.len())?;
                    for (k, s) in &v.values {
                        self.u64(*k);
                        self.str(s)?;
                    }
                }
            }
            self.opt_str(m.sd_id.as_deref())?;
            self.u16(m.params.len())?;
            for (name, p) in &m.params {
                self.str(name)?;
                match p {
                    SdParam::Field(i) => {
                        self.u8(0);
                        self.u16(*i)?;
                    }
                    SdParam::Const(c) => {
                        self.u8(1);
                        self.str(c)?;
                    }
                }
            }
            if depth >= META_MAX_DEPTH && !m.profiles.is_empty() {
                return None;
            }
            self.u16(m.profiles.len())?;
            for (name, l) in &m.profiles {
                self.str(name)?;
                self.syslog(l, depth + 1)?;
            }
            Some(())
        }
    }
    let mut w = W(Vec::new());
    w.u8(META_VERSION);
    w.u16(m.event_time.unwrap_or(0xffff))?;
    if m.event_time == Some(0xffff) {
        return None;
    }
    w.u8(m.priority);
    match &m.priority_by {
        None => w.u8(0),
        Some(p) => {
            w.u8(1);
            w.u16(p.field)?;
            w.u16(p.values.len())?;
            for (v, pr) in &p.values {
                w.u64(*v);
                w.u8(*pr);
            }
        }
    }
    match &m.only_when {
        None => w.u8(0),
        Some(o) => {
            w.u8(1);
            w.u16(o.field)?;
            w.u64(o.equals);
            w.u16(o.fields.len())?;
            for &f in &o.fields {
                w.u16(f)?;
            }
        }
    }
    w.syslog(&m.syslog, 0)?;
    match &m.ipfix_ie_by {
        None => w.u8(0),
        Some(b) => {
            w.u8(1);
            w.u16(b.field)?;
            w.u16(b.selector)?;
            w.u16(b.ies.len())?;
            for (v, ie) in &b.ies {
                w.u32(*v);
                w.u16(usize::from(*ie))?;
            }
        }
    }
    match &m.name_by {
        None => w.u8(0),
        Some(b) => {
            w.u8(1);
            w.u16(b.field)?;
            w.u16(b.selector)?;
            w.u16(b.names.len())?;
            for (v, n) in &b.names {
                w.u32(*v);
                w.str(n)?;
            }
        }
    }
    w.u8(u8::from(m.enum_numbers));
    w.u8(u8::from(m.lifecycle.is_some()));
    if let Some(l) = &m.lifecycle {
        w.u16(l.field)?;
        for values in [&l.opens, &l.closes] {
            w.u16(values.len())?;
            for &v in values {
                w.u64(v);
            }
        }
        for fields in [&l.keys, &l.close_only] {
            w.u16(fields.len())?;
            for &f in fields {
                w.u16(f)?;
            }
        }
    }
    let e = &m.ipfix_enterprise;
    w.u8(u8::from(e.by_position) | u8::from(e.enums_as_unsigned) << 1);
    w.u16(e.explicit.len())?;
    for &(f, id) in &e.explicit {
        w.u16(f)?;
        w.u16(usize::from(id))?;
    }
    Some(w.0)
}

/// Decodes [`encode_meta`]'s encoding, the whole of `b`, and checks every
/// string a formatter writes as it is: an APP-NAME of 1 to 48 printable
/// US-ASCII characters (RFC 5424 section 6.2.5), MSGIDs of 1 to 32
/// (6.2.7), an SD-ID and parameter names of 1 to 32 without `=`, `]`,
/// `"` (6.3.2, 6.3.3), constant parameter values of printable ASCII
/// (space included) without `"`, `\` and `]` (written unescaped),
/// profile names identifiers. Field indexes are checked by
/// [`Schema::with_meta`]. Pure and bounded: it reads only `b` and
/// allocates in proportion to it.
///
/// Errors: a message naming what is wrong.
pub fn decode_meta(b: &[u8]) -> Result<SchemaMeta, String> {
    struct R<'a> {
        b: &'a [u8],
        p: usize,
    }
    fn printable(s: &str, max: usize, what: &str, forbidden: &[char]) -> Result<(), String> {
        if s.is_empty() || s.len() > max {
            return Err(format!("{what} {s:?} is not 1 to {max} characters"));
        }
        match s
            .chars()
            .find(|c| !(33..=126).contains(&(*c as u32)) || forbidden.contains(c))
        {
            Some(c) => Err(format!("{what} {s:?} contains {c:?}")),
            None => Ok(()),
        }
    }
    impl<'a> R<'a> {
        fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
            if n > self.b.len() - self.p {
                return Err("metadata ends early".into());
            }
            let s = &self.b[self.p..self.p + n];
            self.p += n;
            Ok(s)
        }
        fn u8(&mut self) -> Result<u8, String> {
            Ok(self.take(1)?[0])
        }
        fn flag(&mut self) -> Result<bool, String> {
            match self.u8()? {
                0 => Ok(false),
                1 => Ok(true),
                x => Err(format!("presence byte {x}")),
            }
        }
        fn u16(&mut self) -> Result<usize, String> {
            let s = self.take(2)?;
            Ok(usize::from(u16::from_le_bytes([s[0], s[1]])))
        }
        fn u32(&mut self) -> Result<u32, String> {
            let s = self.take(4)?;
            Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        }
        fn u64(&mut self) -> Result<u64, String> {
            Ok(u64::from_le_bytes(
                self.take(8)?.try_into().expect("8 bytes"),
            ))
        }
        fn str(&mut self) -> Result<String, String> {
            let n = usize::from(self.u8()?);
            String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "a string is not UTF-8".into())
        }
        /// A count of elements of at least `min` bytes each: no more than
        /// the bytes left allow.
        fn count(&mut self, min: usize) -> Result<usize, String> {
            let n = self.u16()?;
            if n * min > self.b.len() - self.p {
                return Err(format!("{n} elements do not fit the metadata left"));
            }
            Ok(n)
        }
        fn syslog(&mut self, depth: usize) -> Result<SyslogMeta, String> {
            let mut m = SyslogMeta::default();
            if self.flag()? {
                let a = self.str()?;
                printable(&a, 48, "syslog app name", &[])?;
                m.app_name = Some(a.into());
            }
            if self.flag()? {
                let field = self.u16()?;
                let n = self.count(9)?;
                let mut values = Vec::with_capacity(n);
                for _ in 0..n {
                    let v = self.u64()?;
                    let id = self.str()?;
                    printable(&id, 32, "syslog msgid", &[])?;
                    values.push((v, id.into()));
                }
                m.msgid_by = Some(FieldValues { field, values });
            }
            if self.flag()? {
                let sd = self.str()?;
                printable(&sd, 32, "syslog SD-ID", &['=', ']', '"'])?;
                m.sd_id = Some(sd.into());
            }
            let n = self.count(3)?;
            for _ in 0..n {
                let name = self.str()?;
                printable(&name, 32, "syslog parameter name", &['=', ']', '"'])?;
                let p = match self.u8()? {
                    0 => SdParam::Field(self.u16()?),
                    1 => {
                        let c = self.str()?;
                        if let Some(ch) = c.chars().find(|c| {
                            !(32..=126).contains(&(*c as u32)) || matches!(c, '"' | '\\' | ']')
                        }) {
                            return Err(format!("syslog constant {c:?} contains {ch:?}"));
                        }
                        SdParam::Const(c.into())
                    }
                    k => return Err(format!("syslog parameter kind {k}")),
                };
                m.params.push((name.into(), p));
            }
            let n = self.count(2)?;
            if n > 0 && depth >= META_MAX_DEPTH {
                return Err("a syslog profile's layout has profiles of its own".into());
            }
            for _ in 0..n {
                let name = self.str()?;
                if !profile_name_ok(&name) {
                    return Err(format!("syslog profile name {name:?}"));
                }
                let l = self.syslog(depth + 1)?;
                m.profiles.push((name.into(), l));
            }
            Ok(m)
        }
    }
    let mut r = R { b, p: 0 };
    let v = r.u8()?;
    if v == 0 || v > META_VERSION {
        return Err(format!(
            "metadata version {v}: this reader knows versions 1 to {META_VERSION} (written by a \
             newer dplog? read it with that version)"
        ));
    }
    let event_time = match r.u16()? {
        0xffff => None,
        i => Some(i),
    };
    let mut m = SchemaMeta {
        event_time,
        priority: r.u8()?,
        ..SchemaMeta::default()
    };
    if r.flag()? {
        let field = r.u16()?;
        let n = r.count(9)?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            values.push((r.u64()?, r.u8()?));
        }
        m.priority_by = Some(FieldValues { field, values });
    }
    if r.flag()? {
        let field = r.u16()?;
        let equals = r.u64()?;
        let n = r.count(2)?;
        let mut fields = Vec::with_capacity(n);
        for _ in 0..n {
            fields.push(r.u16()?);
        }
        m.only_when = Some(OnlyWhen {
            field,
            equals,
            fields,
        });
    }
    m.syslog = r.syslog(0)?;
    if r.flag()? {
        let field = r.u16()?;
        let selector = r.u16()?;
        let n = r.count(6)?;
        let mut ies = Vec::with_capacity(n);
        for _ in 0..n {
            ies.push((r.u32()?, r.u16()? as u16));
        }
        m.ipfix_ie_by = Some(IeBy {
            field,
            selector,
            ies,
        });
    }
    if r.flag()? {
        let field = r.u16()?;
        let selector = r.u16()?;
        let n = r.count(5)?;
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            names.push((r.u32()?, r.str()?.into()));
        }
        m.name_by = Some(NameBy {
            field,
            selector,
            names,
        });
    }
    m.enum_numbers = r.flag()?;
    // Version 2 always has a lifecycle; version 3 says whether it has one.
    let lifecycle = match v {
        1 => false,
        2 => true,
        _ => r.flag()?,
    };
    if lifecycle {
        let field = r.u16()?;
        let mut values = || -> Result<Vec<u64>, String> {
            let n = r.count(8)?;
            (0..n).map(|_| r.u64()).collect()
        };
        let opens = values()?;
        let closes = values()?;
        let mut fields = || -> Result<Vec<usize>, String> {
            let n = r.count(2)?;
            (0..n).map(|_| r.u16()).collect()
        };
        let keys = fields()?;
        let close_only = fields()?;
        m.lifecycle = Some(Lifecycle {
            field,
            opens,
            closes,
            keys,
            close_only,
        });
    }
    if v >= 4 {
        let flags = r.u8()?;
        if flags > 3 {
            return Err(format!("enterprise element flags {flags:#x}"));
        }
        m.ipfix_enterprise.by_position = flags & 1 != 0;
        m.ipfix_enterprise.enums_as_unsigned = flags & 2 != 0;
    } else if v == 3 {
        m.ipfix_enterprise.by_position = r.flag()?;
        // Its writer derived an enum's id as an unsigned integer's.
        m.ipfix_enterprise.enums_as_unsigned = !m.ipfix_enterprise.by_position;
    }
    if v >= 3 {
        let n = r.count(4)?;
        for _ in 0..n {
            let field = r.u16()?;
            m.ipfix_enterprise.explicit.push((field, r.u16()? as u16));
        }
    } else {
        // Written before the ids were derived from names: its writer
        // exported each field's position.
        m.ipfix_enterprise.by_position = true;
    }
    if r.p != b.len() {
        return Err(format!("{} stray bytes after the metadata", b.len() - r.p));
    }
    Ok(m)
}
