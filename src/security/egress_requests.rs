//! The egress destinations a repository asks for (`customizations.devcell.egress`, issue 13
//! item 3; spec-note 0501). A repository can only *request* them: each is a
//! [`Permission::Egress`] for the operation to judge ([`super::judge`]) with the user's grants
//! (`--allow egress:DEST`, `allow` in the user's config), shown in the plan like any other.
//!
//! ```jsonc
//! "customizations": { "devcell": { "egress": ["api.example.test", "web.example.test:8080"] } }
//! ```

use serde_json::{Map, Value};

use super::error::{Result, SecurityError};
use super::policy::{Permission, Source};

/// The destinations `customizations` (the merged configuration's, opaque) requests under
/// `devcell.egress`, in order and without repeats, as `(Permission::Egress(entry), source)`.
/// `normalise` checks one entry's syntax and returns its normalised form (`host:port[=address]`;
/// the operation passes the egress layer's parser, which this layer may not name).
///
/// # Errors
/// [`SecurityError::InvalidEgressRequest`] with the property path when `devcell` or `egress`
/// is not the expected shape, or an entry is not a string or `normalise` rejects it.
pub fn egress_requests(
    customizations: Option<&Map<String, Value>>,
    source: &Source,
    normalise: impl Fn(&str) -> std::result::Result<String, String>,
) -> Result<Vec<(Permission, Source)>> {
    let bad = |property: String, message: String| SecurityError::InvalidEgressRequest {
        property,
        message,
    };
    let Some(devcell) = customizations.and_then(|c| c.get("devcell")) else {
        return Ok(Vec::new());
    };
    let Some(devcell) = devcell.as_object() else {
        return Err(bad(
            "customizations.devcell".into(),
            "expected an object".into(),
        ));
    };
    let entries = match devcell.get("egress") {
        None => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(bad(
                "customizations.devcell.egress".into(),
                "expected an array of destinations (`host[:port][=address]`)".into(),
            ));
        }
    };
    let mut out: Vec<(Permission, Source)> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let property = format!("customizations.devcell.egress[{i}]");
        let Some(text) = entry.as_str() else {
            return Err(bad(
                property,
                "expected a string (`host[:port][=address]`)".into(),
            ));
        };
        let normalised = normalise(text).map_err(|why| bad(property, why))?;
        let permission = Permission::Egress(normalised);
        if !out.iter().any(|(p, _)| *p == permission) {
            out.push((permission, source.clone()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::{Grants, RequestStatus, SecurityProfile, judge};
    use serde_json::json;

    /// A stand-in for the egress parser: lowercase, `:443` added, spaces refused.
    fn normalise(text: &str) -> std::result::Result<String, String> {
        if text.contains(' ') || text.is_empty() {
            return Err(format!("`{text}` is not `host[:port]`"));
        }
        let t = text.to_ascii_lowercase();
        Ok(if t.contains(':') {
            t
        } else {
            format!("{t}:443")
        })
    }

    fn customizations(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn requested_destinations_become_egress_requests_the_user_grants() {
        let c = customizations(json!({"devcell": {"egress": [
            "API.example.test", "web.example.test:8080", "api.example.test"
        ]}, "vscode": {}}));
        let asked = egress_requests(Some(&c), &Source::DevcontainerJson, normalise).unwrap();
        assert_eq!(
            asked,
            vec![
                (
                    Permission::Egress("api.example.test:443".into()),
                    Source::DevcontainerJson
                ),
                (
                    Permission::Egress("web.example.test:8080".into()),
                    Source::DevcontainerJson
                ),
            ],
            "normalised, in order, each once"
        );
        assert_eq!(
            asked[0].0.grant_flag().as_deref(),
            Some("--allow egress:api.example.test:443")
        );
        // The user grants one, written without the default port; the other stays refused.
        let grants = Grants::parse(&["egress:api.example.test"]).unwrap();
        let judged = judge(&SecurityProfile::default(), asked, &grants);
        assert_eq!(judged[0].status, RequestStatus::Granted);
        assert_eq!(judged[1].status, RequestStatus::Refused);
        assert_eq!(judged[1].permission.kind(), "egress");
        assert!(
            judged[1]
                .to_string()
                .contains("grant with `--allow egress:web.example.test:8080`"),
            "{}",
            judged[1]
        );
    }

    #[test]
    fn no_request_without_the_devcell_customization() {
        assert!(
            egress_requests(None, &Source::DevcontainerJson, normalise)
                .unwrap()
                .is_empty()
        );
        let c = customizations(json!({"devcell": {"other": 1}}));
        assert!(
            egress_requests(Some(&c), &Source::DevcontainerJson, normalise)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_bad_shape_or_entry_names_its_property() {
        for (v, property) in [
            (json!({"devcell": []}), "customizations.devcell"),
            (
                json!({"devcell": {"egress": "a.test"}}),
                "customizations.devcell.egress",
            ),
            (
                json!({"devcell": {"egress": ["a.test", 5]}}),
                "customizations.devcell.egress[1]",
            ),
            (
                json!({"devcell": {"egress": ["a b"]}}),
                "customizations.devcell.egress[0]",
            ),
        ] {
            let err = egress_requests(
                Some(&customizations(v)),
                &Source::DevcontainerJson,
                normalise,
            )
            .unwrap_err();
            assert!(
                err.to_string().contains(&format!("`{property}`")),
                "{property}: {err}"
            );
        }
    }

    #[test]
    fn a_grant_for_another_port_or_pin_does_not_match() {
        let grants = Grants::parse(&["egress:api.example.test:8443"]).unwrap();
        assert!(!grants.allows(&Permission::Egress("api.example.test:443".into())));
        assert!(grants.allows(&Permission::Egress("api.example.test:8443".into())));
        let grants = Grants::parse(&["egress:web.test:80=127.0.0.1"]).unwrap();
        assert!(grants.allows(&Permission::Egress("web.test:80=127.0.0.1".into())));
        assert!(!grants.allows(&Permission::Egress("web.test:80".into())));
        assert!(Grants::parse(&["egress:"]).is_err());
    }
}
