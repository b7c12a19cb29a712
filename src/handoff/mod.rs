//! L4: operations (`read-configuration`, `up`, `exec`, agent handoff). Library code never prints.

pub mod error;
pub mod features;
pub mod read_configuration;

pub use error::{HandoffError, Result};
pub use read_configuration::{ReadConfiguration, ReadConfigurationOptions, read_configuration};
