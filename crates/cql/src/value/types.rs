//! CQL data types as a schema names them: `int`, `frozen<map<text, int>>`, `tuple<int, blob>`.
//!
//! Frozenness is part of the type because it changes how the server stores a column: a
//! non-frozen list, set or map is stored one cell per element (so one element can be added or
//! removed without reading the rest), while a frozen one is a single opaque value. On the wire the
//! two look the same ([`DataType::to_column_type`]). Tuples are always frozen, and so is every
//! collection nested inside another collection or a tuple: Cassandra refuses `list<list<int>>`
//! and freezes the components of a tuple implicitly, and we do the same so that a schema written
//! for Cassandra means the same thing here.

use std::fmt;
use std::sync::Arc;

use crate::response::result::ColumnType;

/// The longest type text [`DataType::parse`] reads. A column type longer than this is not a type
/// anyone writes by hand; the bound keeps parsing cheap whatever a client sends.
pub const TYPE_TEXT_MAX_BYTES: usize = 4096;

/// How deeply [`DataType::parse`] lets types nest, a bound on its recursion. Kept equal to the
/// bound the RESULT metadata decoder applies, so any type we accept can be described on the wire.
pub const TYPE_NESTING_MAX: usize = crate::response::result::TYPE_NESTING_MAX;

/// The most components in a tuple type.
pub const TUPLE_COMPONENTS_MAX: usize = 256;

/// The most fields in a user-defined type. A non-frozen UDT stores one cell per field, whose
/// path is the field's index as a big-endian u16, so the bound must stay within a u16.
pub const UDT_FIELDS_MAX: usize = 1024;

/// A user-defined type, as `CREATE TYPE` defines it: named fields, in declaration order. Its
/// values are serialized as a tuple's are, one `[int length][bytes]` per field, and may stop
/// early (the missing trailing fields are null), which is how a field added by `ALTER TYPE`
/// reads in values written before it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserType {
    pub keyspace: String,
    pub name: String,
    pub field_names: Vec<String>,
    pub field_types: Vec<DataType>,
}

impl UserType {
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.field_names.iter().position(|f| f == name)
    }
}

/// A CQL data type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataType {
    Ascii,
    /// `text`, also spelled `varchar`.
    Text,
    Blob,
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Varint,
    Float,
    Double,
    Decimal,
    Timestamp,
    Date,
    Time,
    Uuid,
    Timeuuid,
    Inet,
    Duration,
    Counter,
    List {
        element: Box<DataType>,
        frozen: bool,
    },
    Set {
        element: Box<DataType>,
        frozen: bool,
    },
    Map {
        key: Box<DataType>,
        value: Box<DataType>,
        frozen: bool,
    },
    /// Always frozen.
    Tuple(Vec<DataType>),
    /// A custom type named by its Java class, `'com.example.MyType'`, that is no marshal class
    /// of a native type: its values are opaque bytes, sorted and compared as a blob's, and the
    /// wire names it by its class (option id 0x0000).
    Custom(String),
    /// A user-defined type. A non-frozen one (a column's own type declared without
    /// `frozen<...>`) is stored one cell per field, so one field can be set alone.
    Udt {
        def: Arc<UserType>,
        frozen: bool,
    },
}

