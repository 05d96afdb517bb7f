-- Every write to a table that the server caches reads of notifies `arena_changes` with the
-- table's topic, so every replica drops what it cached (server/src/changes.rs). Statement-level:
-- one notification per statement, and PostgreSQL folds identical ones within a transaction.
CREATE FUNCTION arena_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('arena_changes', TG_ARGV[0]);
    RETURN NULL;
END;
$$;

CREATE TRIGGER budget_ledger_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON budget_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION arena_notify_change('ledger');
CREATE TRIGGER environments_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON environments
    FOR EACH STATEMENT EXECUTE FUNCTION arena_notify_change('environments');
CREATE TRIGGER messages_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON messages
    FOR EACH STATEMENT EXECUTE FUNCTION arena_notify_change('board');
