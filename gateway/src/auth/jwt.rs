//! JWT bearer tokens from a team's identity provider (`[gateway.jwt]`), verified offline: the
//! signature against the provider's public keys in a JWKS file (RSA, EC P-256/P-384 or
//! Ed25519; the algorithm is the key's, never the token's choice; symmetric keys refused),
//! then `iss`, `aud`, `exp` and `nbf`. The principal's name is a configured claim; its role and
//! workspaces come from the principals file entry of that name, else from configured claims.

use std::path::Path;
use std::str::FromStr as _;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use ploke_runtime::config::JwtConfig;
use ploke_runtime::principal::{Principal, Role};
use serde_json::Value;

use super::principals::Table;

/// The JWKS file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// The file could not be read.
    #[error("reading the JWKS file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a JWKS document, or a key is unusable.
    #[error("the JWKS file {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

/// Why a JWT was refused (the caller reads it in UNAUTHENTICATED).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid bearer token: the JWT {0}")]
pub struct JwtRefused(pub String);

/// One usable key.
struct Key {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

/// The identity provider's keys and what the gateway checks.
pub struct JwtVerifier {
    config: JwtConfig,
    keys: Vec<Key>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("issuer", &self.config.issuer)
            .field("audience", &self.config.audience)
            .field("keys", &self.keys.len())
            .finish()
    }
}

/// The algorithm a key verifies: its `alg` when given, else the one its type implies.
fn algorithm_of(jwk: &jsonwebtoken::jwk::Jwk) -> Result<Algorithm, String> {
    let implied = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            EllipticCurve::P521 | EllipticCurve::Ed25519 => {
                return Err(format!("curve {:?} is not supported", p.curve));
            }
        },
        AlgorithmParameters::OctetKeyPair(p) => match p.curve {
            EllipticCurve::Ed25519 => Algorithm::EdDSA,
            EllipticCurve::P256 | EllipticCurve::P384 | EllipticCurve::P521 => {
                return Err(format!("curve {:?} is not an OKP curve", p.curve));
            }
        },
        AlgorithmParameters::OctetKey(_) => {
            return Err(
                "symmetric (oct) keys are refused: anyone who can read the file could mint tokens"
                    .to_owned(),
            );
        }
    };
    let Some(alg) = jwk.common.key_algorithm else {
        return Ok(implied);
    };
    let named = Algorithm::from_str(&format!("{alg:?}"))
        .map_err(|_| format!("algorithm {alg:?} cannot verify signatures"))?;
    let same_family = matches!(
        (implied, named),
        (
            Algorithm::RS256,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ) | (Algorithm::ES256, Algorithm::ES256)
            | (Algorithm::ES384, Algorithm::ES384)
            | (Algorithm::EdDSA, Algorithm::EdDSA)
    );
    if same_family {
        Ok(named)
    } else {
        Err(format!("alg {alg:?} does not fit the key type"))
    }
}

fn parse_keys(text: &str, path: &Path) -> Result<Vec<Key>, JwksError> {
    let invalid = |message: String| JwksError::Invalid {
        path: path.display().to_string(),
        message,
    };
    let set: JwkSet = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let mut keys = Vec::with_capacity(set.keys.len());
    // Identity providers publish keys of other uses and kinds beside their signing keys: each
    // key that cannot verify a signature is left out (and said), the rest are used, so a set
    // whose compromised key was just removed is never kept for an unusable neighbour.
    let mut skipped = Vec::new();
    for (i, jwk) in set.keys.iter().enumerate() {
        let which = jwk
            .common
            .key_id
            .clone()
            .unwrap_or_else(|| format!("#{}", i + 1));
        if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
            skipped.push(format!("key {which}: an encryption key"));
            continue;
        }
        let usable = algorithm_of(jwk).and_then(|algorithm| {
            DecodingKey::from_jwk(jwk)
                .map(|key| (algorithm, key))
                .map_err(|e| e.to_string())
        });
        match usable {
            Ok((algorithm, key)) => keys.push(Key {
                kid: jwk.common.key_id.clone(),
                algorithm,
                key,
            }),
            Err(why) => skipped.push(format!("key {which}: {why}")),
        }
    }
    if keys.is_empty() {
        let why = if skipped.is_empty() {
            "it holds no key".to_owned()
        } else {
            format!(
                "it holds no key that verifies signatures ({})",
                skipped.join("; ")
            )
        };
        return Err(invalid(why));
    }
    for s in &skipped {
        tracing::warn!(jwks = %path.display(), skipped = %s, "JWKS key left out");
    }
    Ok(keys)
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => Vec::new(),
    }
}

