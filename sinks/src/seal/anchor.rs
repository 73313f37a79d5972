//! Seal anchors as records: every signed chain head as a [`SealHead`], a
//! record type declared with the SDK's own [`schema!`](macro@dplog_core::schema),
//! so any format and any sink carries it (JSON lines to Kafka, the binary
//! stream to ClickHouse, ...), and `dplog-verify --anchors` reads the
//! heads back from what the receiver kept.

use std::sync::OnceLock;

use dplog_core::schema::{HasSchema, Schema};
use dplog_core::{schema, Record, RecordHeader};
use dplog_formatters::{BytesEncoding, Format, FormatSpec, SchemaFormatter};

/// One signed chain head of a sealed log, as a record: what a signature
/// entry (`S`) of the seal file signs, with the signature.
///
/// Its schema (`dplogSealHead`, id [`SealHead::SCHEMA_ID`]) names the
/// fields as every format prints them:
///
/// | field | output name | kind | what |
/// |---|---|---|---|
/// | `time_ms` | `timeMs` | `U64` | when it was signed, Unix ms |
/// | `seq` | `file` | `U64` | the file's sequence number in the log (0 for its first file) |
/// | `writes` | `writes` | `U64` | sealed writes (`B`/`L` entries) of that file so far |
/// | `end` | `end` | `U64` | byte offset of the file where the sealed bytes end |
/// | `log_id` | `log` | `Bytes` (16) | the log's random id (shared by its rotated files) |
/// | `head` | `head` | `Bytes` (32) | the chain value after those writes |
/// | `key` | `key` | `Bytes` (32) | the signer's Ed25519 public key |
/// | `sig` | `sig` | `Bytes` (64) | the Ed25519 signature of [`sign_message`](super::sign_message) |
///
/// Line formats print the byte fields in hex (the anchor's formatter
/// sets `bytes = "hex"`); binary, IPFIX and ClickHouse carry them raw.
///
/// # Examples
/// ```
/// use dplog_core::schema::HasSchema;
/// use dplog_sinks::seal::anchor::SealHead;
/// let s = SealHead::schema();
/// assert_eq!(s.name(), "dplogSealHead");
/// assert_eq!(std::mem::size_of::<SealHead>(), 184);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SealHead {
    /// Length and schema id.
    pub header: RecordHeader,
    /// Unix milliseconds of the signature.
    pub time_ms: u64,
    /// Sequence number of the file in its log.
    pub seq: u64,
    /// Sealed writes of the file.
    pub writes: u64,
    /// Where the sealed bytes of the file end.
    pub end: u64,
    /// The log's id.
    pub log_id: [u8; 16],
    /// The chain head.
    pub head: [u8; 32],
    /// The signer's public key.
    pub key: [u8; 32],
    /// The signature.
    pub sig: [u8; 64],
}

// The layout the SAFETY comment of `HasSchema` relies on.
const _: () = assert!(std::mem::size_of::<SealHead>() == 184);

impl Record for SealHead {
    /// dplog's own record types take ids from 0xFF00 up.
    const SCHEMA_ID: u16 = 0xFF01;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 4 * 8 + 16 + 32 + 32 + 64 = 184 bytes, every field
// at an offset its alignment divides, so no implicit padding (size
// asserted above); the schema is built from the struct's own offset_of!
// values and size_of.
unsafe impl HasSchema for SealHead {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(SealHead, id = 0xFF01, name = "dplogSealHead", [
                time_ms => "timeMs": U64, ie 0;
                seq => "file": U64, ie 0;
                writes => "writes": U64, ie 0;
                end => "end": U64, ie 0;
                log_id => "log": Bytes, ie 0;
                head => "head": Bytes, ie 0;
                key => "key": Bytes, ie 0;
                sig => "sig": Bytes, ie 0;
            ])
            .expect("the SealHead schema builds")
        })
    }
}

/// The formatter of [`SealHead`] records in `kind`, its byte fields in
/// hex in the line formats.
///
/// # Errors
/// The format's own (e.g. a template that does not compile), as text.
pub fn formatter(kind: Format) -> Result<SchemaFormatter, String> {
    FormatSpec {
        kind,
        bytes: BytesEncoding::Hex,
        ..FormatSpec::default()
    }
    .formatter(&[SealHead::schema()])
    .map_err(|e| e.message)
}
