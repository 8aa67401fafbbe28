package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/store"
	sent "github.com/heraldhq/herald/internal/usage"
)

// herald usage: what GET /v1/usage answers a tenant, for the platform team — every tenant or one, per
// UTC day or hour, as CSV (one row per tenant and period, for a spreadsheet or a billing import) or JSON.

type usageCmd struct {
	config.Admin
	From        string `name:"from" placeholder:"TIME" help:"RFC 3339 start, like 2026-01-01T00:00:00Z (default: 30 days before --to)"`
	To          string `name:"to" placeholder:"TIME" help:"RFC 3339 end, exclusive, at most 400 days after --from (default: now)"`
	Tenant      string `name:"tenant" placeholder:"TENANT" help:"only this tenant (default: every tenant)"`
	Granularity string `name:"granularity" default:"day" enum:"day,hour" help:"a row per UTC day or per hour"`
	Format      string `name:"format" default:"csv" enum:"csv,json" help:"csv (a header, then a row per tenant and period) or json ({\"data\": […]})"`
}

func (c *usageCmd) Run(e runEnv) error {
	w, err := sent.ParseWindow(c.From, c.To, c.Granularity, time.Now())
	if err != nil {
		return usageError{errors.New(cliWindowError(err))}
	}
	return withStore(e, &c.Admin, func(st *store.Store) error {
		if c.Tenant != "" {
			if _, err := st.GetTenant(e.ctx, c.Tenant); err != nil {
				return tenantError(c.Tenant, err)
			}
		}
		periods, err := st.Usage(e.ctx, c.Tenant, w)
		if err != nil {
			return err
		}
		if c.Format == "json" {
			if periods == nil {
				periods = []sent.Period{}
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"data": periods})
		}
		out := csv.NewWriter(e.stdout)
		header := []string{"tenant_id", "period_start"}
		for _, col := range sent.Columns {
			header = append(header, string(col))
		}
		_ = out.Write(header)
		for _, p := range periods {
			row := []string{p.TenantID, p.Start.UTC().Format(time.RFC3339)}
			for _, v := range p.Fields() {
				row = append(row, strconv.FormatInt(*v, 10))
			}
			_ = out.Write(row)
		}
		out.Flush()
		return out.Error()
	})
}

// cliWindowError words a refused window with the flags' names.
func cliWindowError(err error) string {
	return fmt.Sprintf("%v (flags --from, --to, --granularity)", err)
}
