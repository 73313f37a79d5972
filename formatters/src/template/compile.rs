//! Building a [`Program`]: compiling a template string or adding literals,
//! fields and conditions one by one, then specialising and fusing the
//! operations into the steps [`Program::run`] walks.

use super::*;

impl Program {
    /// Starts an empty program for `schema`; add to it with
    /// [`Program::lit`], [`Program::field`] and [`Program::when`].
    pub fn new(schema: &Schema, opts: Options) -> Program {
        Program {
            ops: Vec::new(),
            steps: Vec::new(),
            ready: false,
            sealed: usize::MAX,
            lits: Vec::new(),
            padded: Vec::new(),
            tmp: Vec::new(),
            names: Vec::new(),
            rfc3339: Vec::new(),
            rfc3164: Vec::new(),
            renumber: opts.renumber.unwrap_or_default(),
            tsc: opts.tsc.unwrap_or(TscCalibration::IDENTITY),
            time: opts.time,
            bytes: opts.bytes,
            default_bytes: Vec::new(),
            min_len: schema.size(),
            max_out: 0,
            schema_id: schema.id(),
            fuse: true,
        }
    }

    /// The same program with step specialisation and pair fusion off
    /// (literal suffixes and `{ipv4}:{dec}` still fuse): the reference the
    /// superinstruction tests compare with.
    #[doc(hidden)]
    pub fn unfused(mut self) -> Program {
        self.fuse = false;
        self.ready = false;
        self
    }

    /// Number of steps (dispatches) one record runs through, conditional
    /// bodies included (for tests and benches).
    #[doc(hidden)]
    pub fn step_count(&mut self) -> usize {
        if !self.ready {
            self.build();
        }
        self.steps.len()
    }

