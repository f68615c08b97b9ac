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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use hayate_cql::error::ErrorCode;
use hayate_storage::files::write_atomically;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::permissions::{Permission, PermissionStore, Resource};
use super::{AuthError, AuthenticatedRole};

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

/// The cost of a stored password hash. A hash records its own cost, so changing this affects
/// only passwords set afterwards; old hashes still verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashCost {
    pub memory_kib: u32,
    pub iterations: u32,
}

impl HashCost {
    /// OWASP's recommended argon2id cost (19 MiB, 2 passes): about 25 ms per check on a
    /// current x86 core in a release build.
    pub const DEFAULT: HashCost = HashCost {
        memory_kib: 19 * 1024,
        iterations: 2,
    };

    /// For tests, which run unoptimised and hash many passwords.
    #[cfg(test)]
    pub const CHEAP: HashCost = HashCost {
        memory_kib: 64,
        iterations: 1,
    };
}

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

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RolesFile {
    version: u32,
    roles: Vec<Role>,
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

    /// Checks a name and password, as PasswordAuthenticator does, then that the role may log
    /// in. Waits for a permit, then blocks its thread for one password check, unless the login
    /// was verified recently: await it on the blocking pool.
    pub async fn authenticate(&self, name: &str, password: &str) -> Result<AuthenticatedRole, AuthError> {
        let bad_credentials = || AuthError::BadCredentials {
            name: name.to_string(),
        };
        if name.len() > ROLE_NAME_MAX_BYTES || password.len() > PASSWORD_MAX_BYTES {
            return Err(bad_credentials());
        }
        let (stored_hash, login) = match self.read_roles().get(name) {
            Some(role) => (role.salted_hash.clone(), role.login),
            None => (None, false),
        };
        let Some(stored_hash) = stored_hash else {
            self.burn_one_verification(password).await;
            return Err(bad_credentials());
        };

        // The fingerprint costs microseconds: computed outside the cache's lock.
        let cache_key = self.lock_verified().key;
        let fingerprint = fingerprint(&cache_key, name, password);
        let cached = fingerprint
            .as_ref()
            .is_some_and(|f| self.lock_verified().contains(name, f, &stored_hash));
        if !cached {
            if !self.verify(password, &stored_hash).await {
                return Err(bad_credentials());
            }
            if let Some(fingerprint) = fingerprint {
                self.lock_verified().insert(name, fingerprint, stored_hash);
            }
        }
        // Cassandra checks the password first and LOGIN after, so only someone who knows the
        // password learns that the role may not log in.
        if !login {
            return Err(AuthError::LoginNotPermitted {
                name: name.to_string(),
            });
        }
        Ok(AuthenticatedRole::logged_in(name))
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

    async fn verify(&self, password: &str, stored_hash: &str) -> bool {
        let Ok(hash) = PasswordHash::new(stored_hash) else {
            tracing::error!(
                path = %self.path.display(),
                "a role's password hash in the roles file is not a PHC string; reset it with ALTER ROLE"
            );
            return false;
        };
        let _permit = self
            .verifications
            .acquire()
            .await
            .expect("the verification semaphore is never closed");
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    }

    /// Spends the time of one password check without one to check, for unknown names.
    async fn burn_one_verification(&self, password: &str) {
        let dummy = self
            .dummy_hash
            .get_or_init(|| hash_password(DEFAULT_SUPERUSER_PASSWORD, self.hash_cost).ok());
        if let Some(dummy) = dummy {
            let _ = self.verify(password, dummy).await;
        }
    }

    /// Rewrites the file atomically. The caller holds the write lock.
    fn save(&self, roles: &BTreeMap<String, Role>) -> Result<(), RoleStoreError> {
        let file = RolesFile {
            version: ROLES_FILE_VERSION,
            roles: roles.values().cloned().collect(),
        };
        let mut text = serde_json::to_vec_pretty(&file).map_err(|e| RoleStoreError::Write {
            path: self.path.clone(),
            source: io::Error::other(e),
        })?;
        text.push(b'\n');
        write_atomically(&self.path, &text).map_err(|source| RoleStoreError::Write {
            path: self.path.clone(),
            source,
        })
    }

    fn read_roles(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Role>> {
        // Every writer leaves the map consistent before it can panic (it restores it when
        // the save fails), so a poisoned lock still guards good data.
        self.roles.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_roles(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Role>> {
        self.roles.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_verified(&self) -> std::sync::MutexGuard<'_, VerifiedCache> {
        self.verified.lock().unwrap_or_else(PoisonError::into_inner)
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

fn hash_password(password: &str, cost: HashCost) -> Result<String, RoleStoreError> {
    let hash_error = |e: argon2::password_hash::Error| RoleStoreError::Hash {
        reason: e.to_string(),
    };
    let params =
        Params::new(cost.memory_kib, cost.iterations, 1, None).map_err(|e| RoleStoreError::Hash {
            reason: e.to_string(),
        })?;
    let salt = SaltString::encode_b64(&random_bytes::<16>()?).map_err(hash_error)?;
    let hash = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(password.as_bytes(), &salt)
        .map_err(hash_error)?;
    Ok(hash.to_string())
}

/// Random bytes from the kernel, for salts and the cache key. `/dev/urandom` rather than a
/// crate: the server has no random number generator dependency, and on Linux this never
/// blocks once the system has booted.
fn random_bytes<const N: usize>() -> Result<[u8; N], RoleStoreError> {
    let mut bytes = [0u8; N];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|source| RoleStoreError::Random { source })?;
    Ok(bytes)
}

/// Reads the roles file; `None` if it does not exist.
fn read_roles_file(path: &Path) -> Result<Option<BTreeMap<String, Role>>, RoleStoreError> {
    let read_error = |source| RoleStoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let corrupt = |reason: String| RoleStoreError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let file: RolesFile = match super::read_json_file(path, ROLES_FILE_MAX_BYTES) {
        Ok(Some(file)) => file,
        Ok(None) => return Ok(None),
        Err(super::JsonFileError::Read(source)) => return Err(read_error(source)),
        Err(super::JsonFileError::Corrupt(reason)) => return Err(corrupt(reason)),
    };
    if file.version != ROLES_FILE_VERSION {
        return Err(corrupt(format!(
            "it is version {}, and this hayate reads version {ROLES_FILE_VERSION}",
            file.version
        )));
    }
    let mut roles = BTreeMap::new();
    for role in file.roles {
        if let Some(hash) = &role.salted_hash {
            if PasswordHash::new(hash).is_err() {
                return Err(corrupt(format!(
                    "role {}'s salted_hash is not a PHC string",
                    role.name
                )));
            }
        }
        let name = role.name.clone();
        if roles.insert(name.clone(), role).is_some() {
            return Err(corrupt(format!("role {name} appears twice")));
        }
    }
    Ok(Some(roles))
}

/// Logins verified recently, so that a driver opening many connections with the same
/// credentials pays for one password check, not one per connection.
///
/// The trade-off: an entry holds, for `VERIFIED_CACHE_VALIDITY`, a fingerprint of the
/// password that was accepted: argon2id at its minimum cost, keyed with a random key made at
/// startup. Someone who can read the server's memory could test guesses against it far
/// faster than against the stored hash (microseconds rather than tens of milliseconds per
/// guess), though such a reader can also see passwords arrive in connection buffers. Each
/// entry also remembers the stored hash it was checked against, so a changed password or a
/// dropped and recreated role never matches an old entry, and ALTER and DROP remove the entry
/// as well. A wrong password is never cached: every failed attempt costs a full check.
struct VerifiedCache {
    key: [u8; 16],
    entries: HashMap<String, VerifiedLogin>,
}

struct VerifiedLogin {
    fingerprint: [u8; 32],
    stored_hash: String,
    verified_at: Instant,
}

impl VerifiedCache {
    fn new(key: [u8; 16]) -> VerifiedCache {
        VerifiedCache {
            key,
            entries: HashMap::new(),
        }
    }

    fn contains(&self, name: &str, fingerprint: &[u8; 32], stored_hash: &str) -> bool {
        self.entries.get(name).is_some_and(|e| {
            e.fingerprint == *fingerprint
                && e.stored_hash == stored_hash
                && e.verified_at.elapsed() < VERIFIED_CACHE_VALIDITY
        })
    }

    fn insert(&mut self, name: &str, fingerprint: [u8; 32], stored_hash: String) {
        if self.entries.len() >= VERIFIED_CACHE_ENTRIES_MAX && !self.entries.contains_key(name) {
            // Full: forget the oldest. A scan, but only after a full password check.
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.verified_at)
                .map(|(n, _)| n.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(
            name.to_string(),
            VerifiedLogin {
                fingerprint,
                stored_hash,
                verified_at: Instant::now(),
            },
        );
    }

    fn remove(&mut self, name: &str) {
        self.entries.remove(name);
    }
}

/// A password's fingerprint for one role, for [`VerifiedCache`]. `None` if argon2 refuses the
/// input, which only disables the cache for that attempt.
fn fingerprint(key: &[u8; 16], name: &str, password: &str) -> Option<[u8; 32]> {
    let mut salt = Vec::with_capacity(key.len() + name.len());
    salt.extend_from_slice(key);
    salt.extend_from_slice(name.as_bytes());
    let params = Params::new(Params::MIN_M_COST, 1, 1, Some(32)).ok()?;
    let mut out = [0u8; 32];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(password.as_bytes(), &salt, &mut out)
        .ok()?;
    Some(out)
}

/// Why the roles file could not be read or written.
#[derive(Debug)]
#[non_exhaustive]
pub enum RoleStoreError {
    Read { path: PathBuf, source: io::Error },
    Corrupt { path: PathBuf, reason: String },
    Write { path: PathBuf, source: io::Error },
    Random { source: io::Error },
    Hash { reason: String },
}

impl fmt::Display for RoleStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoleStoreError::Read { path, source } => write!(
                f,
                "cannot read the roles file {}: {source} (check its permissions)",
                path.display()
            ),
            RoleStoreError::Corrupt { path, reason } => write!(
                f,
                "the roles file {} is not valid: {reason}; restore it from a backup, or move it away \
                 to start again with only the default superuser cassandra/cassandra",
                path.display()
            ),
            RoleStoreError::Write { path, source } => write!(
                f,
                "cannot save the roles file {}: {source} (check the permissions and free space of the data directory)",
                path.display()
            ),
            RoleStoreError::Random { source } => write!(
                f,
                "cannot read random bytes from /dev/urandom for a password salt: {source}"
            ),
            RoleStoreError::Hash { reason } => write!(f, "cannot hash a password: {reason}"),
        }
    }
}

impl std::error::Error for RoleStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RoleStoreError::Read { source, .. }
            | RoleStoreError::Write { source, .. }
            | RoleStoreError::Random { source } => Some(source),
            RoleStoreError::Corrupt { .. } | RoleStoreError::Hash { .. } => None,
        }
    }
}

