//! Permissions granted to roles: what Cassandra's CassandraAuthorizer keeps in
//! `system_auth.role_permissions`, kept here in one JSON file beside the roles file, for the
//! same reasons (one node's namespace, small, rarely changed).
//!
//! Every GRANT and REVOKE rewrites the file whole, atomically (temporary file, sync, rename,
//! directory sync), so a crash leaves the old permissions or the new. Resources are stored by
//! Cassandra's internal names, the ones `role_permissions.resource` holds:
//!
//! ```text
//! { "version": 1,
//!   "grants": [ { "role": "alice", "resource": "data/ks/t", "permissions": ["SELECT"] },
//!               { "role": "ops",   "resource": "roles",     "permissions": ["CREATE", "DROP"] } ] }
//! ```
//!
//! `data` is every keyspace, `data/ks` one keyspace, `data/ks/t` one table, `roles` every
//! role and `roles/r` one role.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hayate_storage::files::write_atomically;
use serde::{Deserialize, Serialize};

const PERMISSIONS_FILE_VERSION: u32 = 1;
/// Role and resource pairs the file may hold. Far above any real deployment (Cassandra has no
/// bound), it keeps the file, and the time to rewrite it, small.
pub const GRANTS_MAX: usize = 1 << 20;
/// A permissions file larger than this is not one: `GRANTS_MAX` grants fit in less.
const PERMISSIONS_FILE_MAX_BYTES: u64 = 256 << 20;

/// A permission, in the order of Cassandra's `Permission` enum, which LIST PERMISSIONS sorts
/// by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Permission {
    Create,
    Alter,
    Drop,
    Select,
    Modify,
    Authorize,
    Describe,
    Execute,
    Unmask,
    SelectMasked,
}

impl Permission {
    pub const ALL: [Permission; 10] = [
        Permission::Create,
        Permission::Alter,
        Permission::Drop,
        Permission::Select,
        Permission::Modify,
        Permission::Authorize,
        Permission::Describe,
        Permission::Execute,
        Permission::Unmask,
        Permission::SelectMasked,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Permission::Create => "CREATE",
            Permission::Alter => "ALTER",
            Permission::Drop => "DROP",
            Permission::Select => "SELECT",
            Permission::Modify => "MODIFY",
            Permission::Authorize => "AUTHORIZE",
            Permission::Describe => "DESCRIBE",
            Permission::Execute => "EXECUTE",
            Permission::Unmask => "UNMASK",
            Permission::SelectMasked => "SELECT_MASKED",
        }
    }

    /// The permission a statement names (the parser gives it in upper case).
    pub fn from_name(name: &str) -> Option<Permission> {
        Permission::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a permission is on. Ordered by Cassandra's internal name, the order LIST PERMISSIONS
/// shows resources in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Resource {
    AllKeyspaces,
    Keyspace(String),
    Table {
        keyspace: String,
        table: String,
    },
    /// `<all tables in ks>`: what CREATE TABLE needs CREATE on. It cannot be granted on
    /// directly; its parent is the keyspace.
    AllTables(String),
    AllRoles,
    Role(String),
}

/// What a table, keyspace and every keyspace may be granted (Cassandra 5.0's DataResource).
const TABLE_PERMISSIONS: &[Permission] = &[
    Permission::Alter,
    Permission::Drop,
    Permission::Select,
    Permission::Modify,
    Permission::Authorize,
    Permission::Unmask,
    Permission::SelectMasked,
];
const KEYSPACE_PERMISSIONS: &[Permission] = &[
    Permission::Create,
    Permission::Alter,
    Permission::Drop,
    Permission::Select,
    Permission::Modify,
    Permission::Authorize,
    Permission::Unmask,
    Permission::SelectMasked,
];
/// What every role and one role may be granted (Cassandra 5.0's RoleResource).
const ALL_ROLES_PERMISSIONS: &[Permission] = &[
    Permission::Create,
    Permission::Alter,
    Permission::Drop,
    Permission::Authorize,
    Permission::Describe,
];
const ROLE_PERMISSIONS: &[Permission] = &[
    Permission::Alter,
    Permission::Drop,
    Permission::Authorize,
    Permission::Describe,
];