/// Why a type's text was refused. Display reads like Cassandra's InvalidRequest or SyntaxError
/// message for the same mistake.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TypeError {
    /// The text is not CQL type syntax.
    Syntax { text: String, reason: String },
    /// A name that is no native type nor a user-defined type of the keyspace.
    Unknown { name: String },
    /// `list<address>`: a user-defined type inside a collection must be frozen.
    NonFrozenUdtNested { text: String },
    /// A non-frozen user-defined type with a non-frozen collection field.
    NonFrozenUdtWithCollections,
    /// `list<list<int>>`: a collection inside a collection must be frozen.
    NonFrozenNested { text: String },
    /// `frozen<int>`: only collections and tuples can be frozen.
    FrozenNonCollection { inner: String },
    /// A counter inside a collection or tuple.
    CounterInside { text: String, within: &'static str },
    /// `set<duration>` or `map<duration, _>`: durations have no meaningful order.
    DurationNotAllowed { text: String, within: &'static str },
    /// The text or its nesting is beyond [`TYPE_TEXT_MAX_BYTES`] or [`TYPE_NESTING_MAX`].
    TooLarge { what: &'static str, max: usize },
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeError::Syntax { text, reason } => write!(f, "Invalid type '{text}': {reason}"),
            TypeError::Unknown { name } => write!(f, "Unknown type {name}"),
            TypeError::NonFrozenUdtNested { text } => {
                write!(f, "Non-frozen UDTs are not allowed inside collections: {text}")
            }
            TypeError::NonFrozenUdtWithCollections => {
                f.write_str("Non-frozen UDTs with nested non-frozen collections are not supported")
            }
            TypeError::NonFrozenNested { text } => {
                write!(
                    f,
                    "Non-frozen collections are not allowed inside collections: {text}"
                )
            }
            TypeError::FrozenNonCollection { inner } => write!(
                f,
                "frozen<> is only allowed on collections, tuples, and user-defined types (got {inner})"
            ),
            TypeError::CounterInside { text, within } => {
                write!(f, "Counters are not allowed inside {within}: {text}")
            }
            TypeError::DurationNotAllowed { text, within } => {
                write!(f, "Durations are not allowed {within}: {text}")
            }
            TypeError::TooLarge { what, max } => write!(f, "type {what} exceeds the maximum of {max}"),
        }
    }
}

impl std::error::Error for TypeError {}

impl DataType {
    /// Parses CQL type text: case-insensitive, any whitespace between tokens. Names of
    /// user-defined types are unknown: see [`DataType::parse_with`].
    pub fn parse(text: &str) -> Result<DataType, TypeError> {
        DataType::parse_with(text, &|_| None)
    }

    /// Parses CQL type text, asking `user_type` for the definition of a name that is not a
    /// native type (the user-defined types of the keyspace the type is used in).
    pub fn parse_with(
        text: &str,
        user_type: &dyn Fn(&str) -> Option<Arc<UserType>>,
    ) -> Result<DataType, TypeError> {
        if text.len() > TYPE_TEXT_MAX_BYTES {
            return Err(TypeError::TooLarge {
                what: "text length in bytes",
                max: TYPE_TEXT_MAX_BYTES,
            });
        }
        let mut parser = Parser {
            text,
            pos: 0,
            user_type,
        };
        let raw = parser.parse_raw(0)?;
        parser.skip_ws();
        if parser.pos != text.len() {
            return Err(parser.syntax("unexpected text after the type"));
        }
        raw.prepare(false)
    }

    /// True for list, set and map, frozen or not.
    pub fn is_collection(&self) -> bool {
        matches!(
            self,
            DataType::List { .. } | DataType::Set { .. } | DataType::Map { .. }
        )
    }

    /// True when the server stores the value as one cell per element: a non-frozen collection
    /// or user-defined type.
    pub fn is_multi_cell(&self) -> bool {
        match self {
            DataType::List { frozen, .. }
            | DataType::Set { frozen, .. }
            | DataType::Map { frozen, .. }
            | DataType::Udt { frozen, .. } => !frozen,
            _ => false,
        }
    }

    /// True for frozen collections, tuples and frozen user-defined types.
    pub fn is_frozen(&self) -> bool {
        match self {
            DataType::List { frozen, .. }
            | DataType::Set { frozen, .. }
            | DataType::Map { frozen, .. }
            | DataType::Udt { frozen, .. } => *frozen,
            DataType::Tuple(_) => true,
            _ => false,
        }
    }

    /// The component types of a value serialized as a sequence of `[int length][bytes]`: a
    /// tuple's components or a user-defined type's fields.
    pub fn components(&self) -> Option<&[DataType]> {
        match self {
            DataType::Tuple(types) => Some(types),
            DataType::Udt { def, .. } => Some(&def.field_types),
            _ => None,
        }
    }

