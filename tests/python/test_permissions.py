"""GRANT, REVOKE and LIST PERMISSIONS with CassandraAuthorizer, and the checks it makes.

A node started with `authenticator = "PasswordAuthenticator"` and `authorizer =
"CassandraAuthorizer"` checks every statement against the permissions granted to the logged-in
role and to the roles granted to it, on the table, its keyspace or all keyspaces. The messages
and LIST PERMISSIONS rows are Cassandra 5.0's: `HAYATE_REFERENCE_AUTHZ=host:port` runs the
shared-node tests here against a Cassandra started with those two settings.
"""

import os
import time

import pytest
from cassandra import InvalidRequest, Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import NoHostAvailable
from cassandra.protocol import SyntaxException

from conftest import RUN_ID

REFERENCE_AUTHZ = os.environ.get("HAYATE_REFERENCE_AUTHZ")


@pytest.fixture(scope="module")
def authz_node():
    from hayate_node import ExternalNode, Node

    if REFERENCE_AUTHZ:
        yield ExternalNode(REFERENCE_AUTHZ)
        return
    if os.environ.get("HAYATE_REFERENCE"):
        pytest.skip("needs a node started with CassandraAuthorizer (HAYATE_REFERENCE_AUTHZ)")
    n = Node("authz", authenticator="PasswordAuthenticator", authorizer="CassandraAuthorizer")
    n.start()
    yield n
    n.discard()


def login(node, user, password):
    return node.connect(auth_provider=PlainTextAuthProvider(user, password))


@pytest.fixture(scope="module")
def admin(authz_node):
    cluster, session = login(authz_node, "cassandra", "cassandra")
    yield session
    cluster.shutdown()


_names = iter(range(1_000_000))


def name(prefix):
    """A role or keyspace name of its own for each use, so that a reference server (which keeps
    everything between runs) and the tests of one module never meet each other's."""
    return f"{prefix}_{RUN_ID}_{next(_names)}"


@pytest.fixture
def ks(admin):
    keyspace = name("perm")
    admin.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    )
    admin.execute(f"CREATE TABLE {keyspace}.t1 (k int PRIMARY KEY, v int)")
    admin.execute(f"CREATE TABLE {keyspace}.t2 (k int PRIMARY KEY, v int)")
    yield keyspace
    admin.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")


class User:
    """A login role and one session as it."""

    def __init__(self, node, admin, prefix="user"):
        self.name = name(prefix)
        self.admin = admin
        admin.execute(f"CREATE ROLE {self.name} WITH PASSWORD = 'pw' AND LOGIN = true")
        self.cluster, self.session = login(node, self.name, "pw")

    def close(self):
        self.cluster.shutdown()
        self.admin.execute(f"DROP ROLE IF EXISTS {self.name}")


@pytest.fixture
def alice(authz_node, admin):
    u = User(authz_node, admin, "alice")
    yield u
    u.close()


@pytest.fixture
def bob(authz_node, admin):
    u = User(authz_node, admin, "bob")
    yield u
    u.close()


# Cassandra caches roles and permissions for up to 2 s (roles_validity, permissions_validity),
# so on a reference server a GRANT or REVOKE may take that long to apply; hayate applies it at
# once. The helpers below wait that long for the expected answer, no longer.
CACHE_VALIDITY_S = 5.0


def allowed(session, cql, params=None):
    """The statement runs, once the permission just granted applies."""
    deadline = time.monotonic() + CACHE_VALIDITY_S
    while True:
        try:
            return session.execute(cql, params)
        except Unauthorized:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def refused(session, cql, message, params=None):
    """The statement fails with Unauthorized (0x2100) and exactly Cassandra's message, once
    the permission just revoked no longer applies."""
    deadline = time.monotonic() + CACHE_VALIDITY_S
    while True:
        try:
            session.execute(cql, params)
        except Unauthorized as e:
            assert "code=2100" in str(e), e
            assert message in str(e), e
            return
        assert time.monotonic() < deadline, f"{cql!r} still runs"
        time.sleep(0.25)


def no_permission(user, permission, resource):
    return f"User {user} has no {permission} permission on {resource} or any of its parents"


def rows(result):
    return [tuple(r) for r in result]


