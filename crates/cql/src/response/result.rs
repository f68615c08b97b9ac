//! RESULT (0x08): the answer to QUERY, PREPARE, EXECUTE and BATCH. Spec section 4.2.5.
//!
//! Body: `<kind: [int]>` then the kind's body:
//!
//! ```text
//! 0x0001 Void           (nothing)
//! 0x0002 Rows           <metadata><rows_count: [int]><rows_count × columns_count [bytes]>
//! 0x0003 Set_keyspace   <keyspace: [string]>
//! 0x0004 Prepared       <id: [short bytes]>[<result_metadata_id: [short bytes]> (v5)]
//!                       <prepared metadata><result metadata>
//! 0x0005 Schema_change  <change_type><target><options>   (as the SCHEMA_CHANGE event)
//!
//! metadata = <flags: [int]><columns_count: [int]>[<paging_state: [bytes]>]
//!            [<new_metadata_id: [short bytes]>]                      (v5, flag 0x0008)
//!            [<global keyspace: [string]><global table: [string]>]
//!            columns_count × ([<keyspace><table>]<name: [string]><type: [option]>)
//! ```
//!
//! Rows are kept pre-encoded (`rows_content`) so the executor can serialise cells straight
//! into the response buffer without building a tree of values per row.

use std::sync::Arc;

use super::event::SchemaChange;
use crate::wire::{
    read_bytes, read_int, read_short, read_short_bytes, read_string, write_bytes, write_int, write_short,
    write_short_bytes, write_string, DecodeError,
};

/// How deeply collection, tuple and UDT types may nest when decoded: a bound on recursion.
pub const TYPE_NESTING_MAX: usize = 32;

/// The most columns or UDT/tuple fields we decode in one metadata block.
pub const COLUMNS_MAX: usize = u16::MAX as usize;

pub mod kind {
    pub const VOID: i32 = 0x0001;
    pub const ROWS: i32 = 0x0002;
    pub const SET_KEYSPACE: i32 = 0x0003;
    pub const PREPARED: i32 = 0x0004;
    pub const SCHEMA_CHANGE: i32 = 0x0005;
}

mod metadata_flags {
    pub const GLOBAL_TABLES_SPEC: i32 = 0x0001;
    pub const HAS_MORE_PAGES: i32 = 0x0002;
    pub const NO_METADATA: i32 = 0x0004;
    /// v5: the result columns differ from those the client's result metadata id names.
    pub const METADATA_CHANGED: i32 = 0x0008;
}

/// A column's type, the [option] of spec section 4.2.5.2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnType {
    Custom(String),
    Ascii,
    Bigint,
    Blob,
    Boolean,
    Counter,
    Decimal,
    Double,
    Float,
    Int,
    Timestamp,
    Uuid,
    Varchar,
    Varint,
    Timeuuid,
    Inet,
    Date,
    Time,
    Smallint,
    Tinyint,
    List(Box<ColumnType>),
    Map(Box<ColumnType>, Box<ColumnType>),
    Set(Box<ColumnType>),
    Udt {
        keyspace: String,
        name: String,
        fields: Vec<(String, ColumnType)>,
    },
    Tuple(Vec<ColumnType>),
}

