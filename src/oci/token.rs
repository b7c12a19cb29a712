//! OAuth2 identity tokens (`auths.<host>.identitytoken` in the Docker config, or a credential
//! helper answering `Username: "<token>"`): exchanged for a scoped access token at the
//! registry's token endpoint with the `refresh_token` grant (distribution's token
//! authentication spec, "OAuth2 token"; spec-notes/0262). `oci-client` only knows anonymous,
//! basic and ready-made bearer credentials, so devcell performs this one exchange itself and
//! hands the access token to `oci-client` as a bearer token.

use std::time::Duration;

use serde::Deserialize;

use super::error::{OciError, Result};
use super::transport::is_loopback;

/// The `client_id` devcell sends with the `refresh_token` grant.
pub const CLIENT_ID: &str = "devcell";

/// Access tokens without `expires_in` are valid this long (the token spec's default).
pub const DEFAULT_EXPIRES_IN: Duration = Duration::from_secs(60);

/// A `Bearer` challenge from a registry's `WWW-Authenticate` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BearerChallenge {
    /// The token endpoint (`realm`).
    pub realm: String,
    /// The `service` parameter, when given.
    pub service: Option<String>,
}

/// Finds the `Bearer` challenge (with a `realm`) among the challenges of a `WWW-Authenticate`
/// header value. `None` when there is none or the header does not parse.
pub fn bearer_challenge(header: &str) -> Option<BearerChallenge> {
    let challenges = http_auth::parse_challenges(header).ok()?;
    challenges
        .iter()
        .filter(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        .find_map(|c| {
            let param = |name: &str| {
                c.params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            Some(BearerChallenge {
                realm: param("realm")?,
                service: param("service"),
            })
        })
}

/// The `scope` asked for: `repository:<repository>:pull`, or `…:pull,push` for a push.
pub fn scope(repository: &str, push: bool) -> String {
    let actions = if push { "pull,push" } else { "pull" };
    format!("repository:{repository}:{actions}")
}

/// Whether the identity token may be sent to `realm`: over HTTPS, or plain HTTP to a loopback
/// host (a local token server). Refusing anything else keeps a long-lived refresh token off
/// the wire in clear text.
pub fn realm_allowed(realm: &str) -> bool {
    match reqwest::Url::parse(realm) {
        Ok(url) if url.scheme() == "https" => true,
        Ok(url) if url.scheme() == "http" => url.host_str().is_some_and(is_loopback),
        _ => false,
    }
}

/// The token endpoint's answer (`access_token`; some servers say `token`).
#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// A scoped access token and how long it is valid.
#[derive(Clone)]
pub struct AccessToken {
    /// The bearer token.
    pub token: String,
    /// Its lifetime from now (`expires_in`, else [`DEFAULT_EXPIRES_IN`]).
    pub expires_in: Duration,
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("token", &"<redacted>")
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

/// Exchanges `refresh_token` for an access token to `repository` on `registry` (reached at
/// `base`, `http://host:port` or `https://host`): reads the `Bearer` challenge of `GET
/// <base>/v2/`, then `POST`s the form `grant_type=refresh_token`, `service`, `scope`,
/// `client_id`, `refresh_token` to its realm.
///
/// # Errors
/// [`OciError::TokenExchange`] when the registry offers no bearer challenge, the realm is not
/// HTTPS (nor loopback HTTP), the endpoint refuses (its status is named, never the token) or
/// answers without a token; [`OciError::Http`] for network errors.
pub async fn exchange_refresh_token(
    client: &reqwest::Client,
    registry: &str,
    base: &str,
    repository: &str,
    push: bool,
    refresh_token: &str,
) -> Result<AccessToken> {
    let fail = |reason: String| OciError::TokenExchange {
        registry: registry.to_owned(),
        reason,
    };
    let ping = format!("{base}/v2/");
    let http = |url: &str| {
        let url = url.to_owned();
        move |source| OciError::Http { url, source }
    };
    let response = client.get(&ping).send().await.map_err(http(&ping))?;
    let challenge = response
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(bearer_challenge)
        .ok_or_else(|| {
            fail(format!(
                "`{ping}` answered {} without a `Bearer` challenge; an identity token needs \
                 token authentication",
                response.status()
            ))
        })?;
    if !realm_allowed(&challenge.realm) {
        return Err(fail(format!(
            "refusing to send the identity token to `{}`: the token endpoint must use HTTPS \
             (or be on loopback)",
            challenge.realm
        )));
    }
    let scope = scope(repository, push);
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("client_id", CLIENT_ID),
        ("scope", scope.as_str()),
        ("refresh_token", refresh_token),
    ];
    if let Some(service) = &challenge.service {
        form.push(("service", service.as_str()));
    }
    let response = client
        .post(&challenge.realm)
        .form(&form)
        .send()
        .await
        .map_err(http(&challenge.realm))?;
    let status = response.status();
    if !status.is_success() {
        return Err(fail(format!(
            "the token endpoint `{}` answered {status} for `{scope}`",
            challenge.realm
        )));
    }
    let answer: TokenAnswer = response.json().await.map_err(|_| {
        fail(format!(
            "the token endpoint `{}` did not answer with token JSON",
            challenge.realm
        ))
    })?;
    let token = answer
        .access_token
        .or(answer.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            fail(format!(
                "the token endpoint `{}` answered without `access_token`",
                challenge.realm
            ))
        })?;
    Ok(AccessToken {
        token,
        expires_in: answer
            .expires_in
            .map_or(DEFAULT_EXPIRES_IN, Duration::from_secs),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenge_is_found_among_several() {
        let c = bearer_challenge(
            r#"Basic realm="x", Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#,
        )
        .unwrap();
        assert_eq!(c.realm, "https://auth.example/token");
        assert_eq!(c.service.as_deref(), Some("registry.example"));
        assert_eq!(bearer_challenge(r#"Basic realm="registry""#), None);
        assert_eq!(bearer_challenge("Bearer service=\"x\""), None);
        assert_eq!(bearer_challenge("not a challenge ,,"), None);
    }

    #[test]
    fn scope_names_the_repository_and_actions() {
        assert_eq!(scope("ns/hello", false), "repository:ns/hello:pull");
        assert_eq!(scope("ns/hello", true), "repository:ns/hello:pull,push");
    }

    #[test]
    fn the_token_goes_only_to_https_or_loopback_realms() {
        assert!(realm_allowed("https://auth.example/token"));
        assert!(realm_allowed("http://127.0.0.1:5001/token"));
        assert!(realm_allowed("http://localhost:5001/token"));
        assert!(!realm_allowed("http://auth.example/token"));
        assert!(!realm_allowed("ftp://auth.example/token"));
        assert!(!realm_allowed("/token"));
    }

    #[test]
    fn access_token_debug_is_redacted() {
        let t = AccessToken {
            token: "secret-access".into(),
            expires_in: DEFAULT_EXPIRES_IN,
        };
        assert!(!format!("{t:?}").contains("secret-access"));
    }
}
