//! Roles and their passwords: what Cassandra keeps in `system_auth.roles`, kept here in one
//! JSON file under `data_dir` because the node has a single namespace and no replication yet.
//!
//! The file is small (a role is a few hundred bytes) and changes only on CREATE, ALTER and
//! DROP ROLE, so every change rewrites it whole: written to a temporary file, synced, renamed
//! over the old one, and the directory synced, so that a crash leaves either the old roles or
//! the new, never a torn file. It holds argon2id hashes (PHC strings, which carry their own
//! salt and cost), never passwords.
//!
//! ```text
//! { "version": 1,
//!   "roles": [ { "name": "cassandra", "salted_hash": "$argon2id$v=19$m=19456,t=2,p=1$…",
//!                "login": true, "superuser": true, "options": {}, "member_of": [] } ] }
//! ```
//!
//! The rules of who may do what are Cassandra's (CassandraRoleManager and the role statements)
//! with CassandraAuthorizer and no permissions granted on roles (permissions on roles are not
//! consulted here; see `permissions.rs`): superusers may do anything; any other role may list
//! its own roles and change its own password, nothing else. GRANT ROLE and REVOKE ROLE are
//! checked by the authorizer before they reach [`RoleStore::grant_role`]. The messages are Cassandra's word for word, since applications and tests match on
//! them. Under AllowAllAuthenticator every connection is anonymous and role statements fail
//! as they do in Cassandra, with "You have to be logged in and not anonymous".
//!
//! Checking a password costs about 25 ms of CPU and 19 MiB of RAM (argon2id at OWASP's
//! recommended cost; Cassandra's bcrypt costs about 100 ms). A driver opens several
//! connections at once, each logging in, so recently verified logins are remembered; see
//! [`VerifiedCache`] for what that trades away.
//!
//! This file holds the roles and the statements' rules; `password.rs` the hashes, the login
//! check and its cache; `file.rs` the roles file; `error.rs` why a change or a read failed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::permissions::{Permission, PermissionStore, Resource};
use super::AuthenticatedRole;

mod error;
mod file;
mod password;

pub use error::{RoleError, RoleStoreError};
use file::read_roles_file;
pub use password::HashCost;
use password::{hash_password, random_bytes, VerifiedCache};

/// The superuser a new node starts with, as in Cassandra.
pub const DEFAULT_SUPERUSER_NAME: &str = "cassandra";
const DEFAULT_SUPERUSER_PASSWORD: &str = "cassandra";

/// Bounds on what a statement may store. Cassandra has none below the 64 KiB of a key; these
/// are far above any real name or password and keep one role's hashing and storage small.
pub const ROLE_NAME_MAX_BYTES: usize = 1024;
pub const PASSWORD_MAX_BYTES: usize = 1024;
pub const ROLES_MAX: usize = 65_536;
/// A roles file larger than this is not one: `ROLES_MAX` roles at their largest fit in less.
const ROLES_FILE_MAX_BYTES: u64 = 64 << 20;
const ROLES_FILE_VERSION: u32 = 1;

/// How many password checks may run at once. Each holds the hash's memory cost (19 MiB by
/// default), so a burst of logins must not be allowed to allocate without bound.
const VERIFICATIONS_IN_FLIGHT_MAX: usize = 8;

/// Entries and lifetime of the verified-login cache.
const VERIFIED_CACHE_ENTRIES_MAX: usize = 1024;
const VERIFIED_CACHE_VALIDITY: Duration = Duration::from_secs(300);

/// What the role manager is called in Cassandra's messages ("... doesn't support PASSWORD").
const ROLE_MANAGER_CLASS: &str = "org.apache.cassandra.auth.CassandraRoleManager";

/// One role as the file stores it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Role {
    name: String,
    /// An argon2id PHC string; `None` for a role created without a password, which cannot
    /// log in with one.
    salted_hash: Option<String>,
    login: bool,
    superuser: bool,
    #[serde(default)]
    options: BTreeMap<String, String>,
    /// Roles granted to this one directly (GRANT ROLE); their permissions and superuser
    /// status are this role's too.
    #[serde(default)]
    member_of: BTreeSet<String>,
}

