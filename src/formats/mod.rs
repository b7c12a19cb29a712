//! L0: text formats that several layers read, written once: the Docker client configuration's
//! registry credentials ([`docker_config`]), `--mount` strings ([`mount`]) and POSIX shell words
//! ([`shell`]). Pure, except that [`docker_config`] runs the configured credential helpers.

pub mod docker_config;
pub mod mount;
pub mod shell;