impl ColumnType {
    /// The [option] id.
    pub fn id(&self) -> u16 {
        match self {
            ColumnType::Custom(_) => 0x0000,
            ColumnType::Ascii => 0x0001,
            ColumnType::Bigint => 0x0002,
            ColumnType::Blob => 0x0003,
            ColumnType::Boolean => 0x0004,
            ColumnType::Counter => 0x0005,
            ColumnType::Decimal => 0x0006,
            ColumnType::Double => 0x0007,
            ColumnType::Float => 0x0008,
            ColumnType::Int => 0x0009,
            ColumnType::Timestamp => 0x000B,
            ColumnType::Uuid => 0x000C,
            ColumnType::Varchar => 0x000D,
            ColumnType::Varint => 0x000E,
            ColumnType::Timeuuid => 0x000F,
            ColumnType::Inet => 0x0010,
            ColumnType::Date => 0x0011,
            ColumnType::Time => 0x0012,
            ColumnType::Smallint => 0x0013,
            ColumnType::Tinyint => 0x0014,
            ColumnType::List(_) => 0x0020,
            ColumnType::Map(..) => 0x0021,
            ColumnType::Set(_) => 0x0022,
            ColumnType::Udt { .. } => 0x0030,
            ColumnType::Tuple(_) => 0x0031,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        write_short(out, self.id());
        match self {
            ColumnType::Custom(class) => write_string(out, class),
            ColumnType::List(t) | ColumnType::Set(t) => t.encode(out),
            ColumnType::Map(k, v) => {
                k.encode(out);
                v.encode(out);
            }
            ColumnType::Udt {
                keyspace,
                name,
                fields,
            } => {
                write_string(out, keyspace);
                write_string(out, name);
                write_short(out, count_u16(fields.len()));
                for (field, ty) in fields {
                    write_string(out, field);
                    ty.encode(out);
                }
            }
            ColumnType::Tuple(types) => {
                write_short(out, count_u16(types.len()));
                types.iter().for_each(|t| t.encode(out));
            }
            _ => {}
        }
    }

    pub fn decode(buf: &mut &[u8]) -> Result<ColumnType, DecodeError> {
        ColumnType::decode_nested(buf, 0)
    }

    fn decode_nested(buf: &mut &[u8], depth: usize) -> Result<ColumnType, DecodeError> {
        if depth > TYPE_NESTING_MAX {
            return Err(DecodeError::TooLong {
                what: "type nesting",
                length: depth,
                max: TYPE_NESTING_MAX,
            });
        }
        let inner = |buf: &mut &[u8]| ColumnType::decode_nested(buf, depth + 1).map(Box::new);
        let id = read_short(buf)?;
        Ok(match id {
            0x0000 => ColumnType::Custom(read_string(buf)?.to_owned()),
            0x0001 => ColumnType::Ascii,
            0x0002 => ColumnType::Bigint,
            0x0003 => ColumnType::Blob,
            0x0004 => ColumnType::Boolean,
            0x0005 => ColumnType::Counter,
            0x0006 => ColumnType::Decimal,
            0x0007 => ColumnType::Double,
            0x0008 => ColumnType::Float,
            0x0009 => ColumnType::Int,
            0x000B => ColumnType::Timestamp,
            0x000C => ColumnType::Uuid,
            0x000D => ColumnType::Varchar,
            0x000E => ColumnType::Varint,
            0x000F => ColumnType::Timeuuid,
            0x0010 => ColumnType::Inet,
            0x0011 => ColumnType::Date,
            0x0012 => ColumnType::Time,
            0x0013 => ColumnType::Smallint,
            0x0014 => ColumnType::Tinyint,
            0x0020 => ColumnType::List(inner(buf)?),
            0x0021 => {
                let k = inner(buf)?;
                ColumnType::Map(k, inner(buf)?)
            }
            0x0022 => ColumnType::Set(inner(buf)?),
            0x0030 => {
                let keyspace = read_string(buf)?.to_owned();
                let name = read_string(buf)?.to_owned();
                let n = crate::wire::read_count(buf, "UDT fields", COLUMNS_MAX, 4)?;
                let mut fields = Vec::with_capacity(n);
                for _ in 0..n {
                    let field = read_string(buf)?.to_owned();
                    fields.push((field, ColumnType::decode_nested(buf, depth + 1)?));
                }
                ColumnType::Udt {
                    keyspace,
                    name,
                    fields,
                }
            }
            0x0031 => {
                let n = crate::wire::read_count(buf, "tuple types", COLUMNS_MAX, 2)?;
                let mut types = Vec::with_capacity(n);
                for _ in 0..n {
                    types.push(ColumnType::decode_nested(buf, depth + 1)?);
                }
                ColumnType::Tuple(types)
            }
            other => {
                return Err(DecodeError::Invalid {
                    what: "column type id",
                    value: other.into(),
                })
            }
        })
    }
}

fn count_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or_else(|_| panic!("{n} fields do not fit a [short] count"))
}