/// The options of CREATE ROLE and ALTER ROLE; `None` leaves a setting as it is (ALTER) or at
/// its default (CREATE: no password, NOLOGIN, NOSUPERUSER). `CREATE USER` is `login: true`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RoleOptions {
    pub password: Option<String>,
    pub login: Option<bool>,
    pub superuser: Option<bool>,
    /// Cassandra's OPTIONS map, which its built-in role manager refuses; so do we.
    pub options: Option<BTreeMap<String, String>>,
}

impl RoleOptions {
    fn is_empty(&self) -> bool {
        self.password.is_none() && self.login.is_none() && self.superuser.is_none() && self.options.is_none()
    }
}

impl fmt::Debug for RoleOptions {
    /// Never prints the password, so a statement cannot leak one into a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoleOptions")
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("login", &self.login)
            .field("superuser", &self.superuser)
            .field("options", &self.options)
            .finish()
    }
}

/// One row of LIST ROLES, in Cassandra's column order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRow {
    pub role: String,
    pub superuser: bool,
    pub login: bool,
    pub options: BTreeMap<String, String>,
    /// The datacenters the role may connect to; "ALL" until network permissions exist.
    pub datacenters: String,
}

/// Roles, their password hashes, and the rules for changing them. Shared by every connection
/// (`Arc<RoleStore>`). Password checks block for tens of milliseconds: run
/// [`RoleStore::authenticate`] and the role statements on the blocking pool
/// (`tokio::task::spawn_blocking`), not on a connection task.
pub struct RoleStore {
    path: PathBuf,
    hash_cost: HashCost,
    /// Writers hold the lock across the file write, so the file's order is the map's order.
    roles: RwLock<BTreeMap<String, Role>>,
    verified: Mutex<VerifiedCache>,
    /// Permits for password checks, [`VERIFICATIONS_IN_FLIGHT_MAX`] of them.
    verifications: Semaphore,
    /// Checked against for unknown names, so that a wrong name takes as long as a wrong
    /// password and role names cannot be discovered by timing logins.
    dummy_hash: OnceLock<Option<String>>,
    /// Set under CassandraAuthorizer: see [`RoleStore::consult_permissions`].
    permissions: OnceLock<Arc<PermissionStore>>,
}

impl RoleStore {
    /// Opens the roles file at `path`, creating its directory if needed. If the file does not
    /// exist and `create_default` is set, creates Cassandra's default superuser `cassandra`
    /// (password `cassandra`) and says to change it; later opens find the file and do not
    /// recreate it, so a changed password or a dropped default role stays so.
    pub fn open(path: &Path, create_default: bool) -> Result<RoleStore, RoleStoreError> {
        RoleStore::open_with_cost(path, create_default, HashCost::DEFAULT)
    }

    pub fn open_with_cost(
        path: &Path,
        create_default: bool,
        hash_cost: HashCost,
    ) -> Result<RoleStore, RoleStoreError> {
        let existing = read_roles_file(path)?;
        let create = existing.is_none() && create_default;
        let store = RoleStore {
            path: path.to_path_buf(),
            hash_cost,
            roles: RwLock::new(existing.unwrap_or_default()),
            verified: Mutex::new(VerifiedCache::new(random_bytes()?)),
            verifications: Semaphore::new(VERIFICATIONS_IN_FLIGHT_MAX),
            dummy_hash: OnceLock::new(),
            permissions: OnceLock::new(),
        };
        if create {
            let role = Role {
                name: DEFAULT_SUPERUSER_NAME.to_string(),
                salted_hash: Some(hash_password(DEFAULT_SUPERUSER_PASSWORD, hash_cost)?),
                login: true,
                superuser: true,
                options: BTreeMap::new(),
                member_of: BTreeSet::new(),
            };
            let mut roles = store.write_roles();
            roles.insert(role.name.clone(), role);
            store.save(&roles)?;
            tracing::warn!(
                path = %path.display(),
                "created the default superuser role '{DEFAULT_SUPERUSER_NAME}' with password \
                 '{DEFAULT_SUPERUSER_PASSWORD}': log in as it, create your own superuser role, then \
                 change this one's password (ALTER ROLE {DEFAULT_SUPERUSER_NAME} WITH PASSWORD = '...') \
                 or drop it"
            );
        }
        Ok(store)
    }

