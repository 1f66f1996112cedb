//! Dialect ids owned by memgate itself.
//!
//! A built-in id names a verified contract compiled into the binaries (see the `presets/` crate).
//! Reserved ids name services whose contract could not be verified yet: they are refused everywhere,
//! so that a later release can ship them without an administrator's object already holding the name.

/// Built-in dialects shipped with this release, each with verified contract fixtures.
pub const SHIPPED: &[&str] = &["mem0-platform-v3", "mem0-oss-rest-2026-08", "aliyun-polardb-mysql-2026-08"];

/// Ids reserved for future built-ins; not usable until their contract is verified.
pub const RESERVED: &[&str] = &["aliyun-hologres-mem0-2.0.6", "aliyun-rds-postgresql-memory-2026-08"];

/// How memgate classifies a dialect id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinStatus {
    /// A built-in shipped with this release.
    Shipped,
    /// Reserved for a future built-in; refused.
    Reserved,
    /// Not a memgate id: free for administrators' DialectPresets.
    Unknown,
}

/// Classify `id` against the shipped and reserved built-in ids.
pub fn classify(id: &str) -> BuiltinStatus {
    if SHIPPED.contains(&id) {
        BuiltinStatus::Shipped
    } else if RESERVED.contains(&id) {
        BuiltinStatus::Reserved
    } else {
        BuiltinStatus::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_and_reserved_ids_are_disjoint() {
        for id in SHIPPED {
            assert_eq!(classify(id), BuiltinStatus::Shipped);
            assert!(!RESERVED.contains(id));
        }
        for id in RESERVED {
            assert_eq!(classify(id), BuiltinStatus::Reserved);
        }
        assert_eq!(classify("my-dialect"), BuiltinStatus::Unknown);
    }
}
