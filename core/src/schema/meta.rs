//! Metadata a schema declares beyond its fields ([`SchemaMeta`]) and
//! the `with_*` builders of [`Schema`] that set it.

use std::borrow::Cow;

use super::{name_ok, FieldKind, Schema, SchemaError};

impl Schema {
    pub(super) fn index_of(&self, what: &'static str, name: &str) -> Result<usize, SchemaError> {
        self.field(name)
            .map(|(i, _)| i)
            .ok_or_else(|| SchemaError::BadMetaField(what, name.to_string()))
    }

    fn integer_field(&self, what: &'static str, name: &str) -> Result<usize, SchemaError> {
        let i = self.index_of(what, name)?;
        if self.fields[i].kind.is_integer() && self.fields[i].size <= 8 {
            Ok(i)
        } else {
            Err(SchemaError::BadMetaField(what, name.to_string()))
        }
    }

    /// Values declared for integer field `field` (a MSGID, priority, IPFIX
    /// element or name by value): each fits the field's bytes, none is
    /// listed twice (which of the two results would win is not
    /// obvious). Reading a description from a log does not check this, so
    /// a log written with such a list stays readable.
    ///
    /// Errors: [`SchemaError::BadMetaValue`] with the first bad value.
    fn check_values(
        &self,
        what: &'static str,
        field: usize,
        values: impl Iterator<Item = u64>,
    ) -> Result<(), SchemaError> {
        let Some(f) = self.fields.get(field) else {
            return Err(SchemaError::BadMetaField(what, format!("#{field}")));
        };
        let max = match f.size {
            0..=7 => (1u64 << (8 * f.size)) - 1,
            _ => u64::MAX,
        };
        let bad =
            |problem: String| Err(SchemaError::BadMetaValue(what, f.name.to_string(), problem));
        let mut seen: Vec<u64> = Vec::new();
        for v in values {
            if v > max {
                return bad(format!("value {v} does not fit its {} byte(s)", f.size));
            }
            if seen.contains(&v) {
                return bad(format!("value {v} listed twice"));
            }
            seen.push(v);
        }
        Ok(())
    }

    /// Every value list of `meta` (see `check_values`), syslog profiles
    /// included.
    fn check_meta_values(&self, meta: &SchemaMeta) -> Result<(), SchemaError> {
        if let Some(p) = &meta.priority_by {
            self.check_values("priority", p.field, p.values.iter().map(|v| v.0))?;
        }
        fn syslog(s: &Schema, m: &SyslogMeta) -> Result<(), SchemaError> {
            if let Some(v) = &m.msgid_by {
                s.check_values("syslog msgid", v.field, v.values.iter().map(|v| v.0))?;
            }
            m.profiles.iter().try_for_each(|(_, l)| syslog(s, l))
        }
        syslog(self, &meta.syslog)?;
        if let Some(b) = &meta.ipfix_ie_by {
            let values = b.ies.iter().map(|v| u64::from(v.0));
            self.check_values("ipfix element by value", b.selector, values)?;
            self.check_ie_by_types(b.field, &b.ies)?;
        }
        if let Some(b) = &meta.name_by {
            let values = b.names.iter().map(|v| u64::from(v.0));
            self.check_values("name by value", b.selector, values)?;
            self.check_name_by_names(b.field, b.names.iter().map(|(v, n)| (*v, &**n)))?;
        }
        self.check_enterprise_ies(&meta.ipfix_enterprise)?;
        Ok(())
    }

    /// The IANA elements a by-value rule gives field `field` are ones it
    /// can carry ([`check_iana_type`](super::check_iana_type)).
    fn check_ie_by_types(&self, field: usize, ies: &[(u32, u16)]) -> Result<(), SchemaError> {
        match self.fields.get(field) {
            Some(f) => ies
                .iter()
                .try_for_each(|&(_, ie)| super::check_iana_type(f, ie)),
            None => Ok(()),
        }
    }