    /// Whether the role, or any role granted to it, is a superuser, as of now (a session
    /// keeps its role, but a change of SUPERUSER applies to its next statement).
    pub fn is_superuser(&self, role: &AuthenticatedRole) -> bool {
        !role.is_anonymous()
            && self
                .roles_of(&self.read_roles(), role.name())
                .iter()
                .any(|r| r.superuser)
    }

    /// CREATE ROLE (and CREATE USER, with `login: Some(true)`).
    pub fn create_role(
        &self,
        by: &AuthenticatedRole,
        name: &str,
        options: RoleOptions,
        if_not_exists: bool,
    ) -> Result<(), RoleError> {
        if by.is_anonymous() {
            // Cassandra's checks run in this order with AllowAllAuthenticator.
            if options.superuser == Some(true) {
                return Err(RoleError::SuperuserRequired {
                    message: "Only superusers can create a role with superuser status",
                });
            }
            check_supported(&options, true)?;
            check_name(name)?;
            return Err(RoleError::Anonymous);
        }
        let is_super = self.is_superuser(by);
        let permitted = self.may(by, Permission::Create, &Resource::AllRoles);
        // CassandraAuthorizer checks CREATE first; under AllowAllAuthorizer, which grants
        // CREATE to all in Cassandra, the superuser check is the first answer.
        if self.consults_permissions() && !permitted {
            return Err(RoleError::InsufficientPrivileges {
                user: by.name().to_string(),
            });
        }
        if options.superuser == Some(true) && !is_super {
            return Err(RoleError::SuperuserRequired {
                message: "Only superusers can create a role with superuser status",
            });
        }
        if !permitted {
            return Err(RoleError::InsufficientPrivileges {
                user: by.name().to_string(),
            });
        }
        check_supported(&options, false)?;
        check_name(name)?;
        check_password(&options)?;
        if self.read_roles().contains_key(name) {
            return if if_not_exists {
                Ok(())
            } else {
                Err(RoleError::AlreadyExists {
                    role: name.to_string(),
                })
            };
        }
        // Hashing takes tens of milliseconds: not under the lock that logins read through.
        let salted_hash = match &options.password {
            Some(password) => Some(hash_password(password, self.hash_cost)?),
            None => None,
        };
        let mut roles = self.write_roles();
        if roles.contains_key(name) {
            // Created by another connection while this one hashed.
            return if if_not_exists {
                Ok(())
            } else {
                Err(RoleError::AlreadyExists {
                    role: name.to_string(),
                })
            };
        }
        if roles.len() >= ROLES_MAX {
            return Err(RoleError::TooManyRoles);
        }
        let role = Role {
            name: name.to_string(),
            salted_hash,
            login: options.login.unwrap_or(false),
            superuser: options.superuser.unwrap_or(false),
            options: BTreeMap::new(),
            member_of: BTreeSet::new(),
        };
        roles.insert(name.to_string(), role);
        if let Err(e) = self.save(&roles) {
            roles.remove(name);
            return Err(e.into());
        }
        self.lock_verified().remove(name);
        Ok(())
    }

