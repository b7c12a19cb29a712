//! L3: base image + Features → a tagged image, cached by a hash of its inputs.