    /// The names a name-by-value rule gives field `field` are field names
    /// in the output, so they follow the rules of declared field names:
    /// identifiers, none reserved ([`reserved_field_name`](super::reserved_field_name)).
    fn check_name_by_names<'n>(
        &self,
        field: usize,
        names: impl IntoIterator<Item = (u32, &'n str)>,
    ) -> Result<(), SchemaError> {
        let field = self
            .fields
            .get(field)
            .map_or_else(|| format!("#{field}"), |f| f.name.to_string());
        for (v, n) in names {
            if !name_ok(n) {
                return Err(SchemaError::BadMetaValue(
                    "name by value",
                    field,
                    format!("name {n:?} for value {v} is not an identifier"),
                ));
            }
            if let Some(why) = super::reserved_field_name(n) {
                return Err(SchemaError::BadMetaValue(
                    "name by value",
                    field,
                    format!("name {n} for value {v} is reserved ({why}); choose another name"),
                ));
            }
        }
        Ok(())
    }

    /// Declares which field is the record's event time: `Some(name)` of a
    /// [`FieldKind::NsTimestamp`] or [`FieldKind::TscTimestamp`] field, or
    /// `None` for a record without one. Default: the first timestamp field.
    /// The reorder window and the formats' message time read it.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing or non-timestamp
    /// field.
    pub fn with_event_time(mut self, field: Option<&str>) -> Result<Self, SchemaError> {
        self.meta.event_time = match field {
            None => None,
            Some(n) => {
                let i = self.index_of("event time", n)?;
                if !matches!(
                    self.fields[i].kind,
                    FieldKind::NsTimestamp | FieldKind::TscTimestamp
                ) {
                    return Err(SchemaError::BadMetaField("event time", n.to_string()));
                }
                Some(i)
            }
        };
        Ok(self)
    }

    /// Declares the record type's priority under the `degrade`
    /// backpressure policy ([`PRIORITY_NORMAL`](crate::record::PRIORITY_NORMAL)
    /// by default) and, optionally, priorities by the value of one integer
    /// field (`(field, [(value, priority)])`, e.g. a session delete
    /// outranking a create). Config can override the whole rule per type.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing or non-integer
    /// field; [`SchemaError::BadMetaValue`] for a value the field cannot
    /// hold or one listed twice.
    pub fn with_priority(
        mut self,
        default: u8,
        by_field: Option<(&str, &[(u64, u8)])>,
    ) -> Result<Self, SchemaError> {
        self.meta.priority = default;
        self.meta.priority_by = match by_field {
            None => None,
            Some((n, values)) => {
                let field = self.integer_field("priority", n)?;
                self.check_values("priority", field, values.iter().map(|v| v.0))?;
                Some(FieldValues {
                    field,
                    values: values.to_vec(),
                })
            }
        };
        Ok(self)
    }

    /// Declares fields that the default text and JSON layouts print only
    /// when integer field `when` equals `equals` (e.g. a session's counters
    /// only on its delete); CSV leaves their cells empty otherwise, as JSON
    /// leaves their keys out. Syslog, IPFIX and binary print every field.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing field.
    pub fn with_fields_only_when(
        mut self,
        when: &str,
        equals: u64,
        fields: &[&str],
    ) -> Result<Self, SchemaError> {
        let field = self.integer_field("fields only when", when)?;
        let fields = fields
            .iter()
            .map(|n| self.index_of("fields only when", n))
            .collect::<Result<_, _>>()?;
        self.meta.only_when = Some(OnlyWhen {
            field,
            equals,
            fields,
        });
        Ok(self)
    }

    /// Sets the syslog metadata (RFC 5424 / RFC 3164 defaults of this
    /// record type); see [`SyslogMeta`]. Its field indexes must be this
    /// schema's: build it with [`SyslogMeta::resolve`].
    pub fn with_syslog(mut self, syslog: SyslogMeta) -> Self {
        self.meta.syslog = syslog;
        self
    }