    /// ALTER ROLE (and ALTER USER).
    pub fn alter_role(
        &self,
        by: &AuthenticatedRole,
        name: &str,
        options: RoleOptions,
    ) -> Result<(), RoleError> {
        if by.is_anonymous() {
            if options.superuser.is_some() {
                return Err(RoleError::SuperuserRequired {
                    message: "Only superusers are allowed to alter superuser status",
                });
            }
            check_supported(&options, true)?;
            if options.is_empty() {
                return Err(RoleError::EmptyAlter);
            }
            return Err(RoleError::Anonymous);
        }
        // Access first, as Cassandra, so that a role without permission cannot learn which
        // roles exist from the answer.
        let is_super = self.is_superuser(by);
        if options.superuser.is_some() {
            let granted_to_self = {
                let roles = self.read_roles();
                self.roles_of(&roles, by.name()).iter().any(|r| r.name == name)
            };
            if by.name() == name || granted_to_self {
                return Err(RoleError::OwnSuperuserStatus);
            }
            if !is_super {
                return Err(RoleError::SuperuserRequired {
                    message: "Only superusers are allowed to alter superuser status",
                });
            }
        }
        if !is_super && by.name() != name {
            // Another role's options need ALTER on it.
            if !self.may(by, Permission::Alter, &Resource::Role(name.to_string())) {
                return Err(RoleError::InsufficientPrivileges {
                    user: by.name().to_string(),
                });
            }
        } else if !is_super {
            // A role may change only its own password.
            if options.login.is_some() {
                return Err(RoleError::OptionNotAlterable { option: "LOGIN" });
            }
            if options.options.is_some() {
                return Err(RoleError::OptionNotAlterable { option: "OPTIONS" });
            }
        }
        check_supported(&options, false)?;
        if options.is_empty() {
            return Err(RoleError::EmptyAlter);
        }
        check_password(&options)?;
        if !self.read_roles().contains_key(name) {
            return Err(RoleError::NotFound {
                role: name.to_string(),
            });
        }
        let salted_hash = match &options.password {
            Some(password) => Some(hash_password(password, self.hash_cost)?),
            None => None,
        };

        let mut roles = self.write_roles();
        let Some(role) = roles.get_mut(name) else {
            return Err(RoleError::NotFound {
                role: name.to_string(),
            });
        };
        let before = role.clone();
        if salted_hash.is_some() {
            role.salted_hash = salted_hash;
        }
        if let Some(login) = options.login {
            role.login = login;
        }
        if let Some(superuser) = options.superuser {
            role.superuser = superuser;
        }
        if let Err(e) = self.save(&roles) {
            roles.insert(name.to_string(), before);
            return Err(e.into());
        }
        self.lock_verified().remove(name);
        Ok(())
    }

    /// DROP ROLE (and DROP USER).
    pub fn drop_role(&self, by: &AuthenticatedRole, name: &str, if_exists: bool) -> Result<(), RoleError> {
        if by.is_anonymous() {
            return Err(RoleError::Anonymous);
        }
        let permitted = self.may(by, Permission::Drop, &Resource::Role(name.to_string()));
        let refused = || RoleError::InsufficientPrivileges {
            user: by.name().to_string(),
        };
        // CassandraAuthorizer checks DROP before the role's existence; under
        // AllowAllAuthorizer, which grants DROP to all in Cassandra, the other answers come
        // first.
        if self.consults_permissions() && !permitted {
            return Err(refused());
        }
        let exists = self.read_roles().contains_key(name);
        if !exists && !if_exists {
            return Err(RoleError::NotFound {
                role: name.to_string(),
            });
        }
        if by.name() == name {
            return Err(RoleError::DropSelf);
        }
        if !permitted {
            return Err(refused());
        }
        let mut roles = self.write_roles();
        let before = roles.clone();
        if roles.remove(name).is_none() {
            return Ok(());
        }
        for role in roles.values_mut() {
            role.member_of.remove(name);
        }
        if let Err(e) = self.save(&roles) {
            *roles = before;
            return Err(e.into());
        }
        self.lock_verified().remove(name);
        Ok(())
    }

    /// LIST ROLES [OF name]: a superuser sees every role (or those of `of`); another role sees
    /// its own roles, and may name only one of them in `of`. Sorted by name.
    pub fn list_roles(&self, by: &AuthenticatedRole, of: Option<&str>) -> Result<Vec<RoleRow>, RoleError> {
        self.list_roles_of(by, of, true)
    }

