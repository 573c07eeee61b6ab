-- 0012: runs_active (0006) holds the status only.
--
-- RunsToDrive reads each active run's row anyway (it returns whole runs, and
-- its parked-call check reads the row's step), so the id and step in the
-- index served nothing, and with the step in it every model step of every
-- run rewrote the run's index entry. Its entries are now (status, rowid):
-- written when a run starts, removed when it ends, untouched in between.

DROP INDEX runs_active;
CREATE INDEX runs_active ON runs (status) WHERE status IN ('running', 'waiting');