/// Why a role statement was refused. Display is Cassandra's message; [`RoleError::code`] is
/// the CQL error code to send with it.
#[derive(Debug)]
#[non_exhaustive]
pub enum RoleError {
    /// Any role statement under AllowAllAuthenticator.
    Anonymous,
    /// A role statement without the permission it needs on the role (CREATE on ALL ROLES,
    /// ALTER or DROP on the role): Cassandra's message for all three.
    InsufficientPrivileges {
        user: String,
    },
    SuperuserRequired {
        message: &'static str,
    },
    OwnSuperuserStatus,
    OptionNotAlterable {
        option: &'static str,
    },
    NotAuthorizedToView {
        role: String,
    },
    UnsupportedOption {
        option: &'static str,
    },
    EmptyName,
    EmptyAlter,
    TooLong {
        what: &'static str,
        len_bytes: usize,
        max_bytes: usize,
    },
    TooManyRoles,
    /// CREATE ROLE of an existing role without IF NOT EXISTS: Invalid (0x2200) in Cassandra,
    /// not AlreadyExists (0x2400), which carries a keyspace and table.
    AlreadyExists {
        role: String,
    },
    NotFound {
        role: String,
    },
    /// LIST ROLES OF a role that does not exist; Cassandra names it as a resource.
    GranteeNotFound {
        role: String,
    },
    DropSelf,
    /// GRANT ROLE that is already in force, directly or not, or would make a cycle.
    MemberOf {
        member: String,
        of: String,
    },
    /// REVOKE ROLE of a role not granted directly.
    NotMember {
        member: String,
        of: String,
    },
    /// The change could not be saved; nothing changed.
    Save(RoleStoreError),
}

