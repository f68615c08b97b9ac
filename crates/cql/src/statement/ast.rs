//! The tree a CQL statement parses into.
//!
//! The tree says what the text wrote and nothing more: names are not looked up, types stay as
//! their text (the schema layer's `DataType::parse` reads them), and constants stay as
//! [`Literal`]s whose meaning depends on the column they meet. That keeps the parser free of
//! schema access, so a statement can be parsed once at PREPARE and checked against the schema
//! each time it runs.
//!
//! Bind markers (`?` and `:name`) appear in the tree as an index into
//! [`Parsed::bind_markers`], numbered in order of appearance across the whole text (a batch
//! included), which is the order a driver sends their values in.
//!
//! Unquoted identifiers are already folded to lower case; `"Quoted"` ones keep their case.

use crate::value::Literal;

/// A parsed statement and the bind markers it contains.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    pub statement: Statement,
    /// One entry per `?` or `:name`, in order of appearance. [`Term::Marker`] and
    /// [`InValues::Marker`] index into this.
    pub bind_markers: Vec<BindMarker>,
}

/// One bind marker of the statement text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindMarker {
    /// `Some("id")` for `:id`, `None` for `?`. Folded to lower case unless written `:"Id"`.
    pub name: Option<String>,
}

/// An index into [`Parsed::bind_markers`].
pub type MarkerIndex = usize;

/// A name that may be qualified by a keyspace: `tbl` or `ks.tbl`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QualifiedName {
    pub keyspace: Option<String>,
    pub name: String,
}

/// One CQL statement.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Statement {
    /// `USE ks`
    Use {
        keyspace: String,
    },
    Select(Select),
    Insert(Insert),
    Update(Update),
    Delete(Delete),
    Batch(Batch),

    /// `CREATE KEYSPACE [IF NOT EXISTS] ks WITH replication = {...} [AND durable_writes = ...]`
    CreateKeyspace {
        keyspace: String,
        if_not_exists: bool,
        properties: Vec<Property>,
    },
    /// `ALTER KEYSPACE [IF EXISTS] ks WITH ...`
    AlterKeyspace {
        keyspace: String,
        if_exists: bool,
        properties: Vec<Property>,
    },
    /// `DROP KEYSPACE [IF EXISTS] ks`
    DropKeyspace {
        keyspace: String,
        if_exists: bool,
    },
    CreateTable(CreateTable),
    /// `ALTER TABLE [IF EXISTS] t ...`
    AlterTable {
        table: QualifiedName,
        if_exists: bool,
        action: AlterTableAction,
    },
    /// `DROP TABLE [IF EXISTS] t`
    DropTable {
        table: QualifiedName,
        if_exists: bool,
    },
    /// `CREATE TYPE [IF NOT EXISTS] ks.t (field type, ...)`
    CreateType {
        name: QualifiedName,
        if_not_exists: bool,
        /// Each field's name and type as written.
        fields: Vec<(String, String)>,
    },
    /// `ALTER TYPE ks.t ADD field type` or `ALTER TYPE ks.t RENAME a TO b [AND c TO d ...]`
    AlterType {
        name: QualifiedName,
        action: AlterTypeAction,
    },
    /// `DROP TYPE [IF EXISTS] ks.t`
    DropType {
        name: QualifiedName,
        if_exists: bool,
    },
    /// `CREATE [CUSTOM] INDEX [IF NOT EXISTS] [name] ON t (target) [USING 'class'] [WITH OPTIONS = {...}]`
    CreateIndex(CreateIndex),
    /// `DROP INDEX [IF EXISTS] [ks.]name`
    DropIndex {
        name: QualifiedName,
        if_exists: bool,
    },
    /// `TRUNCATE [TABLE] t`
    Truncate {
        table: QualifiedName,
    },

    /// `CREATE ROLE [IF NOT EXISTS] r [WITH option AND ...]`
    CreateRole {
        role: String,
        if_not_exists: bool,
        options: Vec<RoleOption>,
    },
    /// `ALTER ROLE [IF EXISTS] r WITH option AND ...`
    AlterRole {
        role: String,
        if_exists: bool,
        options: Vec<RoleOption>,
    },
    /// `DROP ROLE [IF EXISTS] r`
    DropRole {
        role: String,
        if_exists: bool,
    },
    /// `LIST ROLES [OF r] [NORECURSIVE]`
    ListRoles {
        of: Option<String>,
        norecursive: bool,
    },
    /// Legacy `CREATE USER [IF NOT EXISTS] u [WITH PASSWORD 'p'] [SUPERUSER | NOSUPERUSER]`.
    /// `superuser` is `None` when neither word was written.
    CreateUser {
        user: String,
        if_not_exists: bool,
        password: Option<String>,
        superuser: Option<bool>,
    },
    /// Legacy `ALTER USER [IF EXISTS] u [WITH PASSWORD 'p'] [SUPERUSER | NOSUPERUSER]`.
    AlterUser {
        user: String,
        if_exists: bool,
        password: Option<String>,
        superuser: Option<bool>,
    },
    /// Legacy `DROP USER [IF EXISTS] u`
    DropUser {
        user: String,
        if_exists: bool,
    },
    /// Legacy `LIST USERS`
    ListUsers,
    /// `GRANT role TO grantee`
    GrantRole {
        role: String,
        grantee: String,
    },
    /// `REVOKE role FROM revokee`
    RevokeRole {
        role: String,
        revokee: String,
    },
    /// `GRANT permissions ON resource TO role`
    GrantPermissions {
        permissions: Permissions,
        resource: Resource,
        role: String,
    },
    /// `REVOKE permissions ON resource FROM role`
    RevokePermissions {
        permissions: Permissions,
        resource: Resource,
        role: String,
    },
    /// `LIST permissions [ON resource] [OF role] [NORECURSIVE]`
    ListPermissions {
        permissions: Permissions,
        resource: Option<Resource>,
        role: Option<String>,
        norecursive: bool,
    },

    /// `DESCRIBE ...` / `DESC ...`, which Cassandra 4+ answers server-side (cqlsh 6 sends it).
    Describe(Describe),

    /// A statement Cassandra has and hayate does not: the leading keywords were recognised and
    /// the rest skipped, so that the client can be told "not supported" rather than "syntax
    /// error". `what` is the statement's name in upper case, e.g. `"CREATE INDEX"`.
    Unsupported {
        what: &'static str,
    },
}

