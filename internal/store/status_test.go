package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// The states the schema's CHECK constraint allows are exactly notification.Statuses.
func TestStatusesMatchTheSchema(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	var def string
	if err := s.Pool().QueryRow(context.Background(), `
		SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
		WHERE c.conrelid = 'notifications'::regclass AND c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%status%'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	var inSchema []string
	for _, part := range strings.Split(def, "'")[1:] {
		if !strings.ContainsAny(part, " :(),") && part != "" {
			inSchema = append(inSchema, part)
		}
	}
	var inGo []string
	for _, st := range notification.Statuses {
		inGo = append(inGo, string(st))
	}
	slices.Sort(inSchema)
	slices.Sort(inGo)
	if !slices.Equal(inSchema, inGo) {
		t.Fatalf("schema allows %v, notification.Statuses is %v (%s)", inSchema, inGo, def)
	}
	for _, st := range notification.Statuses {
		if st.Terminal() && st.Claimable(nil, nil, nil, time.Time{}) {
			t.Errorf("%s is both terminal and claimable", st)
		}
	}
}
