package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentd-dev/agentd/internal/pgtest"
)

// TestDeadlockRetried: two writes that lock the same two rows in opposite
// orders (as a decision, call then run, and a cancel, run then calls, can)
// deadlock; PostgreSQL aborts one of them, which rolls it back whole, and
// the store runs it again instead of failing the request. Both commit, each
// once. The writes are held at the point of the deadlock by channels, not
// by timing: each takes its first row and waits for the other's before
// asking for its second.
func TestDeadlockRetried(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, pgtest.NewSchema(t, pgtest.NewDatabase(t, "")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.writeTx(ctx, func(tx *txn) error {
		_, err := tx.Exec(ctx, `CREATE TABLE pair (id INT PRIMARY KEY, n INT NOT NULL); INSERT INTO pair VALUES (1, 0), (2, 0)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	held := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	write := func(i int) error {
		first, second := 1+i, 2-i
		return db.writeTx(ctx, func(tx *txn) error {
			attempts.Add(1)
			if _, err := tx.Exec(ctx, `UPDATE pair SET n = n + 1 WHERE id = $1`, first); err != nil {
				return err
			}
			once[i].Do(func() { // the first attempt meets the other
				close(held[i])
				<-held[1-i]
			})
			_, err := tx.Exec(ctx, `UPDATE pair SET n = n + 1 WHERE id = $1`, second)
			return err
		})
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { errs[i] = write(i) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if got := attempts.Load(); got != 3 {
		t.Errorf("%d attempts, want 3 (one deadlock victim run again)", got)
	}
	var a, b int
	if err := db.pool.QueryRow(ctx, `SELECT (SELECT n FROM pair WHERE id = 1), (SELECT n FROM pair WHERE id = 2)`).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	if a != 2 || b != 2 {
		t.Errorf("rows after both writes: %d, %d; want 2, 2 (each write committed once)", a, b)
	}
}
