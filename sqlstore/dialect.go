package sqlstore

import (
	"encoding/json"
	"strings"
)

// Dialect is what the SQL of one backend differs in. Statements are
// written with ? placeholders (a PostgreSQL backend numbers them as it
// runs them); the rest is here: how a statement takes a list parameter,
// how an integer parameter is typed, how the planner is steered, how a
// JSON column is edited.
type Dialect struct {
	// Name names the backend ("sqlite", "postgres").
	Name string
	// in is the condition that col is one of the list parameter that
	// list encodes.
	in   func(col string) string
	list func(xs []string) any
	// inInt64s is the condition that col is one of xs, with its
	// parameters.
	inInt64s func(col string, xs []int64) (string, []any)
	// hint prefixes a column whose index the planner must not use for a
	// condition ("+" in SQLite; PostgreSQL has no such hint).
	hint string
	// intParam, bigintParam and textParam are a parameter whose type the
	// statement does not fix (PostgreSQL asks for a cast).
	intParam, bigintParam, textParam string
	// noLimit is the LIMIT parameter of no limit.
	noLimit any
	// runOrder is the column of a run's insertion order (SQLite's runs
	// have only their rowid).
	runOrder string
	// forUpdate and skipLocked end a SELECT of rows the transaction will
	// change: PostgreSQL locks them (skipping those another transaction
	// holds); SQLite's single writer holds the database already.
	forUpdate, skipLocked string
	// The edits of a tool call's approval column (a JSON object as TEXT).
	approval approvalEdits
}

// approvalEdits are a dialect's statements and expressions that edit a
// tool call's approval column.
type approvalEdits struct {
	// dropApprovals is the column with its approvals removed.
	dropApprovals string
	// setApprovals sets the approvals to the parameter (a JSON array),
	// where the call has as many approvals as the second parameter.
	setApprovals string
	// setGovernance sets the reminders (a JSON array) and the extension
	// (milliseconds), and the deadline unless it is NULL.
	setGovernance string
}

// SQLite is the dialect of package sqlite: lists are JSON arrays read by
// json_each, JSON is edited by json_set.
var SQLite = &Dialect{
	Name: "sqlite",
	in:   func(col string) string { return col + ` IN (SELECT value FROM json_each(?))` },
	list: func(xs []string) any {
		b, _ := json.Marshal(xs)
		return string(b)
	},
	inInt64s: func(col string, xs []int64) (string, []any) {
		args := make([]any, len(xs))
		for i, x := range xs {
			args[i] = x
		}
		return col + ` IN (?` + strings.Repeat(", ?", len(xs)-1) + `)`, args
	},
	hint:        "+",
	noLimit:     -1,
	runOrder:    "rowid",
	forUpdate:   "",
	skipLocked:  "",
	intParam:    "?",
	textParam:   "?",
	bigintParam: "?",
	approval: approvalEdits{
		dropApprovals: `json_remove(approval, '$.approvals')`,
		setApprovals: `UPDATE tool_calls SET approval = json_set(approval, '$.approvals', json(?))
				WHERE id = ? AND approval IS NOT NULL AND COALESCE(json_array_length(approval, '$.approvals'), 0) = ?`,
		setGovernance: `UPDATE tool_calls SET approval = json_set(approval, '$.reminded', json(?), '$.extended_ms', ?),
					requires_approval_at = COALESCE(?, requires_approval_at)
				WHERE id = ? AND approval IS NOT NULL AND requires_approval_at = ?
					AND COALESCE(json_array_length(approval, '$.reminded'), 0) = ?`,
	},
}

// Postgres is the dialect of package postgres: lists are text[]
// parameters (= ANY), JSON is edited as jsonb.
var Postgres = &Dialect{
	Name: "postgres",
	in:   func(col string) string { return col + ` = ANY(?)` },
	list: func(xs []string) any { return xs },
	inInt64s: func(col string, xs []int64) (string, []any) {
		return col + ` = ANY(?)`, []any{xs}
	},
	noLimit:     nil,
	runOrder:    "rid",
	forUpdate:   " FOR UPDATE",
	skipLocked:  " FOR UPDATE SKIP LOCKED",
	intParam:    "?::int",
	textParam:   "?::text",
	bigintParam: "?::bigint",
	approval: approvalEdits{
		dropApprovals: `(approval::jsonb - 'approvals')::text`,
		setApprovals: `UPDATE tool_calls SET approval = jsonb_set(approval::jsonb, '{approvals}', ?::jsonb)::text
				WHERE id = ? AND approval IS NOT NULL AND COALESCE(jsonb_array_length(approval::jsonb -> 'approvals'), 0) = ?::int`,
		setGovernance: `UPDATE tool_calls SET approval = jsonb_set(jsonb_set(approval::jsonb, '{reminded}', ?::jsonb), '{extended_ms}', to_jsonb(?::bigint))::text,
					requires_approval_at = COALESCE(?::bigint, requires_approval_at)
				WHERE id = ? AND approval IS NOT NULL AND requires_approval_at = ?::bigint
					AND COALESCE(jsonb_array_length(approval::jsonb -> 'reminded'), 0) = ?::int`,
	},
}

// In is the condition that col is one of a list parameter (listOf).
func (d *Dialect) In(col string) string { return d.in(col) }

// listOf is the parameter of a list of strings for a condition of In.
func listOf[T ~string](d *Dialect, xs []T) any {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return d.list(out)
}
