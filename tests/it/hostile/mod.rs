//! Hostile repositories (issue: "a hostile repository cannot reach the host"): the attacker
//! owns the repository, the user runs devcell with default flags. Each test asserts that
//! nothing happened on the host (tripwire folders and markers in `support::hostile`, `docker
//! inspect`), not only that an error was printed; and that the grant, when given, does what it
//! asks and is reported. Threat model: `spec-notes/0400-threat-model.md`.

mod attacks;
mod before_build;
mod closed_registries;
mod compose_projects;
mod eighth_review;
mod env_and_build;
mod host_bounds;
mod host_execution;
mod host_programs;
mod hostile_agent;
mod identity_and_escapes;
mod image_labels;
mod judge_then_use;
mod paths;
mod seventh_review;
mod terminal;
mod workspace_git;
mod workspace_git_after_up;