    /// Declares that the IPFIX information element of field `field` is
    /// chosen by the value of integer field `selector` (`[(value, ie)]`;
    /// other values export no such element): one template per value. E.g.
    /// RFC 8158's natQuotaExceededEvent selects the limit's element.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing field or a
    /// non-integer selector; [`SchemaError::BadMetaValue`] for a value the
    /// selector cannot hold or one listed twice;
    /// [`SchemaError::ElementType`] for an IANA element the field cannot
    /// carry.
    pub fn with_ipfix_ie_by(
        mut self,
        field: &str,
        selector: &str,
        ies: &[(u32, u16)],
    ) -> Result<Self, SchemaError> {
        let selector = self.integer_field("ipfix element by value", selector)?;
        let values = ies.iter().map(|v| u64::from(v.0));
        self.check_values("ipfix element by value", selector, values)?;
        let field = self.index_of("ipfix element by value", field)?;
        self.check_ie_by_types(field, ies)?;
        self.meta.ipfix_ie_by = Some(IeBy {
            field,
            selector,
            ies: ies.to_vec(),
        });
        Ok(self)
    }

    /// Declares that the default text, JSON, CSV and syslog layouts name
    /// field `field` by the value of integer field `selector`
    /// (`[(value, name)]`; a record whose selector has another value
    /// leaves the field out), as [`Schema::with_ipfix_ie_by`] chooses its
    /// IPFIX element: e.g. RFC 8158's quota-exceeded limit is
    /// `maxSessionEntries`, ..., `maxFragmentsPendingReassembly` by
    /// natQuotaExceededEvent. The field keeps its own name for templates.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a missing field or a
    /// non-integer selector; [`SchemaError::BadMetaValue`] for a value the
    /// selector cannot hold or one listed twice, and for a name that a
    /// declared field could not take: no identifier, or reserved
    /// ([`reserved_field_name`](super::reserved_field_name): `timestamp`,
    /// `recordType`, `dplog*`, `_dplog*`), since it is the field's key or
    /// column in the output.
    pub fn with_name_by(
        mut self,
        field: &str,
        selector: &str,
        names: &[(u32, &'static str)],
    ) -> Result<Self, SchemaError> {
        let selector = self.integer_field("name by value", selector)?;
        self.check_values(
            "name by value",
            selector,
            names.iter().map(|v| u64::from(v.0)),
        )?;
        let field = self.index_of("name by value", field)?;
        self.check_name_by_names(field, names.iter().copied())?;
        self.meta.name_by = Some(NameBy {
            field,
            selector,
            names: names.iter().map(|&(v, n)| (v, Cow::Borrowed(n))).collect(),
        });
        Ok(self)
    }

    /// Replaces the whole [`SchemaMeta`] (e.g. one decoded from a
    /// shared-memory ring's description), checked as the `with_*`
    /// builders check theirs: the event time a timestamp field; the
    /// priority, only-when, MSGID and selector fields integers of at most
    /// 8 bytes; every other field index in range (syslog parameters and
    /// profiles included); name-by names identifiers.
    ///
    /// Errors: [`SchemaError::BadMetaField`] naming what it is for and the
    /// field (its index when out of range); [`SchemaError::BadMetaValue`]
    /// for a listed value (priority, MSGID, IPFIX element or name by value)
    /// that its field cannot hold, or one listed twice.
    pub fn with_meta(self, meta: SchemaMeta) -> Result<Self, SchemaError> {
        let s = self.with_meta_read(meta)?;
        s.check_meta_values(&s.meta)?;
        Ok(s)
    }

    /// [`Schema::with_meta`] for a description read from a log or a ring:
    /// the same checks except that of declared values (see
    /// `check_values`), so that what a writer accepted stays readable.
    pub(crate) fn with_meta_read(mut self, meta: SchemaMeta) -> Result<Self, SchemaError> {
        let n = self.fields.len();
        // A field by name; an index out of range (a damaged description)
        // as `#i`.
        let label = |i: usize| match self.fields.get(i) {
            Some(f) => f.name.to_string(),
            None => format!("#{i}"),
        };
        let bad = |what: &'static str, i: usize| SchemaError::BadMetaField(what, label(i));
        let any = |what: &'static str, i: usize| if i < n { Ok(()) } else { Err(bad(what, i)) };
        let int = |what: &'static str, i: usize| {
            if i < n && self.fields[i].kind.is_integer() && self.fields[i].size <= 8 {
                Ok(())
            } else {
                Err(bad(what, i))
            }
        };
        if let Some(i) = meta.event_time {
            if i >= n
                || !matches!(
                    self.fields[i].kind,
                    FieldKind::NsTimestamp | FieldKind::TscTimestamp
                )
            {
                return Err(bad("event time", i));
            }
        }
        if let Some(p) = &meta.priority_by {
            int("priority", p.field)?;
        }
        if let Some(o) = &meta.only_when {
            int("fields only when", o.field)?;
            for &f in &o.fields {
                any("fields only when", f)?;
            }
        }
        fn syslog(
            m: &SyslogMeta,
            int: &dyn Fn(&'static str, usize) -> Result<(), SchemaError>,
            any: &dyn Fn(&'static str, usize) -> Result<(), SchemaError>,
        ) -> Result<(), SchemaError> {
            if let Some(v) = &m.msgid_by {
                int("syslog msgid", v.field)?;
            }
            for (_, p) in &m.params {
                if let SdParam::Field(i) = p {
                    any("syslog parameter", *i)?;
                }
            }
            for (_, l) in &m.profiles {
                syslog(l, int, any)?;
            }
            Ok(())
        }
        syslog(&meta.syslog, &int, &any)?;
        if let Some(b) = &meta.ipfix_ie_by {
            any("ipfix element by value", b.field)?;
            int("ipfix element by value", b.selector)?;
        }
        if let Some(b) = &meta.name_by {
            any("name by value", b.field)?;
            int("name by value", b.selector)?;
            if let Some((_, bad_name)) = b.names.iter().find(|(_, nm)| !name_ok(nm)) {
                return Err(SchemaError::BadMetaField(
                    "name by value",
                    bad_name.to_string(),
                ));
            }
        }
        if let Some(l) = &meta.lifecycle {
            self.check_lifecycle(l)?;
        }
        for &(i, id) in &meta.ipfix_enterprise.explicit {
            any("ipfix enterprise element", i)?;
            if !(1..=super::MAX_ENTERPRISE_IE).contains(&id) {
                return Err(SchemaError::BadMetaValue(
                    "ipfix enterprise element",
                    label(i),
                    format!("id {id} is outside 1..={}", super::MAX_ENTERPRISE_IE),
                ));
            }
        }
        self.meta = meta;
        Ok(self)
    }

    /// Declares the record type's lifecycle: the records of a *state*
    /// (a session, a connection, a lease) that the integer field `field`
    /// says open it (`opens`, e.g. a create) or close it (`closes`, e.g.
    /// a delete), the fields whose values identify a state (`keys`: an
    /// open and its close carry the same) and the fields a close alone
    /// carries (`close_only`, e.g. its counters). Other values of `field`
    /// are events of no state. `dplog-query --at T` answers which states
    /// were open at T from it, for any record type that declares one.
    ///
    /// # Errors
    /// [`SchemaError::BadMetaField`] for a field the schema lacks or a
    /// `field` that is not an integer of at most 8 bytes;
    /// [`SchemaError::BadLifecycle`] for a timestamp `field`, no opening
    /// or closing value, a value both opens and closes or does not fit the field, no key, or a
    /// field listed twice (as a key and close-only, or as `field` too).
    ///
    /// # Examples
    /// ```
    /// use dplog_core::schema::{FieldDef, FieldKind, Schema};
    /// let s = Schema::new(500, "lbConn", 32, vec![
    ///     FieldDef::new("connTime", 8, 8, FieldKind::NsTimestamp, 0),
    ///     FieldDef::new("vip", 16, 4, FieldKind::Ipv4, 0),
    ///     FieldDef::new("vport", 20, 2, FieldKind::Port, 0),
    ///     FieldDef::new("connEvent", 22, 1, FieldKind::U8, 0),
    ///     FieldDef::new("bytes", 24, 8, FieldKind::U64, 0),
    /// ])
    /// .unwrap()
    /// .with_lifecycle("connEvent", &[1], &[2], &["vip", "vport"], &["bytes"])
    /// .unwrap();
    /// let l = s.meta().lifecycle.as_ref().unwrap();
    /// assert_eq!((l.field, l.keys.as_slice(), l.close_only.as_slice()), (3, &[1, 2][..], &[4][..]));
    /// assert!(l.is_open(1) && l.is_close(2) && !l.is_open(3));
    /// ```
    pub fn with_lifecycle(
        mut self,
        field: &str,
        opens: &[u64],
        closes: &[u64],
        keys: &[&str],
        close_only: &[&str],
    ) -> Result<Self, SchemaError> {
        let names = |v: &[&str]| {
            v.iter()
                .map(|n| self.index_of("lifecycle", n))
                .collect::<Result<Vec<_>, _>>()
        };
        let l = Lifecycle {
            field: self.integer_field("lifecycle", field)?,
            opens: opens.to_vec(),
            closes: closes.to_vec(),
            keys: names(keys)?,
            close_only: names(close_only)?,
        };
        self.check_lifecycle(&l)?;
        self.meta.lifecycle = Some(l);
        Ok(self)
    }

    /// Checks a lifecycle against this schema's fields (see
    /// [`Schema::with_lifecycle`]).
    fn check_lifecycle(&self, l: &Lifecycle) -> Result<(), SchemaError> {
        let n = self.fields.len();
        let bad = |m: String| Err(SchemaError::BadLifecycle(m));
        let name = |i: usize| self.fields[i].name.to_string();
        if l.field >= n || !self.fields[l.field].kind.is_integer() || self.fields[l.field].size > 8
        {
            let field = match self.fields.get(l.field) {
                Some(f) => f.name.to_string(),
                None => format!("#{}", l.field),
            };
            return Err(SchemaError::BadMetaField("lifecycle", field));
        }
        if let Some(&i) = l.keys.iter().chain(&l.close_only).find(|&&i| i >= n) {
            return Err(SchemaError::BadMetaField("lifecycle", format!("#{i}")));
        }
        let f = &self.fields[l.field];
        if matches!(f.kind, FieldKind::TscTimestamp | FieldKind::NsTimestamp) {
            return bad(format!(
                "field {} is a timestamp; the event field says what happened (an enum or integer field)",
                f.name
            ));
        }
        if l.opens.is_empty() || l.closes.is_empty() {
            return bad(format!(
                "field {}: a lifecycle needs at least one opening and one closing value",
                f.name
            ));
        }
        let max = if f.size >= 8 {
            u64::MAX
        } else {
            (1u64 << (8 * f.size)) - 1
        };
        for &v in l.opens.iter().chain(&l.closes) {
            if v > max {
                return bad(format!("value {v} does not fit field {}", f.name));
            }
            if l.opens.contains(&v) && l.closes.contains(&v) {
                return bad(format!(
                    "value {v} of field {} both opens and closes",
                    f.name
                ));
            }
        }
        if l.keys.is_empty() {
            return bad("no key field: say which fields identify a state".into());
        }
        let all: Vec<usize> = std::iter::once(l.field)
            .chain(l.keys.iter().copied())
            .chain(l.close_only.iter().copied())
            .collect();
        for (k, &i) in all.iter().enumerate() {
            if all[..k].contains(&i) {
                return bad(format!(
                    "field {} is listed twice (the event field, a key and close-only are distinct)",
                    name(i)
                ));
            }
        }
        Ok(())
    }

    /// Makes the default layouts print enum fields as numbers (`true`) or
    /// by name (`false`, the default); see [`SchemaMeta::enum_numbers`].
    pub fn with_enum_numbers(mut self, numbers: bool) -> Self {
        self.meta.enum_numbers = numbers;
        self
    }
}

/// Priorities (or other small values) by the value of one integer field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldValues<T> {
    /// Index of the field in [`Schema::fields`].
    pub field: usize,
    /// `(field value, result)`; a value not listed takes the default.
    pub values: Vec<(u64, T)>,
}

/// Fields printed by the default text/JSON layouts only when another
/// field has one value; see [`Schema::with_fields_only_when`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct OnlyWhen {
    /// Index of the integer field tested.
    pub field: usize,
    /// The value that shows the fields.
    pub equals: u64,
    /// Indexes of the fields shown only then.
    pub fields: Vec<usize>,
}

/// An IPFIX element chosen by another field's value; see
/// [`Schema::with_ipfix_ie_by`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct IeBy {
    /// Index of the field whose element varies.
    pub field: usize,
    /// Index of the integer field whose value selects it.
    pub selector: usize,
    /// `(selector value, IANA element id)`.
    pub ies: Vec<(u32, u16)>,
}

