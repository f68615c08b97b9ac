//! Passwords: their argon2id hashes and cost, the check a login makes (bounded by
//! [`VERIFICATIONS_IN_FLIGHT_MAX`] permits), and the cache of logins verified recently.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::sync::PoisonError;
use std::time::Instant;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

use super::{
    RoleStore, RoleStoreError, DEFAULT_SUPERUSER_PASSWORD, PASSWORD_MAX_BYTES, ROLE_NAME_MAX_BYTES,
    VERIFIED_CACHE_ENTRIES_MAX, VERIFIED_CACHE_VALIDITY,
};
use crate::auth::{AuthError, AuthenticatedRole};

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

impl RoleStore {
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

    pub(super) fn lock_verified(&self) -> std::sync::MutexGuard<'_, VerifiedCache> {
        self.verified.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) fn hash_password(password: &str, cost: HashCost) -> Result<String, RoleStoreError> {
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
pub(super) fn random_bytes<const N: usize>() -> Result<[u8; N], RoleStoreError> {
    let mut bytes = [0u8; N];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|source| RoleStoreError::Random { source })?;
    Ok(bytes)
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
pub(super) struct VerifiedCache {
    key: [u8; 16],
    entries: HashMap<String, VerifiedLogin>,
}

struct VerifiedLogin {
    fingerprint: [u8; 32],
    stored_hash: String,
    verified_at: Instant,
}

impl VerifiedCache {
    pub(super) fn new(key: [u8; 16]) -> VerifiedCache {
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

    pub(super) fn remove(&mut self, name: &str) {
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
