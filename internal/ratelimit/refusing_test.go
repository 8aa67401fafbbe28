package ratelimit_test

import (
	"context"
	"testing"

	"github.com/heraldhq/herald/internal/ratelimit"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// Refusing says, without a query, what Take would answer once the central bucket has refused this
// replica: refused, until the time Take would give, for any number of units; it says nothing (not
// refusing) while leased tokens are left, for another tenant or kind, or under a changed limit.
func TestRefusingTellsWhatTakeWouldAnswerWithoutAQuery(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	l := ratelimit.New(st)
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 1, Burst: 2}
	if _, refusing := l.Refusing("acme", ratelimit.Sends, lim); refusing {
		t.Fatal("refusing a tenant never seen")
	}
	if d, err := l.Take(ctx, "acme", ratelimit.Sends, 1, lim); err != nil || !d.Allowed {
		t.Fatalf("the first send: %+v, %v", d, err)
	}
	if _, refusing := l.Refusing("acme", ratelimit.Sends, lim); refusing {
		t.Error("refusing with a leased token left")
	}
	for {
		d, err := l.Take(ctx, "acme", ratelimit.Sends, 1, lim)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			break
		}
	}
	wait, refusing := l.Refusing("acme", ratelimit.Sends, lim)
	if !refusing || wait <= 0 || wait > 1e9 {
		t.Fatalf("after the central bucket refused: refusing %v for %v, want refusing for up to a second", refusing, wait)
	}
	// Take agrees, without asking the central bucket: drop it and Take still answers.
	st.Close()
	if d, err := l.Take(ctx, "acme", ratelimit.Sends, 5, lim); err != nil || d.Allowed || d.RetryAfter <= 0 {
		t.Errorf("Take after Refusing said refused: %+v, %v; want refused without a query", d, err)
	}
	if _, refusing := l.Refusing("acme", ratelimit.Requests, lim); refusing {
		t.Error("the requests bucket is refused by the sends bucket")
	}
	if _, refusing := l.Refusing("globex", ratelimit.Sends, lim); refusing {
		t.Error("another tenant is refused")
	}
	if _, refusing := l.Refusing("acme", ratelimit.Sends, ratelimit.Limit{Rate: 100, Burst: 200}); refusing {
		t.Error("refusing under a changed limit, which Take would lease afresh")
	}
}
