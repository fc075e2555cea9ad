//! The principals file (`[gateway] principals_file`): `[[principal]]` entries with a name, the
//! SHA-256 of each of its bearer tokens (or, for tests, the token itself), a role and the
//! workspaces it may use; and the table the gateway looks presented tokens up in. Tokens are
//! kept only as hashes and compared in constant time against every entry.

use std::path::{Path, PathBuf};

use ploke_runtime::Secret;
use ploke_runtime::principal::{Principal, Role};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Longest principal name.
const MAX_NAME: usize = 128;

/// Names the gateway gives principals itself: `default` (plain tokens, and the owner of what
/// has none), `admin` (plain admin tokens), `local` (an unauthenticated gateway).
const RESERVED: [&str; 3] = [
    ploke_runtime::principal::DEFAULT_PRINCIPAL,
    "admin",
    super::LOCAL,
];

/// The principals file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PrincipalsError {
    /// The file could not be read.
    #[error("reading the principals file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML of the expected shape (unknown keys included).
    #[error("the principals file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's words (they name the key and line).
        message: String,
    },
    /// An entry is not acceptable.
    #[error("the principals file {path}: principal {index} ({name}): {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based position of the entry.
        index: usize,
        /// Its name as written.
        name: String,
        /// Why.
        reason: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    principal: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    /// SHA-256 (hex) of its token; a list while a token is rotated (`["new", "old"]`).
    token_sha256: Option<OneOrMany>,
    /// The token itself (tests and throw-away setups; prefer `token_sha256`).
    token: Option<String>,
    #[serde(default)]
    role: RoleName,
    #[serde(default)]
    workspaces: Vec<String>,
    /// Only tools without side effects (no edit proposals).
    #[serde(default)]
    read_only: bool,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RoleName {
    #[default]
    User,
    Admin,
}

/// Whether `name` is one the gateway gives principals itself (never a file's or a JWT's).
pub fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// Whether `name` is usable as a principal's name (letters, digits and `. _ @ + -`).
pub fn is_valid_name(name: &str) -> bool {
    valid_name(name).is_ok()
}

/// The SHA-256 of a token, as the principals file stores it.
pub fn token_sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.trim().as_bytes()).into()
}

/// Principals and the hashes of their tokens.
#[derive(Debug, Clone, Default)]
pub struct Table {
    principals: Vec<Principal>,
    /// (token hash, index into `principals`).
    hashes: Vec<([u8; 32], usize)>,
}

fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("name must be 1 to {MAX_NAME} characters"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._@+-".contains(*c)))
    {
        return Err(format!(
            "name may hold letters, digits and . _ @ + - only, not {c:?}"
        ));
    }
    Ok(())
}

fn valid_workspace(w: &str) -> Result<(), String> {
    if w == "*" || (w.starts_with('/') && w.len() > 1) || (!w.is_empty() && !w.contains('/')) {
        Ok(())
    } else {
        Err(format!(
            "workspaces entry {w:?} must be \"*\", an absolute root or a workspace name"
        ))
    }
}

fn parse_hash(hex_text: &str) -> Result<[u8; 32], String> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_text.trim(), &mut out).map_err(|_| {
        "token_sha256 must be 64 hex digits (`printf %s TOKEN | sha256sum`)".to_owned()
    })?;
    if out == token_sha256("") {
        return Err(
            "token_sha256 is the hash of an empty token (was the variable unset when it was computed?)"
                .to_owned(),
        );
    }
    Ok(out)
}

