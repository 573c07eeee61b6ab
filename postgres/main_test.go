package postgres

import (
	"testing"

	"github.com/agentd-dev/agentd/internal/pgtest"
)

// TestMain runs the package's tests on a PostgreSQL server: the one
// AGENTD_TEST_POSTGRES_URL names, else one pgtest starts; with neither,
// the summary line says no test ran (pgtest.Main).
func TestMain(m *testing.M) { pgtest.Main(m) }
