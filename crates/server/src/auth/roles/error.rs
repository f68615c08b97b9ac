//! Why the roles file could not be read or written, and why a role statement was refused.

use std::fmt;
use std::io;
use std::path::PathBuf;

use hayate_cql::error::ErrorCode;

use super::{ROLES_MAX, ROLE_MANAGER_CLASS};

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
