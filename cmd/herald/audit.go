package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/store"
)

// herald audit: the audit trail GET /v1/audit-events answers a tenant, for the platform team — every
// tenant or one, newest first, as CSV (a row per event, details as JSON) or JSON. A page that has more
// after it ends with the cursor of the next page on stderr (--cursor).

type auditCmd struct {
	config.Admin
	Tenant string `name:"tenant" placeholder:"TENANT" help:"only this tenant (default: every tenant)"`
	Type   string `name:"type" placeholder:"TYPES" help:"only these comma-separated event types (default: every type)"`
	Limit  int    `name:"limit" default:"100" help:"at most this many events, 1-10000"`
	Cursor string `name:"cursor" placeholder:"CURSOR" help:"the page after the one that printed this cursor (with the same --type)"`
	Format string `name:"format" default:"csv" enum:"csv,json" help:"csv (a header, then a row per event) or json ({\"data\": […], \"next_cursor\"})"`
}

// maxAuditCLILimit bounds one page of herald audit.
const maxAuditCLILimit = 10000

func (c *auditCmd) Run(e runEnv) error {
	var types []audit.Type
	if c.Type != "" {
		for _, name := range strings.Split(c.Type, ",") {
			t, ok := audit.ParseType(strings.TrimSpace(name))
			if !ok {
				return usageError{fmt.Errorf("--type %q is not an audit event type (%s)", name, audit.TypeNames())}
			}
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
		slices.Sort(types)
	}
	if c.Limit < 1 || c.Limit > maxAuditCLILimit {
		return usageError{fmt.Errorf("--limit must be 1-%d", maxAuditCLILimit)}
	}
	var after *store.AuditCursor
	if c.Cursor != "" {
		cur, err := store.DecodeAuditCursor(c.Cursor, types)
		if err != nil {
			return usageError{fmt.Errorf("--cursor: %w", err)}
		}
		after = &cur
	}
	return withStore(e, &c.Admin, func(st *store.Store) error {
		if c.Tenant != "" {
			if _, err := st.GetTenant(e.ctx, c.Tenant); err != nil {
				return tenantError(c.Tenant, err)
			}
		}
		events, next, err := st.AuditEvents(e.ctx, c.Tenant, types, c.Limit, after)
		if err != nil {
			return err
		}
		var nextCursor *string
		if next != nil {
			s := next.Encode(types)
			nextCursor = &s
			fmt.Fprintf(e.stderr, "more events: --cursor %s\n", s)
		}
		if c.Format == "json" {
			if events == nil {
				events = []audit.Event{}
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"data": events, "next_cursor": nextCursor})
		}
		out := csv.NewWriter(e.stdout)
		_ = out.Write([]string{"id", "tenant_id", "at", "type", "actor", "target", "details"})
		for _, ev := range events {
			details, err := json.Marshal(ev.Details)
			if err != nil {
				return fmt.Errorf("while printing event %d: %w", ev.ID, err)
			}
			_ = out.Write([]string{strconv.FormatInt(ev.ID, 10), ev.TenantID, ev.At.UTC().Format(time.RFC3339Nano),
				string(ev.Type), ev.Actor, ev.Target, string(details)})
		}
		out.Flush()
		return out.Error()
	})
}
