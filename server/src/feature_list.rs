//! The list of features, in a file of its own: the API and the workers read it, and it names
//! every feature's folder, none of which looks back at it.

/// Every feature, once: the API merges their routers and the workers start their passes.
pub const FEATURES: &[crate::features::Feature] = &[
    crate::catalog::FEATURE,
    crate::identity::api::FEATURE,
    crate::agents::FEATURE,
    crate::board::FEATURE,
    crate::collections::FEATURE,
    crate::gates::FEATURE,
    crate::runs::FEATURE,
    crate::results::FEATURE,
    crate::baselines::FEATURE,
    crate::jobs::FEATURE,
    crate::openenv::FEATURE,
    crate::webhooks::FEATURE,
    crate::legacy::FEATURE,
    crate::backup::turn::FEATURE,
];
