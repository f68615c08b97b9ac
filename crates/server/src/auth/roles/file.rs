//! The roles file: read whole at startup, rewritten whole and atomically on every change.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use argon2::password_hash::PasswordHash;
use hayate_storage::files::write_atomically;
use serde::{Deserialize, Serialize};

use super::{Role, RoleStore, RoleStoreError, ROLES_FILE_MAX_BYTES, ROLES_FILE_VERSION};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RolesFile {
    version: u32,
    roles: Vec<Role>,
}

impl RoleStore {
    /// Rewrites the file atomically. The caller holds the write lock.
    pub(super) fn save(&self, roles: &BTreeMap<String, Role>) -> Result<(), RoleStoreError> {
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
}

/// Reads the roles file; `None` if it does not exist.
pub(super) fn read_roles_file(path: &Path) -> Result<Option<BTreeMap<String, Role>>, RoleStoreError> {
    let read_error = |source| RoleStoreError::Read {
        path: path.to_path_buf(),
        source,
    };
    let corrupt = |reason: String| RoleStoreError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let file: RolesFile = match crate::auth::read_json_file(path, ROLES_FILE_MAX_BYTES) {
        Ok(Some(file)) => file,
        Ok(None) => return Ok(None),
        Err(crate::auth::JsonFileError::Read(source)) => return Err(read_error(source)),
        Err(crate::auth::JsonFileError::Corrupt(reason)) => return Err(corrupt(reason)),
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
