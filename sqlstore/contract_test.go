package sqlstore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sqlite"
	"github.com/agentd-dev/agentd/storetest"
)

// TestContract runs the store's contract against SQLite from here, where
// the store's logic lives, so that scripts/mutation.sh's sqlstore unit
// (which runs only this package's tests on each mutant) has the contract
// as its killer. The suite runs the contract in sqlite's and postgres'
// own tests; here it runs only with AGENTD_STORE_CONTRACT=1.
func TestContract(t *testing.T) {
	if os.Getenv("AGENTD_STORE_CONTRACT") != "1" {
		t.Skip("the contract runs in sqlite's and postgres' tests; AGENTD_STORE_CONTRACT=1 runs it here too (scripts/mutation.sh sqlstore)")
	}
	open := func(t *testing.T, path string) agentd.Store {
		db, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) agentd.Store { return open(t, filepath.Join(t.TempDir(), "agentd.db")) },
		Reopen: func(t *testing.T, s agentd.Store) agentd.Store {
			path := s.(*sqlite.DB).Path()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, path)
		},
	})
}
