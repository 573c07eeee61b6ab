-- Run leases (docs/scale-out.md): which replica drives an active run, and
-- until when (unix nanoseconds); '' and 0 when none does.
ALTER TABLE runs ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '',
                 ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
