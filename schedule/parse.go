package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parser reads the expressions tool.json's triggers.schedule accepts: five
// cron fields (minute hour day-of-month month day-of-week) or a descriptor
// (@hourly, @daily, @every 1h, …).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is when a scheduled tool runs: its ticks. Every replica that
// reads the same expression computes the same ticks, so a tick names one
// run across replicas: a cron expression's ticks are wall-clock times (in
// UTC), and @every D's are the multiples of D since the Unix epoch (not
// D after each start, as the cron library counts them). A Schedule is
// immutable.
type Schedule struct {
	expr  string
	cron  cron.Schedule
	every time.Duration // @every: the period; 0 for a cron expression
}

// Parse reads a schedule expression: "@every 1h" (a Go duration of at
// least one second, in whole seconds), another descriptor such as
// "@hourly", or a five-field cron expression such as "*/15 * * * *".
// Times are UTC. The error says what is wrong with it.
func Parse(expr string) (*Schedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, fmt.Errorf(`empty schedule: use a five-field cron expression ("0 * * * *") or "@every 1h"`)
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("schedule %q: time zones are not supported: schedules are in UTC", expr)
	}
	if rest, ok := strings.CutPrefix(expr, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("schedule %q: %v", expr, err)
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, fmt.Errorf("schedule %q: the period must be whole seconds, at least 1s", expr)
		}
		return &Schedule{expr: expr, every: d}, nil
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %v", expr, err)
	}
	return &Schedule{expr: expr, cron: s}, nil
}

// String is the expression as written.
func (s *Schedule) String() string { return s.expr }

// Next is the first tick strictly after t.
func (s *Schedule) Next(t time.Time) time.Time {
	t = t.UTC()
	if s.every > 0 {
		d := s.every.Nanoseconds()
		n := t.UnixNano()
		next := (n/d + 1) * d
		if n < 0 && n%d != 0 {
			next = (n / d) * d
		}
		return time.Unix(0, next).UTC()
	}
	return s.cron.Next(t)
}

// Missed counts the ticks strictly between after and before, up to limit
// (a count of limit means "limit or more").
func (s *Schedule) Missed(after, before time.Time, limit int) int {
	n := 0
	for t := s.Next(after); t.Before(before) && n < limit; t = s.Next(t) {
		n++
	}
	return n
}
