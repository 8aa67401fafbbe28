package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/callbackstate"
	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/phone"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// Each state column's CHECK constraint lists exactly the states of the package below the store that owns
// them: a state added to one and not the other fails here, not in production.
func TestStatesMatchTheSchema(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	for _, c := range []struct {
		table, column string
		want          []string
	}{
		{"opt_outs", "by", texts(consent.Bys)},
		{"stop_prompts", "kind", texts(consent.Kinds)},
		{"bots", "state", texts(botstate.States)},
		{"callback_events", "state", texts(callbackstate.States)},
		{"phone_verifications", "status", texts(phone.Statuses)},
		{"audit_events", "type", texts(audit.Types)},
	} {
		var def string
		if err := s.Pool().QueryRow(context.Background(), `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
			WHERE c.conrelid = $1::regclass AND c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%(' || $2 || ' = ANY%'`,
			c.table, c.column).Scan(&def); err != nil {
			t.Fatalf("%s.%s's CHECK: %v", c.table, c.column, err)
		}
		var got []string
		for _, part := range strings.Split(def, "'")[1:] {
			if !strings.HasPrefix(part, "::text") && !strings.HasPrefix(part, ")") && !strings.HasPrefix(part, ", ") {
				got = append(got, part)
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s.%s's CHECK %s allows %q; the Go side lists %q", c.table, c.column, def, got, want)
		}
	}
}

// phone.SeenSQL reads a stored verification as phone.Seen does.
func TestVerificationSeenSQLAgreesWithGo(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	now := time.Now()
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	for _, c := range []struct {
		status  *phone.Status
		expires *time.Time
	}{
		{nil, nil}, {ptr(phone.Unverified), nil}, {ptr(phone.Verified), nil}, {ptr(phone.Pending), &future}, {ptr(phone.Pending), &past},
	} {
		var got phone.Status
		q := `SELECT ` + phone.SeenSQL(`v`) + ` FROM (SELECT $1::text AS status, $2::timestamptz AS session_expires_at) v`
		if err := s.Pool().QueryRow(context.Background(), q, c.status, c.expires).Scan(&got); err != nil {
			t.Fatal(err)
		}
		var stored phone.Status
		if c.status != nil {
			stored = *c.status
		}
		if want := phone.Seen(stored, c.expires, now); got != want {
			t.Errorf("%v expiring %v: SQL reads %q, Go %q", c.status, c.expires, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