impl RoleError {
    pub fn code(&self) -> ErrorCode {
        match self {
            RoleError::Anonymous
            | RoleError::InsufficientPrivileges { .. }
            | RoleError::SuperuserRequired { .. }
            | RoleError::OwnSuperuserStatus
            | RoleError::OptionNotAlterable { .. }
            | RoleError::NotAuthorizedToView { .. } => ErrorCode::Unauthorized,
            RoleError::UnsupportedOption { .. }
            | RoleError::EmptyName
            | RoleError::EmptyAlter
            | RoleError::TooLong { .. }
            | RoleError::TooManyRoles
            | RoleError::AlreadyExists { .. }
            | RoleError::NotFound { .. }
            | RoleError::GranteeNotFound { .. }
            | RoleError::DropSelf
            | RoleError::MemberOf { .. }
            | RoleError::NotMember { .. } => ErrorCode::Invalid,
            RoleError::Save(_) => ErrorCode::ServerError,
        }
    }
}

impl fmt::Display for RoleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoleError::Anonymous => {
                f.write_str("You have to be logged in and not anonymous to perform this request")
            }
            RoleError::InsufficientPrivileges { user } => write!(
                f,
                "User {user} does not have sufficient privileges to perform the requested operation"
            ),
            RoleError::SuperuserRequired { message } => f.write_str(message),
            RoleError::OwnSuperuserStatus => f.write_str(
                "You aren't allowed to alter your own superuser status or that of a role granted to you",
            ),
            RoleError::OptionNotAlterable { option } => write!(f, "You aren't allowed to alter {option}"),
            RoleError::NotAuthorizedToView { role } => {
                write!(f, "You are not authorized to view roles granted to {role} ")
            }
            RoleError::UnsupportedOption { option } => {
                write!(f, "{ROLE_MANAGER_CLASS} doesn't support {option}")
            }
            RoleError::EmptyName => f.write_str("Role name can't be an empty string"),
            RoleError::EmptyAlter => f.write_str("ALTER [ROLE|USER] can't be empty"),
            RoleError::TooLong {
                what,
                len_bytes,
                max_bytes,
            } => write!(
                f,
                "The {what} is {len_bytes} bytes; at most {max_bytes} are allowed"
            ),
            RoleError::TooManyRoles => write!(
                f,
                "Cannot create more than {ROLES_MAX} roles; drop unused roles first"
            ),
            RoleError::AlreadyExists { role } => write!(f, "{role} already exists"),
            RoleError::NotFound { role } => write!(f, "{role} doesn't exist"),
            RoleError::GranteeNotFound { role } => write!(f, "<role {role}> doesn't exist"),
            RoleError::DropSelf => f.write_str("Cannot DROP primary role for current login"),
            RoleError::MemberOf { member, of } => write!(f, "{member} is a member of {of}"),
            RoleError::NotMember { member, of } => write!(f, "{member} is not a member of {of}"),
            RoleError::Save(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RoleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RoleError::Save(e) => Some(e),
            _ => None,
        }
    }
}