    /// True if this type is, or holds somewhere inside, the user-defined type `keyspace.name`.
    pub fn uses_user_type(&self, keyspace: &str, name: &str) -> bool {
        match self {
            DataType::Udt { def, .. } => {
                (def.keyspace == keyspace && def.name == name)
                    || def.field_types.iter().any(|t| t.uses_user_type(keyspace, name))
            }
            DataType::List { element, .. } | DataType::Set { element, .. } => {
                element.uses_user_type(keyspace, name)
            }
            DataType::Map { key, value, .. } => {
                key.uses_user_type(keyspace, name) || value.uses_user_type(keyspace, name)
            }
            DataType::Tuple(types) => types.iter().any(|t| t.uses_user_type(keyspace, name)),
            _ => false,
        }
    }

    /// The same type with every use of the user-defined type `def` (same keyspace and name)
    /// replaced by `def`, as `ALTER TYPE` changes it; frozenness is kept. A placeholder with
    /// an empty keyspace matches `def` by name alone.
    pub fn with_user_type(&self, def: &Arc<UserType>) -> DataType {
        match self {
            DataType::Udt { def: old, frozen } => {
                // A placeholder read from a schema file (no keyspace yet) matches by name.
                let same = old.name == def.name && (old.keyspace == def.keyspace || old.keyspace.is_empty());
                let replaced = if same {
                    def.clone()
                } else {
                    let mut inner = (**old).clone();
                    inner.field_types = inner.field_types.iter().map(|t| t.with_user_type(def)).collect();
                    Arc::new(inner)
                };
                DataType::Udt {
                    def: replaced,
                    frozen: *frozen,
                }
            }
            DataType::List { element, frozen } => DataType::List {
                element: Box::new(element.with_user_type(def)),
                frozen: *frozen,
            },
            DataType::Set { element, frozen } => DataType::Set {
                element: Box::new(element.with_user_type(def)),
                frozen: *frozen,
            },
            DataType::Map { key, value, frozen } => DataType::Map {
                key: Box::new(key.with_user_type(def)),
                value: Box::new(value.with_user_type(def)),
                frozen: *frozen,
            },
            DataType::Tuple(types) => DataType::Tuple(types.iter().map(|t| t.with_user_type(def)).collect()),
            other => other.clone(),
        }
    }

    pub fn is_counter(&self) -> bool {
        matches!(self, DataType::Counter)
    }

    /// The element type of a list or set.
    pub fn element(&self) -> Option<&DataType> {
        match self {
            DataType::List { element, .. } | DataType::Set { element, .. } => Some(element),
            _ => None,
        }
    }

    /// The key and value types of a map.
    pub fn key_value(&self) -> Option<(&DataType, &DataType)> {
        match self {
            DataType::Map { key, value, .. } => Some((key, value)),
            _ => None,
        }
    }

    /// The same type, frozen if it is a collection or user-defined type (tuples already are).
    /// Nested types are already frozen by construction.
    pub fn frozen(&self) -> DataType {
        let mut ty = self.clone();
        match &mut ty {
            DataType::List { frozen, .. }
            | DataType::Set { frozen, .. }
            | DataType::Map { frozen, .. }
            | DataType::Udt { frozen, .. } => *frozen = true,
            _ => {}
        }
        ty
    }

