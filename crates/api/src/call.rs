//! The context of one authenticated API call: who made it (a key of the kind the route needs,
//! [`crate::auth`]), the shared state, and the request's id, read by one extractor. A handler
//! names one argument ([`TenantCall`] or [`OperatorCall`]) instead of three, and takes the
//! caller's audit actor and its audited transaction from it.

use crate::auth::{authenticate, KeyKind, Operator, Tenant};
use crate::error::ApiError;
use crate::extract::RequestId;
use crate::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use sqlx::{PgConnection, Postgres, Transaction};
use uuid::Uuid;

/// One call: the caller's key `K`, the state, the request's id. As an extractor it answers 401
/// or 403 like [`authenticate`] (and 429 over a tenant key's ingress limit) before any other
/// extractor of the handler runs, so put it first.
pub(crate) struct Call<K> {
    key: K,
    /// The shared state.
    pub(crate) state: AppState,
    request: RequestId,
    actor: String,
}

/// A call made with a tenant key.
pub(crate) type TenantCall = Call<Tenant>;
/// A call made with the operator key.
pub(crate) type OperatorCall = Call<Operator>;

impl<K: KeyKind> FromRequestParts<AppState> for Call<K> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let key = authenticate::<K>(parts, state).await?;
        let Ok(request) = RequestId::from_request_parts(parts, state).await;
        Ok(Call {
            actor: key.actor(),
            key,
            state: state.clone(),
            request,
        })
    }
}

impl<K> Call<K> {
    /// The caller as the audit log names it: `operator`, `tenant:<key id>` or
    /// `portal:<session id>`.
    pub(crate) fn actor(&self) -> &str {
        &self.actor
    }

    /// Begins the transaction of a call that writes ([`CallTx`]).
    pub(crate) async fn begin(&self) -> Result<CallTx, ApiError> {
        Ok(CallTx(self.state.pool().begin().await?))
    }

    /// Begins the transaction of a state-changing call, tagged with the request's id so that
    /// every audit row written in it carries it.
    pub(crate) async fn begin_audited(&self) -> Result<CallTx, ApiError> {
        let mut tx = self.begin().await?;
        breakwater_core::audit::begin_request(&mut *tx, &self.request.0).await?;
        Ok(tx)
    }
}

/// The transaction of one API call ([`Call::begin`], [`Call::begin_audited`]): core's functions
/// take it as a `PgConnection` (`&mut tx`), and [`CallTx::commit`] is not held to the API's
/// `lock_timeout`.
///
/// Why: the API's sessions carry `lock_timeout` (`database.api_lock_timeout_ms`, 250 ms) so that
/// a request never waits long for a row another transaction holds (it answers 503 instead). A
/// transaction that wakes workers (`NOTIFY`: every enqueue, a release, a tier move) also takes
/// Postgres's one notification-queue lock at `COMMIT`, which every committing transaction that
/// notified holds in turn through its commit's WAL flush. A burst of such commits, or a slow
/// disk, can queue one longer than the lock timeout, and its `COMMIT` then failed with 55P03: a
/// 503 for a healthy tenant's enqueue that waited for no row at all (seen in the isolation
/// benchmark's timeout mode). The commit waits its turn instead, bounded by `statement_timeout`;
/// every row lock the transaction took before it was still held to the lock timeout.
///
/// **Every commit here is durable before it is answered**. Each call that commits
/// a `CallTx` answers 2xx only after that commit, and the transaction always writes WAL before
/// it: the statement before the `COMMIT` emits a transactional logical-decoding message
/// (`pg_logical_emit_message(true, 'breakwater.ack', '')`: a few bytes of WAL, no table, no
/// lock, any role may). So even a transaction that only read — an idempotent repeat of an
/// enqueue or a message, which finds the rows the first call wrote — commits with WAL of its
/// own, and with synchronous replication its `COMMIT` returns only once a standby has that WAL
/// and so (WAL being in order) everything the answer speaks of. A read-only commit writes
/// nothing and waits for nobody: an old primary could acknowledge a row that exists only on
/// itself. (A transaction id alone is not enough: Postgres skips the flush and the standby
/// wait for a transaction whose only WAL is its commit record.) The same statement lifts
/// `statement_timeout` for the commit: a synchronous wait cancelled by a timeout reports
/// success for a commit no standby has, so a commit is never bounded that way. A `COMMIT`
/// whose answer is lost (the connection dropped) is 503 with `Retry-After`
/// ([`ApiError::commit_unknown`]): it may or may not have happened, and the client's retry
/// with its idempotency key finds out.
pub(crate) struct CallTx(Transaction<'static, Postgres>);

impl CallTx {
    /// Commits durably (type doc), waiting for Postgres's commit-time locks (the notification
    /// queue's) and for synchronous standbys however long it takes; one statement before the
    /// `COMMIT`, as before (it set only `lock_timeout`).
    pub(crate) async fn commit(mut self) -> Result<(), ApiError> {
        sqlx::query(
            "SELECT set_config('lock_timeout', '0', true),
                    set_config('statement_timeout', '0', true),
                    pg_logical_emit_message(true, 'breakwater.ack', '')",
        )
        .execute(&mut *self.0)
        .await?;
        self.0.commit().await.map_err(|e| match e {
            // The server answered: the transaction rolled back, its cause says why.
            sqlx::Error::Database(_) => ApiError::from(e),
            lost => {
                tracing::warn!(error = %lost, "the connection was lost during COMMIT: 503, outcome unknown");
                ApiError::commit_unknown()
            }
        })
    }
}

impl std::ops::Deref for CallTx {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        &self.0
    }
}

impl std::ops::DerefMut for CallTx {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.0
    }
}

impl Call<Tenant> {
    /// The calling key's (or portal session's) tenant.
    pub(crate) fn tenant_id(&self) -> Uuid {
        self.key.tenant_id
    }

    /// The calling credential: an API key or a portal session.
    pub(crate) fn via(&self) -> crate::auth::Via {
        self.key.via
    }
}