def test_select_and_modify_need_grants_on_the_table_or_a_parent(admin, alice, ks):
    s = alice.session
    refused(s, f"SELECT * FROM {ks}.t1", no_permission(alice.name, "SELECT", f"<table {ks}.t1>"))
    admin.execute(f"GRANT SELECT ON TABLE {ks}.t1 TO {alice.name}")
    assert rows(allowed(s, f"SELECT * FROM {ks}.t1")) == []
    refused(s, f"SELECT * FROM {ks}.t2", no_permission(alice.name, "SELECT", f"<table {ks}.t2>"))

    # A grant on the keyspace covers its tables.
    admin.execute(f"GRANT SELECT ON KEYSPACE {ks} TO {alice.name}")
    assert rows(allowed(s, f"SELECT * FROM {ks}.t2")) == []

    for cql in [
        f"INSERT INTO {ks}.t1 (k, v) VALUES (1, 1)",
        f"UPDATE {ks}.t1 SET v = 2 WHERE k = 1",
        f"DELETE FROM {ks}.t1 WHERE k = 1",
        f"TRUNCATE {ks}.t1",
        f"BEGIN BATCH INSERT INTO {ks}.t1 (k, v) VALUES (1, 1); APPLY BATCH",
    ]:
        refused(s, cql, no_permission(alice.name, "MODIFY", f"<table {ks}.t1>"))

    # And one on all keyspaces covers everything.
    admin.execute(f"GRANT MODIFY ON ALL KEYSPACES TO {alice.name}")
    allowed(s, f"INSERT INTO {ks}.t1 (k, v) VALUES (1, 1)")
    s.execute(f"BEGIN BATCH INSERT INTO {ks}.t2 (k, v) VALUES (2, 2); APPLY BATCH")
    assert rows(s.execute(f"SELECT k, v FROM {ks}.t1")) == [(1, 1)]

    admin.execute(f"REVOKE MODIFY ON ALL KEYSPACES FROM {alice.name}")
    refused(s, f"INSERT INTO {ks}.t1 (k, v) VALUES (3, 3)", no_permission(alice.name, "MODIFY", f"<table {ks}.t1>"))
    admin.execute(f"REVOKE SELECT ON KEYSPACE {ks} FROM {alice.name}")
    refused(s, f"SELECT * FROM {ks}.t2", no_permission(alice.name, "SELECT", f"<table {ks}.t2>"))
    # (On a reference server the refused INSERT may have run while the revoke was cached.)
    assert (1,) in rows(s.execute(f"SELECT k FROM {ks}.t1"))


def test_a_missing_table_is_reported_before_permissions(alice, ks):
    with pytest.raises(InvalidRequest, match="nope does not exist"):
        alice.session.execute(f"SELECT * FROM {ks}.nope")


def test_system_tables_drivers_read_need_no_grant(alice):
    s = alice.session
    assert s.execute("SELECT release_version FROM system.local").one() is not None
    s.execute("SELECT * FROM system.peers")
    s.execute("SELECT keyspace_name FROM system_schema.keyspaces")
    s.execute("SELECT * FROM system_schema.tables")