impl Resource {
    /// Cassandra's internal name, as `system_auth.role_permissions` stores it.
    pub fn internal_name(&self) -> String {
        match self {
            Resource::AllKeyspaces => "data".to_string(),
            Resource::Keyspace(ks) => format!("data/{ks}"),
            Resource::Table { keyspace, table } => format!("data/{keyspace}/{table}"),
            Resource::AllTables(ks) => format!("data/{ks}/*"),
            Resource::AllRoles => "roles".to_string(),
            Resource::Role(r) => format!("roles/{r}"),
        }
    }

    /// The resource an internal name names; `None` for one hayate does not know.
    pub fn from_internal_name(name: &str) -> Option<Resource> {
        // A role's name may hold any character, '/' included; keyspace and table names
        // cannot (they are word characters only).
        if let Some(role) = name.strip_prefix("roles/") {
            return (!role.is_empty()).then(|| Resource::Role(role.to_string()));
        }
        let mut parts = name.splitn(3, '/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("data"), None, None) => Some(Resource::AllKeyspaces),
            (Some("data"), Some(ks), None) if !ks.is_empty() => Some(Resource::Keyspace(ks.to_string())),
            (Some("data"), Some(ks), Some(t)) if !ks.is_empty() && !t.is_empty() && t != "*" => {
                Some(Resource::Table {
                    keyspace: ks.to_string(),
                    table: t.to_string(),
                })
            }
            (Some("roles"), None, None) => Some(Resource::AllRoles),
            _ => None,
        }
    }

    /// The resource whose permissions this one inherits.
    pub fn parent(&self) -> Option<Resource> {
        match self {
            Resource::AllKeyspaces | Resource::AllRoles => None,
            Resource::Keyspace(_) => Some(Resource::AllKeyspaces),
            Resource::Table { keyspace, .. } | Resource::AllTables(keyspace) => {
                Some(Resource::Keyspace(keyspace.clone()))
            }
            Resource::Role(_) => Some(Resource::AllRoles),
        }
    }

    /// This resource and its parents, nearest first.
    pub fn chain(&self) -> Vec<Resource> {
        let mut chain = vec![self.clone()];
        while let Some(parent) = chain.last().and_then(Resource::parent) {
            chain.push(parent);
        }
        chain
    }

    /// The permissions that mean something on this resource: what ALL PERMISSIONS grants.
    pub fn applicable(&self) -> &'static [Permission] {
        match self {
            Resource::AllKeyspaces | Resource::Keyspace(_) | Resource::AllTables(_) => KEYSPACE_PERMISSIONS,
            Resource::Table { .. } => TABLE_PERMISSIONS,
            Resource::AllRoles => ALL_ROLES_PERMISSIONS,
            Resource::Role(_) => ROLE_PERMISSIONS,
        }
    }

    /// Cassandra's class name for the kind, as its "does not support" message shows it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Resource::AllRoles | Resource::Role(_) => "RoleResource",
            _ => "DataResource",
        }
    }

    /// Whether `self` is `other` or lies under it (a table under its keyspace).
    pub fn is_within(&self, other: &Resource) -> bool {
        self.chain().contains(other)
    }
}

impl fmt::Display for Resource {
    /// Cassandra's name for users, as its messages and LIST PERMISSIONS show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::AllKeyspaces => f.write_str("<all keyspaces>"),
            Resource::Keyspace(ks) => write!(f, "<keyspace {ks}>"),
            Resource::Table { keyspace, table } => write!(f, "<table {keyspace}.{table}>"),
            Resource::AllTables(ks) => write!(f, "<all tables in {ks}>"),
            Resource::AllRoles => f.write_str("<all roles>"),
            Resource::Role(r) => write!(f, "<role {r}>"),
        }
    }
}

impl PartialOrd for Resource {
    fn partial_cmp(&self, other: &Resource) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Resource {
    fn cmp(&self, other: &Resource) -> std::cmp::Ordering {
        self.internal_name().cmp(&other.internal_name())
    }
}

/// One row of LIST PERMISSIONS.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PermissionRow {
    pub role: String,
    pub resource: Resource,
    pub permission: Permission,
}

type Grants = BTreeMap<String, BTreeMap<Resource, BTreeSet<Permission>>>;

