//! Leader election on a `coordination.k8s.io/v1` Lease, with the maintained `kube-lease-manager`
//! crate (0.13, built on kube 5; alex-karpenko/kube-lease-manager): it locks the Lease with
//! server-side apply, renews it `grace` before it expires and takes over an expired one.
//!
//! Several operator replicas each hold a [`Leadership`]; only the holder of the Lease reconciles.
//! A replica that loses the Lease stops (the process exits and is restarted as a standby) rather
//! than risk reconciling beside the new leader. Dropping a [`Leadership`] releases the Lease, so
//! a clean shutdown hands over at once; a killed leader is replaced once its Lease expires.
//!
//! `kube-lease-manager` keeps reporting "leader" while it cannot reach the API server, even once
//! the Lease has expired and a standby may take it. So the leader also reads the Lease itself and
//! acts only through a [`Gate`] that is open while the Lease, as last read, names this process and
//! stays valid for more than a safety margin ([`lead_remaining`]): an outage longer than the Lease
//! closes the gate on time (no write after the Lease could have expired; the process keeps running)
//! and the next read showing a renewal opens it again. A read naming another holder is a lost Lease.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::{Api, Client};
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::settings::LeaderSettings;

/// Longest one read of the Lease may take; a slower read counts as failed.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// After failed reads with the gate closed (the API server is unreachable), reads are retried after
/// this, doubled per failure up to [`RETRY_MAX`].
const RETRY_BASE: Duration = Duration::from_secs(1);
/// The longest wait between failed reads.
const RETRY_MAX: Duration = Duration::from_secs(8);

/// A running election.
#[derive(Debug)]
pub struct Leadership {
    state: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
    leases: Api<Lease>,
    lease: String,
    identity: String,
    timing: Timing,
    /// The task confirming the hold on the Lease, once acquired; it ends when another holds it.
    confirm: Option<JoinHandle<()>>,
}

/// The election could not start or ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The Lease could not be created or read.
    #[error("leader election on Lease {namespace}/{name}: {source}")]
    Lease {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The cause.
        #[source]
        source: LeaseManagerError,
    },
    /// The Lease was lost (or the election task ended) while leading.
    #[error("lost the leader Lease")]
    Lost,
}

/// Whether this process may write now: open while its hold on the Lease is confirmed.
#[derive(Debug, Clone)]
pub struct Gate(watch::Receiver<bool>);

impl Gate {
    /// A gate that is always open (no leader election).
    pub fn open() -> Gate {
        Gate(watch::channel(true).1)
    }

    /// Whether it is open now.
    pub fn is_open(&self) -> bool {
        *self.0.borrow()
    }

