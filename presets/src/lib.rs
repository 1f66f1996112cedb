//! Built-in dialects: verified contracts compiled into every memgate binary.
//!
//! Each built-in lives in `presets/dialects/<id>/` as two data files: `preset.yaml` (the search
//! grammar, plus the write contract only a built-in may carry) and `fixtures.yaml` (exact upstream
//! requests and answers that prove the contract). `presets.lock` pins the content hash of every
//! published preset: a published id never changes meaning, a changed contract gets a new id.

mod builtin;
mod fixtures;

pub use builtin::{BuiltinDialect, ContentEncoding, WriteAnswer, WriteContract, all, get, view};
pub use fixtures::{
    ExpectedItem, ExpectedRequest, FixtureProvider, Fixtures, IngestFixture, IngestUnit, SearchExpectation,
    SearchFixture, UnitExpectation, UpstreamAnswer, fixtures,
};

/// Embedded sources: id, `preset.yaml`, `fixtures.yaml`.
const SOURCES: &[(&str, &str, &str)] = &[
    (
        "mem0-platform-v3",
        include_str!("../dialects/mem0-platform-v3/preset.yaml"),
        include_str!("../dialects/mem0-platform-v3/fixtures.yaml"),
    ),
    (
        "mem0-oss-rest-2026-08",
        include_str!("../dialects/mem0-oss-rest-2026-08/preset.yaml"),
        include_str!("../dialects/mem0-oss-rest-2026-08/fixtures.yaml"),
    ),
    (
        "aliyun-polardb-mysql-2026-08",
        include_str!("../dialects/aliyun-polardb-mysql-2026-08/preset.yaml"),
        include_str!("../dialects/aliyun-polardb-mysql-2026-08/fixtures.yaml"),
    ),
];
