package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/store"
)

// openAdminStore parses the flags of an admin subcommand and opens the store.
func openAdminStore(ctx context.Context, name string, args []string, stderr io.Writer, bind func(*flag.FlagSet)) (*store.Store, error) {
	var c config.Config
	fs := newFlagSet(name, stderr)
	c.Bind(fs, config.DatabaseURL)
	bind(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	if err := c.Validate(config.DatabaseURL); err != nil {
		return nil, err
	}
	return store.Open(ctx, c.DatabaseURL, 2)
}

func runTenant(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{fmt.Errorf("usage: herald tenant create|suspend|resume|list|add-developer [flags]")}
	}
	var id, name string
	var developer int64
	sub := args[0]
	bind := func(f *flag.FlagSet) {}
	switch sub {
	case "create":
		bind = func(f *flag.FlagSet) {
			f.StringVar(&id, "id", "", "tenant id (1-63 of a-z0-9-)")
			f.StringVar(&name, "developer-name", "", "developer name: the branding label when a key has none")
		}
	case "suspend", "resume":
		bind = func(f *flag.FlagSet) { f.StringVar(&id, "id", "", "tenant id") }
	case "add-developer":
		bind = func(f *flag.FlagSet) {
			f.StringVar(&id, "id", "", "tenant id")
			f.Int64Var(&developer, "messenger-user-id", 0, "messenger user id allowed the /dev_* commands for this tenant")
		}
	case "list":
	default:
		return usageError{fmt.Errorf("unknown tenant subcommand %q (create, suspend, resume, list, add-developer)", sub)}
	}
	st, err := openAdminStore(ctx, "tenant "+sub, args[1:], stderr, bind)
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "create":
		if err := validTenantID(id); err != nil {
			return usageError{err}
		}
		if name = strings.TrimSpace(name); name == "" || len([]rune(name)) > 128 {
			return usageError{fmt.Errorf("--developer-name is required (1-128 characters)")}
		}
		if err := st.CreateTenant(ctx, id, name); err != nil {
			return fmt.Errorf("while creating tenant %q: %w", id, err)
		}
		fmt.Fprintf(stderr, "created tenant %s\n", id)
	case "suspend", "resume":
		if err := st.SetTenantSuspended(ctx, id, sub == "suspend"); err != nil {
			return fmt.Errorf("while updating tenant %q: %w", id, err)
		}
		fmt.Fprintf(stderr, "tenant %s %sd\n", id, sub)
	case "add-developer":
		if developer <= 0 {
			return usageError{fmt.Errorf("--messenger-user-id is required")}
		}
		if err := st.AddTenantDeveloper(ctx, id, developer); err != nil {
			return fmt.Errorf("while adding developer to tenant %q: %w", id, err)
		}
		fmt.Fprintf(stderr, "messenger user %d is a developer of %s\n", developer, id)
	case "list":
		tenants, err := st.ListTenants(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tDEVELOPER NAME\tSUSPENDED\tDEVELOPERS\tCREATED")
		for _, t := range tenants {
			fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\n", t.ID, t.DeveloperName, t.Suspended, joinIDs(t.Developers), t.CreatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return nil
}

func runAPIKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{fmt.Errorf("usage: herald apikey create|revoke|list [flags]")}
	}
	var tenant, label, prefix string
	var ttl time.Duration
	sub := args[0]
	var bind func(f *flag.FlagSet)
	switch sub {
	case "create":
		bind = func(f *flag.FlagSet) {
			f.StringVar(&tenant, "tenant", "", "tenant id")
			f.StringVar(&label, "label", "", "branding label (default: the tenant's developer name)")
			f.DurationVar(&ttl, "expires-in", 0, "expire the key after this long (default: never)")
		}
	case "revoke":
		bind = func(f *flag.FlagSet) {
			f.StringVar(&tenant, "tenant", "", "tenant id")
			f.StringVar(&prefix, "key", "", "the key's prefix (as `apikey list` shows it) or id")
		}
	case "list":
		bind = func(f *flag.FlagSet) { f.StringVar(&tenant, "tenant", "", "tenant id (default: all)") }
	default:
		return usageError{fmt.Errorf("unknown apikey subcommand %q (create, revoke, list)", sub)}
	}
	st, err := openAdminStore(ctx, "apikey "+sub, args[1:], stderr, bind)
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "create":
		if tenant == "" {
			return usageError{fmt.Errorf("--tenant is required")}
		}
		var labelPtr *string
		if label != "" {
			if len([]rune(label)) > 64 {
				return usageError{fmt.Errorf("--label must be at most 64 characters")}
			}
			labelPtr = &label
		}
		var expires *time.Time
		if ttl > 0 {
			t := time.Now().Add(ttl)
			expires = &t
		}
		k := apikey.New()
		if _, err := st.InsertAPIKey(ctx, tenant, k.Digest, k.Prefix, labelPtr, expires); err != nil {
			return fmt.Errorf("while creating a key for tenant %q (does it exist?): %w", tenant, err)
		}
		// The key alone on stdout: scripts capture it. It is shown once and never stored.
		fmt.Fprintln(stdout, k.Secret)
	case "revoke":
		if tenant == "" || prefix == "" {
			return usageError{fmt.Errorf("--tenant and --key are required")}
		}
		if len(prefix) < apikey.PrefixLen && !strings.Contains(prefix, "-") {
			return usageError{fmt.Errorf("--key must be the full prefix shown by `apikey list` (%d characters) or a key id", apikey.PrefixLen)}
		}
		n, err := st.RevokeAPIKeys(ctx, tenant, prefix)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no active key of tenant %q matches %q", tenant, prefix)
		}
		fmt.Fprintf(stderr, "revoked %d key(s)\n", n)
	case "list":
		keys, err := st.ListAPIKeys(ctx, tenant)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tPREFIX\tLABEL\tSTATE\tEXPIRES\tCREATED")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\t%s\t%s\n", k.ID, k.TenantID, k.Prefix, deref(k.Label), keyState(k), optTime(k.ExpiresAt), k.CreatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return nil
}

func keyState(k store.APIKey) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.Disabled:
		return "disabled"
	case k.ExpiresAt != nil && k.ExpiresAt.Before(time.Now()):
		return "expired"
	}
	return "active"
}

func validTenantID(id string) error {
	if len(id) < 1 || len(id) > 63 {
		return fmt.Errorf("--id must be 1-63 characters of a-z, 0-9 and -")
	}
	for i, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0 && i < len(id)-1) {
			return fmt.Errorf("--id must be 1-63 characters of a-z, 0-9 and - (not at the ends)")
		}
	}
	return nil
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func optTime(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}
