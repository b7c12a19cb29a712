//! L4: operations (`read-configuration`, `up`, `exec`, agent handoff). Library code never prints.

pub mod agents_md;
pub mod context;
pub mod envelope;
pub mod error;
pub mod features;
pub mod read_configuration;
pub mod resolve_dependencies;
pub mod state;
pub mod workspace;

pub use error::{HandoffError, Result};
pub use read_configuration::{
    ReadConfiguration, ReadConfigurationExtras, ReadConfigurationOptions, read_configuration,
    read_configuration_with,
};
pub mod outdated;