fn count_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or_else(|_| panic!("{n} does not fit an [int] count"))
}

/// The keyspace and table a column belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    pub keyspace: String,
    pub table: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    pub table: TableSpec,
    pub name: String,
    pub ty: ColumnType,
}

/// Writes the column specs, using the global table spec when all columns share one table
/// (always, in practice: it saves two strings per column).
/// Returns the bytes, which follow the counts (and paging state) that the caller writes first.
fn encode_column_specs(flags: &mut i32, columns: &[ColumnSpec]) -> Vec<u8> {
    let global = columns
        .first()
        .map(|c| &c.table)
        .filter(|first| columns.iter().all(|c| &c.table == *first));
    let mut specs = Vec::new();
    if let Some(t) = global {
        *flags |= metadata_flags::GLOBAL_TABLES_SPEC;
        write_string(&mut specs, &t.keyspace);
        write_string(&mut specs, &t.table);
    }
    for c in columns {
        if global.is_none() {
            write_string(&mut specs, &c.table.keyspace);
            write_string(&mut specs, &c.table.table);
        }
        write_string(&mut specs, &c.name);
        c.ty.encode(&mut specs);
    }
    specs
}

fn decode_column_specs(buf: &mut &[u8], flags: i32, n: usize) -> Result<Vec<ColumnSpec>, DecodeError> {
    let global = if flags & metadata_flags::GLOBAL_TABLES_SPEC != 0 {
        Some(TableSpec {
            keyspace: read_string(buf)?.to_owned(),
            table: read_string(buf)?.to_owned(),
        })
    } else {
        None
    };
    // Each spec takes at least 4 bytes (an empty name and a type id): never reserve more
    // than the remaining bytes could describe.
    let mut columns = Vec::with_capacity(n.min(buf.len() / 4));
    for _ in 0..n {
        let table = match &global {
            Some(t) => t.clone(),
            None => TableSpec {
                keyspace: read_string(buf)?.to_owned(),
                table: read_string(buf)?.to_owned(),
            },
        };
        let name = read_string(buf)?.to_owned();
        columns.push(ColumnSpec {
            table,
            name,
            ty: ColumnType::decode(buf)?,
        });
    }
    Ok(columns)
}

/// Reads an [int] count in `0..=COLUMNS_MAX` whose items take at least `item_min_bytes`.
fn read_int_count(buf: &mut &[u8], what: &'static str, item_min_bytes: usize) -> Result<usize, DecodeError> {
    let length = read_int(buf)?;
    let n = usize::try_from(length).map_err(|_| DecodeError::NegativeLength { what, length })?;
    if n > COLUMNS_MAX {
        return Err(DecodeError::TooLong {
            what,
            length: n,
            max: COLUMNS_MAX,
        });
    }
    if n.saturating_mul(item_min_bytes) > buf.len() {
        return Err(DecodeError::Truncated {
            what,
            needed: n * item_min_bytes,
            remaining: buf.len(),
        });
    }
    Ok(n)
}

/// The <metadata> of a Rows result (and the <result_metadata> of a Prepared result).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RowsMetadata {
    /// Present when there are more pages: the client sends it back to get the next one.
    pub paging_state: Option<Vec<u8>>,
    /// Set when the client asked to skip metadata (it has it from PREPARE): then only the
    /// count of columns is sent, and `columns` is ignored.
    pub no_metadata: bool,
    pub columns_count: usize,
    /// Shared, so a prepared statement's columns are described once and each page of its
    /// results borrows them.
    pub columns: Arc<[ColumnSpec]>,
    /// v5: the client's result metadata id was stale; this is the current one, and the full
    /// metadata goes with it. Not sent before v5.
    pub new_metadata_id: Option<Vec<u8>>,
}