impl JwtVerifier {
    /// Reads the JWKS file `config` names.
    pub fn load(config: &JwtConfig) -> Result<Self, JwksError> {
        let path = &config.jwks_file;
        let text = std::fs::read_to_string(path).map_err(|source| JwksError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self {
            config: config.clone(),
            keys: parse_keys(&text, path)?,
        })
    }

    /// The principal a JWT names, once its signature and claims check out.
    pub fn verify(&self, token: &str, table: &Table) -> Result<Principal, JwtRefused> {
        let refused = |why: &str| JwtRefused(why.to_owned());
        let header = jsonwebtoken::decode_header(token).map_err(|_| refused("is malformed"))?;
        let key = match &header.kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
        .ok_or_else(|| refused("is signed by a key the JWKS file does not hold"))?;
        if header.alg != key.algorithm {
            return Err(refused("names an algorithm its key does not use"));
        }
        let mut validation = Validation::new(key.algorithm);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.leeway = self.config.leeway_secs;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data =
            jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key.key, &validation)
                .map_err(|e| JwtRefused(why_refused(e.kind(), token)))?;
        let claims = data.claims;
        let name = claims
            .get(&self.config.principal_claim)
            .and_then(Value::as_str)
            .filter(|n| super::principals::is_valid_name(n))
            .ok_or_else(|| {
                JwtRefused(format!(
                    "has no usable `{}` claim to name the principal",
                    self.config.principal_claim
                ))
            })?;
        if super::principals::is_reserved(name) {
            return Err(JwtRefused(format!(
                "names `{name}`, a principal name the gateway keeps for itself"
            )));
        }
        match table.by_name(name) {
            // An entry without tokens is the IdP principal's permissions.
            Some((entry, false)) => return Ok(entry.clone()),
            // One with tokens is someone who signs in with a token: never the same principal.
            Some((_, true)) => {
                return Err(JwtRefused(format!(
                    "names `{name}`, a principal of the principals file who signs in with a token"
                )));
            }
            None => {}
        }
        let role = match &self.config.role_claim {
            Some(claim)
                if claims
                    .get(claim)
                    .is_some_and(|v| strings(v).iter().any(|r| r == "admin")) =>
            {
                Role::Admin
            }
            Some(_) | None => Role::User,
        };
        let workspaces = match &self.config.workspaces_claim {
            Some(claim) => claims
                .get(claim)
                .map(strings)
                .unwrap_or_else(|| self.config.default_workspaces.clone()),
            None => self.config.default_workspaces.clone(),
        };
        let principal = Principal {
            name: name.to_owned(),
            role,
            workspaces,
            read_only: false,
        };
        principal
            .check_size()
            .map_err(|why| JwtRefused(format!("names a principal too large: {why}")))?;
        Ok(principal)
    }
}

/// Whether a bearer token is shaped like a JWT (three base64url parts).
pub fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// What a token the library refused lacks or has wrong, as the caller is told it. Claims are
/// checked after the signature, so a token refused for a claim is read again (unverified, only
/// to tell a claim that is missing from one of the wrong type: the library says "missing" of
/// both).
fn why_refused(kind: &jsonwebtoken::errors::ErrorKind, token: &str) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    let has = |claim: &str| {
        jsonwebtoken::dangerous::insecure_decode::<serde_json::Map<String, Value>>(token)
            .is_ok_and(|d| d.claims.contains_key(claim))
    };
    let wrong_type = |claim: &str| match claim {
        "exp" | "nbf" => {
            format!("has an `{claim}` claim that is not a number of seconds since 1970")
        }
        _ => format!("has a `{claim}` claim of the wrong type"),
    };
    match kind {
        K::ExpiredSignature => "has expired".to_owned(),
        K::ImmatureSignature => "is not valid yet (nbf)".to_owned(),
        K::InvalidIssuer => "has another issuer".to_owned(),
        K::InvalidAudience => "is for another audience".to_owned(),
        K::InvalidSignature => "has a bad signature".to_owned(),
        K::MissingRequiredClaim(claim) if has(claim) => wrong_type(claim),
        K::MissingRequiredClaim(claim) => {
            format!("lacks its `{claim}` claim (exp, iss and aud are required)")
        }
        K::InvalidClaimFormat(claim) => wrong_type(claim),
        K::InvalidToken | K::Base64(_) | K::Json(_) | K::Utf8(_) => "is malformed".to_owned(),
        K::InvalidAlgorithm | K::MissingAlgorithm => {
            "names an algorithm its key does not use".to_owned()
        }
        _ => "could not be verified".to_owned(),
    }
}

#[cfg(test)]
mod tests;
