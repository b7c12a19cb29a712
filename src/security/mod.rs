//! L3: security profiles (`hardened`, `reference`), permission requests and audit.
//!
//! [`apply`] is a pure function: the container the merged configuration asks for
//! ([`PolicyInput`]), the [`SecurityProfile`] and the user's [`Grants`] → the container to
//! create and every [`PermissionRequest`] with what was done with it, or
//! [`SecurityError::Refused`] listing them (then nothing may be created). Grants come only from
//! the user (CLI `--allow`, the user's devcell config), never from the repository.
//! [`audit`] and [`probe`] score an existing configuration or container. [`compose`] bounds
//! every service of a Compose configuration, judged on Compose's resolved model.

pub mod audit;
pub mod baseline;
pub mod build_network;
pub mod build_stages;
pub mod choice;
pub mod compose;
pub mod compose_files;
pub mod dockerfile;
pub mod egress_requests;
pub mod error;
pub mod git_baseline;
pub mod git_cover;
pub mod git_entries;
pub mod git_quarantine;
pub mod gpu;
pub mod host_command;
pub mod host_env;
pub mod host_path;
pub mod identity;
pub mod image_tags;
pub mod known;
pub mod mounted;
pub mod origins;
pub mod permissions;
pub mod planted;
pub mod planted_after;
pub mod policy;
pub mod probe;
pub mod profile;
pub mod reattach;
pub mod registries;
pub mod reuse;
pub mod volumes;

pub use baseline::BaselineGap;
pub use choice::{Choice, ChoiceError, InvalidLimit, SecurityOptions};
pub use egress_requests::egress_requests;
pub use error::{PolicyError, Result, SecurityError};
pub use origins::origins_from_metadata;
pub use policy::{
    Applied, Grants, Origins, Permission, PermissionRequest, PolicyInput, RequestStatus, Source,
    apply, configuration_requests, judge, provides_user, refusal, refusal_of_all,
};
pub use profile::{ProfileLimits, SecurityProfile};
pub use reuse::{ExistingContainer, check_reuse};
