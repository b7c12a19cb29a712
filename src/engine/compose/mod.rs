//! Docker Compose, driven through its own CLI (Compose v2: the `docker compose` plugin or a
//! v2 `docker-compose`); devcell never reads or writes Compose YAML itself.
//!
//! - [`ComposeCli`] finds the CLI ([`ComposeCli::locate`]) and refuses Compose v1;
//!   [`ComposeCli::config`] returns the resolved model (`docker compose config --format json`:
//!   `extends`, profiles, anchors and interpolation applied as Compose applies them).
//! - [`ComposeProject`] runs `up -d`, `ps`, `stop`, `down` and `build` for one project name
//!   and file list; a failure carries Compose's stderr ([`ComposeError::Failed`]).
//! - [`name`] is the reference CLI's project name rule (pure).
//! - [`overrides`] writes the override file for the primary service from a
//!   [`crate::engine::ContainerSpec`], as JSON (which is YAML), every string escaped so it
//!   arrives byte for byte through Compose's interpolation.
//!
//! Spec: [Compose properties](https://containers.dev/implementors/json_reference/#compose-specific).

mod cli;
pub mod name;
pub mod overrides;

pub use cli::{
    CONFIG_FILES_LABEL, CONFIG_HASH_LABEL, ComposeCli, ComposeContainer, ComposeError,
    ComposeProject, ONEOFF_LABEL, PROJECT_LABEL, SERVICE_LABEL, config_files_from_label,
    service_labels,
};
pub use name::{ProjectNameInputs, project_name, sanitize_project_name};
pub use overrides::{OVERRIDE_TAG, escape_interpolation, override_file, service_override};
