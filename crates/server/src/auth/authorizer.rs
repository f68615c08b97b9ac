//! What a logged-in role may do: Cassandra's two built-in authorizers, chosen by
//! `[auth] authorizer`.
//!
//! AllowAllAuthorizer (the default, as in Cassandra) lets every role read and write every
//! table and refuses GRANT, REVOKE and LIST PERMISSIONS. CassandraAuthorizer checks every
//! statement against the permissions granted to the role and to the roles granted to it
//! ([`PermissionStore`], [`RoleStore::role_names_of`]), on the resource the statement touches
//! or any of its parents (a table, its keyspace, all keyspaces), as Cassandra's
//! `ClientState.ensurePermission` does:
//!
//! ```text
//! SELECT                      SELECT on the table          (system tables drivers read: free)
//! INSERT/UPDATE/DELETE        MODIFY on the table          (and SELECT with IF ...)
//! TRUNCATE                    MODIFY on the table
//! CREATE KEYSPACE             CREATE on <all keyspaces>
//! CREATE TABLE                CREATE on <all tables in ks>, i.e. on the keyspace
//! ALTER/DROP KEYSPACE|TABLE   ALTER/DROP on it
//! GRANT/REVOKE p ON r         AUTHORIZE on r, and p itself
//! GRANT/REVOKE ROLE r         AUTHORIZE on <role r>
//! ```
//!
//! Superusers hold every permission. The creator of a keyspace, table or role is granted all
//! of its permissions, and dropping one forgets every permission on it, as in Cassandra.
//! Checks run at every QUERY, EXECUTE and BATCH (Cassandra caches permissions for
//! `permissions_validity`, 2 s by default; hayate reads them from memory each time, so a
//! REVOKE applies at once, prepared statements included).

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use hayate_cql::error::ErrorCode;
use hayate_cql::response::event::{ChangeType, SchemaTarget};
use hayate_cql::response::SchemaChange;
use hayate_cql::statement::{self as ast, BatchStatement, Condition, QualifiedName, Statement};

use super::permissions::{Permission, PermissionRow, PermissionStore, PermissionStoreError, Resource};
use super::roles::RoleError;
use super::{AuthenticatedRole, RoleStore};
use crate::config::AuthorizerKind;
use crate::schema::Schema;

const ALLOW_ALL_AUTHORIZER: &str = "AllowAllAuthorizer";

/// The system tables any logged-in role may read, because drivers and cqlsh read them at
/// connect (Cassandra's `ClientState.READABLE_SYSTEM_RESOURCES`): `system.local`, the peers
/// tables, and every table of the schema keyspaces.
fn readable_system_table(keyspace: &str, table: &str) -> bool {
    match keyspace {
        "system" => matches!(table, "local" | "peers" | "peers_v2"),
        "system_schema" | "system_virtual_schema" => true,
        _ => false,
    }
}

/// The authorizer and the stores it consults. Shared by every connection (`Node::authorizer`).
pub struct Authorizer {
    kind: AuthorizerKind,
    roles: Arc<RoleStore>,
    permissions: Arc<PermissionStore>,
}

impl Authorizer {
    /// Opens the permissions file at `path` (it is read, and kept, whatever the kind, so that
    /// switching authorizers back and forth loses nothing).
    pub fn open(
        kind: AuthorizerKind,
        roles: Arc<RoleStore>,
        path: &Path,
    ) -> Result<Authorizer, PermissionStoreError> {
        let permissions = Arc::new(PermissionStore::open(path)?);
        if kind == AuthorizerKind::Cassandra {
            roles.consult_permissions(Arc::clone(&permissions));
        }
        Ok(Authorizer {
            kind,
            roles,
            permissions,
        })
    }

    pub fn roles(&self) -> &RoleStore {
        &self.roles
    }

    /// Whether permissions are checked (CassandraAuthorizer).
    pub fn enforces(&self) -> bool {
        self.kind == AuthorizerKind::Cassandra
    }