    /// Wait until it is open (forever if it can no longer open).
    pub async fn opened(&mut self) {
        if self.0.wait_for(|open| *open).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Wait until it is closed (forever if it can no longer close).
    pub async fn closed(&mut self) {
        if self.0.wait_for(|open| !*open).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// How the hold on the Lease is confirmed, from the Lease settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Close the gate this long before the Lease could expire: half the grace, so that the
    /// renewal (due `grace` before expiry) is normally seen first.
    pub margin: Duration,
    /// The renewal is due this long before expiry.
    pub grace: Duration,
    /// Read the Lease this often while a renewal is awaited or the hold is not confirmed.
    pub poll: Duration,
}

impl Timing {
    /// The timing for these settings.
    pub fn of(settings: &LeaderSettings) -> Timing {
        let margin = settings.grace / 2;
        let poll = ((settings.grace - margin) / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
        Timing { margin, grace: settings.grace, poll }
    }
}

/// What one read of the Lease says about this process's hold on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Held by this identity: renewed at `renewed`, valid for `duration` after it.
    Ours {
        /// `spec.renewTime`.
        renewed: SystemTime,
        /// `spec.leaseDurationSeconds`.
        duration: Duration,
    },
    /// Held by another identity.
    Theirs(String),
    /// No holder, or held by this identity without a renewal time or duration.
    Unconfirmed,
}

/// The hold `spec` gives `identity`.
pub fn hold(spec: Option<&LeaseSpec>, identity: &str) -> Hold {
    let Some(spec) = spec else { return Hold::Unconfirmed };
    match spec.holder_identity.as_deref() {
        Some(holder) if holder == identity => {
            let renewed = spec.renew_time.as_ref().map(|t| SystemTime::from(t.0));
            let duration = spec.lease_duration_seconds.and_then(|s| u64::try_from(s).ok()).map(Duration::from_secs);
            match (renewed, duration) {
                (Some(renewed), Some(duration)) => Hold::Ours { renewed, duration },
                _ => Hold::Unconfirmed,
            }
        }
        Some(holder) => Hold::Theirs(holder.to_string()),
        None => Hold::Unconfirmed,
    }
}

/// The validity rule: how much longer, at wall-clock `now`, a Lease renewed at `renewed` and valid
/// for `duration` lets its holder act, keeping `margin` before its expiry (the instant another
/// replica may take it). `None` once `now >= renewed + duration - margin`.
pub fn lead_remaining(now: SystemTime, renewed: SystemTime, duration: Duration, margin: Duration) -> Option<Duration> {
    let end = renewed.checked_add(duration)?.checked_sub(margin)?;
    end.duration_since(now).ok().filter(|left| !left.is_zero())
}

/// How long after a read showing the Lease held until `expires` to read it again: just after its
/// renewal is due (`grace` before expiry), then every `poll`.
pub fn next_read(now: SystemTime, expires: SystemTime, timing: Timing) -> Duration {
    let renewal_due = expires.checked_sub(timing.grace).unwrap_or(expires);
    renewal_due.duration_since(now).unwrap_or(Duration::ZERO) + timing.poll
}

/// How long to wait after the `failures`-th failed read in a row: `poll` while the gate is still
/// `open` (the renewal may yet be seen), else [`RETRY_BASE`] doubled per failure up to [`RETRY_MAX`].
pub fn retry_after(failures: u32, open: bool, timing: Timing) -> Duration {
    if open {
        return timing.poll;
    }
    let doublings = failures.saturating_sub(1).min(16);
    RETRY_BASE.saturating_mul(1 << doublings).min(RETRY_MAX).max(timing.poll)
}

/// Where the confirmation loop stands after a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Confirmation {
    /// The gate is open until then (`None`: closed).
    until: Option<Instant>,
    /// The next read.
    next: Instant,
    /// Failed reads in a row.
    failures: u32,
}

/// The loop's state after a read at (`wall`, `now`) that gave `read` (`None`: the read failed),
/// `previous` being the state before. A failed read keeps the previous deadline: it comes from the
/// Lease, not from the read. `Err(holder)` when another identity holds the Lease.
fn after_read(
    read: Option<Hold>,
    wall: SystemTime,
    now: Instant,
    previous: Confirmation,
    timing: Timing,
) -> Result<Confirmation, String> {
    let confirmed = |until| Confirmation { until, next: now + timing.poll, failures: 0 };
    match read {
        Some(Hold::Ours { renewed, duration }) => Ok(Confirmation {
            next: now + renewed.checked_add(duration).map_or(timing.poll, |expires| next_read(wall, expires, timing)),
            ..confirmed(lead_remaining(wall, renewed, duration, timing.margin).map(|left| now + left))
        }),
        Some(Hold::Theirs(holder)) => Err(holder),
        Some(Hold::Unconfirmed) => Ok(confirmed(None)),
        None => {
            let failures = previous.failures.saturating_add(1);
            let open = previous.until.is_some_and(|until| now < until);
            Ok(Confirmation { next: now + retry_after(failures, open, timing), failures, ..previous })
        }
    }
}

/// Read the Lease and keep `gate` open exactly while the hold is confirmed; ends (gate closed)
/// once another identity holds the Lease.
async fn confirm(leases: Api<Lease>, lease: String, identity: String, timing: Timing, gate: watch::Sender<bool>) {
    let mut state = Confirmation { until: None, next: Instant::now(), failures: 0 };
    let mut closed_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let open = state.until.is_some_and(|until| now < until);
        if gate.send_if_modified(|current| std::mem::replace(current, open) != open) {
            if let Some(at) = closed_at.filter(|_| open) {
                let stood_down = at.elapsed().as_secs_f64();
                tracing::info!(lease = %lease, identity = %identity, stood_down_seconds = stood_down, "the leader Lease is renewed; reconciling again");
            }
            if !open {
                closed_at = Some(now);
                tracing::warn!(lease = %lease, identity = %identity, margin_seconds = timing.margin.as_secs_f64(), "standing down: the leader Lease is not confirmed renewed and could expire; not reconciling until it is");
            }
        }
        let read = async {
            tokio::time::sleep_until(state.next).await;
            let read = tokio::time::timeout(READ_TIMEOUT, leases.get_opt(&lease)).await;
            match read {
                Ok(Ok(object)) => Some(hold(object.and_then(|l| l.spec).as_ref(), &identity)),
                Ok(Err(error)) => {
                    tracing::debug!(error = %error, "reading the leader Lease failed");
                    None
                }
                Err(_) => None,
            }
        };
        tokio::select! {
            () = tokio::time::sleep_until(state.until.unwrap_or(now)), if open => {}
            read = read => match after_read(read, SystemTime::now(), Instant::now(), state, timing) {
                Ok(next) => state = next,
                Err(holder) => {
                    gate.send_replace(false);
                    tracing::warn!(lease = %lease, identity = %identity, holder = %holder, "the leader Lease is held by another replica");
                    return;
                }
            },
        }
    }
}