impl RowsMetadata {
    /// Metadata describing `columns`.
    pub fn new(columns: impl Into<Arc<[ColumnSpec]>>) -> RowsMetadata {
        let columns = columns.into();
        RowsMetadata {
            paging_state: None,
            no_metadata: false,
            columns_count: columns.len(),
            columns,
            new_metadata_id: None,
        }
    }

    /// Encodes protocol v4 metadata.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_versioned(out, crate::frame::PROTOCOL_V4);
    }

    pub fn encode_versioned(&self, out: &mut Vec<u8>, version: u8) {
        assert!(
            self.no_metadata || self.columns.len() == self.columns_count,
            "columns_count disagrees"
        );
        let mut flags = 0;
        if self.paging_state.is_some() {
            flags |= metadata_flags::HAS_MORE_PAGES;
        }
        let specs = if self.no_metadata {
            flags |= metadata_flags::NO_METADATA;
            Vec::new()
        } else {
            encode_column_specs(&mut flags, &self.columns)
        };
        let new_metadata_id = self
            .new_metadata_id
            .as_ref()
            .filter(|_| version >= crate::frame::PROTOCOL_V5);
        if new_metadata_id.is_some() {
            flags |= metadata_flags::METADATA_CHANGED;
        }
        write_int(out, flags);
        write_int(out, count_i32(self.columns_count));
        if let Some(state) = &self.paging_state {
            write_bytes(out, Some(state));
        }
        if let Some(id) = new_metadata_id {
            write_short_bytes(out, id);
        }
        out.extend_from_slice(&specs);
    }

    pub fn decode(buf: &mut &[u8]) -> Result<RowsMetadata, DecodeError> {
        let flags = read_int(buf)?;
        let columns_count = read_int_count(buf, "columns_count", 0)?;
        let paging_state = if flags & metadata_flags::HAS_MORE_PAGES != 0 {
            read_bytes(buf)?.map(<[u8]>::to_vec)
        } else {
            None
        };
        let new_metadata_id = if flags & metadata_flags::METADATA_CHANGED != 0 {
            Some(read_short_bytes(buf)?.to_vec())
        } else {
            None
        };
        let no_metadata = flags & metadata_flags::NO_METADATA != 0;
        let columns = if no_metadata {
            Arc::from([])
        } else {
            decode_column_specs(buf, flags, columns_count)?.into()
        };
        Ok(RowsMetadata {
            paging_state,
            no_metadata,
            columns_count,
            columns,
            new_metadata_id,
        })
    }
}

/// A page of rows. `rows_content` holds `rows_count × columns_count` [bytes], row-major.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rows {
    pub metadata: RowsMetadata,
    pub rows_count: usize,
    pub rows_content: Vec<u8>,
}

impl Rows {
    pub fn new(metadata: RowsMetadata) -> Rows {
        Rows {
            metadata,
            rows_count: 0,
            rows_content: Vec::new(),
        }
    }

    /// Appends one row; `None` cells are null.
    pub fn push_row(&mut self, cells: &[Option<&[u8]>]) {
        assert_eq!(
            cells.len(),
            self.metadata.columns_count,
            "row width must match the metadata"
        );
        for cell in cells {
            write_bytes(&mut self.rows_content, *cell);
        }
        self.rows_count += 1;
    }

    /// Decodes the rows into cells (client side: tests and the bench).
    pub fn cells(&self) -> Result<Vec<Vec<Option<Vec<u8>>>>, DecodeError> {
        let mut buf = self.rows_content.as_slice();
        let mut rows = Vec::with_capacity(self.rows_count.min(buf.len() / 4 + 1));
        for _ in 0..self.rows_count {
            let mut row = Vec::with_capacity(self.metadata.columns_count);
            for _ in 0..self.metadata.columns_count {
                row.push(read_bytes(&mut buf)?.map(<[u8]>::to_vec));
            }
            rows.push(row);
        }
        Ok(rows)
    }
}