impl From<RoleStoreError> for RoleError {
    fn from(e: RoleStoreError) -> RoleError {
        RoleError::Save(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::block_on;
    use std::fs;

    fn open(dir: &Path) -> RoleStore {
        RoleStore::open_with_cost(&dir.join("roles.json"), true, HashCost::CHEAP).expect("open roles")
    }

    fn login(store: &RoleStore, name: &str, password: &str) -> AuthenticatedRole {
        block_on(store.authenticate(name, password)).expect("login")
    }

    fn with_password(password: &str, login: bool, superuser: bool) -> RoleOptions {
        RoleOptions {
            password: Some(password.to_string()),
            login: Some(login),
            superuser: Some(superuser),
            options: None,
        }
    }

    #[test]
    fn the_default_superuser_is_created_once_and_survives_restarts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = open(dir.path());
        let admin = login(&store, "cassandra", "cassandra");
        assert!(store.is_superuser(&admin));

        // Changing the default password must stick: a restart must not put it back.
        store
            .alter_role(
                &admin,
                "cassandra",
                RoleOptions {
                    password: Some("n3w".into()),
                    ..RoleOptions::default()
                },
            )
            .expect("change own password");
        drop(store);
        let store = open(dir.path());
        assert!(matches!(
            block_on(store.authenticate("cassandra", "cassandra")),
            Err(AuthError::BadCredentials { .. })
        ));
        let admin = login(&store, "cassandra", "n3w");

        // Nor may a dropped default role come back.
        store
            .create_role(&admin, "root", with_password("pw", true, true), false)
            .expect("create superuser");
        let root = login(&store, "root", "pw");
        store.drop_role(&root, "cassandra", false).expect("drop default");
        drop(store);
        let store = open(dir.path());
        assert!(!store.exists("cassandra"));
        assert!(store.exists("root"));
    }

    #[test]
    fn without_create_default_a_new_store_is_empty() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("roles.json");
        let store = RoleStore::open_with_cost(&path, false, HashCost::CHEAP).expect("open");
        assert!(!store.exists("cassandra"));
        assert!(!path.exists());
    }

