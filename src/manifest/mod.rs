//! Tool manifests: model, discovery and lint.
