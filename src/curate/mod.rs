//! Quality filter, flattening into per-step SFT samples, exports.