def test_permissions_are_inherited_through_granted_roles(admin, alice, ks):
    readers, staff = name("readers"), name("staff")
    admin.execute(f"CREATE ROLE {readers}")
    admin.execute(f"CREATE ROLE {staff}")
    try:
        admin.execute(f"GRANT SELECT ON KEYSPACE {ks} TO {readers}")
        admin.execute(f"GRANT {readers} TO {staff}")
        admin.execute(f"GRANT {staff} TO {alice.name}")
        assert rows(allowed(alice.session, f"SELECT * FROM {ks}.t1")) == []

        listed = [r.role for r in admin.execute(f"LIST ROLES OF {alice.name}")]
        assert listed == sorted([alice.name, readers, staff])
        direct = [r.role for r in admin.execute(f"LIST ROLES OF {alice.name} NORECURSIVE")]
        assert direct == sorted([alice.name, staff])

        # No cycles, and no grant that is in force already.
        with pytest.raises(InvalidRequest, match=f"{alice.name} is a member of {readers}"):
            admin.execute(f"GRANT {alice.name} TO {readers}")
        with pytest.raises(InvalidRequest, match=f"{staff} is a member of {staff}"):
            admin.execute(f"GRANT {staff} TO {staff}")
        with pytest.raises(InvalidRequest, match=f"{alice.name} is a member of {readers}"):
            admin.execute(f"GRANT {readers} TO {alice.name}")
        with pytest.raises(InvalidRequest, match=f"{alice.name} is not a member of {readers}"):
            admin.execute(f"REVOKE {readers} FROM {alice.name}")
        with pytest.raises(InvalidRequest, match=f"nope_{RUN_ID} doesn't exist"):
            admin.execute(f"GRANT nope_{RUN_ID} TO {alice.name}")

        admin.execute(f"REVOKE {staff} FROM {alice.name}")
        refused(alice.session, f"SELECT * FROM {ks}.t1", no_permission(alice.name, "SELECT", f"<table {ks}.t1>"))
    finally:
        admin.execute(f"DROP ROLE IF EXISTS {staff}")
        admin.execute(f"DROP ROLE IF EXISTS {readers}")


def test_list_permissions_shows_cassandras_rows(admin, alice, ks):
    group = name("group")
    admin.execute(f"CREATE ROLE {group}")
    try:
        admin.execute(f"GRANT SELECT ON TABLE {ks}.t1 TO {alice.name}")
        admin.execute(f"GRANT MODIFY ON KEYSPACE {ks} TO {group}")
        admin.execute(f"GRANT ALL PERMISSIONS ON TABLE {ks}.t2 TO {alice.name}")
        admin.execute(f"GRANT {group} TO {alice.name}")

        result = admin.execute(f"LIST ALL PERMISSIONS OF {alice.name}")
        assert result.column_names == ["role", "username", "resource", "permission"]
        a, g = alice.name, group
        t2_all = ["ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE", "UNMASK", "SELECT_MASKED"]
        # Sorted by role, then resource (<keyspace ks> before <table ks.t1>), then permission
        # in Cassandra's order; the roles granted to alice are listed too.
        expected = sorted(
            [(a, a, f"<table {ks}.t1>", "SELECT")]
            + [(a, a, f"<table {ks}.t2>", p) for p in t2_all]
            + [(g, g, f"<keyspace {ks}>", "MODIFY")],
            key=lambda r: r[0],
        )
        assert rows(result) == expected

        # On a table: that table's and its parents' grants, unless NORECURSIVE.
        assert rows(admin.execute(f"LIST ALL PERMISSIONS ON TABLE {ks}.t1 OF {alice.name}")) == sorted(
            [(a, a, f"<table {ks}.t1>", "SELECT"), (g, g, f"<keyspace {ks}>", "MODIFY")],
            key=lambda r: r[0],
        )
        assert rows(admin.execute(f"LIST ALL PERMISSIONS ON TABLE {ks}.t1 OF {alice.name} NORECURSIVE")) == [
            (a, a, f"<table {ks}.t1>", "SELECT")
        ]
        assert rows(admin.execute(f"LIST SELECT PERMISSION ON TABLE {ks}.t2 OF {alice.name} NORECURSIVE")) == [
            (a, a, f"<table {ks}.t2>", "SELECT")
        ]
        # Without OF: every role's grants on the resource, the creator's too.
        everyone = rows(admin.execute(f"LIST ALL PERMISSIONS ON KEYSPACE {ks} NORECURSIVE"))
        assert (g, g, f"<keyspace {ks}>", "MODIFY") in everyone
        assert ("cassandra", "cassandra", f"<keyspace {ks}>", "CREATE") in everyone

        # A role may list its own permissions and those of its roles, not another's.
        assert rows(allowed(alice.session, f"LIST ALL PERMISSIONS OF {group}")) == [(g, g, f"<keyspace {ks}>", "MODIFY")]
        refused(alice.session, "LIST ALL PERMISSIONS OF cassandra", "You are not authorized to view cassandra's permissions")
        refused(alice.session, "LIST ALL PERMISSIONS", "You are not authorized to view everyone's permissions")

        with pytest.raises(InvalidRequest, match=f"<role nope_{RUN_ID}> doesn't exist"):
            admin.execute(f"LIST ALL PERMISSIONS OF nope_{RUN_ID}")
        with pytest.raises(InvalidRequest, match=f"<keyspace nope_{RUN_ID}> doesn't exist"):
            admin.execute(f"LIST ALL PERMISSIONS ON KEYSPACE nope_{RUN_ID}")
    finally:
        admin.execute(f"DROP ROLE IF EXISTS {group}")