/// A field's output name chosen by another field's value; see
/// [`Schema::with_name_by`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NameBy {
    /// Index of the field whose name varies.
    pub field: usize,
    /// Index of the integer field whose value selects the name.
    pub selector: usize,
    /// `(selector value, name)`.
    pub names: Vec<(u32, Cow<'static, str>)>,
}

/// One RFC 5424 SD-PARAM (or RFC 3164 `NAME=value` pair) of a declared
/// syslog layout: a field's value or a constant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SdParam {
    /// The value of the field with this index.
    Field(usize),
    /// A constant value (RFC 3164 omits it).
    Const(Cow<'static, str>),
}

/// Syslog metadata of a record type: what RFC 5424 and RFC 3164 print by
/// default. Everything is optional; without it a record is printed with
/// APP-NAME from the syslog options (default `dplog`), MSGID the schema
/// name, SD-ID `<schema name>@<enterprise>` and every field as a parameter
/// under its name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SyslogMeta {
    /// APP-NAME (RFC 5424) / TAG (RFC 3164) unless the options set one.
    pub app_name: Option<Cow<'static, str>>,
    /// MSGID by the value of an integer field (a value not listed prints
    /// in decimal).
    pub msgid_by: Option<FieldValues<Cow<'static, str>>>,
    /// SD-ID of the declared parameter layout (`name@enterprise` or an
    /// IANA-registered bare name), unless the options set one.
    pub sd_id: Option<Cow<'static, str>>,
    /// The parameters in order (PARAM-NAME, value); empty: every field
    /// under its own name.
    pub params: Vec<(Cow<'static, str>, SdParam)>,
    /// Other layouts of this record type by syslog profile name (e.g.
    /// `vpp`: VPP's exact NAT layout), chosen by the syslog options'
    /// `profile`; a profile not listed uses this layout.
    pub profiles: Vec<(Cow<'static, str>, SyslogMeta)>,
}

impl SyslogMeta {
    /// Builds syslog metadata for `schema` by field names: `app_name`,
    /// MSGID by `(field, [(value, msgid)])`, SD-ID and parameters as
    /// `(PARAM-NAME, source)` where a source starting with `=` is a
    /// constant and any other names a field.
    ///
    /// Errors: [`SchemaError::BadMetaField`] for a field the schema lacks;
    /// [`SchemaError::BadMetaValue`] for a MSGID value the field cannot
    /// hold or one listed twice.
    pub fn resolve(
        schema: &Schema,
        app_name: Option<&'static str>,
        msgid_by: Option<(&str, &[(u64, &'static str)])>,
        sd_id: Option<&'static str>,
        params: &[(&'static str, &'static str)],
    ) -> Result<SyslogMeta, SchemaError> {
        let msgid_by = match msgid_by {
            None => None,
            Some((n, values)) => {
                let field = schema.integer_field("syslog msgid", n)?;
                schema.check_values("syslog msgid", field, values.iter().map(|v| v.0))?;
                Some(FieldValues {
                    field,
                    values: values.iter().map(|&(v, m)| (v, Cow::Borrowed(m))).collect(),
                })
            }
        };
        let params = params
            .iter()
            .map(|&(name, src)| {
                let v = match src.strip_prefix('=') {
                    Some(c) => SdParam::Const(Cow::Borrowed(c)),
                    None => SdParam::Field(schema.index_of("syslog parameter", src)?),
                };
                Ok((Cow::Borrowed(name), v))
            })
            .collect::<Result<_, SchemaError>>()?;
        Ok(SyslogMeta {
            app_name: app_name.map(Cow::Borrowed),
            msgid_by,
            sd_id: sd_id.map(Cow::Borrowed),
            params,
            profiles: Vec::new(),
        })
    }

    /// This layout with `layout` as the one of syslog profile `name`.
    pub fn with_profile(mut self, name: &'static str, layout: SyslogMeta) -> SyslogMeta {
        self.profiles.push((Cow::Borrowed(name), layout));
        self
    }

    /// The layout of profile `name` (`None`: this one), this one if the
    /// record type declares none for it.
    pub fn for_profile(&self, name: Option<&str>) -> &SyslogMeta {
        name.and_then(|n| self.profiles.iter().find(|(p, _)| p == n))
            .map_or(self, |(_, m)| m)
    }
}

/// A record type's lifecycle: which records open and close a state and
/// what identifies it; see [`Schema::with_lifecycle`]. Field numbers are
/// indexes into [`Schema::fields`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lifecycle {
    /// Index of the integer field whose value says what a record does.
    pub field: usize,
    /// Values of `field` that open a state.
    pub opens: Vec<u64>,
    /// Values of `field` that close one.
    pub closes: Vec<u64>,
    /// Indexes of the fields whose values identify a state.
    pub keys: Vec<usize>,
    /// Indexes of the fields a close alone carries (e.g. counters).
    pub close_only: Vec<usize>,
}

impl Lifecycle {
    /// Whether value `v` of the lifecycle field opens a state.
    pub fn is_open(&self, v: u64) -> bool {
        self.opens.contains(&v)
    }

    /// Whether value `v` of the lifecycle field closes a state.
    pub fn is_close(&self, v: u64) -> bool {
        self.closes.contains(&v)
    }
}

/// What a schema declares beyond its fields; see [`Schema::meta`] and the
/// `with_*` builders of [`Schema`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchemaMeta {
    /// Index of the event-time field, if any (default: the first
    /// timestamp field).
    pub event_time: Option<usize>,
    /// Priority under `degrade` (default
    /// [`PRIORITY_NORMAL`](crate::record::PRIORITY_NORMAL)).
    pub priority: u8,
    /// Priorities by one field's value, over `priority`.
    pub priority_by: Option<FieldValues<u8>>,
    /// Fields the default text/JSON layouts print only conditionally.
    pub only_when: Option<OnlyWhen>,
    /// Syslog defaults.
    pub syslog: SyslogMeta,
    /// An IPFIX element chosen by another field's value.
    pub ipfix_ie_by: Option<IeBy>,
    /// A field named by another field's value in the default layouts.
    pub name_by: Option<NameBy>,
    /// The default text, JSON, CSV and syslog layouts print enum fields
    /// as numbers (as some collectors expect, e.g. NAT's natEvent) instead
    /// of their names. Default `false`: names.
    pub enum_numbers: bool,
    /// The record type's lifecycle, if its records open and close
    /// states; see [`Schema::with_lifecycle`].
    pub lifecycle: Option<Lifecycle>,
    /// The IPFIX enterprise element ids of the fields without an IANA
    /// element; see [`EnterpriseIes`](super::EnterpriseIes) and
    /// [`Schema::with_ipfix_enterprise_ie`].
    pub ipfix_enterprise: super::EnterpriseIes,
}

impl Default for SchemaMeta {
    fn default() -> Self {
        Self {
            event_time: None,
            priority: crate::record::PRIORITY_NORMAL,
            priority_by: None,
            only_when: None,
            syslog: SyslogMeta::default(),
            ipfix_ie_by: None,
            name_by: None,
            enum_numbers: false,
            lifecycle: None,
            ipfix_enterprise: super::EnterpriseIes::default(),
        }
    }
}
