package audit_test

import (
	"context"
	"testing"

	"github.com/heraldhq/herald/internal/audit"
)

func TestActorTravelsWithTheContext(t *testing.T) {
	if got := audit.ActorOf(context.Background()); got != audit.Unknown {
		t.Errorf("no actor: %q, want %q", got, audit.Unknown)
	}
	ctx := audit.WithActor(context.Background(), audit.APIKey("k1"))
	if got := audit.ActorOf(ctx); got != "api_key:k1" {
		t.Errorf("actor %q, want api_key:k1", got)
	}
}

func TestParseTypeKnowsEveryTypeAndNothingElse(t *testing.T) {
	for _, ty := range audit.Types {
		if got, ok := audit.ParseType(string(ty)); !ok || got != ty {
			t.Errorf("ParseType(%q) = %q, %v", ty, got, ok)
		}
	}
	for _, s := range []string{"", "api_key", "API_KEY.CREATED", "user.blocked"} {
		if _, ok := audit.ParseType(s); ok {
			t.Errorf("ParseType(%q) accepted", s)
		}
	}
}
