//! Fuzz target: arbitrary bytes as a devcontainer.json → parse → validate → substitute and
//! compute the workspace → migrate → metadata merge. Must never panic or overflow the stack; errors are fine.
#![no_main]

use std::collections::HashMap;
use std::path::Path;

use devcell::config::{jsonc, metadata, model, workspace};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = Path::new("/fuzz/ws/.devcontainer/devcontainer.json");
    let Ok(doc) = jsonc::parse(file, text) else {
        return;
    };
    // Every warning and location must render.
    for w in &doc.warnings {
        let _ = w.to_string();
    }
    if let Err(e) = model::validate(&doc) {
        let _ = e.to_string();
        return;
    }
    let mut value = doc.value.clone();
    let opts = workspace::ResolveOptions {
        workspace_folder: "/fuzz/ws".into(),
        config_file: file.to_owned(),
        mount_workspace_git_root: false,
        env: HashMap::from([("HOME".to_owned(), "/home/fuzz".to_owned())]),
    };
    if workspace::resolve(&mut value, &opts).is_ok() {
        let _ = model::validate_value(&doc, &value);
        if let serde_json::Value::Object(map) = &mut value {
            model::migrate_legacy(map);
        }
        let entries = [metadata::config_entry(&value)];
        let _ = metadata::merge_configuration(&value, &entries);
    }
});
