//! Many developers on one deployment: principals from a principals file, each owning their
//! sessions and proposals (someone else's look like ones that do not exist), workspace
//! permissions and admin-only administration, and each developer's own code through their
//! session's overlay, with approved edits delivered to their checkout.

mod first_run;
mod overlay;
mod ownership;
mod permissions;

use ploke_e2e::fake_provider::FakeProvider;
use ploke_e2e::{AuthedGateway, Sandbox};
use ploke_runtime::config::PlokeConfig;

pub(super) const ALICE: &str = "alice-token-0123456789";
pub(super) const BOB: &str = "bob-token-0123456789ab";
/// An admin.
pub(super) const ROOT: &str = "root-token-0123456789a";
/// A user allowed only a workspace that is not served.
pub(super) const CAROL: &str = "carol-token-012345678";
/// A reviewer of every workspace who runs read-only tools only.
pub(super) const RITA: &str = "rita-token-0123456789a";

/// A shared deployment (the Sandbox, a fake provider) and its principals file.
pub(super) struct Team {
    pub sandbox: Sandbox,
    pub fake: FakeProvider,
    _principals: tempfile::TempDir,
}

fn hash(token: &str) -> String {
    ploke_gateway::auth::principals::token_sha256(token)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The principals file of the team: alice and bob (users of every workspace), root (admin),
/// carol (a user of the workspace `elsewhere` only) and rita (read-only, every workspace).
pub(super) fn principals_toml() -> String {
    format!(
        r#"
[[principal]]
name = "alice"
token_sha256 = "{}"
workspaces = ["*"]

[[principal]]
name = "bob"
token_sha256 = "{}"
workspaces = ["*"]

[[principal]]
name = "root"
token_sha256 = "{}"
role = "admin"
workspaces = ["*"]

[[principal]]
name = "carol"
token_sha256 = "{}"
workspaces = ["elsewhere"]

[[principal]]
name = "rita"
token_sha256 = "{}"
workspaces = ["*"]
read_only = true
"#,
        hash(ALICE),
        hash(BOB),
        hash(ROOT),
        hash(CAROL),
        hash(RITA)
    )
}

/// The team's deployment; `adjust` may change the rest of the configuration.
pub(super) async fn team(adjust: impl FnOnce(&mut PlokeConfig)) -> Team {
    let fake = FakeProvider::start().await.unwrap();
    let mut provider = fake.provider_config(Some(16_000));
    provider.api_key_env = Some(super::session::KEY_ENV.into());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("principals.toml");
    std::fs::write(&file, principals_toml()).unwrap();
    let sandbox = Sandbox::start_with_provider(provider, move |c| {
        c.gateway.principals_file = Some(file);
        // Per-principal credentials only: shared tokens beside them are refused at start.
        c.gateway.tokens.clear();
        adjust(c);
    })
    .await
    .unwrap();
    Team {
        sandbox,
        fake,
        _principals: dir,
    }
}

impl Team {
    /// A gateway client presenting `token`.
    pub(super) fn as_(&self, token: &str) -> AuthedGateway {
        self.sandbox.gateway_with_token(Some(token))
    }
}

/// `(code, message)` of a refusal with `id` replaced by `ID`: two refusals that differ only in
/// the id they name are the same answer.
pub(super) fn answer(status: &tonic::Status, id: &str) -> (tonic::Code, String) {
    (status.code(), status.message().replace(id, "ID"))
}