def test_schema_statements_need_create_alter_drop_and_creators_own_what_they_make(admin, alice, ks):
    s, a = alice.session, alice.name
    mine = name("mine")
    create_ks = f"CREATE KEYSPACE {mine} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    refused(s, create_ks, no_permission(a, "CREATE", "<all keyspaces>"))
    refused(s, f"CREATE TABLE {ks}.t3 (k int PRIMARY KEY)", no_permission(a, "CREATE", f"<all tables in {ks}>"))
    refused(s, f"ALTER TABLE {ks}.t1 ADD w int", no_permission(a, "ALTER", f"<table {ks}.t1>"))
    refused(s, f"DROP TABLE {ks}.t1", no_permission(a, "DROP", f"<table {ks}.t1>"))
    refused(s, f"DROP TABLE IF EXISTS {ks}.nope", no_permission(a, "DROP", f"<table {ks}.nope>"))
    refused(
        s,
        f"ALTER KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
        no_permission(a, "ALTER", f"<keyspace {ks}>"),
    )
    refused(s, f"DROP KEYSPACE {ks}", no_permission(a, "DROP", f"<keyspace {ks}>"))

    admin.execute(f"GRANT CREATE ON ALL KEYSPACES TO {a}")
    try:
        allowed(s, create_ks)
        # The creator holds every permission on what it made, and so may use it at once.
        owned = rows(admin.execute(f"LIST ALL PERMISSIONS ON KEYSPACE {mine} OF {a} NORECURSIVE"))
        assert [r[3] for r in owned] == [
            "CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE", "UNMASK", "SELECT_MASKED"
        ]
        s.execute(f"CREATE TABLE {mine}.t (k int PRIMARY KEY, v int)")
        assert [r[3] for r in admin.execute(f"LIST ALL PERMISSIONS ON TABLE {mine}.t OF {a} NORECURSIVE")] == [
            "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE", "UNMASK", "SELECT_MASKED"
        ]
        s.execute(f"INSERT INTO {mine}.t (k, v) VALUES (1, 1)")
        assert rows(s.execute(f"SELECT k, v FROM {mine}.t")) == [(1, 1)]
        s.execute(f"DROP TABLE {mine}.t")
        s.execute(f"DROP KEYSPACE {mine}")

        # Dropping forgets the permissions: made again by someone else, alice has none on it.
        admin.execute(create_ks)
        admin.execute(f"CREATE TABLE {mine}.t (k int PRIMARY KEY, v int)")
        assert rows(admin.execute(f"LIST ALL PERMISSIONS ON TABLE {mine}.t OF {a}")) == [
            (a, a, "<all keyspaces>", "CREATE")
        ]
        refused(s, f"SELECT * FROM {mine}.t", no_permission(a, "SELECT", f"<table {mine}.t>"))
    finally:
        admin.execute(f"DROP KEYSPACE IF EXISTS {mine}")
        admin.execute(f"REVOKE CREATE ON ALL KEYSPACES FROM {a}")


def test_granting_needs_authorize_and_the_permission_itself(admin, alice, bob, ks):
    refused(
        bob.session,
        f"GRANT SELECT ON TABLE {ks}.t1 TO {alice.name}",
        no_permission(bob.name, "AUTHORIZE", f"<table {ks}.t1>"),
    )
    admin.execute(f"GRANT AUTHORIZE ON KEYSPACE {ks} TO {bob.name}")
    admin.execute(f"GRANT SELECT ON KEYSPACE {ks} TO {bob.name}")
    allowed(bob.session, f"GRANT SELECT ON TABLE {ks}.t1 TO {alice.name}")
    assert rows(allowed(alice.session, f"SELECT * FROM {ks}.t1")) == []
    refused(
        bob.session,
        f"GRANT MODIFY ON TABLE {ks}.t1 TO {alice.name}",
        no_permission(bob.name, "MODIFY", f"<table {ks}.t1>"),
    )
    bob.session.execute(f"REVOKE SELECT ON TABLE {ks}.t1 FROM {alice.name}")
    refused(alice.session, f"SELECT * FROM {ks}.t1", no_permission(alice.name, "SELECT", f"<table {ks}.t1>"))

    # Roles are granted by those with AUTHORIZE on them (superusers here).
    refused(
        bob.session,
        f"GRANT {bob.name} TO {alice.name}",
        f"User {bob.name} does not have sufficient privileges to perform the requested operation",
    )