/// The permissions of every role, and their file. Shared by every connection through the
/// [`super::authorizer::Authorizer`].
pub struct PermissionStore {
    path: PathBuf,
    /// Role name, then resource, then what it was granted there. Writers hold the lock across
    /// the file write, so the file's order is the map's order.
    grants: RwLock<Grants>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PermissionsFile {
    version: u32,
    grants: Vec<GrantEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantEntry {
    role: String,
    resource: String,
    permissions: BTreeSet<Permission>,
}

impl PermissionStore {
    /// Opens the permissions file at `path`; a missing file is no permissions.
    pub fn open(path: &Path) -> Result<PermissionStore, PermissionStoreError> {
        Ok(PermissionStore {
            path: path.to_path_buf(),
            grants: RwLock::new(read_permissions_file(path)?.unwrap_or_default()),
        })
    }

    /// What `role` was granted on exactly `resource` (not its parents).
    pub fn granted(&self, role: &str, resource: &Resource) -> BTreeSet<Permission> {
        self.read()
            .get(role)
            .and_then(|r| r.get(resource))
            .cloned()
            .unwrap_or_default()
    }

    /// Adds `permissions` on `resource` to `role`; returns those it did not have already.
    pub fn grant(
        &self,
        role: &str,
        resource: &Resource,
        permissions: &BTreeSet<Permission>,
    ) -> Result<BTreeSet<Permission>, PermissionStoreError> {
        let mut grants = self.write();
        let before = grants.clone();
        let pairs: usize = grants.values().map(BTreeMap::len).sum();
        let entry = grants.entry(role.to_string()).or_default();
        if !entry.contains_key(resource) && pairs >= GRANTS_MAX {
            return Err(PermissionStoreError::TooManyGrants);
        }
        let held = entry.entry(resource.clone()).or_default();
        let added: BTreeSet<Permission> = permissions.difference(held).copied().collect();
        held.extend(added.iter().copied());
        if added.is_empty() {
            *grants = before;
            return Ok(added);
        }
        self.save_or_restore(&mut grants, before)?;
        Ok(added)
    }

    /// Takes `permissions` on `resource` from `role`; returns those it had.
    pub fn revoke(
        &self,
        role: &str,
        resource: &Resource,
        permissions: &BTreeSet<Permission>,
    ) -> Result<BTreeSet<Permission>, PermissionStoreError> {
        let mut grants = self.write();
        let before = grants.clone();
        let Some(held) = grants.get_mut(role).and_then(|r| r.get_mut(resource)) else {
            return Ok(BTreeSet::new());
        };
        let removed: BTreeSet<Permission> = held.intersection(permissions).copied().collect();
        if removed.is_empty() {
            return Ok(removed);
        }
        held.retain(|p| !removed.contains(p));
        prune(&mut grants);
        self.save_or_restore(&mut grants, before)?;
        Ok(removed)
    }

    /// Forgets every permission on `resource` and on what lies under it (a dropped keyspace's
    /// tables), as Cassandra does when a keyspace, table or role is dropped.
    pub fn revoke_all_on(&self, resource: &Resource) -> Result<(), PermissionStoreError> {
        let mut grants = self.write();
        let before = grants.clone();
        let mut changed = false;
        for on in grants.values_mut() {
            let count = on.len();
            on.retain(|r, _| !r.is_within(resource));
            changed |= on.len() != count;
        }
        if !changed {
            return Ok(());
        }
        prune(&mut grants);
        self.save_or_restore(&mut grants, before)
    }

    /// Forgets every permission granted to `role` (a dropped role).
    pub fn revoke_all_from(&self, role: &str) -> Result<(), PermissionStoreError> {
        let mut grants = self.write();
        let before = grants.clone();
        if grants.remove(role).is_none() {
            return Ok(());
        }
        self.save_or_restore(&mut grants, before)
    }

    /// Every grant to the roles `roles` (all roles when `None`) on `resource` (every resource
    /// when `None`) of a permission in `permissions`, sorted as Cassandra sorts LIST
    /// PERMISSIONS: by role, resource name, then permission.
    pub fn list(
        &self,
        roles: Option<&BTreeSet<String>>,
        resource: Option<&Resource>,
        permissions: &BTreeSet<Permission>,
    ) -> Vec<PermissionRow> {
        let grants = self.read();
        let mut rows = Vec::new();
        for (role, on) in grants.iter() {
            if roles.is_some_and(|r| !r.contains(role)) {
                continue;
            }
            for (r, held) in on {
                if resource.is_some_and(|wanted| wanted != r) {
                    continue;
                }
                for p in held.intersection(permissions) {
                    rows.push(PermissionRow {
                        role: role.clone(),
                        resource: r.clone(),
                        permission: *p,
                    });
                }
            }
        }
        rows.sort();
        rows
    }

    fn save_or_restore(
        &self,
        grants: &mut RwLockWriteGuard<'_, Grants>,
        before: Grants,
    ) -> Result<(), PermissionStoreError> {
        if let Err(e) = self.save(grants) {
            **grants = before;
            return Err(e);
        }
        Ok(())
    }

    /// Rewrites the file atomically. The caller holds the write lock.
    fn save(&self, grants: &Grants) -> Result<(), PermissionStoreError> {
        let file = PermissionsFile {
            version: PERMISSIONS_FILE_VERSION,
            grants: grants
                .iter()
                .flat_map(|(role, on)| {
                    on.iter().map(move |(resource, permissions)| GrantEntry {
                        role: role.clone(),
                        resource: resource.internal_name(),
                        permissions: permissions.clone(),
                    })
                })
                .collect(),
        };
        let write_error = |source| PermissionStoreError::Write {
            path: self.path.clone(),
            source,
        };
        let mut text = serde_json::to_vec_pretty(&file).map_err(|e| write_error(io::Error::other(e)))?;
        text.push(b'\n');
        write_atomically(&self.path, &text).map_err(write_error)
    }

    fn read(&self) -> RwLockReadGuard<'_, Grants> {
        // Writers restore the map before they return an error, so a poisoned lock still
        // guards consistent grants.
        self.grants.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Grants> {
        self.grants.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Drops empty permission sets and roles left with none, so that the file holds only grants.
fn prune(grants: &mut Grants) {
    for on in grants.values_mut() {
        on.retain(|_, held| !held.is_empty());
    }
    grants.retain(|_, on| !on.is_empty());
}

fn read_permissions_file(path: &Path) -> Result<Option<Grants>, PermissionStoreError> {
    let read_error = |source| PermissionStoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let corrupt = |reason: String| PermissionStoreError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let file: PermissionsFile = match super::read_json_file(path, PERMISSIONS_FILE_MAX_BYTES) {
        Ok(Some(file)) => file,
        Ok(None) => return Ok(None),
        Err(super::JsonFileError::Read(source)) => return Err(read_error(source)),
        Err(super::JsonFileError::Corrupt(reason)) => return Err(corrupt(reason)),
    };
    if file.version != PERMISSIONS_FILE_VERSION {
        return Err(corrupt(format!(
            "it is version {}, and this hayate reads version {PERMISSIONS_FILE_VERSION}",
            file.version
        )));
    }
    if file.grants.len() > GRANTS_MAX {
        return Err(corrupt(format!("it holds more than {GRANTS_MAX} grants")));
    }
    let mut grants = Grants::new();
    for entry in file.grants {
        let resource = Resource::from_internal_name(&entry.resource)
            .ok_or_else(|| corrupt(format!("{:?} is not a resource", entry.resource)))?;
        let held = grants.entry(entry.role).or_default().entry(resource).or_default();
        held.extend(entry.permissions);
    }
    prune(&mut grants);
    Ok(Some(grants))
}

/// Why the permissions file could not be read or written.
#[derive(Debug)]
#[non_exhaustive]
pub enum PermissionStoreError {
    Read { path: PathBuf, source: io::Error },
    Corrupt { path: PathBuf, reason: String },
    Write { path: PathBuf, source: io::Error },
    TooManyGrants,
}

impl fmt::Display for PermissionStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PermissionStoreError::Read { path, source } => write!(
                f,
                "cannot read the permissions file {}: {source} (check its permissions)",
                path.display()
            ),
            PermissionStoreError::Corrupt { path, reason } => write!(
                f,
                "the permissions file {} is not valid: {reason}; restore it from a backup, or move it \
                 away to start again with no permissions granted (superusers keep every permission)",
                path.display()
            ),
            PermissionStoreError::Write { path, source } => write!(
                f,
                "cannot save the permissions file {}: {source} (check the permissions and free space \
                 of the data directory)",
                path.display()
            ),
            PermissionStoreError::TooManyGrants => write!(
                f,
                "Cannot hold more than {GRANTS_MAX} grants; revoke unused permissions or drop unused roles first"
            ),
        }
    }
}

impl std::error::Error for PermissionStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PermissionStoreError::Read { source, .. } | PermissionStoreError::Write { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ps: &[Permission]) -> BTreeSet<Permission> {
        ps.iter().copied().collect()
    }

