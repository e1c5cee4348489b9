-- Retry policy and request timeout per channel, with a tenant default (issue 33, part 3).
--
-- channels.retry_policy / tenants.retry_policy: the policy a tenant set, as JSON
-- (`breakwater_core::retry_policy::RetryPolicy`: `max_attempts`, `backoff`,
-- `request_timeout_ms`, each optional; absent = inherited). NULL = nothing set.
--
-- deliveries.retry_policy: the tenant's default merged with the channel's own (the channel's
-- fields win), copied when the delivery is accepted, so a later change applies only to
-- deliveries accepted after it (as the job's max_attempts always did). NULL = the service
-- configuration's. The worker reads it with the delivery in the statement that begins the
-- attempt: no extra statement per delivery.
--
-- Nullable columns without a default: adding them rewrites no table.
ALTER TABLE channels ADD COLUMN retry_policy jsonb;
ALTER TABLE tenants ADD COLUMN retry_policy jsonb;
ALTER TABLE deliveries ADD COLUMN retry_policy jsonb;
