package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/testing/pgtest"
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
	if code, _, stderr := herald(t, "tenant", "create", "--id", "acme", "--developer-name", "Again"); code != 1 || !strings.Contains(stderr, "tenant acme already exists") ||
		strings.Contains(stderr, "pkey") {
		t.Errorf("a duplicate tenant must be refused in plain words: %d %s", code, stderr)
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
	if code, stdout, stderr := herald(t, "apikey", "create", "--tenant", "nobody"); code != 1 || stdout != "" ||
		!strings.Contains(stderr, "no tenant nobody") || strings.Contains(stderr, "fkey") {
		t.Errorf("a key for an unknown tenant must be refused in plain words: %d %q %s", code, stdout, stderr)
	}

	// list shows the prefix, never the key.
	_, list, _ := herald(t, "apikey", "list", "--tenant", "acme")
	if !strings.Contains(list, key[:apikey.PrefixLen]) || strings.Contains(list, key) {
		t.Errorf("apikey list must show the prefix and not the key:\n%s", list)
	}
	// Suspension and resumption.
	if code, _, stderr := herald(t, "tenant", "suspend", "--id", "acme"); code != 0 || stderr != "tenant acme suspended\n" {
		t.Fatalf("suspend: %d %q", code, stderr)
	}
	if _, err := st.Authenticate(ctx, apikey.Digest(key)); err == nil {
		t.Error("a suspended tenant's key still authenticates")
	}
	if code, _, stderr := herald(t, "tenant", "resume", "--id", "acme"); code != 0 || stderr != "tenant acme resumed\n" {
		t.Fatalf("resume: %d %q", code, stderr)
	}
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

func TestAdminCLIRevokesByWhatListShows(t *testing.T) {
	_, url := pgtest.NewStore(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	if code, _, stderr := herald(t, "tenant", "create", "--id", "acme", "--developer-name", "Acme"); code != 0 {
		t.Fatalf("tenant create: %s", stderr)
	}
	newKey := func() string {
		t.Helper()
		code, stdout, stderr := herald(t, "apikey", "create", "--tenant", "acme", "--label", "Shop")
		if code != 0 {
			t.Fatalf("apikey create: %s", stderr)
		}
		return strings.TrimSpace(stdout)
	}
	// listed returns the ID and PREFIX columns of the key's row in `apikey list`.
	listed := func(key string) (id, prefix, state string) {
		t.Helper()
		_, list, _ := herald(t, "apikey", "list", "--tenant", "acme")
		for _, line := range strings.Split(list, "\n") {
			cols := regexp.MustCompile(`\s{2,}`).Split(line, -1)
			if len(cols) > 4 && strings.HasPrefix(cols[2], key[:apikey.PrefixLen]) {
				return cols[0], cols[2], cols[4]
			}
		}
		t.Fatalf("key %s… not listed:\n%s", key[:apikey.PrefixLen], list)
		return
	}
	for _, tc := range []struct {
		name string
		arg  func(key string) string
	}{
		{"the prefix as listed, with its ellipsis", func(key string) string { _, prefix, _ := listed(key); return prefix }},
		{"the prefix without the ellipsis", func(key string) string { return key[:apikey.PrefixLen] }},
		{"the id as listed", func(key string) string { id, _, _ := listed(key); return id }},
		{"the key itself", func(key string) string { return key }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newKey()
			code, _, stderr := herald(t, "apikey", "revoke", "--tenant", "acme", "--key", tc.arg(key))
			if code != 0 || strings.Contains(stderr, key) {
				t.Fatalf("revoke: %d %s", code, stderr)
			}
			if _, _, state := listed(key); state != "revoked" {
				t.Errorf("the key is %s", state)
			}
		})
	}
	for _, bad := range []string{"hk_", "hk_AbC", "hk_-", "acme"} {
		if code, _, stderr := herald(t, "apikey", "revoke", "--tenant", "acme", "--key", bad); code != 2 || !strings.Contains(stderr, "apikey list") {
			t.Errorf("--key %q must be refused, saying what --key takes: %d %s", bad, code, stderr)
		}
	}
	if code, _, stderr := herald(t, "apikey", "revoke", "--tenant", "ghost", "--key", "hk_AbCdEfGh"); code != 1 || !strings.Contains(stderr, "no tenant ghost") {
		t.Errorf("revoking for an unknown tenant: %d %s", code, stderr)
	}
	if code, _, stderr := herald(t, "apikey", "revoke", "--tenant", "acme", "--key", "hk_AbCdEfGh…"); code != 1 || !strings.Contains(stderr, "no active key of tenant acme matches hk_AbCdEfGh") {
		t.Errorf("revoking a key that is not there: %d %s", code, stderr)
	}
}

func TestAdminCLIRefusesWhatItCannotDo(t *testing.T) {
	_, url := pgtest.NewStore(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	if code, _, stderr := herald(t, "tenant", "create", "--id", "acme", "--developer-name", "Acme"); code != 0 {
		t.Fatalf("tenant create: %s", stderr)
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		// A key that expired at birth, or never: --expires-in must be positive.
		{[]string{"apikey", "create", "--tenant", "acme", "--expires-in", "-5m"}, 2, "--expires-in must be a positive duration"},
		{[]string{"apikey", "create", "--tenant", "acme", "--expires-in=-5m"}, 2, "--expires-in must be a positive duration"},
		{[]string{"apikey", "create", "--tenant", "acme", "--expires-in", "0s"}, 2, "--expires-in must be a positive duration"},
		// --messenger-user-id says what is wrong with it.
		{[]string{"tenant", "add-developer", "--id", "acme"}, 2, "missing flags: --messenger-user-id"},
		{[]string{"tenant", "add-developer", "--id", "acme", "--messenger-user-id", "0"}, 2, "0 is not a messenger user id: they are positive numbers"},
		{[]string{"tenant", "add-developer", "--id", "acme", "--messenger-user-id", "-7"}, 2, "-7 is not a messenger user id: they are positive numbers"},
		{[]string{"tenant", "add-developer", "--id", "acme", "--messenger-user-id", "@alice"}, 2, `"@alice" is not a messenger user id: that is a number`},
		{[]string{"tenant", "add-developer", "--id", "acme", "--messenger-user-id", "99999999999999999999"}, 2, "too large for a messenger user id"},
		// Tenants that do not exist, in plain words.
		{[]string{"tenant", "suspend", "--id", "ghost"}, 1, "no tenant ghost"},
		{[]string{"tenant", "resume", "--id", "ghost"}, 1, "no tenant ghost"},
		{[]string{"tenant", "add-developer", "--id", "ghost", "--messenger-user-id", "42"}, 1, "no tenant ghost"},
		{[]string{"apikey", "list", "--tenant", "ghost"}, 1, "no tenant ghost"},
		{[]string{"tenant", "create", "--id", "acme"}, 2, "missing flags: --developer-name"},
	} {
		code, stdout, stderr := herald(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.says) || stdout != "" {
			t.Errorf("herald %s: exit %d (want %d), stdout %q, stderr %s(want it to say %q)", strings.Join(tc.args, " "), code, tc.code, stdout, stderr, tc.says)
		}
	}
	if _, list, _ := herald(t, "apikey", "list", "--tenant", "acme"); strings.Contains(list, "hk_") {
		t.Errorf("a refused create made a key:\n%s", list)
	}
	code, stdout, stderr := herald(t, "apikey", "create", "--tenant", "acme", "--expires-in", "1h")
	if code != 0 {
		t.Fatalf("apikey create --expires-in 1h: %s", stderr)
	}
	if _, list, _ := herald(t, "apikey", "list", "--tenant", "acme"); !strings.Contains(list, strings.TrimSpace(stdout)[:apikey.PrefixLen]) || strings.Contains(list, "never") {
		t.Errorf("a key created with --expires-in 1h must have an expiry:\n%s", list)
	}
}

func TestAdminCLIHelpListsSubcommands(t *testing.T) {
	for _, args := range [][]string{{"tenant", "-h"}, {"tenant", "--help"}, {"help", "tenant"}} {
		code, stdout, stderr := herald(t, args...)
		if code != 0 {
			t.Errorf("herald %s: %d %s", strings.Join(args, " "), code, stderr)
		}
		for _, sub := range []string{"create", "update", "suspend", "resume", "list", "add-developer"} {
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
	code, stdout, _ = herald(t, "apikey", "revoke", "-h")
	if code != 0 || !strings.Contains(stdout, "--key=KEY") || !strings.Contains(stdout, "ID") || !strings.Contains(stdout, "apikey list") {
		t.Errorf("herald apikey revoke -h must say what --key takes:\n%s", stdout)
	}
	if code, _, stderr := herald(t, "tenant"); code != 2 || !strings.Contains(stderr, "herald tenant add-developer") || !strings.Contains(stderr, "herald tenant update") {
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
