//! L3: lifecycle hooks (`onCreateCommand` … `postAttachCommand`) in spec order.
