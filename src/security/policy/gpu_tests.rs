//! GPUs as a permission judged by the policy (`security::gpu` names the request and its
//! grant). Kept with the policy, which imports `gpu`, so that `gpu` never imports it back.

use crate::engine::GpuRequest;
use crate::security::gpu::permission;
use crate::security::permissions::{Permission, PermissionRequest, RequestStatus, Source};
use crate::security::{Grants, SecurityProfile};

fn request(asked: &str) -> Permission {
    permission(&GpuRequest {
        asked: asked.to_string(),
    })
}

/// The request names what the configuration asked, is granted by `gpu` (command line or
/// config.toml, one parser) and shows that grant when refused.
#[test]
fn a_gpu_is_a_request_granted_by_allow_gpu() {
    let gpu = request("true");
    assert_eq!(gpu.kind(), "gpu");
    assert_eq!(gpu.value(), Some("true"));
    assert_eq!(gpu.grant_flag().as_deref(), Some("--allow gpu"));
    assert_eq!(
        gpu.to_string(),
        "the host's GPUs (`hostRequirements.gpu`: true)"
    );
    let refused = PermissionRequest {
        permission: request(r#"{"cores":2}"#),
        source: Source::DevcontainerJson,
        status: RequestStatus::Refused,
    };
    assert_eq!(
        refused.to_string(),
        "the host's GPUs (`hostRequirements.gpu`: {\"cores\":2}) (from devcontainer.json), grant with `--allow gpu`"
    );
    assert_eq!(
        serde_json::to_value(&refused).unwrap(),
        serde_json::json!({
            "permission": "gpu",
            "value": "{\"cores\":2}",
            "source": "devcontainer.json",
            "status": "refused",
            "grant": "--allow gpu"
        })
    );

    assert!(!Grants::default().allows(&gpu));
    let granted = Grants::parse(&["gpu"]).unwrap();
    assert!(granted.allows(&gpu) && granted.allows(&request("\"optional\"")));
    // the Compose service's request, and its own grant, are the same GPUs
    assert!(granted.allows(&Permission::Device("gpu".into())));
    assert!(!granted.allows(&Permission::Device("/dev/nvidia0".into())));
    assert!(Grants::parse(&["device:gpu"]).unwrap().allows(&gpu));
    assert!(!Grants::parse(&["device:/dev/dri"]).unwrap().allows(&gpu));
    assert!(Grants::parse(&["gpu:all"]).is_err());

    let judged = granted.judge_devcontainer_json(&SecurityProfile::default(), gpu.clone(), false);
    assert_eq!(judged.status, RequestStatus::Granted);
    let judged = Grants::default().judge_devcontainer_json(&SecurityProfile::default(), gpu, false);
    assert_eq!(judged.status, RequestStatus::Refused);
}

/// A container asking for the GPUs is refused under `hardened` without the grant (the
/// refusal lists the request with its grant), keeps them with it, and under `reference`
/// is allowed by the profile.
#[test]
fn the_policy_refuses_a_gpu_without_the_grant_and_keeps_it_with_it() {
    use crate::engine::ContainerSpec;
    use crate::security::{PolicyInput, SecurityError, apply};
    let input = PolicyInput {
        spec: ContainerSpec {
            image: "img".into(),
            gpu: Some(GpuRequest {
                asked: "true".into(),
            }),
            ..ContainerSpec::default()
        },
        remote_user: Some("vscode".into()),
        image_user: Some("vscode".into()),
        workspace: "/w".into(),
        ..PolicyInput::default()
    };
    let hardened = SecurityProfile::default();
    match apply(&hardened, &input, &Grants::default()) {
        Err(SecurityError::Refused { requests, .. }) => {
            let gpu: Vec<_> = requests
                .iter()
                .filter(|r| r.permission == request("true"))
                .collect();
            assert_eq!(gpu.len(), 1, "{requests:?}");
            assert_eq!(gpu[0].status, RequestStatus::Refused);
            assert_eq!(gpu[0].source, Source::DevcontainerJson);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let applied = apply(&hardened, &input, &Grants::parse(&["gpu"]).unwrap()).unwrap();
    assert!(applied.spec.gpu.is_some());
    assert!(
        applied
            .requests
            .iter()
            .any(|r| r.permission == request("true") && r.status == RequestStatus::Granted)
    );
    let reference = apply(&SecurityProfile::Reference, &input, &Grants::default()).unwrap();
    assert!(reference.spec.gpu.is_some());

    // no GPU asked, no request
    let none = PolicyInput {
        spec: ContainerSpec {
            gpu: None,
            ..input.spec.clone()
        },
        ..input
    };
    let applied = apply(&hardened, &none, &Grants::default()).unwrap();
    assert!(
        applied
            .requests
            .iter()
            .all(|r| r.permission.kind() != "gpu")
    );
}
