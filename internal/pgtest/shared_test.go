package pgtest

import "testing"

// Without AGENTD_TEST_POSTGRES_URL, the test process starts one server of
// its own, where PostgreSQL is installed, and every test gets that one.
func TestServerURLStartsOne(t *testing.T) {
	t.Setenv("AGENTD_TEST_POSTGRES_URL", "")
	if pgBin() == "" {
		t.Skip(errNoPrograms.Error())
	}
	u := ServerURL(t)
	Exec(t, u, "SELECT 1")
	db := NewDatabase(t, "")
	Exec(t, db, "CREATE TABLE t (x int)")
	if again := ServerURL(t); again != u {
		t.Errorf("ServerURL = %s, then %s: want one server", u, again)
	}
}
