//! Which lifecycle hooks exist, by the spec's property names and in the order the spec runs
//! them ([spec: lifecycle scripts](https://containers.dev/implementors/json_reference/#lifecycle-scripts)).

use std::fmt;

use serde::Serialize;

/// A lifecycle hook, in the order the spec runs them (`Ord` follows that order).
///
/// `initializeCommand` runs on the host; the other five run in the container.
/// Serialises as the spec's property name (`"postCreateCommand"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum LifecycleHook {
    /// `initializeCommand`: on the host, before any image work, at every bring-up.
    InitializeCommand,
    /// `onCreateCommand`: once per container, first of the in-container hooks.
    OnCreateCommand,
    /// `updateContentCommand`: once per container, after `onCreateCommand`.
    UpdateContentCommand,
    /// `postCreateCommand`: once per container, after `updateContentCommand`.
    PostCreateCommand,
    /// `postStartCommand`: at every container start.
    PostStartCommand,
    /// `postAttachCommand`: at every attach.
    PostAttachCommand,
}

impl LifecycleHook {
    /// All hooks in spec order.
    pub const ALL: [LifecycleHook; 6] = [
        LifecycleHook::InitializeCommand,
        LifecycleHook::OnCreateCommand,
        LifecycleHook::UpdateContentCommand,
        LifecycleHook::PostCreateCommand,
        LifecycleHook::PostStartCommand,
        LifecycleHook::PostAttachCommand,
    ];

    /// The five in-container hooks in spec order.
    pub const CONTAINER: [LifecycleHook; 5] = [
        LifecycleHook::OnCreateCommand,
        LifecycleHook::UpdateContentCommand,
        LifecycleHook::PostCreateCommand,
        LifecycleHook::PostStartCommand,
        LifecycleHook::PostAttachCommand,
    ];

    /// The spec's property name, e.g. `postCreateCommand`.
    pub fn property(self) -> &'static str {
        match self {
            LifecycleHook::InitializeCommand => "initializeCommand",
            LifecycleHook::OnCreateCommand => "onCreateCommand",
            LifecycleHook::UpdateContentCommand => "updateContentCommand",
            LifecycleHook::PostCreateCommand => "postCreateCommand",
            LifecycleHook::PostStartCommand => "postStartCommand",
            LifecycleHook::PostAttachCommand => "postAttachCommand",
        }
    }

    /// The property of the reference CLI's merged configuration that accumulates this hook
    /// from every metadata entry (`postCreateCommands`); `None` for `initializeCommand`, which
    /// only devcontainer.json may set and which is never merged.
    pub fn merged_property(self) -> Option<&'static str> {
        match self {
            LifecycleHook::InitializeCommand => None,
            LifecycleHook::OnCreateCommand => Some("onCreateCommands"),
            LifecycleHook::UpdateContentCommand => Some("updateContentCommands"),
            LifecycleHook::PostCreateCommand => Some("postCreateCommands"),
            LifecycleHook::PostStartCommand => Some("postStartCommands"),
            LifecycleHook::PostAttachCommand => Some("postAttachCommands"),
        }
    }

    /// Parses a spec property name (`"postStartCommand"`).
    pub fn from_property(name: &str) -> Option<LifecycleHook> {
        LifecycleHook::ALL
            .into_iter()
            .find(|hook| hook.property() == name)
    }

    /// Whether the hook runs on the host (`initializeCommand`) rather than in the container.
    pub fn runs_on_host(self) -> bool {
        self == LifecycleHook::InitializeCommand
    }
}

impl fmt::Display for LifecycleHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.property())
    }
}