impl Table {
    /// Parses a principals file's text.
    pub fn parse(text: &str, path: &Path) -> Result<Self, PrincipalsError> {
        let file: File = toml::from_str(text).map_err(|e| PrincipalsError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let mut table = Table::default();
        for (i, entry) in file.principal.into_iter().enumerate() {
            let invalid = |reason: String| PrincipalsError::Invalid {
                path: path.to_owned(),
                index: i + 1,
                name: ploke_runtime::text::shown(&entry.name).into_owned(),
                reason,
            };
            valid_name(&entry.name).map_err(invalid)?;
            if is_reserved(&entry.name) {
                return Err(invalid(format!(
                    "the names {} are the gateway's own (plain tokens, an unauthenticated gateway)",
                    RESERVED.join(", ")
                )));
            }
            if table.principals.iter().any(|p| p.name == entry.name) {
                return Err(invalid("another principal has this name".to_owned()));
            }
            for w in &entry.workspaces {
                valid_workspace(w).map_err(invalid)?;
            }
            let mut hashes = match &entry.token_sha256 {
                None => Vec::new(),
                Some(OneOrMany::One(h)) => vec![parse_hash(h).map_err(invalid)?],
                Some(OneOrMany::Many(hs)) => hs
                    .iter()
                    .map(|h| parse_hash(h))
                    .collect::<Result<_, _>>()
                    .map_err(invalid)?,
            };
            if let Some(token) = &entry.token {
                if token.trim().len() < ploke_runtime::internal::MIN_TOKEN_BYTES {
                    return Err(invalid(format!(
                        "token must be at least {} characters",
                        ploke_runtime::internal::MIN_TOKEN_BYTES
                    )));
                }
                hashes.push(token_sha256(token));
            }
            if hashes
                .iter()
                .any(|h| table.hashes.iter().any(|(o, _)| o == h))
            {
                return Err(invalid(
                    "its token is also another principal's (every token names one principal)"
                        .to_owned(),
                ));
            }
            let principal = Principal {
                name: entry.name.clone(),
                role: match entry.role {
                    RoleName::User => Role::User,
                    RoleName::Admin => Role::Admin,
                },
                workspaces: entry.workspaces.clone(),
                read_only: entry.read_only,
            };
            principal.check_size().map_err(invalid)?;
            let index = table.principals.len();
            table.principals.push(principal);
            table.hashes.extend(hashes.into_iter().map(|h| (h, index)));
        }
        Ok(table)
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<Self, PrincipalsError> {
        let text = std::fs::read_to_string(path).map_err(|source| PrincipalsError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Adds the one-person setup's tokens (`PLOKE_GATEWAY_TOKENS`, `[gateway] tokens_file`) as
    /// the principal `default` (a user of every workspace) and `PLOKE_GATEWAY_ADMIN_TOKENS` as
    /// `admin` (names the principals file may not use).
    pub fn with_plain_tokens(mut self, users: &[Secret], admins: &[Secret]) -> Self {
        for (name, role, tokens) in [
            (
                ploke_runtime::principal::DEFAULT_PRINCIPAL,
                Role::User,
                users,
            ),
            ("admin", Role::Admin, admins),
        ] {
            if tokens.is_empty() {
                continue;
            }
            let index = self.principals.len();
            self.principals.push(Principal::everywhere(name, role));
            self.hashes
                .extend(tokens.iter().map(|t| (token_sha256(t.expose()), index)));
        }
        self
    }

    /// Whether no token is accepted.
    pub fn has_no_tokens(&self) -> bool {
        self.hashes.is_empty()
    }

    /// How many principals it names.
    pub fn principal_count(&self) -> usize {
        self.principals.len()
    }

    /// The principal a token belongs to. Every stored hash is compared, in constant time, so
    /// timing tells neither whether nor which one matched.
    pub fn by_token(&self, token: &str) -> Option<&Principal> {
        let presented = token_sha256(token);
        let mut found = usize::MAX;
        for (hash, index) in &self.hashes {
            let equal = bool::from(hash.ct_eq(&presented));
            // Branch-free selection of the index (no early exit).
            let mask = usize::from(equal).wrapping_neg();
            found = (found & !mask) | (*index & mask);
        }
        self.principals.get(found)
    }

    /// The entry named `name`, and whether it has tokens of its own (JWT principals take their
    /// role and workspaces from an entry without any).
    pub fn by_name(&self, name: &str) -> Option<(&Principal, bool)> {
        let index = self.principals.iter().position(|p| p.name == name)?;
        let has_tokens = self.hashes.iter().any(|(_, i)| *i == index);
        Some((&self.principals[index], has_tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "alice-token-0123456789";
    const BOB: &str = "bob-token-0123456789ab";

    fn table(text: &str) -> Result<Table, PrincipalsError> {
        Table::parse(text, Path::new("/etc/ploke/principals.toml"))
    }

    #[test]
    fn hashed_plain_and_rotated_tokens_name_their_principal() {
        let text = format!(
            r#"
[[principal]]
name = "alice"
token_sha256 = "{}"
workspaces = ["app"]

[[principal]]
name = "bob"
token_sha256 = ["{}", "{}"]
role = "admin"
workspaces = ["*"]

[[principal]]
name = "carol@example.com"
token = "carol-token-0123456789"
read_only = true
"#,
            hex::encode(token_sha256(ALICE)),
            hex::encode(token_sha256("bob-new-token-0123456")),
            hex::encode(token_sha256(BOB)),
        );
        let t = table(&text).unwrap();
        assert_eq!(
            t.by_token(ALICE),
            Some(&Principal {
                name: "alice".into(),
                role: Role::User,
                workspaces: vec!["app".into()],
                read_only: false,
            })
        );
        assert_eq!(
            t.by_token(BOB).map(|p| (p.name.as_str(), p.role)),
            Some(("bob", Role::Admin))
        );
        assert_eq!(
            t.by_token("bob-new-token-0123456").map(|p| p.name.as_str()),
            Some("bob")
        );
        assert_eq!(
            t.by_token("carol-token-0123456789")
                .map(|p| p.workspaces.len()),
            Some(0)
        );
        assert_eq!(t.by_token("alice-token-012345678"), None);
        assert_eq!(t.by_token(""), None);
    }

    #[test]
    fn bad_entries_are_refused_naming_the_entry_and_never_the_token() {
        let hash = hex::encode(token_sha256(ALICE));
        for (text, expected) in [
            (
                "[[principal]]\nname = \"a b\"\n".to_owned(),
                "principal 1 (a b): name may hold letters, digits and . _ @ + - only, not ' '",
            ),
            (
                format!(
                    "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{hash}\"\n[[principal]]\nname = \"a\"\n"
                ),
                "principal 2 (a): another principal has this name",
            ),
            (
                format!(
                    "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{hash}\"\n[[principal]]\nname = \"b\"\ntoken_sha256 = \"{hash}\"\n"
                ),
                "principal 2 (b): its token is also another principal's (every token names one principal)",
            ),
            (
                "[[principal]]\nname = \"a\"\ntoken_sha256 = \"abc\"\n".to_owned(),
                "principal 1 (a): token_sha256 must be 64 hex digits (`printf %s TOKEN | sha256sum`)",
            ),
            (
                format!(
                    "[[principal]]\nname = \"a\"\ntoken_sha256 = \"{}\"\n",
                    hex::encode(token_sha256(""))
                ),
                "principal 1 (a): token_sha256 is the hash of an empty token (was the variable unset when it was computed?)",
            ),
            (
                "[[principal]]\nname = \"a\"\ntoken = \"short\"\n".to_owned(),
                "principal 1 (a): token must be at least 16 characters",
            ),
            (
                "[[principal]]\nname = \"default\"\n".to_owned(),
                "principal 1 (default): the names default, admin, local are the gateway's own (plain tokens, an unauthenticated gateway)",
            ),
            (
                format!(
                    "[[principal]]\nname = \"a\"\nworkspaces = [{}]\n",
                    vec![format!("\"/srv/{}\"", "r".repeat(100)); 50].join(", ")
                ),
                "principal 1 (a): its name and workspaces take 5355 bytes; at most 4096 travel with every call (grant \"*\" or fewer, shorter entries)",
            ),
            (
                "[[principal]]\nname = \"a\"\nworkspaces = [\"src/app\"]\n".to_owned(),
                "principal 1 (a): workspaces entry \"src/app\" must be \"*\", an absolute root or a workspace name",
            ),
        ] {
            let e = table(&text).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("the principals file /etc/ploke/principals.toml: {expected}")
            );
            assert!(!e.contains(ALICE));
        }
        let unknown = table("[[principal]]\nname = \"a\"\nrole = \"root\"\n").unwrap_err();
        assert!(
            unknown.to_string().contains("unknown variant `root`"),
            "{unknown}"
        );
        let typo = table("[[principal]]\nname = \"a\"\nworkspace = [\"*\"]\n").unwrap_err();
        assert!(
            typo.to_string().contains("unknown field `workspace`"),
            "{typo}"
        );
    }

    #[test]
    fn plain_tokens_are_the_default_and_admin_principals() {
        let t = Table::default().with_plain_tokens(&[Secret::new(ALICE)], &[Secret::new(BOB)]);
        assert_eq!(
            t.by_token(ALICE),
            Some(&Principal::everywhere("default", Role::User))
        );
        assert_eq!(
            t.by_token(BOB),
            Some(&Principal::everywhere("admin", Role::Admin))
        );
        assert!(Table::default().has_no_tokens());
    }
}