def test_roles_are_managed_with_permissions_on_roles(admin, alice, bob):
    s, a = alice.session, alice.name
    made, helpers = name("made"), name("helpers")
    insufficient = f"User {a} does not have sufficient privileges to perform the requested operation"
    refused(s, f"CREATE ROLE {made}", insufficient)
    refused(s, f"ALTER ROLE {bob.name} WITH PASSWORD = 'taken'", insufficient)
    refused(s, f"DROP ROLE {bob.name}", insufficient)
    refused(s, f"DROP ROLE nope_{RUN_ID}", insufficient)

    admin.execute(f"CREATE ROLE {helpers}")
    admin.execute(f"GRANT CREATE ON ALL ROLES TO {a}")
    admin.execute(f"GRANT ALTER ON ROLE {bob.name} TO {a}")
    admin.execute(f"GRANT AUTHORIZE ON ROLE {helpers} TO {a}")
    try:
        allowed(s, f"CREATE ROLE {made} WITH PASSWORD = 'pw' AND LOGIN = true")
        # The creator of a role holds every permission on it, so may drop it.
        assert [r.permission for r in admin.execute(f"LIST ALL PERMISSIONS ON ROLE {made} OF {a} NORECURSIVE")] == [
            "ALTER", "DROP", "AUTHORIZE", "DESCRIBE"
        ]
        allowed(s, f"ALTER ROLE {bob.name} WITH PASSWORD = 'pw'")
        allowed(s, f"GRANT {helpers} TO {made}")
        assert [r.role for r in admin.execute(f"LIST ROLES OF {made}")] == sorted([made, helpers])
        # ALTER on bob is not AUTHORIZE on bob.
        refused(s, f"GRANT {bob.name} TO {made}", insufficient)
        s.execute(f"DROP ROLE {made}")
        assert rows(admin.execute(f"LIST ALL PERMISSIONS ON ROLE {helpers} OF {a} NORECURSIVE")) == [
            (a, a, f"<role {helpers}>", "AUTHORIZE")
        ]
        with pytest.raises(Unauthorized, match="Only superusers can create a role with superuser status"):
            s.execute(f"CREATE ROLE {made} WITH SUPERUSER = true")
    finally:
        admin.execute(f"DROP ROLE IF EXISTS {made}")
        admin.execute(f"DROP ROLE IF EXISTS {helpers}")
        admin.execute(f"REVOKE CREATE ON ALL ROLES FROM {a}")


def test_describe_on_all_roles_lists_every_role(admin, alice, bob):
    mine = {r.role for r in alice.session.execute("LIST ROLES")}
    assert mine == {alice.name}
    refused(alice.session, f"LIST ROLES OF {bob.name}", f"You are not authorized to view roles granted to {bob.name} ")
    admin.execute(f"GRANT DESCRIBE ON ALL ROLES TO {alice.name}")
    try:
        everyone = {r.role for r in allowed(alice.session, "LIST ROLES")}
        assert {alice.name, bob.name, "cassandra"} <= everyone
        assert [r.role for r in alice.session.execute(f"LIST ROLES OF {bob.name}")] == [bob.name]
    finally:
        admin.execute(f"REVOKE DESCRIBE ON ALL ROLES FROM {alice.name}")


