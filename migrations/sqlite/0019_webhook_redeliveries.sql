-- Redeliveries an account asks for, bounded per webhook: a fixed window (its start, epoch
-- seconds) and the redeliveries counted in it, moved in the same statement that admits one.
-- Webhook secrets are stored sealed from this version on (`server::webhooks::sealed`); the
-- server seals any older clear one at start.
ALTER TABLE webhooks ADD COLUMN redelivery_window BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN redeliveries INTEGER NOT NULL DEFAULT 0;