/// `CREATE [CUSTOM] INDEX ...`, as written.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateIndex {
    /// `None` when the statement names none (the index then gets Cassandra's default name).
    pub name: Option<String>,
    pub table: QualifiedName,
    pub if_not_exists: bool,
    pub custom: bool,
    /// What is indexed, in the order written (Cassandra takes several only for custom indexes).
    pub targets: Vec<IndexTarget>,
    /// `USING 'class'`.
    pub using: Option<String>,
    /// `WITH OPTIONS = {...}` (and any other property written after WITH).
    pub properties: Vec<Property>,
}

/// One indexed column and what of it: `c`, `KEYS(c)`, `VALUES(c)`, `ENTRIES(c)`, `FULL(c)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexTarget {
    pub kind: IndexTargetKind,
    pub column: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexTargetKind {
    /// The column as written: its value, or a non-frozen collection's values.
    Simple,
    Keys,
    Values,
    Entries,
    Full,
}

/// `SELECT [JSON] [DISTINCT] selection FROM t [WHERE ...] [GROUP BY ...] [ORDER BY ...]
/// [PER PARTITION LIMIT n] [LIMIT n] [ALLOW FILTERING]`
#[derive(Clone, Debug, PartialEq)]
pub struct Select {
    pub table: QualifiedName,
    pub json: bool,
    pub distinct: bool,
    pub selection: Selection,
    pub where_clause: Vec<Relation>,
    pub group_by: Vec<String>,
    pub order_by: Vec<Ordering>,
    pub per_partition_limit: Option<Term>,
    pub limit: Option<Term>,
    pub allow_filtering: bool,
}

/// What a SELECT returns.
#[derive(Clone, Debug, PartialEq)]
pub enum Selection {
    /// `*`
    Wildcard,
    Selectors(Vec<Selector>),
}

/// One selected expression and its optional `AS alias`.
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    pub expr: SelectorExpr,
    pub alias: Option<String>,
}

/// A selected expression.
#[derive(Clone, Debug, PartialEq)]
pub enum SelectorExpr {
    Column(String),
    /// `count(*)` and `count(1)`: the number of rows.
    CountRows,
    /// `writetime(col)`
    WriteTime(String),
    /// `ttl(col)`
    Ttl(String),
    /// Any other call, `token(a, b)` and `count(col)` included. The name is as written
    /// (folded), so `COUNT(x)` has name `count`.
    Function {
        name: QualifiedName,
        args: Vec<SelectorExpr>,
    },
    /// `CAST(expr AS type)`
    Cast {
        expr: Box<SelectorExpr>,
        type_text: String,
    },
    /// `expr.field` on a user-defined type.
    Field {
        expr: Box<SelectorExpr>,
        field: String,
    },
    /// A constant or bind marker, as a function argument or on its own.
    Term(Term),
}