    /// Compiles a user template (syntax in the module docs) for `schema`.
    /// String fields are escaped with `esc`.
    pub fn compile(
        template: &str,
        schema: &Schema,
        opts: Options,
        esc: Escape,
    ) -> Result<Program, TemplateError> {
        let mut p = Program::new(schema, opts);
        let mut lit = String::new();
        let mut chars = template.char_indices().enumerate().peekable();
        while let Some((col0, (_, c))) = chars.next() {
            let col = col0 + 1;
            match c {
                '{' if matches!(chars.peek(), Some((_, (_, '{')))) => {
                    chars.next();
                    lit.push('{');
                }
                '}' if matches!(chars.peek(), Some((_, (_, '}')))) => {
                    chars.next();
                    lit.push('}');
                }
                '}' => {
                    return Err(TemplateError {
                        column: col,
                        message: "unmatched '}' (write '}}' for a literal brace)".into(),
                    })
                }
                '{' => {
                    let mut spec = String::new();
                    let mut closed = false;
                    for (_, (_, c)) in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        if c == '{' {
                            break;
                        }
                        spec.push(c);
                    }
                    if !closed {
                        return Err(TemplateError {
                            column: col,
                            message: "unclosed '{' (write '{{' for a literal brace)".into(),
                        });
                    }
                    p.lit(lit.as_bytes());
                    lit.clear();
                    let (name, conv) = match spec.split_once(':') {
                        Some((n, c)) => (n.trim(), Some(c.trim())),
                        None => (spec.trim(), None),
                    };
                    let (idx, _) = schema.field(name).ok_or_else(|| TemplateError {
                        column: col,
                        message: format!(
                            "unknown field {name:?} in schema {}; known fields: {}",
                            schema.name(),
                            schema
                                .fields()
                                .iter()
                                .map(|f| &*f.name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    })?;
                    let conv = match conv {
                        None => None,
                        // Bare `rfc3339`: the options' precision.
                        Some("rfc3339") => Some(Conv::Rfc3339(p.time.map_or(3, |t| t.digits()))),
                        Some(c) => Some(Conv::parse(c).ok_or_else(|| TemplateError {
                            column: col,
                            message: format!("unknown converter {c:?} for field {name}"),
                        })?),
                    };
                    p.field(schema, idx, conv, esc)
                        .map_err(|message| TemplateError {
                            column: col,
                            message,
                        })?;
                }
                // Every sink takes a line as one record (a datagram, a
                // RELP or Kafka message, each counted written or dropped),
                // so a record must stay on one line.
                '\n' => {
                    return Err(TemplateError {
                        column: col,
                        message: "a line break would split each record into several lines (one record, one line)".into(),
                    })
                }
                c => lit.push(c),
            }
        }
        p.lit(lit.as_bytes());
        Ok(p)
    }

    /// Appends a literal (merged with a literal just before it).
    pub fn lit(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.ready = false;
        let start = self.lits.len() as u32;
        self.lits.extend_from_slice(bytes);
        self.max_out += bytes.len();
        // Never merge into the last op of a conditional body: the literal
        // comes after the body and must not be skipped with it.
        let sealed = self.sealed == self.ops.len();
        if let Some(Op::Lit { start: s, len }) = self.ops.last_mut().filter(|_| !sealed) {
            if *s + *len == start {
                *len += bytes.len() as u32;
                return;
            }
        }
        self.ops.push(Op::Lit {
            start,
            len: bytes.len() as u32,
        });
    }

    /// Appends field `idx` of `schema` printed with `conv` (its kind's
    /// default under the program's [`Options`] if `None`, see
    /// [`Conv::default_with`]); strings and enum names escaped with `esc`.
    ///
    /// # Errors
    /// A message if `idx` is out of range or `conv` does not suit the kind.
    pub fn field(
        &mut self,
        schema: &Schema,
        idx: usize,
        conv: Option<Conv>,
        esc: Escape,
    ) -> Result<(), String> {
        let f: &FieldDef = schema
            .fields()
            .get(idx)
            .ok_or_else(|| format!("no field #{idx} in schema {}", schema.name()))?;
        // TSC fields always convert: with the consumer's calibration once
        // it arrives, the identity before.
        let tsc = true;
        let opts = Options {
            time: self.time,
            bytes: self.bytes,
            ..Options::default()
        };
        if conv.is_none() && f.kind == FieldKind::Bytes {
            self.default_bytes.push((self.ops.len(), idx, esc));
        }
        let conv = conv.unwrap_or(Conv::default_with(f.kind, &opts));
        if !conv.suits(f.kind, tsc) {
            let hint = if f.kind == FieldKind::TscTimestamp && conv.is_time() {
                " (a TSC field needs a TSC calibration to print as time)"
            } else {
                ""
            };
            return Err(format!(
                "converter {} does not suit field {} of kind {}{hint}",
                conv.name(),
                f.name,
                f.kind.name()
            ));
        }
        let off = f.offset as u32;
        let size = f.size as u8;
        let is_tsc = f.kind == FieldKind::TscTimestamp;
        let is_event =
            self.renumber.len > 0 && f.ie_id == self.renumber.ie_id && f.kind.is_integer();
        let (op, max) = match conv {
            Conv::Dec if is_event => (Op::Event { off, size }, 20),
            Conv::Dec => (Op::Dec { off, size }, 20),
            Conv::Hex if f.kind == FieldKind::Bytes => bytes_op(f, BytesEncoding::Hex, esc),
            Conv::Base64 => bytes_op(f, BytesEncoding::Base64, esc),
            Conv::Hex => (Op::Hex { off, size }, 16),
            Conv::Bool => (Op::Bool { off }, 5),
            Conv::Ipv4 => (Op::Ipv4 { off }, 15),
            Conv::Ipv6 => (Op::Ipv6 { off }, 45),
            Conv::Mac => (Op::Mac { off }, 17),
            Conv::Rfc3339(digits) => {
                self.rfc3339.push(Rfc3339Cache::default());
                let cache = (self.rfc3339.len() - 1) as u16;
                (
                    Op::Rfc3339 {
                        off,
                        cache,
                        digits,
                        tsc: is_tsc,
                    },
                    30,
                )
            }
            Conv::Rfc3164 => {
                self.rfc3164.push(Rfc3164Cache::default());
                let cache = (self.rfc3164.len() - 1) as u16;
                (
                    Op::Rfc3164 {
                        off,
                        cache,
                        tsc: is_tsc,
                    },
                    15,
                )
            }
            Conv::UnixS => (
                Op::Unix {
                    off,
                    div: 1_000_000_000,
                    tsc: is_tsc,
                },
                20,
            ),
            Conv::UnixMs => (
                Op::Unix {
                    off,
                    div: 1_000_000,
                    tsc: is_tsc,
                },
                20,
            ),
            Conv::UnixUs => (
                Op::Unix {
                    off,
                    div: 1_000,
                    tsc: is_tsc,
                },
                20,
            ),
            Conv::UnixNs => (
                Op::Unix {
                    off,
                    div: 1,
                    tsc: is_tsc,
                },
                20,
            ),
            Conv::Name => {
                let mut t = NameTable {
                    dense: Box::new([(0, 0); 256]),
                    sparse: Vec::new(),
                };
                // An unnamed value prints in decimal: up to 20 digits.
                let mut longest = 20;
                for e in &f.enum_names {
                    let start = self.lits.len() as u32;
                    push_escaped(&mut self.lits, e.name.as_bytes(), esc);
                    let len = self.lits.len() as u32 - start;
                    longest = longest.max(len as usize);
                    if e.value < 256 {
                        t.dense[e.value as usize] = (start, len);
                    } else {
                        t.sparse.push((e.value, start, len));
                    }
                }
                self.names.push(t);
                (
                    Op::Name {
                        off,
                        size,
                        table: (self.names.len() - 1) as u16,
                        event: is_event,
                    },
                    longest,
                )
            }
            Conv::Str => bytes_op(f, BytesEncoding::Text, esc),
        };
        self.ready = false;
        self.ops.push(op);
        self.max_out += max;
        Ok(())
    }

    /// Prints the BYTES field named `field` with `enc` wherever this
    /// program prints it with its default converter (a layout's field,
    /// a template's `{field}`; not a template's `{field:str}`, `{field:hex}`
    /// or `{field:base64}`, which name their own): the per-field override
    /// of [`Options::bytes`] (`[format.bytes_fields]`). Returns how many
    /// places changed (0 if the program does not print the field, or the
    /// schema has no such BYTES field).
    pub fn set_bytes_encoding(
        &mut self,
        schema: &Schema,
        field: &str,
        enc: BytesEncoding,
    ) -> usize {
        let mut n = 0;
        for &(at, idx, esc) in &self.default_bytes {
            let Some(f) = schema.fields().get(idx).filter(|f| f.name == field) else {
                continue;
            };
            // A Str op's bound (6 bytes per byte) covers hex (2) and
            // base64 (4 per 3): `max_out` needs no change.
            self.ops[at] = bytes_op(f, enc, esc).0;
            n += 1;
        }
        if n > 0 {
            self.ready = false;
        }
        n
    }

    /// Appends integer field `idx` printed through the name table `names`
    /// (raw recorded values, no profile mapping); values without a name
    /// print in decimal.
    pub fn field_mapped(
        &mut self,
        schema: &Schema,
        idx: usize,
        names: &[(u32, &str)],
        esc: Escape,
    ) -> Result<(), String> {
        let f = schema
            .fields()
            .get(idx)
            .ok_or_else(|| format!("no field #{idx} in schema {}", schema.name()))?;
        if !f.kind.is_integer() {
            return Err(format!("field {} is not an integer", f.name));
        }
        let mut t = NameTable {
            dense: Box::new([(0, 0); 256]),
            sparse: Vec::new(),
        };
        let mut longest = 20;
        for &(value, name) in names {
            let start = self.lits.len() as u32;
            push_escaped(&mut self.lits, name.as_bytes(), esc);
            let len = self.lits.len() as u32 - start;
            longest = longest.max(len as usize);
            if value < 256 {
                t.dense[value as usize] = (start, len);
            } else {
                t.sparse.push((value, start, len));
            }
        }
        self.names.push(t);
        self.ready = false;
        self.ops.push(Op::Name {
            off: f.offset as u32,
            size: f.size as u8,
            table: (self.names.len() - 1) as u16,
            event: false,
        });
        self.max_out += longest;
        Ok(())
    }

    /// Makes the ops added by `body` run only for records whose integer
    /// field `idx` equals `value` (compared before any profile mapping).
    pub fn when(
        &mut self,
        schema: &Schema,
        idx: usize,
        value: u32,
        body: impl FnOnce(&mut Program) -> Result<(), String>,
    ) -> Result<(), String> {
        let f = &schema.fields()[idx];
        if !f.kind.is_integer() {
            return Err(format!("field {} is not an integer", f.name));
        }
        let at = self.ops.len();
        self.ready = false;
        self.ops.push(Op::SkipUnless {
            off: f.offset as u32,
            size: f.size as u8,
            value,
            skip: 0,
        });
        body(self)?;
        // A literal merged into one from before the condition would be
        // skipped with it: `lit` only merges with the op right before it,
        // and that is the SkipUnless here, so no merge can cross it.
        let n = (self.ops.len() - at - 1) as u16;
        if let Op::SkipUnless { skip, .. } = &mut self.ops[at] {
            *skip = n;
        }
        self.sealed = self.ops.len();
        Ok(())
    }

    /// The time precision of [`Options::time`] this program was built with.
    pub fn time_precision(&self) -> Option<TimePrecision> {
        self.time
    }

    /// Replaces the TSC calibration that converts TSC timestamp fields
    /// printed as time (the consumer's, from `Formatter::tsc_calibration`).
    pub fn set_tsc_calibration(&mut self, cal: TscCalibration) {
        self.tsc = cal;
    }

    /// The TSC calibration in use.
    pub fn tsc_calibration(&self) -> TscCalibration {
        self.tsc
    }

    /// The schema id this program was compiled for.
    pub fn schema_id(&self) -> u16 {
        self.schema_id
    }

    /// The shortest record (bytes) this program formats: its schema's size.
    pub fn min_len(&self) -> usize {
        self.min_len
    }

    /// Upper bound of the bytes one run appends.
    pub fn max_output(&self) -> usize {
        self.max_out
    }

    /// Fuses literals into the ops before them (see [`Step`]) and pads the
    /// literal pool for 16-byte block copies.
    pub(super) fn build(&mut self) {
        // Last op of every conditional body: a literal right after one is
        // outside the body and must not join a step inside it.
        let ends: Vec<usize> = self
            .ops
            .iter()
            .enumerate()
            .filter_map(|(a, op)| match op {
                Op::SkipUnless { skip, .. } => Some(a + *skip as usize),
                _ => None,
            })
            .collect();
        let mut steps: Vec<Step> = Vec::with_capacity(self.ops.len());
        let mut step_of = Vec::with_capacity(self.ops.len());
        let ops = &self.ops;
        let mut j = 0;
        while j < ops.len() {
            let op = ops[j];
            // `{ipv4}<one byte>{dec}` inside one block becomes one step.
            if let (
                Op::Ipv4 { off },
                Some(Op::Lit { start, len: 1 }),
                Some(Op::Dec { off: o2, size: s2 }),
            ) = (op, ops.get(j + 1).copied(), ops.get(j + 2).copied())
            {
                if !ends.contains(&j) && !ends.contains(&(j + 1)) {
                    steps.push(Step::of(Op::Ipv4Dec {
                        off,
                        sep: self.lits[start as usize],
                        off2: o2,
                        size2: s2,
                    }));
                    step_of.extend([steps.len() - 1; 3]);
                    j += 3;
                    continue;
                }
            }
            // A literal joins the field step before it.
            if let Op::Lit { start, len } = op {
                let fusable = j > 0 && !ends.contains(&(j - 1)) && len as usize <= POST_MAX;
                if let Some(last) = steps.last_mut().filter(|_| fusable) {
                    if !matches!(last.op, Op::Lit { .. } | Op::SkipUnless { .. })
                        && last.post_len == 0
                    {
                        let (s, l) = (start as usize, len as usize);
                        last.post[..l].copy_from_slice(&self.lits[s..s + l]);
                        last.post_len = len;
                        step_of.push(steps.len() - 1);
                        j += 1;
                        continue;
                    }
                }
            }
            steps.push(Step::of(op));
            step_of.push(steps.len() - 1);
            j += 1;
        }
        // Skip counts in steps: a body's ops a+1..=a+k are the steps after
        // step_of[a] up to step_of[a+k] (no fusion crosses a body's ends).
        for (a, op) in self.ops.iter().enumerate() {
            if let Op::SkipUnless { skip, .. } = *op {
                let (s, e) = (step_of[a], step_of[a + skip as usize]);
                if let Op::SkipUnless { skip, .. } = &mut steps[s].op {
                    *skip = (e - s) as u16;
                }
            }
        }
        if self.fuse {
            steps = self.fuse_steps(steps);
        }
        self.steps = steps;
        self.padded.clear();
        self.padded.extend_from_slice(&self.lits);
        self.padded.extend_from_slice(&[0; 32]);
        self.ready = true;
    }

    /// Specialises steps (decimal fields of 1, 2, 4 or 8 bytes, RFC 3339
    /// ms time, and `{ipv4}:{port}` with a 2-byte port, each read with one
    /// exact load) and fuses pairs into superinstructions: a field step
    /// whose literal suffix is at most 16 bytes, followed by an
    /// `{ipv4}<sep>{port}` or an enum-name step, becomes one step (the
    /// second as its [`Tail`]), greedily from the left. The bench line
    /// `{time} NAT44 {event} {a}:{p} -> {b}:{q} proto={n} dst={c}:{r}` runs
    /// as 3 steps: time + event, `a:p` + `b:q`, `n` + `c:r`. No pair is
    /// fused across the end of a conditional body; skip counts are
    /// remapped.
    fn fuse_steps(&self, steps: Vec<Step>) -> Vec<Step> {
        // Steps that end a conditional body.
        let mut ends = vec![false; steps.len()];
        for (s, st) in steps.iter().enumerate() {
            if let Op::SkipUnless { skip, .. } = st.op {
                ends[s + skip as usize] = true;
            }
        }
        let spec = |op: Op| match op {
            Op::Dec { off, size: 1 } => Op::Dec1 { off },
            Op::Dec { off, size: 2 } => Op::Dec2 { off },
            Op::Dec { off, size: 4 } => Op::Dec4 { off },
            Op::Dec { off, size: 8 } => Op::Dec8 { off },
            Op::Rfc3339 {
                off,
                cache,
                digits: 3,
                tsc: false,
            } => Op::Rfc3339Ms { off, cache },
            Op::Ipv4Dec {
                off,
                sep,
                off2,
                size2: 2,
            } => Op::Ipv4Port { off, sep, off2 },
            op => op,
        };
        let mut out: Vec<Step> = Vec::with_capacity(steps.len());
        let mut new_of = Vec::with_capacity(steps.len());
        let mut k = 0;
        while k < steps.len() {
            let a = steps[k];
            let b = steps.get(k + 1).map(|b| spec(b.op));
            let mid_len = a.post_len as usize;
            // Heads: any field op (not a literal or a condition) whose
            // suffix fits the 16-byte middle and that ends no body.
            let head = !matches!(a.op, Op::Lit { .. } | Op::SkipUnless { .. });
            if head && mid_len <= 16 && !ends[k] {
                let tail = match b {
                    Some(Op::Ipv4Port { off, sep, off2 }) => Tail::Ipv4Port { off, sep, off2 },
                    Some(Op::Name {
                        off,
                        size,
                        table,
                        event,
                    }) => Tail::Name {
                        off,
                        size,
                        table,
                        event,
                    },
                    _ => Tail::None,
                };
                if !matches!(tail, Tail::None) {
                    let b = steps[k + 1];
                    let mut mid = [0u8; 16];
                    mid.copy_from_slice(&a.post[..16]);
                    out.push(Step {
                        op: spec(a.op),
                        tail,
                        mid_len: mid_len as u8,
                        mid,
                        post_len: b.post_len,
                        post: b.post,
                    });
                    new_of.extend([out.len() - 1; 2]);
                    k += 2;
                    continue;
                }
            }
            out.push(Step {
                op: spec(a.op),
                ..a
            });
            new_of.push(out.len() - 1);
            k += 1;
        }
        // A body's end step is never the first of a fused pair, so it
        // maps to the step that still ends the body.
        for (s, st) in steps.iter().enumerate() {
            if let Op::SkipUnless { skip, .. } = st.op {
                let (ns, ne) = (new_of[s], new_of[s + skip as usize]);
                if let Op::SkipUnless { skip, .. } = &mut out[ns].op {
                    *skip = (ne - ns) as u16;
                }
            }
        }
        out
    }
}

/// The op printing byte-string field `f` with `enc` (as text escaped
/// with `esc`) and the bound of its output: 6 bytes per byte plus a CSV
/// field's 2 quotes for escaped text, 2 per byte for hex, 4 per 3 for
/// base64.
fn bytes_op(f: &FieldDef, enc: BytesEncoding, esc: Escape) -> (Op, usize) {
    let (off, len, size) = (f.offset as u32, f.size, f.size as usize);
    match enc {
        BytesEncoding::Text => (Op::Str { off, len, esc }, size * 6 + 2),
        BytesEncoding::Hex => (Op::Bytes { off, len, enc }, size * 2),
        BytesEncoding::Base64 => (Op::Bytes { off, len, enc }, size.div_ceil(3) * 4),
    }
}