    /// LIST ROLES [OF name] [NORECURSIVE]: with `recursive` false, the roles of `of` are only
    /// itself and those granted to it directly.
    pub fn list_roles_of(
        &self,
        by: &AuthenticatedRole,
        of: Option<&str>,
        recursive: bool,
    ) -> Result<Vec<RoleRow>, RoleError> {
        if by.is_anonymous() {
            return Err(RoleError::Anonymous);
        }
        // Superusers, and under CassandraAuthorizer roles with DESCRIBE on ALL ROLES, see
        // every role; others see their own. Asked before the lock below is taken.
        let sees_all = self.may(by, Permission::Describe, &Resource::AllRoles);
        let roles = self.read_roles();
        if let Some(of) = of {
            if !roles.contains_key(of) {
                return Err(RoleError::GranteeNotFound { role: of.to_string() });
            }
        }
        let listed: Vec<&Role> = match (sees_all, of) {
            (true, None) => roles.values().collect(),
            (true, Some(of)) if !recursive => direct_roles_of(&roles, of),
            (true, Some(of)) => self.roles_of(&roles, of),
            (false, None) if !recursive => direct_roles_of(&roles, by.name()),
            (false, None) => self.roles_of(&roles, by.name()),
            (false, Some(of)) => {
                if !self.roles_of(&roles, by.name()).iter().any(|r| r.name == of) {
                    return Err(RoleError::NotAuthorizedToView { role: of.to_string() });
                }
                if recursive {
                    self.roles_of(&roles, of)
                } else {
                    direct_roles_of(&roles, of)
                }
            }
        };
        let mut rows: Vec<RoleRow> = listed
            .into_iter()
            .map(|r| RoleRow {
                role: r.name.clone(),
                superuser: self.roles_of(&roles, &r.name).iter().any(|g| g.superuser),
                login: r.login,
                options: r.options.clone(),
                datacenters: "ALL".to_string(),
            })
            .collect();
        rows.sort_by(|a, b| a.role.cmp(&b.role));
        Ok(rows)
    }

    /// Makes the role statements honour permissions granted on roles (CREATE on ALL ROLES,
    /// ALTER and DROP on a role), as with CassandraAuthorizer. Without it only superusers
    /// manage roles.
    pub fn consult_permissions(&self, permissions: Arc<PermissionStore>) {
        let _ = self.permissions.set(permissions);
    }

    fn consults_permissions(&self) -> bool {
        self.permissions.get().is_some()
    }

    /// Whether `by` is a superuser or, when permissions are consulted, holds `permission` on
    /// `resource` or its parent, itself or through a granted role.
    fn may(&self, by: &AuthenticatedRole, permission: Permission, resource: &Resource) -> bool {
        if self.is_superuser(by) {
            return true;
        }
        let Some(permissions) = self.permissions.get() else {
            return false;
        };
        let names = self.role_names_of(by.name());
        resource.chain().iter().any(|r| {
            names
                .iter()
                .any(|n| permissions.granted(n, r).contains(&permission))
        })
    }

    /// Whether a role of this name exists.
    pub fn exists(&self, name: &str) -> bool {
        self.read_roles().contains_key(name)
    }

    /// The names of a role and of every role granted to it, directly or not: the roles whose
    /// permissions it holds. Empty if it does not exist.
    pub fn role_names_of(&self, name: &str) -> BTreeSet<String> {
        self.roles_of(&self.read_roles(), name)
            .into_iter()
            .map(|r| r.name.clone())
            .collect()
    }

