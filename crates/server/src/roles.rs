//! Role and permission statements (CREATE/ALTER/DROP ROLE and USER, LIST ROLES and USERS,
//! GRANT and REVOKE of roles and permissions, LIST PERMISSIONS), applied to the role store
//! ([`crate::auth::roles`]) and the authorizer ([`crate::auth::authorizer`]) as the
//! logged-in role.

use std::collections::BTreeMap;

use hayate_cql::error::ErrorCode;
use hayate_cql::response::result::{ColumnSpec, ColumnType, ResultBody, Rows, RowsMetadata, TableSpec};
use hayate_cql::statement::{RoleOption, Statement};
use hayate_cql::value::{encode_map, DataType, Literal};

use crate::auth::permissions::Resource;
use crate::auth::roles::{RoleError, RoleOptions};
use crate::auth::{AuthenticatedRole, Authorizer, PermissionError};
use crate::error::{invalid, server_error, syntax, unauthorized, QueryError, QueryResult};
use crate::query::Context;

fn role_error(e: RoleError) -> QueryError {
    match e.code() {
        ErrorCode::Unauthorized => unauthorized(e.to_string()),
        ErrorCode::ServerError => server_error(e.to_string()),
        _ => invalid(e.to_string()),
    }
}

/// The authorizer's refusal as the error the client gets.
pub fn permission_error(e: PermissionError) -> QueryError {
    match e.code() {
        ErrorCode::Unauthorized => unauthorized(e.to_string()),
        ErrorCode::ServerError => server_error(e.to_string()),
        ErrorCode::SyntaxError => syntax(e.to_string()),
        _ => invalid(e.to_string()),
    }
}

fn literal_text(l: &Literal) -> String {
    match l {
        Literal::Str(s) | Literal::Int(s) | Literal::Float(s) | Literal::Uuid(s) | Literal::Duration(s) => {
            s.clone()
        }
        Literal::Bool(b) => b.to_string(),
        Literal::Hex(_) | Literal::Null => String::new(),
    }
}

fn options(list: &[RoleOption]) -> QueryResult<RoleOptions> {
    let mut o = RoleOptions::default();
    for option in list {
        match option {
            RoleOption::Password(p) => o.password = Some(p.clone()),
            RoleOption::Login(b) => o.login = Some(*b),
            RoleOption::Superuser(b) => o.superuser = Some(*b),
            RoleOption::Options(m) => {
                o.options = Some(
                    m.iter()
                        .map(|(k, v)| (literal_text(k), literal_text(v)))
                        .collect(),
                )
            }
            RoleOption::HashedPassword(_) => {
                return Err(invalid("hayate does not support HASHED PASSWORD yet"))
            }
            RoleOption::AccessToDatacenters(_) | RoleOption::AccessToAllDatacenters => {
                return Err(invalid("hayate does not support ACCESS TO DATACENTERS yet"))
            }
        }
    }
    Ok(o)
}

fn spec(name: &str, ty: ColumnType) -> ColumnSpec {
    spec_of("roles", name, ty)
}

fn spec_of(table: &str, name: &str, ty: ColumnType) -> ColumnSpec {
    ColumnSpec {
        table: TableSpec {
            keyspace: "system_auth".into(),
            table: table.into(),
        },
        name: name.into(),
        ty,
    }
}

fn cell(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
    out.extend_from_slice(bytes);
}

