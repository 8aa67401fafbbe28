package main

import (
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// The admin commands' changes are the admin CLI's in the audit trail, and herald audit prints the trail
// of every tenant or one, as CSV or JSON, paged by a cursor — never the key it created.
func TestAuditCommand(t *testing.T) {
	_, url := pgtest.NewStore(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	for _, args := range [][]string{
		{"tenant", "create", "--id", "acme", "--developer-name", "Acme"},
		{"tenant", "create", "--id", "globex", "--developer-name", "Globex"},
		{"tenant", "update", "--id", "acme", "--sends-per-second", "7"},
		{"tenant", "update", "--id", "acme", "--quiet-hours", "22:00-07:00", "--quiet-hours-zone", "Europe/Berlin"},
		{"tenant", "suspend", "--id", "globex"},
	} {
		if code, _, stderr := herald(t, args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, stderr)
		}
	}
	code, stdout, stderr := herald(t, "apikey", "create", "--tenant", "acme", "--label", "Shop")
	if code != 0 {
		t.Fatalf("apikey create: %d %s", code, stderr)
	}
	key := strings.TrimSpace(stdout)
	if code, _, stderr := herald(t, "apikey", "revoke", "--tenant", "acme", "--key", key[:apikey.PrefixLen]); code != 0 {
		t.Fatalf("apikey revoke: %d %s", code, stderr)
	}

	code, stdout, stderr = herald(t, "audit")
	if code != 0 {
		t.Fatalf("herald audit: %d %s", code, stderr)
	}
	if strings.Contains(stdout, key) || strings.Contains(stdout, key[:apikey.PrefixLen]) {
		t.Errorf("herald audit prints the key or its prefix:\n%s", stdout)
	}
	rows, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows[0], ","); got != "id,tenant_id,at,type,actor,target,details" {
		t.Errorf("header %s", got)
	}
	var seen []string
	for _, r := range rows[1:] {
		seen = append(seen, r[1]+" "+r[3])
		if r[4] != "admin_cli" {
			t.Errorf("event %v: actor %q, want admin_cli", r, r[4])
		}
	}
	// Newest first: the revocation, the creation, the suspension of globex, acme's quiet hours, its limits.
	want := []string{"acme api_key.revoked", "acme api_key.created", "globex tenant.updated", "acme tenant.updated", "acme tenant.updated"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", seen, want)
	}
	if d := rows[5][6]; !strings.Contains(d, `"sends_per_second":7`) {
		t.Errorf("the limits' event's details %s", d)
	}

	// One tenant, one type, as JSON, a page of one and then the next by its cursor.
	code, stdout, stderr = herald(t, "audit", "--tenant", "acme", "--type", "tenant.updated", "--limit", "1", "--format", "json")
	var page struct {
		Data []struct {
			TenantID string         `json:"tenant_id"`
			Type     string         `json:"type"`
			Actor    string         `json:"actor"`
			Target   string         `json:"target"`
			Details  map[string]any `json:"details"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &page) != nil || len(page.Data) != 1 || page.NextCursor == nil {
		t.Fatalf("herald audit --tenant acme --limit 1: %d\n%s%s", code, stdout, stderr)
	}
	if e := page.Data[0]; e.TenantID != "acme" || e.Target != "acme" || e.Details["quiet_hours"] == nil {
		t.Errorf("the newest of acme's tenant.updated: %+v", e)
	}
	if !strings.Contains(stderr, "--cursor "+*page.NextCursor) {
		t.Errorf("stderr %q does not name the next page's cursor", stderr)
	}
	code, stdout, stderr = herald(t, "audit", "--tenant", "acme", "--type", "tenant.updated", "--limit", "1", "--format", "json", "--cursor", *page.NextCursor)
	page.Data, page.NextCursor = nil, nil
	if code != 0 || json.Unmarshal([]byte(stdout), &page) != nil || len(page.Data) != 1 || page.NextCursor != nil {
		t.Fatalf("the second page: %d\n%s%s", code, stdout, stderr)
	}
	if e := page.Data[0]; e.Details["limits"] == nil {
		t.Errorf("the oldest of acme's tenant.updated: %+v", e)
	}

	if code, _, stderr := herald(t, "audit", "--type", "user.blocked"); code != 2 || !strings.Contains(stderr, "not an audit event type") {
		t.Errorf("an unknown type: %d %s", code, stderr)
	}
	if code, _, stderr := herald(t, "audit", "--tenant", "nope"); code != 1 || !strings.Contains(stderr, "no tenant nope") {
		t.Errorf("an unknown tenant: %d %s", code, stderr)
	}
}
