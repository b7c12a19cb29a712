//! L0: text formats that several layers read, written once: the Docker client configuration's
//! registry credentials ([`docker_config`]), image references ([`image_reference`]), `--mount`
//! strings ([`mount`]), POSIX shell words ([`shell`]), loosely typed JSON values ([`json`]) and
//! text made safe for a terminal ([`terminal`]), and the environment of the host programs devcell
//! starts ([`host_tool`]). Pure, except that [`docker_config`] runs the
//! configured credential helpers.

pub mod docker_config;
pub mod host_tool;
pub mod image_reference;
pub mod json;
pub mod mount;
pub mod shell;
pub mod terminal;