pub fn run(ctx: &Context<'_>, authorizer: &Authorizer, stmt: &Statement) -> QueryResult<ResultBody> {
    let anonymous = AuthenticatedRole::anonymous();
    let by = ctx.role.unwrap_or(&anonymous);
    let store = authorizer.roles();
    // The creator of a role is granted every permission on it, as in Cassandra; a role that
    // existed already (IF NOT EXISTS) is left as it was.
    let created = |name: &str, existed: bool| -> QueryResult<()> {
        if existed || !store.exists(name) {
            return Ok(());
        }
        authorizer
            .grant_to_creator(by, &Resource::Role(name.to_string()))
            .map_err(permission_error)
    };
    let dropped = |name: &str| authorizer.role_dropped(name).map_err(permission_error);
    match stmt {
        Statement::CreateRole {
            role,
            if_not_exists,
            options: o,
        } => {
            let existed = store.exists(role);
            store
                .create_role(by, role, options(o)?, *if_not_exists)
                .map_err(role_error)?;
            created(role, existed)?;
        }
        Statement::AlterRole { role, options: o, .. } => {
            store.alter_role(by, role, options(o)?).map_err(role_error)?
        }
        Statement::DropRole { role, if_exists } => {
            let existed = store.exists(role);
            store.drop_role(by, role, *if_exists).map_err(role_error)?;
            if existed {
                dropped(role)?;
            }
        }
        Statement::GrantRole { role, grantee } => authorizer
            .grant_role(by, role, grantee)
            .map_err(permission_error)?,
        Statement::RevokeRole { role, revokee } => authorizer
            .revoke_role(by, role, revokee)
            .map_err(permission_error)?,
        Statement::GrantPermissions {
            permissions,
            resource,
            role,
        } => {
            authorizer
                .change_permissions(by, true, permissions, resource, role, &ctx.schema, ctx.keyspace)
                .map_err(permission_error)?;
        }
        Statement::RevokePermissions {
            permissions,
            resource,
            role,
        } => {
            authorizer
                .change_permissions(by, false, permissions, resource, role, &ctx.schema, ctx.keyspace)
                .map_err(permission_error)?;
        }
        Statement::ListPermissions {
            permissions,
            resource,
            role,
            norecursive,
        } => {
            let rows = authorizer
                .list(
                    by,
                    permissions,
                    resource.as_ref(),
                    role.as_deref(),
                    *norecursive,
                    &ctx.schema,
                    ctx.keyspace,
                )
                .map_err(permission_error)?;
            let mut content = Vec::new();
            for r in &rows {
                cell(&mut content, r.role.as_bytes());
                cell(&mut content, r.role.as_bytes());
                cell(&mut content, r.resource.to_string().as_bytes());
                cell(&mut content, r.permission.name().as_bytes());
            }
            return Ok(ResultBody::Rows(Rows {
                metadata: RowsMetadata::new(
                    ["role", "username", "resource", "permission"]
                        .into_iter()
                        .map(|n| spec_of("permissions", n, ColumnType::Varchar))
                        .collect::<Vec<_>>(),
                ),
                rows_count: rows.len(),
                rows_content: content,
            }));
        }
        Statement::CreateUser {
            user,
            if_not_exists,
            password,
            superuser,
        } => {
            let o = RoleOptions {
                password: password.clone(),
                login: Some(true),
                superuser: Some(superuser.unwrap_or(false)),
                options: None,
            };
            let existed = store.exists(user);
            store
                .create_role(by, user, o, *if_not_exists)
                .map_err(role_error)?;
            created(user, existed)?;
        }
        Statement::AlterUser {
            user,
            password,
            superuser,
            ..
        } => {
            let o = RoleOptions {
                password: password.clone(),
                superuser: *superuser,
                ..RoleOptions::default()
            };
            store.alter_role(by, user, o).map_err(role_error)?
        }
        Statement::DropUser { user, if_exists } => {
            let existed = store.exists(user);
            store.drop_role(by, user, *if_exists).map_err(role_error)?;
            if existed {
                dropped(user)?;
            }
        }
        Statement::ListRoles { of, norecursive } => {
            let rows = store
                .list_roles_of(by, of.as_deref(), !norecursive)
                .map_err(role_error)?;
            let mut content = Vec::new();
            for r in &rows {
                cell(&mut content, r.role.as_bytes());
                cell(&mut content, &[u8::from(r.superuser)]);
                cell(&mut content, &[u8::from(r.login)]);
                let mut m = Vec::new();
                let entries: BTreeMap<&String, &String> = r.options.iter().collect();
                encode_map(
                    &DataType::Text,
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                        .collect(),
                    &mut m,
                );
                cell(&mut content, &m);
                cell(&mut content, r.datacenters.as_bytes());
            }
            let text_map = ColumnType::Map(Box::new(ColumnType::Varchar), Box::new(ColumnType::Varchar));
            return Ok(ResultBody::Rows(Rows {
                metadata: RowsMetadata::new(vec![
                    spec("role", ColumnType::Varchar),
                    spec("super", ColumnType::Boolean),
                    spec("login", ColumnType::Boolean),
                    spec("options", text_map),
                    spec("datacenters", ColumnType::Varchar),
                ]),
                rows_count: rows.len(),
                rows_content: content,
            }));
        }
        Statement::ListUsers => {
            let rows = store.list_roles(by, None).map_err(role_error)?;
            let mut content = Vec::new();
            let mut n = 0;
            for r in rows.iter().filter(|r| r.login) {
                cell(&mut content, r.role.as_bytes());
                cell(&mut content, &[u8::from(r.superuser)]);
                cell(&mut content, r.datacenters.as_bytes());
                n += 1;
            }
            return Ok(ResultBody::Rows(Rows {
                metadata: RowsMetadata::new(vec![
                    spec("name", ColumnType::Varchar),
                    spec("super", ColumnType::Boolean),
                    spec("datacenters", ColumnType::Varchar),
                ]),
                rows_count: n,
                rows_content: content,
            }));
        }
        other => {
            return Err(invalid(format!(
                "hayate does not support {} statements yet",
                other.kind()
            )))
        }
    }
    Ok(ResultBody::Void)
}