    /// Whether `role` holds `permission` on `resource` or one of its parents, itself or
    /// through a role granted to it. Superusers hold everything.
    pub fn holds(&self, role: &AuthenticatedRole, permission: Permission, resource: &Resource) -> bool {
        if role.is_anonymous() {
            return false;
        }
        if self.roles.is_superuser(role) {
            return true;
        }
        let names = self.roles.role_names_of(role.name());
        resource.chain().iter().any(|r| {
            names
                .iter()
                .any(|name| self.permissions.granted(name, r).contains(&permission))
        })
    }

    /// Cassandra's `ensurePermission`: Unauthorized unless `role` holds the permission.
    fn ensure(
        &self,
        role: &AuthenticatedRole,
        permission: Permission,
        resource: &Resource,
    ) -> Result<(), PermissionError> {
        if self.holds(role, permission, resource) {
            return Ok(());
        }
        Err(PermissionError::NoPermission {
            user: role.name().to_string(),
            permission,
            resource: resource.to_string(),
        })
    }

    /// Checks, before it runs, that the session's role may run `statement`. Statements on a
    /// table that does not exist pass, so that they fail with their own error, as in
    /// Cassandra (which resolves the table before it checks access). Role and permission
    /// statements are checked where they run ([`Authorizer::grant_role`] and friends).
    pub fn authorize(
        &self,
        role: Option<&AuthenticatedRole>,
        session_keyspace: Option<&str>,
        schema: &Schema,
        statement: &Statement,
    ) -> Result<(), PermissionError> {
        if !self.enforces() {
            return Ok(());
        }
        let Some(role) = role.filter(|r| !r.is_anonymous()) else {
            // A node with CassandraAuthorizer requires a login (the configuration refuses
            // AllowAllAuthenticator with it), so this is a programmer error turned safe.
            return Err(PermissionError::Anonymous);
        };
        let existing_table = |name: &QualifiedName| -> Option<Resource> {
            let keyspace = name.keyspace.as_deref().or(session_keyspace)?;
            schema.keyspace(keyspace)?.tables.get(&name.name)?;
            Some(Resource::Table {
                keyspace: keyspace.to_string(),
                table: name.name.clone(),
            })
        };
        let named_table = |name: &QualifiedName| -> Option<Resource> {
            let keyspace = name.keyspace.as_deref().or(session_keyspace)?;
            Some(Resource::Table {
                keyspace: keyspace.to_string(),
                table: name.name.clone(),
            })
        };
        let modify = |name: &QualifiedName, conditional: bool| -> Result<(), PermissionError> {
            let Some(table) = existing_table(name) else {
                return Ok(());
            };
            self.ensure(role, Permission::Modify, &table)?;
            // A conditional update reveals what it read, so it needs SELECT too.
            if conditional {
                self.ensure(role, Permission::Select, &table)?;
            }
            Ok(())
        };
        match statement {
            Statement::Select(s) => {
                let Some(table) = existing_table(&s.table) else {
                    return Ok(());
                };
                if let Resource::Table { keyspace, table: t } = &table {
                    if readable_system_table(keyspace, t) {
                        return Ok(());
                    }
                }
                self.ensure(role, Permission::Select, &table)
            }
            Statement::Insert(s) => modify(&s.table, s.if_not_exists),
            Statement::Update(s) => modify(&s.table, s.condition != Condition::None),
            Statement::Delete(s) => modify(&s.table, s.condition != Condition::None),
            Statement::Batch(b) => {
                for s in &b.statements {
                    match s {
                        BatchStatement::Insert(s) => modify(&s.table, s.if_not_exists)?,
                        BatchStatement::Update(s) => modify(&s.table, s.condition != Condition::None)?,
                        BatchStatement::Delete(s) => modify(&s.table, s.condition != Condition::None)?,
                    }
                }
                Ok(())
            }
            Statement::Truncate { table } => modify(table, false),
            Statement::CreateKeyspace { .. } => {
                self.ensure(role, Permission::Create, &Resource::AllKeyspaces)
            }
            Statement::AlterKeyspace { keyspace, .. } => {
                self.ensure(role, Permission::Alter, &Resource::Keyspace(keyspace.clone()))
            }
            Statement::DropKeyspace { keyspace, .. } => {
                self.ensure(role, Permission::Drop, &Resource::Keyspace(keyspace.clone()))
            }
            Statement::CreateTable(c) => {
                let Some(keyspace) = c.table.keyspace.as_deref().or(session_keyspace) else {
                    return Ok(());
                };
                self.ensure(
                    role,
                    Permission::Create,
                    &Resource::AllTables(keyspace.to_string()),
                )
            }
            Statement::AlterTable { table, .. } => match named_table(table) {
                Some(t) => self.ensure(role, Permission::Alter, &t),
                None => Ok(()),
            },
            Statement::DropTable { table, .. } => match named_table(table) {
                Some(t) => self.ensure(role, Permission::Drop, &t),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// After a schema statement has changed the schema: grants the creator of a keyspace or
    /// table all of its permissions, and forgets every permission on what was dropped.
    pub fn schema_changed(
        &self,
        role: Option<&AuthenticatedRole>,
        change: &SchemaChange,
    ) -> Result<(), PermissionError> {
        // Drops forget permissions under either authorizer, so that a keyspace dropped and
        // made again under AllowAllAuthorizer does not bring old grants back later.
        let resource = match &change.target {
            SchemaTarget::Keyspace { keyspace } => Resource::Keyspace(keyspace.clone()),
            SchemaTarget::Table { keyspace, table } => Resource::Table {
                keyspace: keyspace.clone(),
                table: table.clone(),
            },
            _ => return Ok(()),
        };
        match change.change_type {
            ChangeType::Created => match role.filter(|r| !r.is_anonymous()) {
                Some(role) => self.grant_to_creator(role, &resource),
                None => Ok(()),
            },
            ChangeType::Dropped => self
                .permissions
                .revoke_all_on(&resource)
                .map_err(PermissionError::Save),
            ChangeType::Updated => Ok(()),
        }
    }

    /// Cassandra's `grantPermissionsToCreator`: all of the new resource's permissions.
    pub fn grant_to_creator(
        &self,
        role: &AuthenticatedRole,
        resource: &Resource,
    ) -> Result<(), PermissionError> {
        if !self.enforces() {
            return Ok(());
        }
        let all: BTreeSet<Permission> = resource.applicable().iter().copied().collect();
        self.permissions
            .grant(role.name(), resource, &all)
            .map(|_| ())
            .map_err(PermissionError::Save)
    }

    /// After DROP ROLE: what it was granted and what was granted on it go.
    pub fn role_dropped(&self, name: &str) -> Result<(), PermissionError> {
        self.permissions
            .revoke_all_from(name)
            .and_then(|()| self.permissions.revoke_all_on(&Resource::Role(name.to_string())))
            .map_err(PermissionError::Save)
    }

    /// GRANT role TO grantee.
    pub fn grant_role(
        &self,
        by: &AuthenticatedRole,
        role: &str,
        grantee: &str,
    ) -> Result<(), PermissionError> {
        self.check_role_management(by, role)?;
        self.roles
            .grant_role(role, grantee)
            .map_err(PermissionError::Role)
    }

    /// REVOKE role FROM revokee.
    pub fn revoke_role(
        &self,
        by: &AuthenticatedRole,
        role: &str,
        revokee: &str,
    ) -> Result<(), PermissionError> {
        self.check_role_management(by, role)?;
        self.roles
            .revoke_role(role, revokee)
            .map_err(PermissionError::Role)
    }

    /// GRANT and REVOKE ROLE need AUTHORIZE on the role granted. Under AllowAllAuthorizer
    /// nothing is granted on roles, so only superusers manage them, as with CREATE ROLE.
    fn check_role_management(&self, by: &AuthenticatedRole, role: &str) -> Result<(), PermissionError> {
        if by.is_anonymous() {
            return Err(PermissionError::Anonymous);
        }
        let resource = Resource::Role(role.to_string());
        let allowed = self.roles.is_superuser(by)
            || (self.enforces() && self.holds(by, Permission::Authorize, &resource));
        if !allowed {
            return Err(PermissionError::InsufficientPrivileges {
                user: by.name().to_string(),
            });
        }
        Ok(())
    }

    /// GRANT permissions ON resource TO grantee (`grant`) or REVOKE ... FROM (`!grant`).
    /// Returns the permissions that changed.
    #[expect(
        clippy::too_many_arguments,
        reason = "one per clause of the statement, and where names resolve"
    )]
    pub fn change_permissions(
        &self,
        by: &AuthenticatedRole,
        grant: bool,
        permissions: &ast::Permissions,
        resource: &ast::Resource,
        grantee: &str,
        schema: &Schema,
        session_keyspace: Option<&str>,
    ) -> Result<BTreeSet<Permission>, PermissionError> {
        if by.is_anonymous() {
            return Err(PermissionError::Anonymous);
        }
        let resource = resolve(resource, session_keyspace)?;
        let wanted = applicable(permissions, &resource)?;
        if self.enforces() {
            self.ensure(by, Permission::Authorize, &resource)?;
            for p in &wanted {
                self.ensure(by, *p, &resource)?;
            }
        }
        if !self.roles.exists(grantee) {
            return Err(PermissionError::GranteeNotFound {
                role: grantee.to_string(),
            });
        }
        if !self.exists(&resource, schema) {
            return Err(PermissionError::ResourceNotFound {
                resource: resource.to_string(),
            });
        }
        if !self.enforces() {
            return Err(PermissionError::Unsupported {
                operation: if grant { "GRANT" } else { "REVOKE" },
            });
        }
        let changed = if grant {
            self.permissions.grant(grantee, &resource, &wanted)
        } else {
            self.permissions.revoke(grantee, &resource, &wanted)
        };
        changed.map_err(PermissionError::Save)
    }

    /// LIST permissions [ON resource] [OF role] [NORECURSIVE]: the grants of `of` and of the
    /// roles granted to it (of every role when `None`), on `resource` and its parents (only
    /// on it with NORECURSIVE; on everything when `None`).
    #[expect(clippy::too_many_arguments, reason = "one per clause of the statement")]
    pub fn list(
        &self,
        by: &AuthenticatedRole,
        permissions: &ast::Permissions,
        resource: Option<&ast::Resource>,
        of: Option<&str>,
        norecursive: bool,
        schema: &Schema,
        session_keyspace: Option<&str>,
    ) -> Result<Vec<PermissionRow>, PermissionError> {
        if by.is_anonymous() {
            return Err(PermissionError::Anonymous);
        }
        if !self.enforces() {
            return Err(PermissionError::Unsupported {
                operation: "LIST PERMISSIONS",
            });
        }
        let resource = resource.map(|r| resolve(r, session_keyspace)).transpose()?;
        let wanted: BTreeSet<Permission> = match permissions {
            ast::Permissions::All => Permission::ALL.into_iter().collect(),
            ast::Permissions::Only(names) => names.iter().filter_map(|n| Permission::from_name(n)).collect(),
        };
        if let Some(of) = of {
            if !self.roles.exists(of) {
                return Err(PermissionError::NotFound {
                    what: Resource::Role(of.to_string()).to_string(),
                });
            }
        }
        if let Some(r) = &resource {
            if !self.exists(r, schema) {
                return Err(PermissionError::NotFound { what: r.to_string() });
            }
        }
        if !self.roles.is_superuser(by) {
            let own = self.roles.role_names_of(by.name());
            if !of.is_some_and(|of| own.contains(of)) {
                return Err(PermissionError::NotAuthorizedToView {
                    whose: of.map(str::to_string),
                });
            }
        }
        let roles = of.map(|of| self.roles.role_names_of(of));
        let resources: Vec<Option<Resource>> = match resource {
            None => vec![None],
            Some(r) if norecursive => vec![Some(r)],
            Some(r) => r.chain().into_iter().map(Some).collect(),
        };
        let mut rows: Vec<PermissionRow> = resources
            .iter()
            .flat_map(|r| self.permissions.list(roles.as_ref(), r.as_ref(), &wanted))
            .collect();
        rows.sort();
        Ok(rows)
    }

    fn exists(&self, resource: &Resource, schema: &Schema) -> bool {
        match resource {
            Resource::AllKeyspaces | Resource::AllRoles => true,
            Resource::Keyspace(ks) | Resource::AllTables(ks) => schema.keyspace(ks).is_some(),
            Resource::Table { keyspace, table } => schema
                .keyspace(keyspace)
                .is_some_and(|k| k.tables.contains_key(table)),
            Resource::Role(r) => self.roles.exists(r),
        }
    }
}

/// The resource a statement names, with the session's keyspace for an unqualified table.
fn resolve(resource: &ast::Resource, session_keyspace: Option<&str>) -> Result<Resource, PermissionError> {
    Ok(match resource {
        ast::Resource::AllKeyspaces => Resource::AllKeyspaces,
        ast::Resource::Keyspace(ks) => Resource::Keyspace(ks.clone()),
        ast::Resource::Table(name) => Resource::Table {
            keyspace: name
                .keyspace
                .as_deref()
                .or(session_keyspace)
                .ok_or(PermissionError::NoKeyspace)?
                .to_string(),
            table: name.name.clone(),
        },
        ast::Resource::AllRoles => Resource::AllRoles,
        ast::Resource::Role(r) => Resource::Role(r.clone()),
        ast::Resource::Other(what) => {
            return Err(PermissionError::UnsupportedResource { what: what.clone() })
        }
    })
}

/// The permissions a GRANT or REVOKE names that apply to `resource` (all of them for ALL), as
/// Cassandra's parser keeps them; none applying is a syntax error there.
fn applicable(
    permissions: &ast::Permissions,
    resource: &Resource,
) -> Result<BTreeSet<Permission>, PermissionError> {
    let on: BTreeSet<Permission> = resource.applicable().iter().copied().collect();
    let wanted: BTreeSet<Permission> = match permissions {
        ast::Permissions::All => return Ok(on),
        ast::Permissions::Only(names) => names.iter().filter_map(|n| Permission::from_name(n)).collect(),
    };
    let kept: BTreeSet<Permission> = wanted.intersection(&on).copied().collect();
    if kept.is_empty() {
        return Err(PermissionError::NotApplicable {
            type_name: resource.type_name(),
        });
    }
    Ok(kept)
}

/// Why a statement was refused by the authorizer. Display is Cassandra's message;
/// [`PermissionError::code`] the error code it sends.
#[derive(Debug)]
#[non_exhaustive]
pub enum PermissionError {
    Anonymous,
    /// "User alice has no SELECT permission on <table ks.t> or any of its parents".
    NoPermission {
        user: String,
        permission: Permission,
        resource: String,
    },
    /// GRANT or REVOKE ROLE without AUTHORIZE on the role.
    InsufficientPrivileges {
        user: String,
    },
    /// LIST PERMISSIONS of another role (`Some`) or of every role (`None`).
    NotAuthorizedToView {
        whose: Option<String>,
    },
    /// GRANT, REVOKE or LIST PERMISSIONS under AllowAllAuthorizer.
    Unsupported {
        operation: &'static str,
    },
    NoKeyspace,
    /// GRANT or REVOKE on a keyspace, table or role that does not exist.
    ResourceNotFound {
        resource: String,
    },
    /// LIST PERMISSIONS on or of something that does not exist.
    NotFound {
        what: String,
    },
    GranteeNotFound {
        role: String,
    },
    /// None of the permissions named applies to the resource (SELECT on a role).
    NotApplicable {
        type_name: &'static str,
    },
    /// Functions and MBeans, which hayate does not have.
    UnsupportedResource {
        what: String,
    },
    Role(RoleError),
    Save(PermissionStoreError),
}

impl PermissionError {
    pub fn code(&self) -> ErrorCode {
        match self {
            PermissionError::Anonymous
            | PermissionError::NoPermission { .. }
            | PermissionError::InsufficientPrivileges { .. }
            | PermissionError::NotAuthorizedToView { .. } => ErrorCode::Unauthorized,
            // Cassandra's AllowAllAuthorizer throws UnsupportedOperationException from GRANT
            // and REVOKE, which reaches the client as a server error; LIST checks first and
            // answers Invalid.
            PermissionError::Unsupported { operation } if *operation != "LIST PERMISSIONS" => {
                ErrorCode::ServerError
            }
            PermissionError::NotApplicable { .. } => ErrorCode::SyntaxError,
            PermissionError::Role(e) => e.code(),
            PermissionError::Save(_) => ErrorCode::ServerError,
            _ => ErrorCode::Invalid,
        }
    }
}

impl fmt::Display for PermissionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PermissionError::Anonymous => {
                f.write_str("You have to be logged in and not anonymous to perform this request")
            }
            PermissionError::NoPermission {
                user,
                permission,
                resource,
            } => write!(
                f,
                "User {user} has no {permission} permission on {resource} or any of its parents"
            ),
            PermissionError::InsufficientPrivileges { user } => write!(
                f,
                "User {user} does not have sufficient privileges to perform the requested operation"
            ),
            PermissionError::NotAuthorizedToView { whose: Some(role) } => {
                write!(f, "You are not authorized to view {role}'s permissions")
            }
            PermissionError::NotAuthorizedToView { whose: None } => {
                f.write_str("You are not authorized to view everyone's permissions")
            }
            PermissionError::Unsupported { operation } => {
                write!(
                    f,
                    "{operation} operation is not supported by {ALLOW_ALL_AUTHORIZER}"
                )
            }
            PermissionError::NoKeyspace => f.write_str(
                "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename",
            ),
            PermissionError::ResourceNotFound { resource } => write!(f, "Resource {resource} doesn't exist"),
            PermissionError::NotFound { what } => write!(f, "{what} doesn't exist"),
            PermissionError::GranteeNotFound { role } => write!(f, "Role {role} doesn't exist"),
            PermissionError::NotApplicable { type_name } => write!(
                f,
                "Resource type {type_name} does not support any of the requested permissions"
            ),
            PermissionError::UnsupportedResource { what } => write!(
                f,
                "hayate does not support permissions on {what} yet: it has no user functions or MBeans"
            ),
            PermissionError::Role(e) => write!(f, "{e}"),
            PermissionError::Save(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PermissionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PermissionError::Role(e) => Some(e),
            PermissionError::Save(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::block_on;
    use crate::auth::roles::{HashCost, RoleOptions};
    use hayate_cql::statement::parse;

    struct World {
        _dir: tempfile::TempDir,
        authorizer: Authorizer,
        schema: Schema,
        admin: AuthenticatedRole,
        alice: AuthenticatedRole,
    }

    /// A role store with the default superuser and a login role alice, and a schema with
    /// `ks.t` and the built-in keyspaces.
    fn world(kind: AuthorizerKind) -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        let roles = Arc::new(
            RoleStore::open_with_cost(&dir.path().join("roles.json"), true, HashCost::CHEAP).expect("roles"),
        );
        let admin = block_on(roles.authenticate("cassandra", "cassandra")).expect("admin logs in");
        let login = RoleOptions {
            password: Some("pw".into()),
            login: Some(true),
            ..RoleOptions::default()
        };
        roles.create_role(&admin, "alice", login, false).expect("alice");
        roles
            .create_role(&admin, "readers", RoleOptions::default(), false)
            .expect("readers");
        let alice = block_on(roles.authenticate("alice", "pw")).expect("alice logs in");
        let authorizer =
            Authorizer::open(kind, roles, &dir.path().join("permissions.json")).expect("authorizer");

        let mut schema = Schema::default();
        crate::schema::system::add_system_keyspaces(&mut schema);
        crate::schema::ddl::add_test_keyspace(
            &mut schema,
            1,
            &["CREATE TABLE ks.t (k int PRIMARY KEY, v int)"],
        );
        World {
            _dir: dir,
            authorizer,
            schema,
            admin,
            alice,
        }
    }

    impl World {
        /// The authorizer's answer to `cql` run by `role`: `Ok` or the message.
        fn check(&self, role: &AuthenticatedRole, cql: &str) -> Result<(), String> {
            let statement = parse(cql).expect("parses").statement;
            self.authorizer
                .authorize(Some(role), None, &self.schema, &statement)
                .map_err(|e| e.to_string())
        }

        fn grant(
            &self,
            permission: &str,
            resource: ast::Resource,
            role: &str,
        ) -> Result<(), PermissionError> {
            self.authorizer
                .change_permissions(
                    &self.admin,
                    true,
                    &ast::Permissions::Only(vec![permission.into()]),
                    &resource,
                    role,
                    &self.schema,
                    None,
                )
                .map(|_| ())
        }
    }

    fn no(permission: &str, resource: &str) -> Result<(), String> {
        Err(format!(
            "User alice has no {permission} permission on {resource} or any of its parents"
        ))
    }

    #[test]
    fn statements_need_the_permission_on_the_resource_or_a_parent_through_any_granted_role() {
        let w = world(AuthorizerKind::Cassandra);
        let alice = &w.alice;
        assert_eq!(w.check(alice, "SELECT * FROM ks.t"), no("SELECT", "<table ks.t>"));
        // What drivers read at connect, and tables that do not exist (their own error
        // follows), need nothing.
        assert_eq!(w.check(alice, "SELECT * FROM system.local"), Ok(()));
        assert_eq!(w.check(alice, "SELECT * FROM system_schema.tables"), Ok(()));
        assert_eq!(w.check(alice, "SELECT * FROM ks.missing"), Ok(()));

        w.grant("SELECT", ast::Resource::Keyspace("ks".into()), "readers")
            .expect("grant to readers");
        assert_eq!(w.check(alice, "SELECT * FROM ks.t"), no("SELECT", "<table ks.t>"));
        w.authorizer
            .grant_role(&w.admin, "readers", "alice")
            .expect("grant readers to alice");
        assert_eq!(w.check(alice, "SELECT * FROM ks.t"), Ok(()));

        assert_eq!(
            w.check(alice, "INSERT INTO ks.t (k, v) VALUES (1, 1)"),
            no("MODIFY", "<table ks.t>")
        );
        assert_eq!(
            w.check(
                alice,
                "BEGIN BATCH INSERT INTO ks.t (k, v) VALUES (1, 1) APPLY BATCH"
            ),
            no("MODIFY", "<table ks.t>")
        );
        assert_eq!(w.check(alice, "TRUNCATE ks.t"), no("MODIFY", "<table ks.t>"));
        assert_eq!(
            w.check(
                alice,
                "CREATE KEYSPACE k2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
            ),
            no("CREATE", "<all keyspaces>")
        );
        assert_eq!(
            w.check(alice, "CREATE TABLE ks.u (k int PRIMARY KEY)"),
            no("CREATE", "<all tables in ks>")
        );
        assert_eq!(w.check(alice, "DROP TABLE ks.t"), no("DROP", "<table ks.t>"));
        assert_eq!(w.check(alice, "DROP KEYSPACE ks"), no("DROP", "<keyspace ks>"));

        // MODIFY on all keyspaces; a conditional update needs SELECT too, which alice has.
        w.grant("MODIFY", ast::Resource::AllKeyspaces, "alice")
            .expect("grant");
        assert_eq!(
            w.check(alice, "UPDATE ks.t SET v = 1 WHERE k = 1 IF v = 0"),
            Ok(())
        );
        w.authorizer
            .revoke_role(&w.admin, "readers", "alice")
            .expect("revoke readers");
        assert_eq!(
            w.check(alice, "UPDATE ks.t SET v = 1 WHERE k = 1 IF v = 0"),
            no("SELECT", "<table ks.t>")
        );
        assert_eq!(w.check(alice, "UPDATE ks.t SET v = 1 WHERE k = 1"), Ok(()));

        // Superusers need no grant.
        assert_eq!(w.check(&w.admin, "DROP KEYSPACE ks"), Ok(()));
    }

    #[test]
    fn creators_own_what_they_make_and_drops_forget() {
        let w = world(AuthorizerKind::Cassandra);
        let table = SchemaChange {
            change_type: ChangeType::Created,
            target: SchemaTarget::Table {
                keyspace: "ks".into(),
                table: "t".into(),
            },
        };
        w.authorizer
            .schema_changed(Some(&w.alice), &table)
            .expect("created");
        assert_eq!(w.check(&w.alice, "DROP TABLE ks.t"), Ok(()));
        let dropped = SchemaChange {
            change_type: ChangeType::Dropped,
            target: SchemaTarget::Keyspace {
                keyspace: "ks".into(),
            },
        };
        w.authorizer
            .schema_changed(Some(&w.alice), &dropped)
            .expect("dropped");
        assert_eq!(w.check(&w.alice, "DROP TABLE ks.t"), no("DROP", "<table ks.t>"));
    }

    #[test]
    fn allow_all_checks_nothing_and_refuses_permission_statements() {
        let w = world(AuthorizerKind::AllowAll);
        assert_eq!(w.check(&w.alice, "DROP KEYSPACE ks"), Ok(()));
        let err = w
            .grant("SELECT", ast::Resource::Keyspace("ks".into()), "alice")
            .expect_err("refused");
        assert_eq!(
            err.to_string(),
            "GRANT operation is not supported by AllowAllAuthorizer"
        );
        assert_eq!(err.code(), ErrorCode::ServerError);
        let err = w
            .authorizer
            .list(
                &w.admin,
                &ast::Permissions::All,
                None,
                None,
                false,
                &w.schema,
                None,
            )
            .expect_err("refused");
        assert_eq!(err.code(), ErrorCode::Invalid);
    }

    #[test]
    fn grants_apply_only_where_they_mean_something() {
        let w = world(AuthorizerKind::Cassandra);
        let err = w
            .grant(
                "CREATE",
                ast::Resource::Table(QualifiedName {
                    keyspace: Some("ks".into()),
                    name: "t".into(),
                }),
                "alice",
            )
            .expect_err("CREATE on a table");
        assert_eq!(
            err.to_string(),
            "Resource type DataResource does not support any of the requested permissions"
        );
        assert_eq!(err.code(), ErrorCode::SyntaxError);
        let err = w
            .grant("SELECT", ast::Resource::Keyspace("nope".into()), "alice")
            .expect_err("no such keyspace");
        assert_eq!(err.to_string(), "Resource <keyspace nope> doesn't exist");
        let err = w
            .grant("SELECT", ast::Resource::Keyspace("ks".into()), "nobody")
            .expect_err("no such role");
        assert_eq!(err.to_string(), "Role nobody doesn't exist");
    }
}
