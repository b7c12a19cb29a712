//! Hostile repositories: see `super`.