    #[test]
    fn logins_need_the_right_password_and_the_login_option() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = open(dir.path());
        let admin = login(&store, "cassandra", "cassandra");
        store
            .create_role(&admin, "alice", with_password("a", true, false), false)
            .expect("create alice");
        store
            .create_role(&admin, "app", with_password("b", false, false), false)
            .expect("create app");
        store
            .create_role(
                &admin,
                "nopw",
                RoleOptions {
                    login: Some(true),
                    ..RoleOptions::default()
                },
                false,
            )
            .expect("create role without password");

        let alice = login(&store, "alice", "a");
        assert_eq!(alice.name(), "alice");
        assert!(!store.is_superuser(&alice));
        // A second login is served from the cache and must give the same answer.
        assert_eq!(login(&store, "alice", "a"), alice);

        for (name, password) in [("alice", "wrong"), ("alice", ""), ("nobody", "a"), ("nopw", "")] {
            let err = block_on(store.authenticate(name, password)).expect_err("must fail");
            assert_eq!(
                err.to_string(),
                format!("Provided username {name} and/or password are incorrect")
            );
            assert_eq!(err.code(), ErrorCode::AuthenticationError);
        }
        // The right password of a NOLOGIN role.
        let err = block_on(store.authenticate("app", "b")).expect_err("NOLOGIN");
        assert_eq!(err.to_string(), "app is not permitted to log in");
        // The wrong password of a NOLOGIN role does not reveal that it is NOLOGIN.
        let err = block_on(store.authenticate("app", "x")).expect_err("wrong password");
        assert!(matches!(err, AuthError::BadCredentials { .. }));
    }

    #[test]
    fn a_changed_password_is_not_served_from_the_cache() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = open(dir.path());
        let admin = login(&store, "cassandra", "cassandra");
        store
            .create_role(&admin, "alice", with_password("old", true, false), false)
            .expect("create alice");
        login(&store, "alice", "old");
        store
            .alter_role(
                &admin,
                "alice",
                RoleOptions {
                    password: Some("new".into()),
                    ..RoleOptions::default()
                },
            )
            .expect("reset password");
        assert!(block_on(store.authenticate("alice", "old")).is_err());
        login(&store, "alice", "new");

        // LOGIN revoked after a cached login applies at once.
        store
            .alter_role(
                &admin,
                "alice",
                RoleOptions {
                    login: Some(false),
                    ..RoleOptions::default()
                },
            )
            .expect("revoke login");
        assert!(matches!(
            block_on(store.authenticate("alice", "new")),
            Err(AuthError::LoginNotPermitted { .. })
        ));

        // Dropped and recreated with another password.
        store.drop_role(&admin, "alice", false).expect("drop");
        assert!(block_on(store.authenticate("alice", "new")).is_err());
        store
            .create_role(&admin, "alice", with_password("third", true, false), false)
            .expect("recreate");
        assert!(block_on(store.authenticate("alice", "new")).is_err());
        login(&store, "alice", "third");
    }

    #[test]
    fn only_superusers_manage_roles_and_a_role_may_change_its_own_password() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = open(dir.path());
        let admin = login(&store, "cassandra", "cassandra");
        store
            .create_role(&admin, "alice", with_password("a", true, false), false)
            .expect("create alice");
        store
            .create_role(&admin, "bob", with_password("b", true, false), false)
            .expect("create bob");
        let alice = login(&store, "alice", "a");

        let refused = |result: Result<(), RoleError>, code: ErrorCode, message: &str| {
            let err = result.expect_err(message);
            assert_eq!(err.to_string(), message);
            assert_eq!(err.code(), code);
        };
        use ErrorCode::{Invalid, Unauthorized};
        refused(
            store.create_role(&alice, "carol", with_password("c", true, false), false),
            Unauthorized,
            "User alice does not have sufficient privileges to perform the requested operation",
        );
        refused(
            store.create_role(&alice, "mallory", with_password("m", true, true), false),
            Unauthorized,
            "Only superusers can create a role with superuser status",
        );
        refused(
            store.drop_role(&alice, "bob", false),
            Unauthorized,
            "User alice does not have sufficient privileges to perform the requested operation",
        );
        refused(
            store.alter_role(
                &alice,
                "bob",
                RoleOptions {
                    password: Some("mine now".into()),
                    ..RoleOptions::default()
                },
            ),
            Unauthorized,
            "User alice does not have sufficient privileges to perform the requested operation",
        );
        refused(
            store.alter_role(
                &alice,
                "alice",
                RoleOptions {
                    superuser: Some(true),
                    ..RoleOptions::default()
                },
            ),
            Unauthorized,
            "You aren't allowed to alter your own superuser status or that of a role granted to you",
        );
        refused(
            store.alter_role(
                &alice,
                "bob",
                RoleOptions {
                    superuser: Some(true),
                    ..RoleOptions::default()
                },
            ),
            Unauthorized,
            "Only superusers are allowed to alter superuser status",
        );
        refused(
            store.alter_role(
                &alice,
                "alice",
                RoleOptions {
                    login: Some(false),
                    ..RoleOptions::default()
                },
            ),
            Unauthorized,
            "You aren't allowed to alter LOGIN",
        );
        refused(
            store.drop_role(&alice, "alice", false),
            Invalid,
            "Cannot DROP primary role for current login",
        );
        refused(
            store.alter_role(&alice, "alice", RoleOptions::default()),
            Invalid,
            "ALTER [ROLE|USER] can't be empty",
        );
        store
            .alter_role(
                &alice,
                "alice",
                RoleOptions {
                    password: Some("a2".into()),
                    ..RoleOptions::default()
                },
            )
            .expect("a role may change its own password");
        login(&store, "alice", "a2");

        // What superusers are refused.
        refused(
            store.create_role(&admin, "bob", RoleOptions::default(), false),
            Invalid,
            "bob already exists",
        );
        store
            .create_role(&admin, "bob", RoleOptions::default(), true)
            .expect("IF NOT EXISTS");
        refused(
            store.drop_role(&admin, "nobody", false),
            Invalid,
            "nobody doesn't exist",
        );
        store.drop_role(&admin, "nobody", true).expect("IF EXISTS");
        refused(
            store.alter_role(
                &admin,
                "nobody",
                RoleOptions {
                    login: Some(true),
                    ..RoleOptions::default()
                },
            ),
            Invalid,
            "nobody doesn't exist",
        );
        refused(
            store.create_role(&admin, "", RoleOptions::default(), false),
            Invalid,
            "Role name can't be an empty string",
        );
        refused(
            store.create_role(
                &admin,
                "x",
                RoleOptions {
                    options: Some(BTreeMap::new()),
                    ..RoleOptions::default()
                },
                false,
            ),
            Invalid,
            "org.apache.cassandra.auth.CassandraRoleManager doesn't support OPTIONS",
        );
        refused(
            store.alter_role(
                &admin,
                "cassandra",
                RoleOptions {
                    superuser: Some(false),
                    ..RoleOptions::default()
                },
            ),
            Unauthorized,
            "You aren't allowed to alter your own superuser status or that of a role granted to you",
        );

        // A superuser made by ALTER may then manage roles.
        store
            .alter_role(
                &admin,
                "bob",
                RoleOptions {
                    superuser: Some(true),
                    ..RoleOptions::default()
                },
            )
            .expect("promote bob");
        let bob = login(&store, "bob", "b");
        assert!(store.is_superuser(&bob));
        store.drop_role(&bob, "alice", false).expect("bob drops alice");
    }

    #[test]
    fn list_roles_shows_superusers_everything_and_others_themselves() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = open(dir.path());
        let admin = login(&store, "cassandra", "cassandra");
        store
            .create_role(&admin, "bob", with_password("b", true, false), false)
            .expect("create bob");
        store
            .create_role(&admin, "alice", with_password("a", false, true), false)
            .expect("create alice");

        let all = store.list_roles(&admin, None).expect("list all");
        let names: Vec<&str> = all.iter().map(|r| r.role.as_str()).collect();
        assert_eq!(names, ["alice", "bob", "cassandra"]);
        assert_eq!(
            all[0],
            RoleRow {
                role: "alice".into(),
                superuser: true,
                login: false,
                options: BTreeMap::new(),
                datacenters: "ALL".into(),
            }
        );
        assert_eq!(store.list_roles(&admin, Some("bob")).expect("of bob").len(), 1);

        let bob = login(&store, "bob", "b");
        let own = store.list_roles(&bob, None).expect("list own");
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].role, "bob");
        assert_eq!(store.list_roles(&bob, Some("bob")).expect("of self").len(), 1);
        let err = store
            .list_roles(&bob, Some("alice"))
            .expect_err("another's roles");
        assert_eq!(
            err.to_string(),
            "You are not authorized to view roles granted to alice "
        );
        assert_eq!(err.code(), ErrorCode::Unauthorized);
        let err = store
            .list_roles(&admin, Some("nobody"))
            .expect_err("no such role");
        assert_eq!(err.to_string(), "<role nobody> doesn't exist");
    }

    #[test]
    fn anonymous_sessions_get_cassandras_allow_all_answers() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = open(dir.path());
        let anonymous = AuthenticatedRole::anonymous();
        assert!(!store.is_superuser(&anonymous));
        let message = |e: RoleError| (e.code(), e.to_string());
        assert_eq!(
            message(
                store
                    .create_role(&anonymous, "alice", RoleOptions::default(), false)
                    .expect_err("create")
            ),
            (
                ErrorCode::Unauthorized,
                "You have to be logged in and not anonymous to perform this request".into()
            )
        );
        assert_eq!(
            message(
                store
                    .create_role(&anonymous, "alice", with_password("a", true, false), false)
                    .expect_err("create with password")
            ),
            (
                ErrorCode::Invalid,
                "org.apache.cassandra.auth.CassandraRoleManager doesn't support PASSWORD".into()
            )
        );
        assert_eq!(
            message(
                store
                    .create_role(&anonymous, "alice", with_password("a", true, true), false)
                    .expect_err("create superuser")
            ),
            (
                ErrorCode::Unauthorized,
                "Only superusers can create a role with superuser status".into()
            )
        );
        assert_eq!(
            message(store.list_roles(&anonymous, None).expect_err("list")).0,
            ErrorCode::Unauthorized
        );
        assert_eq!(
            message(store.drop_role(&anonymous, "cassandra", false).expect_err("drop")).0,
            ErrorCode::Unauthorized
        );
        assert!(store.exists("cassandra"));
    }

    #[test]
    fn the_file_holds_hashes_never_passwords() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = open(dir.path());
        let admin = login(&store, "cassandra", "cassandra");
        let password = "correct horse battery staple";
        store
            .create_role(&admin, "alice", with_password(password, true, false), false)
            .expect("create alice");
        let text = fs::read_to_string(dir.path().join("roles.json")).expect("read file");
        assert!(!text.contains(password), "{text}");
        assert!(text.contains("$argon2id$"), "{text}");
        // The default password "cassandra" is also the role's name; it may appear only as one.
        let mentions = text.matches("cassandra").count();
        assert_eq!(mentions, 1, "{text}");
        assert!(!dir.path().join("roles.json.tmp").exists());
        // Debug output of options hides the password too.
        let shown = format!("{:?}", with_password(password, true, false));
        assert!(!shown.contains(password), "{shown}");
    }

    #[test]
    fn a_damaged_file_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("roles.json");
        for text in [
            "{ not json",
            "{\"version\": 2, \"roles\": []}",
            "{\"version\": 1, \"roles\": [{\"name\": \"a\", \"salted_hash\": \"plaintext\", \"login\": true, \"superuser\": false}]}",
        ] {
            fs::write(&path, text).expect("write file");
            let err = RoleStore::open_with_cost(&path, true, HashCost::CHEAP)
                .err()
                .expect("damaged file refused");
            let message = err.to_string();
            assert!(message.contains("roles.json") && message.contains("backup"), "{message}");
        }
    }

    #[test]
    fn the_default_cost_takes_the_intended_memory() {
        // A guard against an edit that weakens the stored hashes: the PHC string records the
        // cost, and it must be at least OWASP's recommendation.
        let hash = hash_password("x", HashCost::DEFAULT).expect("hash");
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{hash}");
    }
}
