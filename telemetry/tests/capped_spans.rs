//! A span of a library capped below its level is never created when nothing is exported: the
//! registry allocates no slot and the log layer formats nothing for it (rmcp opens an `info` span
//! per stateless MCP request; the gateway caps rmcp at `warn`). Its own process: `init` installs
//! the global subscriber once.

use memgate_telemetry::{Options, init, keep_every_event};

static OPTIONS: Options = Options {
    service_name: "capped-spans-test",
    log_caps: &["capped_library=warn"],
    exported_spans: &["exported.span"],
    drop_log_event: keep_every_event,
};

#[test]
fn a_capped_library_span_is_not_created_without_export() {
    // The cap is added after `RUST_LOG`'s directives, so it holds whatever the environment says.
    let telemetry = init(&OPTIONS);
    let capped = tracing::info_span!(target: "capped_library::service", "serve_inner");
    assert!(capped.is_disabled(), "an info span of a library capped at warn was created");
    let warned = tracing::warn_span!(target: "capped_library::service", "at_the_cap");
    assert!(!warned.is_disabled(), "a span at the cap is logged (the test can tell the two apart)");
    telemetry.shutdown();
}
