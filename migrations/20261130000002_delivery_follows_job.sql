-- A delivery's status follows its job on every path that finishes or abandons the job, in the
-- same transaction (issue: "deliveries that end up in no state at all"). The worker records its
-- own results itself (status first, then the job), so for those this changes nothing; it covers
-- the paths that do not know about deliveries: rescue of a last attempt (discarded), a handler
-- error or panic retried or discarded by the runner, shutdown hand-back, a snooze.
CREATE FUNCTION deliveries_follow_job() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delivery uuid;
BEGIN
    BEGIN
        delivery := (NEW.args->>'delivery_id')::uuid;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
    IF delivery IS NULL THEN
        RETURN NULL;
    END IF;
    IF NEW.state = 'discarded' THEN
        -- Dead, with the reason, replayable.
        UPDATE deliveries
        SET status = 'dead',
            last_error = coalesce(NEW.errors->-1->>'error', last_error),
            updated_at = now()
        WHERE id = delivery AND status NOT IN ('delivered', 'dead');
    ELSIF NEW.state IN ('available', 'scheduled') THEN
        -- Waiting again (handed back, rescued, snoozed, retried after a handler error).
        UPDATE deliveries SET status = 'pending', updated_at = now()
        WHERE id = delivery AND status = 'delivering';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_delivery_follows AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (OLD.state = 'executing' AND NEW.state IN ('discarded', 'available', 'scheduled')
          AND NEW.kind = 'deliver')
    EXECUTE FUNCTION deliveries_follow_job();
