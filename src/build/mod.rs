//! L3: base image + Features → a tagged image, cached by a hash of its inputs
//! ([spec: Features, installation](https://containers.dev/implementors/features/#installation)).
//!
//! - [`features`]: the generated build context and Dockerfile that install each Feature in its
//!   own layer, restore the image's `USER` and write the `devcontainer.metadata` label, tagged
//!   `devcell/features:<key>`; [`features::needs_build`] skips the build when the tag exists.
//! - [`uid`]: the `updateRemoteUserUID` layer, tagged `devcell/uid:<key>`.
//! - [`image`]: both built through the [`crate::engine::Engine`], only when the tag is missing.
//! - [`cache_key`]: the documented key hashing; [`tree`]: stable folder walks;
//!   [`dockerfile`]: safe Dockerfile and shell words; [`final_user`]: the `USER` a Dockerfile's
//!   final stage will run as, read before the build.
//!
//! Everything here is pure apart from reading Feature folders and writing the temporary build
//! context; [`image`] hands the context to the engine. No secret goes into a build: the label
//! holds the unsubstituted `devcontainer.json` entry, and `devcontainer.json`'s `containerEnv`
//! is applied when the container is created, not baked into the image (spec-note 0122).

pub mod cache_key;
pub mod dockerfile;
pub mod error;
pub mod features;
pub mod final_user;
pub mod image;
pub mod tree;
pub mod uid;

pub use error::{BuildError, Result};
pub use features::{
    BaseImage, BuildContext, FeatureLayer, FeaturesInput, FeaturesPlan, needs_build, plan,
    plan_with_labels,
};
pub use image::{
    BuiltImage, ImageOptions, ensure_features_image, ensure_features_image_with, ensure_uid_image,
};
pub use uid::{UidInput, UidPlan, plan_uid_update};
