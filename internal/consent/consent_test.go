package consent

import (
	"slices"
	"strings"
	"testing"
)

// The table says what the spec says (v1-extensions §9): the user lifts any opt-out and takes over the
// tenant's; the tenant lifts only its own.
func TestTheTable(t *testing.T) {
	for _, c := range []struct {
		actor, held    By
		lift, takeOver bool
	}{
		{ByUser, ByUser, true, false},
		{ByUser, ByTenant, true, true},
		{ByTenant, ByTenant, true, false},
		{ByTenant, ByUser, false, false},
	} {
		if got := MayLift(c.actor, c.held); got != c.lift {
			t.Errorf("MayLift(%s, %s) = %v", c.actor, c.held, got)
		}
		if got := TakesOver(c.actor, c.held); got != c.takeOver {
			t.Errorf("TakesOver(%s, %s) = %v", c.actor, c.held, got)
		}
	}
}

func TestTheSQL(t *testing.T) {
	if got, want := LiftSQL("$4", "by"), "($4 = 'user' AND by IN ('user', 'tenant') OR $4 = 'tenant' AND by IN ('tenant'))"; got != want {
		t.Errorf("LiftSQL:\n got %s\nwant %s", got, want)
	}
	if got, want := TakeOverSQL("EXCLUDED.by", "o.by"), "(EXCLUDED.by = 'user' AND o.by IN ('tenant'))"; got != want {
		t.Errorf("TakeOverSQL:\n got %s\nwant %s", got, want)
	}
}

// /stop offers what the user has not stopped (the tenant's opt-out is offered: the user takes it over);
// /resume offers every opt-out.
func TestOffers(t *testing.T) {
	tenants := []Tenant{
		{TenantID: "acme", Label: "Acme", Categories: []string{"news", "promo"}, OptOuts: []Record{{Category: "promo", By: ByUser}}},
		{TenantID: "globex", Label: "Globex", Categories: []string{"alerts"}, OptOuts: []Record{{Category: "", By: ByTenant}}},
		{TenantID: "initech", Label: "Initech", Categories: []string{"x"}, OptOuts: []Record{{Category: "", By: ByUser}}},
	}
	texts := func(os []Offer) []string {
		var out []string
		for _, o := range os {
			out = append(out, o.Text)
		}
		return out
	}
	whole, categories := Offers(Stop, tenants)
	if got, want := texts(whole), []string{"Acme", "Globex"}; !slices.Equal(got, want) {
		t.Errorf("/stop's tenants: %q, want %q", got, want)
	}
	if got, want := texts(categories), []string{"Acme: news", "Globex: alerts"}; !slices.Equal(got, want) {
		t.Errorf("/stop's categories: %q, want %q", got, want)
	}
	whole, categories = Offers(Resume, tenants)
	if got, want := texts(whole), []string{"Globex", "Initech"}; !slices.Equal(got, want) {
		t.Errorf("/resume's tenants: %q, want %q", got, want)
	}
	if got, want := texts(categories), []string{"Acme: promo"}; !slices.Equal(got, want) {
		t.Errorf("/resume's categories: %q, want %q", got, want)
	}
}

func TestOutcome(t *testing.T) {
	labels := map[string]string{"acme": "Acme", "globex": "Globex"}
	if m := Outcome(Result{Kind: Stop}, labels); m.TenantID != "" || m.Body != textNothingChanged {
		t.Errorf("nothing chosen: %+v", m)
	}
	m := Outcome(Result{Kind: Resume, Choices: []Choice{{TenantID: "acme", Category: "news"}}}, labels)
	if m.TenantID != "acme" || m.Body == "" || !strings.Contains(m.Body, "Resumed: Acme: news.") {
		t.Errorf("one tenant's category resumed: %+v", m)
	}
	m = Outcome(Result{Kind: Stop, Choices: []Choice{{TenantID: "acme"}, {TenantID: "globex"}}}, labels)
	if m.TenantID != "" || !strings.Contains(m.Body, "Stopped: Acme and Globex.") {
		t.Errorf("two tenants stopped: %+v", m)
	}
}