    /// The [option] that describes this type in RESULT metadata. Frozen and non-frozen
    /// collections look the same on the wire; `text` is sent as varchar, as Cassandra does.
    pub fn to_column_type(&self) -> ColumnType {
        match self {
            DataType::Ascii => ColumnType::Ascii,
            DataType::Text => ColumnType::Varchar,
            DataType::Blob => ColumnType::Blob,
            DataType::Boolean => ColumnType::Boolean,
            DataType::TinyInt => ColumnType::Tinyint,
            DataType::SmallInt => ColumnType::Smallint,
            DataType::Int => ColumnType::Int,
            DataType::BigInt => ColumnType::Bigint,
            DataType::Varint => ColumnType::Varint,
            DataType::Float => ColumnType::Float,
            DataType::Double => ColumnType::Double,
            DataType::Decimal => ColumnType::Decimal,
            DataType::Timestamp => ColumnType::Timestamp,
            DataType::Date => ColumnType::Date,
            DataType::Time => ColumnType::Time,
            DataType::Uuid => ColumnType::Uuid,
            DataType::Timeuuid => ColumnType::Timeuuid,
            DataType::Inet => ColumnType::Inet,
            // Protocol v4 has no option id for duration; it travels as a custom type.
            DataType::Duration => ColumnType::Custom("org.apache.cassandra.db.marshal.DurationType".into()),
            DataType::Counter => ColumnType::Counter,
            DataType::List { element, .. } => ColumnType::List(Box::new(element.to_column_type())),
            DataType::Set { element, .. } => ColumnType::Set(Box::new(element.to_column_type())),
            DataType::Map { key, value, .. } => {
                ColumnType::Map(Box::new(key.to_column_type()), Box::new(value.to_column_type()))
            }
            DataType::Tuple(types) => ColumnType::Tuple(types.iter().map(DataType::to_column_type).collect()),
            DataType::Custom(class) => ColumnType::Custom(class.clone()),
            DataType::Udt { def, .. } => ColumnType::Udt {
                keyspace: def.keyspace.clone(),
                name: def.name.clone(),
                fields: def
                    .field_names
                    .iter()
                    .zip(&def.field_types)
                    .map(|(n, t)| (n.clone(), t.to_column_type()))
                    .collect(),
            },
        }
    }

    /// The name of a native type as Cassandra prints it, or `None` for a collection or tuple.
    pub fn native_name(&self) -> Option<&'static str> {
        Some(match self {
            DataType::Ascii => "ascii",
            DataType::Text => "text",
            DataType::Blob => "blob",
            DataType::Boolean => "boolean",
            DataType::TinyInt => "tinyint",
            DataType::SmallInt => "smallint",
            DataType::Int => "int",
            DataType::BigInt => "bigint",
            DataType::Varint => "varint",
            DataType::Float => "float",
            DataType::Double => "double",
            DataType::Decimal => "decimal",
            DataType::Timestamp => "timestamp",
            DataType::Date => "date",
            DataType::Time => "time",
            DataType::Uuid => "uuid",
            DataType::Timeuuid => "timeuuid",
            DataType::Inet => "inet",
            DataType::Duration => "duration",
            DataType::Counter => "counter",
            _ => return None,
        })
    }

    /// The native type a Cassandra marshal class stands for (`org.apache.cassandra.db.marshal.`
    /// and the class's simple name), as a quoted custom type names it.
    fn from_marshal_class(class: &str) -> Option<DataType> {
        let simple = class.strip_prefix("org.apache.cassandra.db.marshal.")?;
        Some(match simple {
            "AsciiType" => DataType::Ascii,
            "UTF8Type" => DataType::Text,
            "BytesType" => DataType::Blob,
            "BooleanType" => DataType::Boolean,
            "ByteType" => DataType::TinyInt,
            "ShortType" => DataType::SmallInt,
            "Int32Type" => DataType::Int,
            "LongType" => DataType::BigInt,
            "IntegerType" => DataType::Varint,
            "FloatType" => DataType::Float,
            "DoubleType" => DataType::Double,
            "DecimalType" => DataType::Decimal,
            "TimestampType" | "DateType" => DataType::Timestamp,
            "SimpleDateType" => DataType::Date,
            "TimeType" => DataType::Time,
            "UUIDType" => DataType::Uuid,
            "TimeUUIDType" => DataType::Timeuuid,
            "InetAddressType" => DataType::Inet,
            "DurationType" => DataType::Duration,
            "CounterColumnType" => DataType::Counter,
            _ => return None,
        })
    }

    fn native_from_name(name: &str) -> Option<DataType> {
        Some(match name {
            "ascii" => DataType::Ascii,
            "text" | "varchar" => DataType::Text,
            "blob" => DataType::Blob,
            "boolean" => DataType::Boolean,
            "tinyint" => DataType::TinyInt,
            "smallint" => DataType::SmallInt,
            "int" => DataType::Int,
            "bigint" => DataType::BigInt,
            "varint" => DataType::Varint,
            "float" => DataType::Float,
            "double" => DataType::Double,
            "decimal" => DataType::Decimal,
            "timestamp" => DataType::Timestamp,
            "date" => DataType::Date,
            "time" => DataType::Time,
            "uuid" => DataType::Uuid,
            "timeuuid" => DataType::Timeuuid,
            "inet" => DataType::Inet,
            "duration" => DataType::Duration,
            "counter" => DataType::Counter,
            _ => return None,
        })
    }
}

