package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/postgres"
	"github.com/agentd-dev/agentd/sqlite"
)

// openStore opens the store cfg names: the PostgreSQL database of
// --database (AGENTD_DATABASE_URL) when set, else the SQLite file
// agentd.db in the data folder.
func openStore(ctx context.Context, cfg serveConfig) (agentd.Store, error) {
	u := cfg.databaseURL
	if u == "" {
		db, err := sqlite.Open(filepath.Join(cfg.dataDir, "agentd.db"))
		if err != nil {
			return nil, err
		}
		return db, nil
	}
	if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		return nil, fmt.Errorf("--database must be a postgres:// URL")
	}
	db, err := postgres.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	return db, nil
}
