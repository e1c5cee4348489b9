-- Every audit row carries the id of the API request that made it (the `x-request-id` the API
-- answered with). The API sets the transaction-local setting `breakwater.request_id` at the start
-- of each state-changing transaction, so every row written in it, including rows written deep in
-- core (circuit transitions of a manual pause), gets the id without passing it down. Rows the
-- workers write (automatic transitions) have none.
ALTER TABLE audit_log
    ADD COLUMN request_id text DEFAULT nullif(current_setting('breakwater.request_id', true), '');