impl Leadership {
    /// Join the election on the configured Lease (created when absent).
    pub async fn join(client: Client, settings: &LeaderSettings) -> Result<Leadership, LeaderError> {
        let lease_error =
            |source| LeaderError::Lease { namespace: settings.namespace.clone(), name: settings.lease.clone(), source };
        let manager = LeaseManagerBuilder::new(client.clone(), &settings.lease)
            .with_namespace(&settings.namespace)
            .with_identity(&settings.identity)
            .with_duration(settings.duration.as_secs())
            .with_grace(settings.grace.as_secs())
            .build()
            .await
            .map_err(lease_error)?;
        let (state, task) = manager.watch().await;
        Ok(Leadership {
            state,
            task,
            leases: Api::namespaced(client, &settings.namespace),
            lease: settings.lease.clone(),
            identity: settings.identity.clone(),
            timing: Timing::of(settings),
            confirm: None,
        })
    }

    /// Wait until this process holds the Lease; the [`Gate`] is open while the hold is confirmed.
    pub async fn acquired(&mut self) -> Result<Gate, LeaderError> {
        self.state.wait_for(|leading| *leading).await.map_err(|_| LeaderError::Lost)?;
        let (sender, receiver) = watch::channel(false);
        if let Some(old) = self.confirm.replace(tokio::spawn(confirm(
            self.leases.clone(),
            self.lease.clone(),
            self.identity.clone(),
            self.timing,
            sender,
        ))) {
            old.abort();
        }
        Ok(Gate(receiver))
    }

    /// Wait until this process no longer holds the Lease.
    pub async fn lost(&mut self) -> LeaderError {
        let manager = self.state.wait_for(|leading| !*leading);
        match self.confirm.as_mut() {
            Some(confirm) => {
                tokio::select! {
                    _ = manager => {}
                    _ = confirm => {}
                }
            }
            None => {
                let _ = manager.await;
            }
        }
        LeaderError::Lost
    }

    /// Release the Lease (if held) and end the election.
    pub async fn release(self) {
        let Leadership { state, task, confirm, .. } = self;
        if let Some(confirm) = confirm {
            confirm.abort();
        }
        drop(state);
        if let Ok(Err(error)) = task.await {
            tracing::warn!(error = %error, "releasing the leader Lease failed; it expires on its own");
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);
    /// The defaults: a 15 s Lease renewed 5 s before expiry.
    const TIMING: Timing =
        Timing { margin: Duration::from_millis(2500), grace: Duration::from_secs(5), poll: Duration::from_millis(625) };

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
    }

