use hayate_cql::error::ErrorCode;

use super::*;
use crate::auth::block_on;
use crate::auth::AuthError;
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