/// The <metadata> of a Prepared result: the bind markers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PreparedMetadata {
    /// For each partition key column, in key order, the index of its bind marker. Drivers
    /// use this for token-aware routing; empty if some key column is not bound.
    pub pk_indexes: Vec<u16>,
    pub columns: Vec<ColumnSpec>,
}

impl PreparedMetadata {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut flags = 0;
        let specs = encode_column_specs(&mut flags, &self.columns);
        write_int(out, flags);
        write_int(out, count_i32(self.columns.len()));
        write_int(out, count_i32(self.pk_indexes.len()));
        self.pk_indexes.iter().for_each(|i| write_short(out, *i));
        out.extend_from_slice(&specs);
    }

    pub fn decode(buf: &mut &[u8]) -> Result<PreparedMetadata, DecodeError> {
        let flags = read_int(buf)?;
        let columns_count = read_int_count(buf, "columns_count", 0)?;
        let pk_count = read_int_count(buf, "pk_count", 2)?;
        let mut pk_indexes = Vec::with_capacity(pk_count);
        for _ in 0..pk_count {
            pk_indexes.push(read_short(buf)?);
        }
        let columns = decode_column_specs(buf, flags, columns_count)?;
        Ok(PreparedMetadata { pk_indexes, columns })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub id: Vec<u8>,
    /// v5: the id of `result_metadata`, which EXECUTE sends back (not sent before v5).
    pub result_metadata_id: Vec<u8>,
    pub metadata: PreparedMetadata,
    pub result_metadata: RowsMetadata,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultBody {
    Void,
    Rows(Rows),
    SetKeyspace(String),
    Prepared(Prepared),
    SchemaChange(SchemaChange),
}

impl ResultBody {
    /// Encodes a protocol v4 body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_versioned(out, crate::frame::PROTOCOL_V4);
    }

    pub fn encode_versioned(&self, out: &mut Vec<u8>, version: u8) {
        match self {
            ResultBody::Void => write_int(out, kind::VOID),
            ResultBody::Rows(rows) => {
                write_int(out, kind::ROWS);
                rows.metadata.encode_versioned(out, version);
                write_int(out, count_i32(rows.rows_count));
                out.extend_from_slice(&rows.rows_content);
            }
            ResultBody::SetKeyspace(keyspace) => {
                write_int(out, kind::SET_KEYSPACE);
                write_string(out, keyspace);
            }
            ResultBody::Prepared(p) => {
                write_int(out, kind::PREPARED);
                write_short_bytes(out, &p.id);
                if version >= crate::frame::PROTOCOL_V5 {
                    write_short_bytes(out, &p.result_metadata_id);
                }
                p.metadata.encode(out);
                p.result_metadata.encode(out);
            }
            ResultBody::SchemaChange(change) => {
                write_int(out, kind::SCHEMA_CHANGE);
                change.encode(out);
            }
        }
    }

    /// Decodes a protocol v4 RESULT body (client side). Rows stay encoded; see [`Rows::cells`].
    pub fn decode(buf: &mut &[u8]) -> Result<ResultBody, DecodeError> {
        ResultBody::decode_versioned(buf, crate::frame::PROTOCOL_V4)
    }

    pub fn decode_versioned(buf: &mut &[u8], version: u8) -> Result<ResultBody, DecodeError> {
        Ok(match read_int(buf)? {
            kind::VOID => ResultBody::Void,
            kind::ROWS => {
                let metadata = RowsMetadata::decode(buf)?;
                let length = read_int(buf)?;
                let rows_count = usize::try_from(length).map_err(|_| DecodeError::NegativeLength {
                    what: "rows_count",
                    length,
                })?;
                let rows = Rows {
                    metadata,
                    rows_count,
                    rows_content: buf.to_vec(),
                };
                // Check the content holds exactly the cells it claims before handing it out.
                let mut check = rows.rows_content.as_slice();
                for _ in 0..rows.rows_count.saturating_mul(rows.metadata.columns_count) {
                    read_bytes(&mut check)?;
                }
                let used = rows.rows_content.len() - check.len();
                *buf = &buf[used..];
                ResultBody::Rows(Rows {
                    rows_content: rows.rows_content[..used].to_vec(),
                    ..rows
                })
            }
            kind::SET_KEYSPACE => ResultBody::SetKeyspace(read_string(buf)?.to_owned()),
            kind::PREPARED => {
                let id = read_short_bytes(buf)?.to_vec();
                let result_metadata_id = if version >= crate::frame::PROTOCOL_V5 {
                    read_short_bytes(buf)?.to_vec()
                } else {
                    Vec::new()
                };
                let metadata = PreparedMetadata::decode(buf)?;
                ResultBody::Prepared(Prepared {
                    id,
                    result_metadata_id,
                    metadata,
                    result_metadata: RowsMetadata::decode(buf)?,
                })
            }
            kind::SCHEMA_CHANGE => ResultBody::SchemaChange(SchemaChange::decode(buf)?),
            other => {
                return Err(DecodeError::Invalid {
                    what: "result kind",
                    value: other.into(),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::event::{ChangeType, SchemaTarget};

    fn spec(table: &str, name: &str, ty: ColumnType) -> ColumnSpec {
        ColumnSpec {
            table: TableSpec {
                keyspace: "ks".into(),
                table: table.into(),
            },
            name: name.into(),
            ty,
        }
    }

    fn check(body: &ResultBody) {
        let mut out = Vec::new();
        body.encode(&mut out);
        let mut cursor = out.as_slice();
        assert_eq!(&ResultBody::decode(&mut cursor).expect("decodes"), body);
        assert!(cursor.is_empty());
        for cut in 0..out.len() {
            assert!(
                ResultBody::decode(&mut &out[..cut]).is_err(),
                "{body:?} accepted {cut} bytes"
            );
        }
    }

    fn every_type() -> Vec<ColumnType> {
        use ColumnType::*;
        vec![
            Custom("org.apache.cassandra.db.marshal.DurationType".into()),
            Ascii,
            Bigint,
            Blob,
            Boolean,
            Counter,
            Decimal,
            Double,
            Float,
            Int,
            Timestamp,
            Uuid,
            Varchar,
            Varint,
            Timeuuid,
            Inet,
            Date,
            Time,
            Smallint,
            Tinyint,
            List(Box::new(Int)),
            Map(Box::new(Varchar), Box::new(List(Box::new(Blob)))),
            Set(Box::new(Uuid)),
            Udt {
                keyspace: "ks".into(),
                name: "address".into(),
                fields: vec![("street".into(), Varchar)],
            },
            Tuple(vec![Int, Set(Box::new(Ascii))]),
        ]
    }

    #[test]
    fn void_set_keyspace_and_schema_change_round_trip() {
        check(&ResultBody::Void);
        check(&ResultBody::SetKeyspace("ks".into()));
        check(&ResultBody::SchemaChange(SchemaChange {
            change_type: ChangeType::Created,
            target: SchemaTarget::Table {
                keyspace: "ks".into(),
                table: "t".into(),
            },
        }));
    }

    #[test]
    fn rows_with_every_type_and_a_paging_state_round_trip() {
        let columns: Vec<_> = every_type()
            .into_iter()
            .enumerate()
            .map(|(i, t)| spec("t", &format!("c{i}"), t))
            .collect();
        let mut metadata = RowsMetadata::new(columns);
        metadata.paging_state = Some(vec![1, 2, 3, 4]);
        let mut rows = Rows::new(metadata);
        let width = rows.metadata.columns_count;
        let cells: Vec<Option<&[u8]>> = (0..width)
            .map(|i| if i % 3 == 0 { None } else { Some(&b"v"[..]) })
            .collect();
        rows.push_row(&cells);
        rows.push_row(&cells);
        check(&ResultBody::Rows(rows.clone()));
        let decoded = rows.cells().expect("cells");
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[0][0], None);
        assert_eq!(decoded[0][1], Some(b"v".to_vec()));
    }

    #[test]
    fn one_table_uses_the_global_spec_and_two_tables_do_not() {
        let one = RowsMetadata::new(vec![
            spec("t", "a", ColumnType::Int),
            spec("t", "b", ColumnType::Int),
        ]);
        let mut out = Vec::new();
        one.encode(&mut out);
        assert_eq!(&out[..4], [0, 0, 0, 1], "Global_tables_spec flag");
        let two = RowsMetadata::new(vec![
            spec("t", "a", ColumnType::Int),
            spec("u", "b", ColumnType::Int),
        ]);
        let mut out = Vec::new();
        two.encode(&mut out);
        assert_eq!(&out[..4], [0, 0, 0, 0]);
        assert_eq!(RowsMetadata::decode(&mut out.as_slice()), Ok(two));
    }

    #[test]
    fn no_metadata_sends_only_the_count() {
        let mut m = RowsMetadata::new(vec![spec("t", "a", ColumnType::Int)]);
        m.no_metadata = true;
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(out, [0, 0, 0, 4, 0, 0, 0, 1]);
    }

    #[test]
    fn v5_adds_the_result_metadata_id_and_metadata_changed() {
        let mut m = RowsMetadata::new(vec![spec("t", "a", ColumnType::Int)]);
        m.new_metadata_id = Some(vec![9; 16]);
        let mut v4 = Vec::new();
        m.encode(&mut v4);
        assert_eq!(&v4[..4], [0, 0, 0, 1], "v4 has no METADATA_CHANGED");
        let mut v5 = Vec::new();
        m.encode_versioned(&mut v5, crate::frame::PROTOCOL_V5);
        assert_eq!(&v5[..4], [0, 0, 0, 0x09], "Global_tables_spec | Metadata_changed");
        assert_eq!(&v5[8..10], [0, 16]);
        assert_eq!(RowsMetadata::decode(&mut v5.as_slice()), Ok(m));

        let prepared = ResultBody::Prepared(Prepared {
            id: vec![0xAA; 16],
            result_metadata_id: vec![0xBB; 16],
            metadata: PreparedMetadata::default(),
            result_metadata: RowsMetadata::new(vec![spec("t", "a", ColumnType::Int)]),
        });
        let mut out = Vec::new();
        prepared.encode_versioned(&mut out, crate::frame::PROTOCOL_V5);
        assert_eq!(&out[22..24], [0, 16], "the result metadata id follows the id");
        let v5 = crate::frame::PROTOCOL_V5;
        assert_eq!(
            ResultBody::decode_versioned(&mut out.as_slice(), v5),
            Ok(prepared)
        );
    }

    #[test]
    fn prepared_round_trips() {
        check(&ResultBody::Prepared(Prepared {
            id: vec![0xAA; 16],
            result_metadata_id: Vec::new(),
            metadata: PreparedMetadata {
                pk_indexes: vec![1, 0],
                columns: vec![
                    spec("t", "k2", ColumnType::Int),
                    spec("t", "k1", ColumnType::Varchar),
                ],
            },
            result_metadata: RowsMetadata {
                no_metadata: true,
                ..RowsMetadata::default()
            },
        }));
    }

    #[test]
    fn deeply_nested_types_are_refused_not_recursed_into() {
        // 0x0020 (list) repeated: a stack-overflow attempt in 2 bytes per level.
        let mut out = Vec::new();
        for _ in 0..10_000 {
            write_short(&mut out, 0x0020);
        }
        write_short(&mut out, 0x0009);
        assert!(matches!(
            ColumnType::decode(&mut out.as_slice()),
            Err(DecodeError::TooLong { .. })
        ));
    }
}