    /// GRANT role TO grantee; the caller has checked that `by` may. Refuses a grant that would
    /// make a cycle, with Cassandra's messages.
    pub fn grant_role(&self, role: &str, grantee: &str) -> Result<(), RoleError> {
        let mut roles = self.write_roles();
        for name in [role, grantee] {
            if !roles.contains_key(name) {
                return Err(RoleError::NotFound {
                    role: name.to_string(),
                });
            }
        }
        // Already granted, directly or through another role, or the grantee is itself
        // granted to `role`: either way the graph would gain a redundant edge or a cycle.
        if self.roles_of(&roles, grantee).iter().any(|r| r.name == role) {
            return Err(RoleError::MemberOf {
                member: grantee.to_string(),
                of: role.to_string(),
            });
        }
        if self.roles_of(&roles, role).iter().any(|r| r.name == grantee) {
            return Err(RoleError::MemberOf {
                member: role.to_string(),
                of: grantee.to_string(),
            });
        }
        let before = roles.clone();
        if let Some(g) = roles.get_mut(grantee) {
            g.member_of.insert(role.to_string());
        }
        if let Err(e) = self.save(&roles) {
            *roles = before;
            return Err(e.into());
        }
        Ok(())
    }

    /// REVOKE role FROM revokee; the caller has checked that `by` may.
    pub fn revoke_role(&self, role: &str, revokee: &str) -> Result<(), RoleError> {
        let mut roles = self.write_roles();
        for name in [role, revokee] {
            if !roles.contains_key(name) {
                return Err(RoleError::NotFound {
                    role: name.to_string(),
                });
            }
        }
        let before = roles.clone();
        let removed = roles.get_mut(revokee).is_some_and(|r| r.member_of.remove(role));
        if !removed {
            return Err(RoleError::NotMember {
                member: revokee.to_string(),
                of: role.to_string(),
            });
        }
        if let Err(e) = self.save(&roles) {
            *roles = before;
            return Err(e.into());
        }
        Ok(())
    }

    /// A role and every role granted to it, directly or not; empty if it does not exist.
    fn roles_of<'a>(&self, roles: &'a BTreeMap<String, Role>, name: &str) -> Vec<&'a Role> {
        let mut found: Vec<&Role> = Vec::new();
        let mut pending = vec![name];
        while let Some(next) = pending.pop() {
            if found.iter().any(|r| r.name == next) {
                continue;
            }
            if let Some(role) = roles.get(next) {
                found.push(role);
                pending.extend(role.member_of.iter().map(String::as_str));
            }
        }
        found
    }

    fn read_roles(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Role>> {
        // Every writer leaves the map consistent before it can panic (it restores it when
        // the save fails), so a poisoned lock still guards good data.
        self.roles.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_roles(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Role>> {
        self.roles.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A role and the roles granted to it directly.
fn direct_roles_of<'a>(roles: &'a BTreeMap<String, Role>, name: &str) -> Vec<&'a Role> {
    let Some(role) = roles.get(name) else {
        return Vec::new();
    };
    let mut found = vec![role];
    found.extend(role.member_of.iter().filter_map(|m| roles.get(m)));
    found
}

fn check_name(name: &str) -> Result<(), RoleError> {
    if name.is_empty() {
        return Err(RoleError::EmptyName);
    }
    if name.len() > ROLE_NAME_MAX_BYTES {
        return Err(RoleError::TooLong {
            what: "role name",
            len_bytes: name.len(),
            max_bytes: ROLE_NAME_MAX_BYTES,
        });
    }
    Ok(())
}

fn check_password(options: &RoleOptions) -> Result<(), RoleError> {
    match &options.password {
        Some(password) if password.len() > PASSWORD_MAX_BYTES => Err(RoleError::TooLong {
            what: "password",
            len_bytes: password.len(),
            max_bytes: PASSWORD_MAX_BYTES,
        }),
        _ => Ok(()),
    }
}

/// Cassandra's built-in role manager supports PASSWORD only with PasswordAuthenticator (an
/// anonymous caller means AllowAllAuthenticator), and never OPTIONS.
fn check_supported(options: &RoleOptions, anonymous: bool) -> Result<(), RoleError> {
    if anonymous && options.password.is_some() {
        return Err(RoleError::UnsupportedOption { option: "PASSWORD" });
    }
    if options.options.is_some() {
        return Err(RoleError::UnsupportedOption { option: "OPTIONS" });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
