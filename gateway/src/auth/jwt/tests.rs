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
            hex::encode(super::super::principals::token_sha256(
                "dana-token-0123456789"
            ))
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