def test_bad_grants_get_cassandras_errors(admin, alice, ks):
    for cql, type_name in [
        (f"GRANT CREATE ON TABLE {ks}.t1 TO {alice.name}", "DataResource"),
        (f"GRANT DESCRIBE ON ALL KEYSPACES TO {alice.name}", "DataResource"),
        (f"GRANT SELECT ON ROLE {alice.name} TO {alice.name}", "RoleResource"),
    ]:
        with pytest.raises(SyntaxException) as e:
            admin.execute(cql)
        assert f"Resource type {type_name} does not support any of the requested permissions" in str(e.value)
    # Those that apply are kept: CREATE does not apply to a table, SELECT does.
    admin.execute(f"GRANT SELECT, CREATE ON TABLE {ks}.t1 TO {alice.name}")
    assert [r.permission for r in admin.execute(f"LIST ALL PERMISSIONS OF {alice.name}")] == ["SELECT"]

    with pytest.raises(InvalidRequest, match=f"Resource <table {ks}.nope> doesn't exist"):
        admin.execute(f"GRANT SELECT ON TABLE {ks}.nope TO {alice.name}")
    with pytest.raises(InvalidRequest, match=f"Resource <keyspace nope_{RUN_ID}> doesn't exist"):
        admin.execute(f"GRANT ALL ON KEYSPACE nope_{RUN_ID} TO {alice.name}")
    with pytest.raises(InvalidRequest, match=f"Role nope_{RUN_ID} doesn't exist"):
        admin.execute(f"GRANT SELECT ON KEYSPACE {ks} TO nope_{RUN_ID}")


def test_a_prepared_statement_is_checked_at_every_execute(admin, alice, ks):
    admin.execute(f"GRANT SELECT ON TABLE {ks}.t1 TO {alice.name}")
    admin.execute(f"GRANT MODIFY ON TABLE {ks}.t1 TO {alice.name}")
    select = alice.session.prepare(f"SELECT v FROM {ks}.t1 WHERE k = ?")
    insert = alice.session.prepare(f"INSERT INTO {ks}.t1 (k, v) VALUES (?, ?)")
    allowed(alice.session, insert, (1, 10))
    assert rows(alice.session.execute(select, (1,))) == [(10,)]

    admin.execute(f"REVOKE SELECT ON TABLE {ks}.t1 FROM {alice.name}")
    admin.execute(f"REVOKE MODIFY ON TABLE {ks}.t1 FROM {alice.name}")
    refused(alice.session, select, no_permission(alice.name, "SELECT", f"<table {ks}.t1>"), (1,))
    refused(alice.session, insert, no_permission(alice.name, "MODIFY", f"<table {ks}.t1>"), (2, 20))


def test_dropping_a_role_forgets_its_permissions(authz_node, admin, ks):
    carol = name("carol")
    admin.execute(f"CREATE ROLE {carol} WITH PASSWORD = 'pw' AND LOGIN = true")
    admin.execute(f"GRANT SELECT ON KEYSPACE {ks} TO {carol}")
    admin.execute(f"DROP ROLE {carol}")
    admin.execute(f"CREATE ROLE {carol} WITH PASSWORD = 'pw' AND LOGIN = true")
    try:
        assert rows(admin.execute(f"LIST ALL PERMISSIONS OF {carol}")) == []
    finally:
        admin.execute(f"DROP ROLE {carol}")


