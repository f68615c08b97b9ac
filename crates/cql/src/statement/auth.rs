//! Roles, legacy users, and permissions: CREATE/ALTER ROLE and USER, GRANT, REVOKE, LIST.
//! DROP ROLE and DROP USER are in `ddl.rs`, beside the other DROPs.

use super::ast::*;
use super::lexer::TokenKind;
use super::parser::{Parser, Result};

/// The permission names of GRANT, REVOKE and LIST (Cassandra 5 adds the last two).
const PERMISSION_NAMES: &[&str] = &[
    "CREATE",
    "ALTER",
    "DROP",
    "SELECT",
    "MODIFY",
    "AUTHORIZE",
    "DESCRIBE",
    "EXECUTE",
    "UNMASK",
    "SELECT_MASKED",
];

impl Parser<'_> {
    /// After `CREATE ROLE`.
    pub fn create_role(&mut self) -> Result<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let role = self.role_name()?;
        let options = if self.eat_kw("WITH") {
            self.role_options()?
        } else {
            Vec::new()
        };
        Ok(Statement::CreateRole {
            role,
            if_not_exists,
            options,
        })
    }

    /// After `ALTER ROLE`.
    pub fn alter_role(&mut self) -> Result<Statement> {
        let if_exists = self.if_exists()?;
        let role = self.role_name()?;
        self.expect_kw("WITH")?;
        let options = self.role_options()?;
        Ok(Statement::AlterRole {
            role,
            if_exists,
            options,
        })
    }

    /// `option (AND option)*`
    fn role_options(&mut self) -> Result<Vec<RoleOption>> {
        let mut options = vec![self.role_option()?];
        while self.eat_kw("AND") {
            self.check_list_len(options.len())?;
            options.push(self.role_option()?);
        }
        Ok(options)
    }

    fn role_option(&mut self) -> Result<RoleOption> {
        if self.eat_kw("PASSWORD") {
            self.expect(TokenKind::Eq, "'='")?;
            return Ok(RoleOption::Password(self.string_literal()?));
        }
        if self.eat_kw("HASHED") {
            self.expect_kw("PASSWORD")?;
            self.expect(TokenKind::Eq, "'='")?;
            return Ok(RoleOption::HashedPassword(self.string_literal()?));
        }
        if self.eat_kw("LOGIN") {
            self.expect(TokenKind::Eq, "'='")?;
            return Ok(RoleOption::Login(self.boolean()?));
        }
        if self.eat_kw("SUPERUSER") {
            self.expect(TokenKind::Eq, "'='")?;
            return Ok(RoleOption::Superuser(self.boolean()?));
        }
        if self.eat_kw("OPTIONS") {
            self.expect(TokenKind::Eq, "'='")?;
            self.expect(TokenKind::LBrace, "'{'")?;
            let mut entries = Vec::new();
            if !self.eat(TokenKind::RBrace) {
                entries = self.comma_list(|p| {
                    let key = p.constant()?;
                    p.expect(TokenKind::Colon, "':'")?;
                    Ok((key, p.constant()?))
                })?;
                self.expect(TokenKind::RBrace, "'}' or ','")?;
            }
            return Ok(RoleOption::Options(entries));
        }
        if self.eat_kw("ACCESS") {
            self.expect_kw("TO")?;
            if self.eat_kw("ALL") {
                self.expect_kw("DATACENTERS")?;
                return Ok(RoleOption::AccessToAllDatacenters);
            }
            self.expect_kw("DATACENTERS")?;
            self.expect(TokenKind::LBrace, "'{'")?;
            let mut datacenters = Vec::new();
            if !self.eat(TokenKind::RBrace) {
                datacenters = self.comma_list(Self::string_literal)?;
                self.expect(TokenKind::RBrace, "'}' or ','")?;
            }
            return Ok(RoleOption::AccessToDatacenters(datacenters));
        }
        Err(self.mismatched("PASSWORD, HASHED PASSWORD, LOGIN, SUPERUSER, OPTIONS or ACCESS TO"))
    }

    /// After `CREATE USER`.
    pub fn create_user(&mut self) -> Result<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let user = self.role_name()?;
        let (password, superuser) = self.user_options()?;
        Ok(Statement::CreateUser {
            user,
            if_not_exists,
            password,
            superuser,
        })
    }

    /// After `ALTER USER`.
    pub fn alter_user(&mut self) -> Result<Statement> {
        let if_exists = self.if_exists()?;
        let user = self.role_name()?;
        let (password, superuser) = self.user_options()?;
        Ok(Statement::AlterUser {
            user,
            if_exists,
            password,
            superuser,
        })
    }

    /// `[WITH PASSWORD 'p'] [SUPERUSER | NOSUPERUSER]`
    fn user_options(&mut self) -> Result<(Option<String>, Option<bool>)> {
        let mut password = None;
        if self.eat_kw("WITH") {
            self.expect_kw("PASSWORD")?;
            password = Some(self.string_literal()?);
        }
        let superuser = if self.eat_kw("SUPERUSER") {
            Some(true)
        } else if self.eat_kw("NOSUPERUSER") {
            Some(false)
        } else {
            None
        };
        Ok((password, superuser))
    }

    fn at_permissions(&self) -> bool {
        self.is_kw("ALL") || PERMISSION_NAMES.iter().any(|name| self.is_kw(name))
    }

    /// `ALL [PERMISSIONS]` or `perm [PERMISSION] (, perm [PERMISSION])*`
    fn permissions(&mut self) -> Result<Permissions> {
        if self.eat_kw("ALL") {
            self.eat_kw("PERMISSIONS");
            return Ok(Permissions::All);
        }
        let names = self.comma_list(|p| {
            let token = p.peek();
            let name = p.text(token).to_ascii_uppercase();
            if token.kind != TokenKind::Word || !PERMISSION_NAMES.contains(&name.as_str()) {
                return Err(p.mismatched(
                    "a permission (ALL, CREATE, ALTER, DROP, SELECT, MODIFY, AUTHORIZE, DESCRIBE, EXECUTE)",
                ));
            }
            p.advance();
            if !p.eat_kw("PERMISSION") {
                p.eat_kw("PERMISSIONS");
            }
            Ok(name)
        })?;
        Ok(Permissions::Only(names))
    }

    /// What a permission is on.
    fn resource(&mut self) -> Result<Resource> {
        if self.eat_kw("ALL") {
            if self.eat_kw("KEYSPACES") {
                return Ok(Resource::AllKeyspaces);
            }
            if self.eat_kw("ROLES") {
                return Ok(Resource::AllRoles);
            }
            if self.eat_kw("FUNCTIONS") {
                if self.eat_kw("IN") {
                    self.expect_kw("KEYSPACE")?;
                    let keyspace = self.ident_expecting("a keyspace name")?;
                    return Ok(Resource::Other(format!("ALL FUNCTIONS IN KEYSPACE {keyspace}")));
                }
                return Ok(Resource::Other("ALL FUNCTIONS".to_owned()));
            }
            if self.eat_kw("MBEANS") {
                return Ok(Resource::Other("ALL MBEANS".to_owned()));
            }
            return Err(self.mismatched("KEYSPACES, ROLES, FUNCTIONS or MBEANS"));
        }
        if self.eat_kw("KEYSPACE") {
            return Ok(Resource::Keyspace(self.ident_expecting("a keyspace name")?));
        }
        if self.eat_kw("ROLE") {
            return Ok(Resource::Role(self.role_name()?));
        }
        if self.eat_kw("FUNCTION") {
            let name = self.qualified_name()?;
            self.expect(TokenKind::LParen, "'('")?;
            let mut types = Vec::new();
            if !self.eat(TokenKind::RParen) {
                types = self.comma_list(Self::type_text)?;
                self.expect(TokenKind::RParen, "')' or ','")?;
            }
            let keyspace = name.keyspace.map(|k| format!("{k}.")).unwrap_or_default();
            return Ok(Resource::Other(format!(
                "FUNCTION {keyspace}{}({})",
                name.name,
                types.join(", ")
            )));
        }
        if self.eat_kw("MBEAN") || self.eat_kw("MBEANS") {
            return Ok(Resource::Other(format!("MBEAN {}", self.string_literal()?)));
        }
        if !self.eat_kw("TABLE") {
            self.eat_kw("COLUMNFAMILY");
        }
        Ok(Resource::Table(self.qualified_name()?))
    }

    /// After `GRANT`.
    pub fn grant(&mut self) -> Result<Statement> {
        if !self.at_permissions() {
            let role = self.role_name()?;
            self.expect_kw("TO")?;
            let grantee = self.role_name()?;
            return Ok(Statement::GrantRole { role, grantee });
        }
        let permissions = self.permissions()?;
        self.expect_kw("ON")?;
        let resource = self.resource()?;
        self.expect_kw("TO")?;
        let role = self.role_name()?;
        Ok(Statement::GrantPermissions {
            permissions,
            resource,
            role,
        })
    }

    /// After `REVOKE`.
    pub fn revoke(&mut self) -> Result<Statement> {
        if !self.at_permissions() {
            let role = self.role_name()?;
            self.expect_kw("FROM")?;
            let revokee = self.role_name()?;
            return Ok(Statement::RevokeRole { role, revokee });
        }
        let permissions = self.permissions()?;
        self.expect_kw("ON")?;
        let resource = self.resource()?;
        self.expect_kw("FROM")?;
        let role = self.role_name()?;
        Ok(Statement::RevokePermissions {
            permissions,
            resource,
            role,
        })
    }

    /// After `LIST`.
    pub fn list(&mut self) -> Result<Statement> {
        if self.eat_kw("ROLES") {
            let of = if self.eat_kw("OF") {
                Some(self.role_name()?)
            } else {
                None
            };
            let norecursive = self.eat_kw("NORECURSIVE");
            return Ok(Statement::ListRoles { of, norecursive });
        }
        if self.eat_kw("USERS") {
            return Ok(Statement::ListUsers);
        }
        if self.is_kw("SUPERUSERS") {
            self.skip_rest();
            return Ok(Statement::Unsupported {
                what: "LIST SUPERUSERS",
            });
        }
        if !self.at_permissions() {
            return Err(self.mismatched("ROLES, USERS, ALL or a permission"));
        }
        let permissions = self.permissions()?;
        let resource = if self.eat_kw("ON") {
            Some(self.resource()?)
        } else {
            None
        };
        let role = if self.eat_kw("OF") {
            Some(self.role_name()?)
        } else {
            None
        };
        let norecursive = self.eat_kw("NORECURSIVE");
        Ok(Statement::ListPermissions {
            permissions,
            resource,
            role,
            norecursive,
        })
    }
}
