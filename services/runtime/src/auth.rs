//! Bearer-token authentication for the gateway: tokens compared in constant time; a missing or
//! wrong token is `UNAUTHENTICATED` before anything is forwarded.

use std::sync::Arc;

use subtle::ConstantTimeEq;

use crate::config::Secret;

/// Who is calling, as the gateway's authentication found: put into the request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// Presented an admin token (or the gateway serves without authentication, on loopback).
    pub admin: bool,
}

/// A tonic interceptor that accepts requests carrying one of the configured bearer tokens
/// (or admin tokens), and records the [`Caller`].
#[derive(Debug, Clone)]
pub struct BearerAuth {
    tokens: Arc<[Secret]>,
    admins: Arc<[Secret]>,
}

impl BearerAuth {
    /// Accepts exactly these tokens (an empty set refuses everything).
    pub fn new(tokens: Vec<Secret>) -> Self {
        Self {
            tokens: tokens.into(),
            admins: Arc::new([]),
        }
    }

    /// Also accepts `admins`, whose callers may administer.
    pub fn with_admins(mut self, admins: Vec<Secret>) -> Self {
        self.admins = admins.into();
        self
    }

    /// Whether `presented` equals one of the tokens. Every token is compared, in constant time,
    /// so timing reveals neither which token nor how much of it matched.
    pub fn accepts(&self, presented: &str) -> bool {
        self.caller(presented).is_some()
    }

    /// Who `presented` is: an admin, a user, or nobody. Both sets are always compared.
    pub fn caller(&self, presented: &str) -> Option<Caller> {
        let user = matches_any(&self.tokens, presented.as_bytes());
        let admin = matches_any(&self.admins, presented.as_bytes());
        (user || admin).then_some(Caller { admin })
    }
}

/// Whether `presented` equals one of `tokens`. Every token is compared, in constant time, so
/// timing reveals neither which token nor how much of it matched.
pub(crate) fn matches_any(tokens: &[Secret], presented: &[u8]) -> bool {
    let mut ok = subtle::Choice::from(0u8);
    for token in tokens {
        ok |= token.expose().as_bytes().ct_eq(presented);
    }
    bool::from(ok)
}

impl tonic::service::Interceptor for BearerAuth {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if self.tokens.is_empty() && self.admins.is_empty() {
            return Err(tonic::Status::unauthenticated(
                "the gateway has no tokens configured (PLOKE_GATEWAY_TOKENS or [gateway] tokens_file)",
            ));
        }
        let header = request
            .metadata()
            .get("authorization")
            .ok_or_else(|| tonic::Status::unauthenticated("missing bearer token"))?;
        let value = header
            .to_str()
            .map_err(|_| tonic::Status::unauthenticated("malformed authorization header"))?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or_else(|| tonic::Status::unauthenticated("authorization is not a bearer token"))?;
        if let Some(caller) = self.caller(token.trim()) {
            let mut request = request;
            request.extensions_mut().insert(caller);
            Ok(request)
        } else {
            Err(tonic::Status::unauthenticated("invalid bearer token"))
        }
    }
}

#[cfg(test)]
mod tests {
    use tonic::service::Interceptor;

    use super::*;

    fn request(auth: Option<&str>) -> tonic::Request<()> {
        let mut r = tonic::Request::new(());
        if let Some(a) = auth {
            r.metadata_mut().insert("authorization", a.parse().unwrap());
        }
        r
    }

    #[test]
    fn accepts_only_configured_tokens() {
        let mut auth = BearerAuth::new(vec![Secret::new("alpha"), Secret::new("beta")]);
        assert!(auth.call(request(Some("Bearer beta"))).is_ok());
        for (header, message) in [
            (None, "missing bearer token"),
            (Some("Bearer gamma"), "invalid bearer token"),
            (Some("Bearer alph"), "invalid bearer token"),
            (
                Some("Basic YWxwaGE="),
                "authorization is not a bearer token",
            ),
        ] {
            let status = auth.call(request(header)).unwrap_err();
            assert_eq!(
                (status.code(), status.message()),
                (tonic::Code::Unauthenticated, message)
            );
        }
    }

    #[test]
    fn empty_token_set_refuses_everything() {
        let auth = BearerAuth::new(Vec::new());
        assert!(!auth.accepts(""));
    }
}
