//! One module per subcommand, named like it. Each turns args into options, calls `handoff`,
//! and renders the result.

pub mod features_package;
pub mod features_publish;
pub mod features_resolve_dependencies;
pub mod outdated;
pub mod read_configuration;
pub mod upgrade;
