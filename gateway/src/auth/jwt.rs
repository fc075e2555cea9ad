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
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
    use base64::Engine as _;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    use super::*;

    struct Idp {
        _dir: tempfile::TempDir,
        config: JwtConfig,
        key: EncodingKey,
    }

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    /// An identity provider with one Ed25519 key `k1` in its JWKS file.
    fn idp() -> Idp {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        let dir = tempfile::tempdir().unwrap();
        let jwks = dir.path().join("jwks.json");
        std::fs::write(
            &jwks,
            json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "x": x}]}).to_string(),
        )
        .unwrap();
        Idp {
            _dir: dir,
            config: JwtConfig {
                jwks_file: jwks,
                issuer: "https://idp.example.com/".into(),
                audience: "ploke".into(),
                principal_claim: "email".into(),
                role_claim: Some("groups".into()),
                workspaces_claim: Some("ploke_workspaces".into()),
                default_workspaces: vec!["app".into()],
                leeway_secs: 0,
            },
            key: EncodingKey::from_ed_der(pkcs8.as_ref()),
        }
    }

    fn sign(idp: &Idp, kid: &str, claims: serde_json::Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, &claims, &idp.key).unwrap()
    }

    fn claims(extra: serde_json::Value) -> serde_json::Value {
        let mut c = json!({
            "iss": "https://idp.example.com/",
            "aud": "ploke",
            "exp": now() + 600,
            "email": "dana@example.com",
        });
        if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
            c.extend(e.clone());
        }
        c
    }

    #[test]
    fn a_valid_token_names_its_principal_with_claimed_or_filed_permissions() {
        let idp = idp();
        let v = JwtVerifier::load(&idp.config).unwrap();
        let empty = Table::default();
        let plain = sign(&idp, "k1", claims(json!({})));
        assert_eq!(
            v.verify(&plain, &empty),
            Ok(Principal {
                name: "dana@example.com".into(),
                role: Role::User,
                workspaces: vec!["app".into()],
                read_only: false,
            })
        );
        let claimed = sign(
            &idp,
            "k1",
            claims(json!({"groups": ["dev", "admin"], "ploke_workspaces": ["*"]})),
        );
        assert_eq!(
            v.verify(&claimed, &empty),
            Ok(Principal::everywhere("dana@example.com", Role::Admin))
        );
        // A principals file entry with tokens of its own is someone else: refused.
        let tokened = Table::parse(
            &format!(
                "[[principal]]\nname = \"dana@example.com\"\ntoken_sha256 = \"{}\"\nrole = \"admin\"\n",
                hex::encode(super::super::principals::token_sha256("dana-token-0123456789"))
            ),
            Path::new("p.toml"),
        )
        .unwrap();
        assert_eq!(
            v.verify(&claimed, &tokened).unwrap_err().to_string(),
            "invalid bearer token: the JWT names `dana@example.com`, a principal of the principals file who signs in with a token"
        );
        // The principals file's entry of that name wins over the claims.
        let filed = Table::parse(
            "[[principal]]\nname = \"dana@example.com\"\nworkspaces = [\"other\"]\n",
            Path::new("p.toml"),
        )
        .unwrap();
        assert_eq!(
            v.verify(&claimed, &filed),
            Ok(Principal {
                name: "dana@example.com".into(),
                role: Role::User,
                workspaces: vec!["other".into()],
                read_only: false,
            })
        );
    }

    #[test]
    fn forged_expired_misaddressed_and_unknown_tokens_are_refused_with_the_reason() {
        let idp = idp();
        let v = JwtVerifier::load(&idp.config).unwrap();
        let t = Table::default();
        let refused = |token: &str| v.verify(token, &t).unwrap_err().to_string();
        assert_eq!(
            refused(&sign(&idp, "k1", claims(json!({"exp": now() - 5})))),
            "invalid bearer token: the JWT has expired"
        );
        assert_eq!(
            refused(&sign(&idp, "k1", claims(json!({"nbf": now() + 600})))),
            "invalid bearer token: the JWT is not valid yet (nbf)"
        );
        // Claims of the wrong type or missing are named.
        assert_eq!(
            refused(&sign(&idp, "k1", claims(json!({"exp": "1900000000"})))),
            "invalid bearer token: the JWT has an `exp` claim that is not a number of seconds since 1970"
        );
        assert_eq!(
            refused(&sign(&idp, "k1", claims(json!({"nbf": "soon"})))),
            "invalid bearer token: the JWT has an `nbf` claim that is not a number of seconds since 1970"
        );
        let mut no_aud = claims(json!({}));
        no_aud.as_object_mut().unwrap().remove("aud");
        assert_eq!(
            refused(&sign(&idp, "k1", no_aud)),
            "invalid bearer token: the JWT lacks its `aud` claim (exp, iss and aud are required)"
        );
        assert_eq!(
            refused(&sign(
                &idp,
                "k1",
                claims(json!({"iss": "https://evil.example.com/"}))
            )),
            "invalid bearer token: the JWT has another issuer"
        );
        assert_eq!(
            refused(&sign(&idp, "k1", claims(json!({"aud": "grafana"})))),
            "invalid bearer token: the JWT is for another audience"
        );
        assert_eq!(
            refused(&sign(&idp, "k2", claims(json!({})))),
            "invalid bearer token: the JWT is signed by a key the JWKS file does not hold"
        );
        assert_eq!(
            refused(&sign(&idp, "k1", claims(json!({"email": ""})))),
            "invalid bearer token: the JWT has no usable `email` claim to name the principal"
        );
        assert_eq!(
            refused(&sign(&idp, "k1", claims(json!({"email": "admin"})))),
            "invalid bearer token: the JWT names `admin`, a principal name the gateway keeps for itself"
        );
        // Signed by another key that claims to be k1.
        let other = self::idp();
        assert_eq!(
            refused(&sign(&other, "k1", claims(json!({})))),
            "invalid bearer token: the JWT has a bad signature"
        );
        // An HS256 token made with the public key as the secret (algorithm confusion).
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        let confused = jsonwebtoken::encode(
            &header,
            &claims(json!({})),
            &EncodingKey::from_secret(b"public-key-bytes"),
        )
        .unwrap();
        assert_eq!(
            refused(&confused),
            "invalid bearer token: the JWT names an algorithm its key does not use"
        );
        assert_eq!(
            refused("a.b.c"),
            "invalid bearer token: the JWT is malformed"
        );
    }

    #[test]
    fn keys_that_cannot_verify_are_left_out_and_the_rest_used() {
        let idp = idp();
        let text = std::fs::read_to_string(&idp.config.jwks_file).unwrap();
        let mut set: serde_json::Value = serde_json::from_str(&text).unwrap();
        set["keys"].as_array_mut().unwrap().extend([
            json!({"kty": "RSA", "use": "enc", "kid": "e1", "alg": "RSA-OAEP", "n": "sXch", "e": "AQAB"}),
            json!({"kty": "EC", "crv": "P-521", "kid": "p521", "x": "AQ", "y": "AQ"}),
        ]);
        std::fs::write(&idp.config.jwks_file, set.to_string()).unwrap();
        let v = JwtVerifier::load(&idp.config).unwrap();
        let token = sign(&idp, "k1", claims(json!({})));
        assert_eq!(
            v.verify(&token, &Table::default()).unwrap().name,
            "dana@example.com"
        );
    }

    #[test]
    fn symmetric_keys_and_empty_sets_are_refused_at_load() {
        let idp = idp();
        std::fs::write(
            &idp.config.jwks_file,
            json!({"keys": [{"kty": "oct", "kid": "s", "k": "c2VjcmV0"}]}).to_string(),
        )
        .unwrap();
        let e = JwtVerifier::load(&idp.config).unwrap_err().to_string();
        assert!(e.ends_with("it holds no key that verifies signatures (key s: symmetric (oct) keys are refused: anyone who can read the file could mint tokens)"), "{e}");
        std::fs::write(&idp.config.jwks_file, r#"{"keys": []}"#).unwrap();
        let e = JwtVerifier::load(&idp.config).unwrap_err().to_string();
        assert!(e.ends_with("it holds no key"), "{e}");
    }

    #[test]
    fn jwt_shape() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(!looks_like_jwt("plain-token-0123456789"));
        assert!(!looks_like_jwt("a..b"));
    }
}
