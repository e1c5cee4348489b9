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
    /// The caller as the audit log names it: `operator` or `tenant:<key id>`.
    pub(crate) fn actor(&self) -> &str {
        &self.actor
    }

    /// Begins the transaction of a state-changing call, tagged with the request's id so that
    /// every audit row written in it carries it.
    pub(crate) async fn begin_audited(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, ApiError> {
        let mut tx = self.state.pool().begin().await?;
        breakwater_core::audit::begin_request(&mut *tx, &self.request.0).await?;
        Ok(tx)
    }
}

impl Call<Tenant> {
    /// The calling key's tenant.
    pub(crate) fn tenant_id(&self) -> Uuid {
        self.key.0.tenant_id
    }
}