/// Prints the type as Cassandra 4 and 5 show it in `system_schema.columns.type`: `text` rather
/// than `varchar`, `, ` between parameters, and `frozen<...>` around every frozen collection and
/// every tuple, nested ones included.
impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = self.native_name() {
            return f.write_str(name);
        }
        if self.is_frozen() {
            f.write_str("frozen<")?;
        }
        match self {
            DataType::List { element, .. } => write!(f, "list<{element}>")?,
            DataType::Set { element, .. } => write!(f, "set<{element}>")?,
            DataType::Map { key, value, .. } => write!(f, "map<{key}, {value}>")?,
            DataType::Tuple(types) => {
                f.write_str("tuple<")?;
                for (i, ty) in types.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{ty}")?;
                }
                f.write_str(">")?;
            }
            DataType::Udt { def, .. } => f.write_str(&def.name)?,
            DataType::Custom(class) => write!(f, "'{}'", class.replace('\'', "''"))?,
            _ => {}
        }
        if self.is_frozen() {
            f.write_str(">")?;
        }
        Ok(())
    }
}

/// A type as written, before the nesting rules are applied: the rules need to know what was
/// written (to quote it in errors) and what encloses each part.
#[derive(Debug)]
enum Raw {
    Native(DataType),
    List(Box<Raw>),
    Set(Box<Raw>),
    Map(Box<Raw>, Box<Raw>),
    Tuple(Vec<Raw>),
    Frozen(Box<Raw>),
    Udt(Arc<UserType>),
}

impl fmt::Display for Raw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Raw::Native(ty) => write!(f, "{ty}"),
            Raw::List(e) => write!(f, "list<{e}>"),
            Raw::Set(e) => write!(f, "set<{e}>"),
            Raw::Map(k, v) => write!(f, "map<{k}, {v}>"),
            Raw::Frozen(inner) => write!(f, "frozen<{inner}>"),
            Raw::Udt(def) => f.write_str(&def.name),
            Raw::Tuple(types) => {
                f.write_str("tuple<")?;
                for (i, ty) in types.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{ty}")?;
                }
                f.write_str(">")
            }
        }
    }
}

impl Raw {
    fn is_collection(&self) -> bool {
        matches!(self, Raw::List(_) | Raw::Set(_) | Raw::Map(..))
    }

    /// Applies Cassandra's rules. `frozen` is true inside `frozen<...>` or a tuple, where nested
    /// collections are frozen implicitly.
    fn prepare(&self, frozen: bool) -> Result<DataType, TypeError> {
        match self {
            Raw::Native(ty) => Ok(ty.clone()),
            Raw::Udt(def) => {
                if !frozen && def.field_types.iter().any(DataType::is_multi_cell) {
                    return Err(TypeError::NonFrozenUdtWithCollections);
                }
                Ok(DataType::Udt {
                    def: def.clone(),
                    frozen,
                })
            }
            Raw::Frozen(inner) => {
                if !matches!(
                    **inner,
                    Raw::List(_) | Raw::Set(_) | Raw::Map(..) | Raw::Tuple(_) | Raw::Frozen(_) | Raw::Udt(_)
                ) {
                    return Err(TypeError::FrozenNonCollection {
                        inner: inner.to_string(),
                    });
                }
                inner.prepare(true)
            }
            Raw::List(e) | Raw::Set(e) => {
                let element = Box::new(self.prepare_element(e, frozen)?);
                if matches!(self, Raw::Set(_)) && matches!(*element, DataType::Duration) {
                    return Err(TypeError::DurationNotAllowed {
                        text: self.to_string(),
                        within: "inside sets",
                    });
                }
                Ok(match self {
                    Raw::List(_) => DataType::List { element, frozen },
                    _ => DataType::Set { element, frozen },
                })
            }
            Raw::Map(k, v) => {
                let key = Box::new(self.prepare_element(k, frozen)?);
                if matches!(*key, DataType::Duration) {
                    return Err(TypeError::DurationNotAllowed {
                        text: self.to_string(),
                        within: "as map keys",
                    });
                }
                let value = Box::new(self.prepare_element(v, frozen)?);
                Ok(DataType::Map { key, value, frozen })
            }
            Raw::Tuple(types) => {
                let mut out = Vec::with_capacity(types.len());
                for ty in types {
                    let prepared = ty.prepare(true)?;
                    if prepared.is_counter() {
                        return Err(TypeError::CounterInside {
                            text: self.to_string(),
                            within: "tuples",
                        });
                    }
                    out.push(prepared);
                }
                Ok(DataType::Tuple(out))
            }
        }
    }