    fn spec(holder: Option<&str>, renewed: Option<SystemTime>, duration: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(String::from),
            renew_time: renewed.map(|t| MicroTime(t.try_into().expect("representable"))),
            lease_duration_seconds: duration,
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn timing_keeps_half_the_grace_and_polls_within_the_rest() {
        let settings = |duration, grace| LeaderSettings {
            namespace: "ns".into(),
            lease: "memgate-operator".into(),
            identity: "me".into(),
            duration: Duration::from_secs(duration),
            grace: Duration::from_secs(grace),
        };
        assert_eq!(Timing::of(&settings(15, 5)), TIMING);
        let short = Timing::of(&settings(2, 1));
        assert_eq!((short.margin, short.poll), (Duration::from_millis(500), Duration::from_millis(125)));
        assert_eq!(Timing::of(&settings(300, 100)).poll, SECOND, "at most 1 s");
    }

    #[test]
    fn the_holder_may_lead_until_the_margin_before_expiry() {
        let margin = TIMING.margin;
        let lease = Duration::from_secs(15);
        assert!(lead_remaining(at(0), at(0), lease, margin).is_some());
        assert!(lead_remaining(at(12), at(0), lease, margin).is_some(), "12 s < 15 s - 2.5 s");
        assert!(lead_remaining(at(13), at(0), lease, margin).is_none());
        assert!(lead_remaining(at(60), at(0), lease, margin).is_none(), "expired long ago");
        assert_eq!(lead_remaining(at(10), at(0), lease, margin), Some(Duration::from_millis(2500)));
        let end = at(0) + lease - margin;
        assert!(lead_remaining(end, at(0), lease, margin).is_none(), "the end itself is too late");
        assert!(lead_remaining(end - Duration::from_millis(1), at(0), lease, margin).is_some());
        assert!(
            lead_remaining(at(0) - SECOND, at(0), lease, margin).is_some(),
            "a renewal stamped by a clock ahead of ours"
        );
        assert!(lead_remaining(at(0), at(0), SECOND, SECOND).is_none(), "a margin as long as the Lease");
    }

    #[test]
    fn a_lease_names_us_only_with_a_renewal_time_and_a_duration() {
        assert_eq!(
            hold(Some(&spec(Some("me"), Some(at(3)), Some(15))), "me"),
            Hold::Ours { renewed: at(3), duration: Duration::from_secs(15) }
        );
        assert_eq!(hold(Some(&spec(Some("other"), Some(at(3)), Some(15))), "me"), Hold::Theirs("other".into()));
        assert_eq!(hold(Some(&spec(None, Some(at(3)), Some(15))), "me"), Hold::Unconfirmed, "released");
        assert_eq!(hold(Some(&spec(Some("me"), None, Some(15))), "me"), Hold::Unconfirmed);
        assert_eq!(hold(Some(&spec(Some("me"), Some(at(3)), None)), "me"), Hold::Unconfirmed);
        assert_eq!(hold(Some(&spec(Some("me"), Some(at(3)), Some(-1))), "me"), Hold::Unconfirmed);
        assert_eq!(hold(None, "me"), Hold::Unconfirmed);
    }

    #[test]
    fn the_next_read_follows_the_renewal() {
        let expires = at(15);
        assert_eq!(next_read(at(0), expires, TIMING), Duration::from_secs(10) + TIMING.poll, "renewal due at 10 s");
        assert_eq!(next_read(at(11), expires, TIMING), TIMING.poll, "renewal overdue: poll");
        assert_eq!(next_read(at(99), expires, TIMING), TIMING.poll);
    }

    #[test]
    fn failed_reads_back_off_only_once_the_gate_is_closed() {
        assert_eq!(retry_after(3, true, TIMING), TIMING.poll, "the renewal may still be seen");
        let closed: Vec<u64> = (1..=6).map(|n| retry_after(n, false, TIMING).as_secs()).collect();
        assert_eq!(closed, [1, 2, 4, 8, 8, 8]);
        assert_eq!(retry_after(u32::MAX, false, TIMING), RETRY_MAX);
    }

    #[test]
    fn reads_open_close_and_reopen_the_gate() {
        let now = Instant::now();
        let ours = |renewed| Some(Hold::Ours { renewed, duration: Duration::from_secs(15) });
        let start = Confirmation { until: None, next: now, failures: 0 };
        // Acquired at 0 s, read at 0 s: open until 12.5 s, read again after the renewal due at 10 s.
        let held = after_read(ours(at(0)), at(0), now, start, TIMING).expect("ours");
        assert_eq!(held.until, Some(now + Duration::from_millis(12_500)));
        assert_eq!(held.next, now + Duration::from_secs(10) + TIMING.poll);
        // The API server is gone: a failed read keeps the deadline the Lease gave, and retries soon.
        let later = now + Duration::from_secs(11);
        let failed = after_read(None, at(11), later, held, TIMING).expect("no holder seen");
        assert_eq!(failed, Confirmation { until: held.until, next: later + TIMING.poll, failures: 1 });
        // Past the deadline: closed, and reads back off.
        let gone = now + Duration::from_secs(13);
        let failed = after_read(None, at(13), gone, failed, TIMING).expect("no holder seen");
        assert_eq!((failed.until, failed.next, failed.failures), (held.until, gone + Duration::from_secs(2), 2));
        // Back, our expired Lease not renewed yet: closed.
        let back = now + Duration::from_secs(20);
        let stale = after_read(ours(at(0)), at(20), back, failed, TIMING).expect("ours");
        assert_eq!(stale, Confirmation { until: None, next: back + TIMING.poll, failures: 0 });
        // Renewed at 21 s: open again.
        let renewed = after_read(ours(at(21)), at(21), back + SECOND, stale, TIMING).expect("ours");
        assert_eq!(renewed.until, Some(back + SECOND + Duration::from_millis(12_500)));
        // Released by a standby that found it expired: closed, not lost.
        let free = after_read(Some(Hold::Unconfirmed), at(40), back, renewed, TIMING).expect("free");
        assert_eq!(free.until, None);
        // Taken by a standby: lost.
        let taken = after_read(Some(Hold::Theirs("standby".into())), at(40), back, free, TIMING);
        assert_eq!(taken, Err("standby".to_string()));
    }

    #[tokio::test]
    async fn a_gate_waits_for_its_state() {
        let (sender, receiver) = watch::channel(false);
        let mut gate = Gate(receiver);
        assert!(!gate.is_open());
        gate.closed().await;
        let waiter = tokio::spawn({
            let mut gate = gate.clone();
            async move { gate.opened().await }
        });
        sender.send_replace(true);
        waiter.await.expect("opened");
        assert!(gate.is_open());
        let mut always = Gate::open();
        always.opened().await;
        assert!(tokio::time::timeout(Duration::from_millis(20), always.closed()).await.is_err(), "never closes");
    }
}
