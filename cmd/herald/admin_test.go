package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// herald runs the binary's entry point in-process and returns the exit code and outputs.
func herald(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestAdminCLIManagesTenantsAndKeys(t *testing.T) {
	st, url := pgtest.NewStore(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	ctx := context.Background()

	if code, _, stderr := herald(t, "tenant", "create", "--id", "acme", "--developer-name", "Acme Inc."); code != 0 {
		t.Fatalf("tenant create: %d %s", code, stderr)
	}
	if code, _, stderr := herald(t, "tenant", "create", "--id", "acme", "--developer-name", "Again"); code == 0 || !strings.Contains(stderr, "acme") {
		t.Errorf("a duplicate tenant was accepted: %d %s", code, stderr)
	}
	if code, _, _ := herald(t, "tenant", "create", "--id", "Bad_ID", "--developer-name", "x"); code != 2 {
		t.Errorf("an invalid tenant id must be a usage error (2), got %d", code)
	}

	// apikey create prints the key alone on one line of stdout.
	code, stdout, stderr := herald(t, "apikey", "create", "--tenant", "acme", "--label", "Acme Shop")
	if code != 0 {
		t.Fatalf("apikey create: %d %s", code, stderr)
	}
	key := strings.TrimSuffix(stdout, "\n")
	if strings.Contains(key, "\n") || !apikey.LooksValid(key) {
		t.Fatalf("stdout %q is not one key on one line", stdout)
	}
	p, err := st.Authenticate(ctx, apikey.Digest(key))
	if err != nil || p.TenantID != "acme" || p.Label != "Acme Shop" {
		t.Fatalf("the printed key does not authenticate as acme/Acme Shop: %+v %v", p, err)
	}
	if code, _, _ := herald(t, "apikey", "create", "--tenant", "nobody"); code == 0 {
		t.Error("a key for an unknown tenant was created")
	}

	// list shows the prefix, never the key.
	_, list, _ := herald(t, "apikey", "list", "--tenant", "acme")
	if !strings.Contains(list, key[:apikey.PrefixLen]) || strings.Contains(list, key) {
		t.Errorf("apikey list must show the prefix and not the key:\n%s", list)
	}
	// Suspension and resumption.
	if code, _, _ := herald(t, "tenant", "suspend", "--id", "acme"); code != 0 {
		t.Fatal("suspend failed")
	}
	if _, err := st.Authenticate(ctx, apikey.Digest(key)); err == nil {
		t.Error("a suspended tenant's key still authenticates")
	}
	herald(t, "tenant", "resume", "--id", "acme")
	if _, err := st.Authenticate(ctx, apikey.Digest(key)); err != nil {
		t.Errorf("a resumed tenant's key does not authenticate: %v", err)
	}
	// Developers.
	if code, _, stderr := herald(t, "tenant", "add-developer", "--id", "acme", "--messenger-user-id", "4242"); code != 0 {
		t.Fatalf("add-developer: %s", stderr)
	}
	_, tenants, _ := herald(t, "tenant", "list")
	if !strings.Contains(tenants, "acme") || !strings.Contains(tenants, "4242") || !strings.Contains(tenants, "Acme Inc.") {
		t.Errorf("tenant list:\n%s", tenants)
	}
	// Revocation by prefix.
	if code, _, stderr := herald(t, "apikey", "revoke", "--tenant", "acme", "--key", key[:apikey.PrefixLen]); code != 0 {
		t.Fatalf("revoke: %s", stderr)
	}
	if _, err := st.Authenticate(ctx, apikey.Digest(key)); err == nil {
		t.Error("a revoked key still authenticates")
	}
	if code, _, _ := herald(t, "apikey", "revoke", "--tenant", "acme", "--key", "hk_"); code != 2 {
		t.Error("a too-short prefix must be refused: it could revoke many keys")
	}
	_, list, _ = herald(t, "apikey", "list")
	if !strings.Contains(list, "revoked") {
		t.Errorf("list does not show the revoked state:\n%s", list)
	}
}

func TestAdminCLIHelpListsSubcommands(t *testing.T) {
	for _, args := range [][]string{{"tenant", "-h"}, {"tenant", "--help"}, {"help", "tenant"}} {
		code, stdout, stderr := herald(t, args...)
		if code != 0 {
			t.Errorf("herald %s: %d %s", strings.Join(args, " "), code, stderr)
		}
		for _, sub := range []string{"create", "suspend", "resume", "list", "add-developer"} {
			if !strings.Contains(stdout, "tenant "+sub) {
				t.Errorf("herald %s does not list %s:\n%s", strings.Join(args, " "), sub, stdout)
			}
		}
	}
	code, stdout, _ := herald(t, "apikey", "-h")
	for _, sub := range []string{"create", "revoke", "list"} {
		if code != 0 || !strings.Contains(stdout, "apikey "+sub) {
			t.Errorf("herald apikey -h does not list %s:\n%s", sub, stdout)
		}
	}
	if code, _, stderr := herald(t, "tenant"); code != 2 || !strings.Contains(stderr, "add-developer") {
		t.Errorf("herald tenant without a subcommand: %d %s", code, stderr)
	}
}

func TestUnknownCommandsAndMissingConfiguration(t *testing.T) {
	if code, _, stderr := herald(t, "nonsense"); code != 2 || !strings.Contains(stderr, "unknown command") {
		t.Errorf("unknown command: %d %s", code, stderr)
	}
	t.Setenv("HERALD_DATABASE_URL", "")
	if code, _, stderr := herald(t, "migrate"); code != 1 || !strings.Contains(stderr, "HERALD_DATABASE_URL") {
		t.Errorf("migrate without a database: %d %s", code, stderr)
	}
	if code, _, stderr := herald(t, "ingress", "--kafka-brokers", "nohost"); code != 1 || !strings.Contains(stderr, "HERALD_KAFKA_BROKERS") {
		t.Errorf("ingress with a bad broker: %d %s", code, stderr)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	url := pgtest.NewDatabase(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	for range 2 {
		if code, _, stderr := herald(t, "migrate"); code != 0 {
			t.Fatalf("migrate: %s", stderr)
		}
	}
}