/// `col [ASC | DESC]` in ORDER BY or CLUSTERING ORDER BY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ordering {
    pub column: String,
    pub descending: bool,
}

/// `INSERT INTO t (cols) VALUES (terms) | JSON '...' [IF NOT EXISTS] [USING ...]`
#[derive(Clone, Debug, PartialEq)]
pub struct Insert {
    pub table: QualifiedName,
    pub values: InsertValues,
    pub if_not_exists: bool,
    pub using: Using,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InsertValues {
    /// `(a, b) VALUES (1, ?)`; the parser checks that both lists have the same length.
    Columns { columns: Vec<String>, values: Vec<Term> },
    /// `JSON '{"a": 1}' [DEFAULT NULL | DEFAULT UNSET]`; the JSON is a string or a marker.
    Json { json: Term, default_unset: bool },
}

/// `USING TTL x AND TIMESTAMP y`, each optional. Both may be bind markers.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Using {
    pub ttl: Option<Term>,
    pub timestamp: Option<Term>,
}

/// `UPDATE t [USING ...] SET assignments WHERE relations [IF ...]`
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    pub table: QualifiedName,
    pub using: Using,
    pub assignments: Vec<Assignment>,
    pub where_clause: Vec<Relation>,
    pub condition: Condition,
}

/// One `SET` item: the column and what happens to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    pub column: String,
    pub operation: Operation,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    /// `c = term`
    Set(Term),
    /// `c[key] = value`: a map put or a list set by index.
    SetElement { key: Term, value: Term },
    /// `c.field = value` on a user-defined type.
    SetField { field: String, value: Term },
    /// `c = c + term` or `c += term`: a collection append or union, or a counter increment.
    /// The parser cannot tell which; the column's type does.
    Add(Term),
    /// `c = term + c`: a list prepend.
    Prepend(Term),
    /// `c = c - term` or `c -= term`: remove elements or keys, or a counter decrement.
    Subtract(Term),
}

/// The lightweight-transaction clause of UPDATE and DELETE.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Condition {
    #[default]
    None,
    /// `IF EXISTS`
    Exists,
    /// `IF c = 1 AND m['k'] > 2 ...`: relations whose left side is a column, an element
    /// (`m[k]`) or a field (`u.f`).
    If(Vec<Relation>),
}

/// `DELETE [targets] FROM t [USING TIMESTAMP y] WHERE relations [IF ...]`
#[derive(Clone, Debug, PartialEq)]
pub struct Delete {
    /// Empty for a whole-row delete.
    pub targets: Vec<DeleteTarget>,
    pub table: QualifiedName,
    pub using: Using,
    pub where_clause: Vec<Relation>,
    pub condition: Condition,
}

#[derive(Clone, Debug, PartialEq)]
pub enum DeleteTarget {
    Column(String),
    /// `m[key]` or `l[index]`
    Element {
        column: String,
        key: Term,
    },
    /// `u.field`
    Field {
        column: String,
        field: String,
    },
}

/// `BEGIN [UNLOGGED | COUNTER] BATCH [USING TIMESTAMP t] stmt; ... APPLY BATCH`
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub kind: BatchKind,
    pub using: Using,
    pub statements: Vec<BatchStatement>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchKind {
    Logged,
    Unlogged,
    Counter,
}

/// The statements a batch may hold.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchStatement {
    Insert(Insert),
    Update(Update),
    Delete(Delete),
}

/// One WHERE (or IF) relation. Relations are joined by AND; CQL has no OR.
#[derive(Clone, Debug, PartialEq)]
pub enum Relation {
    /// `lhs op term`, e.g. `a = 1`, `(a, b) > (1, 2)`, `token(a) >= token(?)`, `c CONTAINS 3`.
    Compare {
        lhs: RelationLhs,
        op: CompareOp,
        rhs: Term,
    },
    /// `lhs IN (t1, t2)` or `lhs IN ?`. For a tuple lhs each term is a tuple or a marker.
    In { lhs: RelationLhs, values: InValues },
    /// `col IS NOT NULL` (materialized views, and accepted in SELECT by Cassandra 5).
    IsNotNull { column: String },
}

