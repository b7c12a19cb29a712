//! L2: the container engine boundary. The only module that names `bollard`.