    fn table(ks: &str, t: &str) -> Resource {
        Resource::Table {
            keyspace: ks.into(),
            table: t.into(),
        }
    }

    #[test]
    fn resources_have_cassandras_names_and_parents() {
        let t = table("ks", "t");
        assert_eq!(t.to_string(), "<table ks.t>");
        assert_eq!(t.internal_name(), "data/ks/t");
        assert_eq!(
            t.chain(),
            [t.clone(), Resource::Keyspace("ks".into()), Resource::AllKeyspaces]
        );
        assert_eq!(Resource::AllTables("ks".into()).to_string(), "<all tables in ks>");
        assert_eq!(
            Resource::Role("r".into()).chain(),
            [Resource::Role("r".into()), Resource::AllRoles]
        );
        for r in [
            Resource::AllKeyspaces,
            Resource::Keyspace("ks".into()),
            t,
            Resource::AllRoles,
            Resource::Role("r".into()),
            Resource::Role("team/ops".into()),
        ] {
            assert_eq!(Resource::from_internal_name(&r.internal_name()), Some(r));
        }
        for bad in ["", "data/", "data/ks/*", "functions", "roles/", "x/y"] {
            assert_eq!(Resource::from_internal_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn grants_persist_and_drops_forget_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("permissions.json");
        let store = PermissionStore::open(&path).expect("open");
        let select = set(&[Permission::Select]);
        assert_eq!(
            store.grant("alice", &table("ks", "t"), &select).expect("grant"),
            select
        );
        assert!(store
            .grant("alice", &table("ks", "t"), &select)
            .expect("again")
            .is_empty());
        store
            .grant(
                "alice",
                &Resource::Keyspace("ks".into()),
                &set(&[Permission::Modify]),
            )
            .expect("grant");
        store
            .grant("bob", &Resource::Keyspace("other".into()), &select)
            .expect("grant");
        drop(store);

        let store = PermissionStore::open(&path).expect("reopen");
        let all = set(&Permission::ALL);
        let rows = store.list(None, None, &all);
        let shown: Vec<(String, String, &str)> = rows
            .iter()
            .map(|r| (r.role.clone(), r.resource.to_string(), r.permission.name()))
            .collect();
        assert_eq!(
            shown,
            [
                ("alice".into(), "<keyspace ks>".into(), "MODIFY"),
                ("alice".into(), "<table ks.t>".into(), "SELECT"),
                ("bob".into(), "<keyspace other>".into(), "SELECT"),
            ]
        );
        // Dropping a keyspace forgets what was granted on its tables too.
        store
            .revoke_all_on(&Resource::Keyspace("ks".into()))
            .expect("drop keyspace");
        assert!(store
            .list(Some(&["alice".to_string()].into()), None, &all)
            .is_empty());
        assert!(
            store
                .revoke("bob", &Resource::Keyspace("other".into()), &select)
                .expect("revoke")
                == select
        );
        drop(store);
        let store = PermissionStore::open(&path).expect("reopen");
        assert!(store.list(None, None, &all).is_empty());
    }

    #[test]
    fn a_damaged_file_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("permissions.json");
        for text in [
            "{ not json",
            "{\"version\": 2, \"grants\": []}",
            "{\"version\": 1, \"grants\": [{\"role\": \"a\", \"resource\": \"mbeans\", \"permissions\": [\"SELECT\"]}]}",
            "{\"version\": 1, \"grants\": [{\"role\": \"a\", \"resource\": \"data\", \"permissions\": [\"READ\"]}]}",
        ] {
            std::fs::write(&path, text).expect("write");
            let err = PermissionStore::open(&path).err().expect("refused");
            let message = err.to_string();
            assert!(message.contains("permissions.json") && message.contains("backup"), "{message}");
        }
    }
}