def test_permissions_survive_restart(node_factory):
    n = node_factory("authz_restart", authenticator="PasswordAuthenticator", authorizer="CassandraAuthorizer")
    cluster, admin = login(n, "cassandra", "cassandra")
    admin.execute("CREATE KEYSPACE kept WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    admin.execute("CREATE TABLE kept.t (k int PRIMARY KEY)")
    admin.execute("CREATE ROLE reader")
    admin.execute("CREATE ROLE dana WITH PASSWORD = 'pw' AND LOGIN = true")
    admin.execute("GRANT SELECT ON TABLE kept.t TO reader")
    admin.execute("GRANT reader TO dana")
    # A role's name may hold a '/', which the file's resource names also use.
    admin.execute("CREATE ROLE 'team/ops'")
    admin.execute("GRANT ALTER ON ROLE 'team/ops' TO reader")
    before = rows(admin.execute("LIST ALL PERMISSIONS"))
    assert ("reader", "reader", "<role team/ops>", "ALTER") in before
    cluster.shutdown()
    n.restart()
    cluster, admin = login(n, "cassandra", "cassandra")
    assert rows(admin.execute("LIST ALL PERMISSIONS")) == before
    assert ("reader", "reader", "<table kept.t>", "SELECT") in before
    cluster.shutdown()
    cluster, dana = login(n, "dana", "pw")
    assert rows(dana.execute("SELECT * FROM kept.t")) == []
    cluster.shutdown()


def test_allow_all_authorizer_refuses_permission_statements(node_factory):
    """Cassandra's default authorizer lets every role do everything and manages no
    permissions: GRANT and REVOKE fail with a server error, LIST with Invalid. Roles may still
    be granted to roles."""
    n = node_factory("authz_allow_all", authenticator="PasswordAuthenticator")
    cluster, admin = login(n, "cassandra", "cassandra")
    try:
        admin.execute("CREATE KEYSPACE open WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        admin.execute("CREATE TABLE open.t (k int PRIMARY KEY)")
        admin.execute("CREATE ROLE erin WITH PASSWORD = 'pw' AND LOGIN = true")
        admin.execute("CREATE ROLE helpers")
        for cql, operation in [
            ("GRANT SELECT ON TABLE open.t TO erin", "GRANT"),
            ("REVOKE SELECT ON TABLE open.t FROM erin", "REVOKE"),
        ]:
            with pytest.raises(NoHostAvailable) as e:
                admin.execute(cql)
            assert "code=0000" in str(e.value), e.value
            assert f"{operation} operation is not supported by AllowAllAuthorizer" in str(e.value)
        with pytest.raises(InvalidRequest, match="LIST PERMISSIONS operation is not supported by AllowAllAuthorizer"):
            admin.execute("LIST ALL PERMISSIONS")
        admin.execute("GRANT helpers TO erin")
        assert [r.role for r in admin.execute("LIST ROLES OF erin")] == ["erin", "helpers"]
        admin.execute("REVOKE helpers FROM erin")

        c2, erin = login(n, "erin", "pw")
        erin.execute("INSERT INTO open.t (k) VALUES (1)")
        assert rows(erin.execute("SELECT k FROM open.t")) == [(1,)]
        c2.shutdown()
    finally:
        cluster.shutdown()


def test_cqlsh_prints_list_permissions_and_list_roles(authz_node, admin, alice, ks, tmp_path):
    """cqlsh prints these two through its table metadata for system_auth, which it looks up in
    the driver's schema; without the keyspace it fails with "Keyspace 'system_auth' not
    found"."""
    import subprocess
    import sys
    from pathlib import Path

    admin.execute(f"GRANT SELECT ON TABLE {ks}.t1 TO {alice.name}")
    cqlsh = Path(sys.executable).parent / "cqlsh"
    proc = subprocess.run(
        [str(cqlsh), authz_node.host, str(authz_node.port), "-u", "cassandra", "-p", "cassandra", "-e",
         f"LIST ALL PERMISSIONS OF {alice.name}; LIST ROLES OF {alice.name}"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "not found" not in proc.stderr, proc.stderr
    cells = [[c.strip() for c in ln.split("|")] for ln in proc.stdout.splitlines() if "|" in ln]
    assert cells[0] == ["role", "username", "resource", "permission"]
    assert cells[1] == [alice.name, alice.name, f"<table {ks}.t1>", "SELECT"]
    assert cells[2] == ["role", "super", "login", "options", "datacenters"]
    assert cells[3][0] == alice.name


def test_permission_statements_need_a_login_without_authentication(session):
    """With AllowAllAuthenticator every client is anonymous, and Cassandra refuses GRANT,
    REVOKE and LIST PERMISSIONS, of permissions or roles, before anything else."""
    for cql in [
        "GRANT SELECT ON ALL KEYSPACES TO cassandra",
        "REVOKE SELECT ON ALL KEYSPACES FROM cassandra",
        "LIST ALL PERMISSIONS",
        "GRANT cassandra TO cassandra",
        "REVOKE cassandra FROM cassandra",
    ]:
        with pytest.raises(Unauthorized) as e:
            session.execute(cql)
        assert "You have to be logged in and not anonymous to perform this request" in str(e.value), cql