    /// An element, key or value of the collection `self`.
    fn prepare_element(&self, inner: &Raw, frozen: bool) -> Result<DataType, TypeError> {
        if !frozen && inner.is_collection() {
            return Err(TypeError::NonFrozenNested {
                text: self.to_string(),
            });
        }
        if !frozen && matches!(inner, Raw::Udt(_)) {
            return Err(TypeError::NonFrozenUdtNested {
                text: self.to_string(),
            });
        }
        let ty = inner.prepare(true)?;
        if ty.is_counter() {
            return Err(TypeError::CounterInside {
                text: self.to_string(),
                within: "collections",
            });
        }
        Ok(ty)
    }
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    user_type: &'a dyn Fn(&str) -> Option<Arc<UserType>>,
}

impl Parser<'_> {
    fn syntax(&self, reason: &str) -> TypeError {
        TypeError::Syntax {
            text: self.text.to_owned(),
            reason: format!("{reason} at character {}", self.pos),
        }
    }

    fn skip_ws(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn ident(&mut self) -> Result<String, TypeError> {
        self.skip_ws();
        let rest = &self.text[self.pos..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if len == 0 {
            return Err(self.syntax("expected a type name"));
        }
        self.pos += len;
        Ok(rest[..len].to_ascii_lowercase())
    }

    /// Consumes `c` after optional whitespace, or reports what was expected.
    fn expect(&mut self, c: char) -> Result<(), TypeError> {
        if !self.eat(c) {
            return Err(self.syntax(&format!("expected '{c}'")));
        }
        Ok(())
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.text[self.pos..].starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// A quoted Java class name, `'org.apache.cassandra.db.marshal.BytesType'`, with `''` for a
    /// quote inside it.
    fn class_name(&mut self) -> Result<String, TypeError> {
        let mut name = String::new();
        let mut chars = self.text[self.pos + 1..].char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '\'' {
                name.push(c);
                continue;
            }
            if self.text[self.pos + 1 + i + 1..].starts_with('\'') {
                name.push('\'');
                chars.next();
                continue;
            }
            self.pos += 1 + i + 1;
            if name.is_empty() {
                return Err(self.syntax("expected a class name inside the quotes"));
            }
            return Ok(name);
        }
        Err(self.syntax("unterminated quoted class name"))
    }

    fn parse_raw(&mut self, depth: usize) -> Result<Raw, TypeError> {
        if depth > TYPE_NESTING_MAX {
            return Err(TypeError::TooLarge {
                what: "nesting depth",
                max: TYPE_NESTING_MAX,
            });
        }
        self.skip_ws();
        if self.text[self.pos..].starts_with('\'') {
            let class = self.class_name()?;
            return Ok(Raw::Native(
                DataType::from_marshal_class(&class).unwrap_or(DataType::Custom(class)),
            ));
        }
        let name = self.ident()?;
        let one = |p: &mut Self| -> Result<Box<Raw>, TypeError> {
            p.expect('<')?;
            let inner = p.parse_raw(depth + 1)?;
            p.expect('>')?;
            Ok(Box::new(inner))
        };
        Ok(match name.as_str() {
            "list" => Raw::List(one(self)?),
            "set" => Raw::Set(one(self)?),
            "frozen" => Raw::Frozen(one(self)?),
            "map" => {
                self.expect('<')?;
                let key = self.parse_raw(depth + 1)?;
                self.expect(',')?;
                let value = self.parse_raw(depth + 1)?;
                self.expect('>')?;
                Raw::Map(Box::new(key), Box::new(value))
            }
            "tuple" => {
                self.expect('<')?;
                let mut types = vec![self.parse_raw(depth + 1)?];
                while self.eat(',') {
                    if types.len() == TUPLE_COMPONENTS_MAX {
                        return Err(TypeError::TooLarge {
                            what: "tuple components",
                            max: TUPLE_COMPONENTS_MAX,
                        });
                    }
                    types.push(self.parse_raw(depth + 1)?);
                }
                self.expect('>')?;
                Raw::Tuple(types)
            }
            other => match DataType::native_from_name(other) {
                Some(ty) => Raw::Native(ty),
                None => match (self.user_type)(other) {
                    Some(def) => Raw::Udt(def),
                    None => {
                        return Err(TypeError::Unknown {
                            name: other.to_owned(),
                        })
                    }
                },
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> DataType {
        DataType::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn native_types_parse_case_insensitively_and_print_as_cassandra_does() {
        assert_eq!(parse("VarChar"), DataType::Text);
        assert_eq!(parse(" text ").to_string(), "text");
        assert_eq!(parse("varchar").to_string(), "text");
        for name in [
            "ascii",
            "blob",
            "boolean",
            "tinyint",
            "smallint",
            "int",
            "bigint",
            "varint",
            "float",
            "double",
            "decimal",
            "timestamp",
            "date",
            "time",
            "uuid",
            "timeuuid",
            "inet",
            "duration",
            "counter",
        ] {
            assert_eq!(parse(&name.to_uppercase()).to_string(), name);
        }
    }

    #[test]
    fn collections_print_with_frozen_where_cassandra_shows_it() {
        let cases = [
            ("list<int>", "list<int>"),
            ("MAP < varchar , INT >", "map<text, int>"),
            ("frozen<list<int>>", "frozen<list<int>>"),
            ("frozen<list<list<int>>>", "frozen<list<frozen<list<int>>>>"),
            ("set<frozen<map<int,text>>>", "set<frozen<map<int, text>>>"),
            ("tuple<int, text>", "frozen<tuple<int, text>>"),
            ("frozen<tuple<int,text>>", "frozen<tuple<int, text>>"),
            ("tuple<int, list<int>>", "frozen<tuple<int, frozen<list<int>>>>"),
            ("list<tuple<int>>", "list<frozen<tuple<int>>>"),
        ];
        for (text, shown) in cases {
            let ty = parse(text);
            assert_eq!(ty.to_string(), shown, "{text}");
            assert_eq!(DataType::parse(shown), Ok(ty), "{shown} parses back");
        }
    }

    #[test]
    fn multi_cell_is_only_a_non_frozen_collection() {
        assert!(parse("list<int>").is_multi_cell());
        assert!(parse("map<int, frozen<set<int>>>").is_multi_cell());
        assert!(!parse("frozen<list<int>>").is_multi_cell());
        assert!(!parse("tuple<int>").is_multi_cell());
        assert!(!parse("int").is_multi_cell());
        assert!(parse("frozen<set<int>>").is_collection());
    }

    #[test]
    fn nesting_rules_match_cassandra() {
        let err = |text: &str| DataType::parse(text).expect_err(text).to_string();
        assert_eq!(
            err("list<list<int>>"),
            "Non-frozen collections are not allowed inside collections: list<list<int>>"
        );
        assert_eq!(
            err("map<set<int>, int>"),
            "Non-frozen collections are not allowed inside collections: map<set<int>, int>"
        );
        assert!(err("frozen<int>").starts_with("frozen<> is only allowed on collections"));
        assert_eq!(
            err("list<counter>"),
            "Counters are not allowed inside collections: list<counter>"
        );
        assert_eq!(
            err("tuple<counter>"),
            "Counters are not allowed inside tuples: tuple<counter>"
        );
        assert_eq!(
            err("set<duration>"),
            "Durations are not allowed inside sets: set<duration>"
        );
        assert_eq!(
            err("map<duration, int>"),
            "Durations are not allowed as map keys: map<duration, int>"
        );
        assert_eq!(err("foo"), "Unknown type foo");
        assert!(err("list<int").contains("expected '>'"));
        assert!(err("map<int>").contains("expected ','"));
        assert!(err("int int").contains("unexpected text"));
        assert!(err(&"list<".repeat(100)).contains("nesting"));
    }

    fn address() -> Arc<UserType> {
        Arc::new(UserType {
            keyspace: "ks".into(),
            name: "address".into(),
            field_names: vec!["street".into(), "zip".into()],
            field_types: vec![DataType::Text, DataType::Int],
        })
    }

    #[test]
    fn user_types_parse_by_name_with_cassandras_freezing_rules() {
        let def = address();
        let lookup = |n: &str| (n == "address").then(|| def.clone());
        let parse = |text: &str| DataType::parse_with(text, &lookup);
        let plain = parse("address").expect("a column's own UDT may be non-frozen");
        assert!(plain.is_multi_cell() && plain.to_string() == "address");
        let frozen = parse("frozen<Address>").expect("names fold to lower case");
        assert!(frozen.is_frozen() && frozen.to_string() == "frozen<address>");
        assert_eq!(
            parse("list<frozen<address>>").expect("ok").to_string(),
            "list<frozen<address>>"
        );
        assert_eq!(
            parse("tuple<int, address>")
                .expect("tuples freeze their parts")
                .to_string(),
            "frozen<tuple<int, frozen<address>>>"
        );
        assert_eq!(
            parse("list<address>").expect_err("must be frozen").to_string(),
            "Non-frozen UDTs are not allowed inside collections: list<address>"
        );
        assert_eq!(
            DataType::parse("address")
                .expect_err("no types known")
                .to_string(),
            "Unknown type address"
        );
        assert_eq!(
            frozen.to_column_type(),
            ColumnType::Udt {
                keyspace: "ks".into(),
                name: "address".into(),
                fields: vec![
                    ("street".into(), ColumnType::Varchar),
                    ("zip".into(), ColumnType::Int)
                ],
            }
        );
    }

    #[test]
    fn altering_a_user_type_reaches_every_use_of_it() {
        let old = address();
        let mut new = (*old).clone();
        new.field_names.push("country".into());
        new.field_types.push(DataType::Text);
        let new = Arc::new(new);
        let ty = DataType::List {
            element: Box::new(DataType::Udt {
                def: old,
                frozen: true,
            }),
            frozen: false,
        };
        assert!(ty.uses_user_type("ks", "address") && !ty.uses_user_type("other", "address"));
        let DataType::List { element, .. } = ty.with_user_type(&new) else {
            panic!("still a list")
        };
        assert_eq!(element.components().map(<[DataType]>::len), Some(3));
    }

    #[test]
    fn quoted_classes_are_native_types_or_opaque_custom_ones() {
        assert_eq!(
            parse("'org.apache.cassandra.db.marshal.BytesType'"),
            DataType::Blob
        );
        assert_eq!(
            parse(" 'org.apache.cassandra.db.marshal.TimeUUIDType' "),
            DataType::Timeuuid
        );
        let custom = parse("'com.example.It''s'");
        assert_eq!(custom, DataType::Custom("com.example.It's".into()));
        assert_eq!(custom.to_string(), "'com.example.It''s'");
        assert_eq!(
            DataType::parse(&custom.to_string()),
            Ok(custom.clone()),
            "prints back to itself"
        );
        assert_eq!(
            custom.to_column_type(),
            ColumnType::Custom("com.example.It's".into())
        );
        assert!(DataType::parse("'unterminated").is_err());
        assert!(DataType::parse("''").is_err());
    }

    #[test]
    fn column_types_are_the_wire_options() {
        assert_eq!(parse("text").to_column_type(), ColumnType::Varchar);
        assert_eq!(
            parse("frozen<map<text, list<int>>>").to_column_type(),
            ColumnType::Map(
                Box::new(ColumnType::Varchar),
                Box::new(ColumnType::List(Box::new(ColumnType::Int)))
            )
        );
        assert_eq!(
            parse("tuple<int, blob>").to_column_type(),
            ColumnType::Tuple(vec![ColumnType::Int, ColumnType::Blob])
        );
    }
}