/// The left side of a relation.
#[derive(Clone, Debug, PartialEq)]
pub enum RelationLhs {
    Column(String),
    /// `(c1, c2)`: a multi-column relation on clustering columns.
    Tuple(Vec<String>),
    /// `token(a, b)`
    Token(Vec<String>),
    /// `m[key]`: a map entry (WHERE on an indexed map, or an IF condition).
    Element {
        column: String,
        key: Term,
    },
    /// `u.field`: a user-defined type field (IF conditions).
    Field {
        column: String,
        field: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    Neq,
    Lt,
    Lte,
    Gt,
    Gte,
    Contains,
    ContainsKey,
    Like,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InValues {
    /// `IN (t1, t2, ...)`, possibly empty.
    Terms(Vec<Term>),
    /// `IN ?` or `IN :name`: the whole list is one bound value.
    Marker(MarkerIndex),
}

/// A value in the statement text.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// A constant. A leading `-` on a number or duration is folded into its text.
    Literal(Literal),
    /// `?` or `:name`
    Marker(MarkerIndex),
    /// `[a, b]`
    List(Vec<Term>),
    /// `{a, b}`
    Set(Vec<Term>),
    /// `{k: v, ...}`
    Map(Vec<(Term, Term)>),
    /// `{}`: an empty map or an empty set; the column's type decides.
    EmptyBraces,
    /// `{field: value, ...}` where each key is an identifier: a user-defined type value.
    UserType(Vec<(String, Term)>),
    /// `(a, b)`
    Tuple(Vec<Term>),
    /// `now()`, `toTimestamp(now())`, `token(?)`, `ks.f(1)`.
    Function { name: QualifiedName, args: Vec<Term> },
    /// `(type) term`
    Cast { type_text: String, term: Box<Term> },
    /// `-term` where the term is not a number literal (e.g. `-?`).
    Negate(Box<Term>),
}

/// A `name = value` property of `WITH ... AND ...` (keyspaces and tables).
#[derive(Clone, Debug, PartialEq)]
pub struct Property {
    /// Folded to lower case, e.g. `replication`, `durable_writes`, `compaction`.
    pub name: String,
    pub value: PropertyValue,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PropertyValue {
    Constant(Literal),
    /// An unquoted word, e.g. `caching = keys_only` in old schemas.
    Identifier(String),
    /// `{'class': 'SimpleStrategy', 'replication_factor': 1}`
    Map(Vec<(Literal, Literal)>),
}

/// What `ALTER TYPE` changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterTypeAction {
    /// `ADD field type`
    Add { field: String, type_text: String },
    /// `RENAME a TO b [AND c TO d ...]`
    Rename(Vec<(String, String)>),
}

/// `CREATE TABLE [IF NOT EXISTS] t (col type [STATIC] [PRIMARY KEY], ..., PRIMARY KEY (...))
/// [WITH ...]`
#[derive(Clone, Debug, PartialEq)]
pub struct CreateTable {
    pub table: QualifiedName,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDefinition>,
    /// Never empty: the parser requires exactly one PRIMARY KEY, inline or as a clause.
    pub partition_key: Vec<String>,
    pub clustering_columns: Vec<String>,
    /// `WITH CLUSTERING ORDER BY (c DESC, ...)`, empty when not given.
    pub clustering_order: Vec<Ordering>,
    /// `WITH COMPACT STORAGE`
    pub compact_storage: bool,
    /// Every other `WITH name = value`.
    pub properties: Vec<Property>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnDefinition {
    pub name: String,
    /// The type as written, whitespace normalized: `map<text, frozen<list<int>>>`.
    pub type_text: String,
    pub is_static: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AlterTableAction {
    /// `ADD col type` or `ADD (c1 t1, c2 t2)`
    Add(Vec<ColumnDefinition>),
    /// `DROP col` or `DROP (c1, c2)`
    Drop(Vec<String>),
    /// `RENAME a TO b [AND c TO d]`
    Rename(Vec<(String, String)>),
    /// `ALTER col TYPE type` (Cassandra 3 only; the server may refuse it)
    AlterType { column: String, type_text: String },
    /// `WITH name = value AND ...`
    With(Vec<Property>),
}

/// A `CREATE ROLE` / `ALTER ROLE` option.
#[derive(Clone, Debug, PartialEq)]
pub enum RoleOption {
    Password(String),
    /// `HASHED PASSWORD = '$2a$...'` (Cassandra 4.1)
    HashedPassword(String),
    Login(bool),
    Superuser(bool),
    /// `OPTIONS = {...}` for custom authenticators.
    Options(Vec<(Literal, Literal)>),
    /// `ACCESS TO DATACENTERS {'dc1', 'dc2'}` (Cassandra 4)
    AccessToDatacenters(Vec<String>),
    /// `ACCESS TO ALL DATACENTERS`
    AccessToAllDatacenters,
}

/// `ALL [PERMISSIONS]` or a list of permission names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permissions {
    All,
    /// Upper case: `SELECT`, `MODIFY`, `CREATE`, `ALTER`, `DROP`, `AUTHORIZE`, `DESCRIBE`,
    /// `EXECUTE`, `UNMASK`, `SELECT_MASKED`.
    Only(Vec<String>),
}

/// What a permission is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resource {
    AllKeyspaces,
    Keyspace(String),
    /// `[TABLE] [ks.]t`
    Table(QualifiedName),
    AllRoles,
    Role(String),
    /// `ALL FUNCTIONS [IN KEYSPACE ks]`, `FUNCTION f(types)`, `ALL MBEANS`, `MBEAN name`: kept
    /// as the normalized text, since hayate has neither functions nor MBeans to grant on.
    Other(String),
}

/// A DESCRIBE statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Describe {
    pub target: DescribeTarget,
    /// `WITH INTERNALS`
    pub with_internals: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum DescribeTarget {
    /// `[FULL] SCHEMA`
    Schema {
        full: bool,
    },
    Keyspaces,
    /// `[ONLY] KEYSPACE [ks]`; `None` is the session's keyspace.
    Keyspace {
        keyspace: Option<String>,
        only: bool,
    },
    Tables,
    Table(QualifiedName),
    Types,
    Type(QualifiedName),
    Functions,
    Function(QualifiedName),
    Aggregates,
    Aggregate(QualifiedName),
    Cluster,
    Index(QualifiedName),
    MaterializedView(QualifiedName),
    /// `DESCRIBE name`: a keyspace, table, index or view, looked up in that order.
    Name(QualifiedName),
}

impl Statement {
    /// A short label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Statement::Use { .. } => "use",
            Statement::Select(_) => "select",
            Statement::Insert(_) => "insert",
            Statement::Update(_) => "update",
            Statement::Delete(_) => "delete",
            Statement::Batch(_) => "batch",
            Statement::CreateKeyspace { .. }
            | Statement::AlterKeyspace { .. }
            | Statement::DropKeyspace { .. }
            | Statement::CreateTable(_)
            | Statement::AlterTable { .. }
            | Statement::DropTable { .. }
            | Statement::CreateType { .. }
            | Statement::AlterType { .. }
            | Statement::DropType { .. }
            | Statement::CreateIndex(_)
            | Statement::DropIndex { .. } => "ddl",
            Statement::Truncate { .. } => "truncate",
            Statement::CreateRole { .. }
            | Statement::AlterRole { .. }
            | Statement::DropRole { .. }
            | Statement::ListRoles { .. }
            | Statement::CreateUser { .. }
            | Statement::AlterUser { .. }
            | Statement::DropUser { .. }
            | Statement::ListUsers
            | Statement::GrantRole { .. }
            | Statement::RevokeRole { .. } => "role",
            Statement::GrantPermissions { .. }
            | Statement::RevokePermissions { .. }
            | Statement::ListPermissions { .. } => "permission",
            Statement::Describe(_) => "describe",
            Statement::Unsupported { .. } => "unsupported",
        }
    }

    /// The table a statement reads or writes, when it names exactly one. A batch names none
    /// here; look at its statements.
    pub fn table(&self) -> Option<&QualifiedName> {
        match self {
            Statement::Select(s) => Some(&s.table),
            Statement::Insert(s) => Some(&s.table),
            Statement::Update(s) => Some(&s.table),
            Statement::Delete(s) => Some(&s.table),
            Statement::CreateTable(s) => Some(&s.table),
            Statement::AlterTable { table, .. }
            | Statement::DropTable { table, .. }
            | Statement::Truncate { table } => Some(table),
            _ => None,
        }
    }

    /// The keyspace and table named by the statement, if it names a table: the keyspace is
    /// `None` when the text left it to the session's `USE`.
    pub fn keyspace_table(&self) -> Option<(Option<&str>, &str)> {
        self.table().map(|t| (t.keyspace.as_deref(), t.name.as_str()))
    }
}

impl BatchStatement {
    pub fn table(&self) -> &QualifiedName {
        match self {
            BatchStatement::Insert(s) => &s.table,
            BatchStatement::Update(s) => &s.table,
            BatchStatement::Delete(s) => &s.table,
        }
    }
}

impl QualifiedName {
    pub fn new(keyspace: Option<&str>, name: &str) -> QualifiedName {
        QualifiedName {
            keyspace: keyspace.map(str::to_owned),
            name: name.to_owned(),
        }
    }
}
