package main

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// The operators' view of a tenant's notifications: what GET /v1/notifications lists and POST
// /v1/notifications/{id}/cancel does, through the same store functions, without the tenant's key. The
// table goes to stdout; the cursor of the next page and confirmations go to stderr.

type notificationsCmd struct {
	List   notificationsListCmd   `cmd:"" help:"list a tenant's notifications, newest first, a page at a time (never the bodies)"`
	Cancel notificationsCancelCmd `cmd:"" help:"cancel a tenant's scheduled, queued or retrying notification"`
}

type notificationsListCmd struct {
	config.Admin
	Tenant        string      `name:"tenant" required:"" placeholder:"TENANT" help:"tenant id"`
	Status        config.List `name:"status" placeholder:"STATE" help:"comma-separated states, like queued,retrying (default: every state)"`
	UserID        string      `name:"user-id" placeholder:"USER" help:"only this user's notifications"`
	CreatedAfter  string      `name:"created-after" placeholder:"TIME" help:"only those created after this RFC 3339 time, like 2026-01-02T15:04:05Z"`
	CreatedBefore string      `name:"created-before" placeholder:"TIME" help:"only those created before this RFC 3339 time"`
	Limit         int         `name:"limit" default:"50" help:"notifications per page, 1-200"`
	Cursor        string      `name:"cursor" placeholder:"CURSOR" help:"the page after this cursor (printed after the previous page, with the same filters)"`
}

func (c *notificationsListCmd) Run(e runEnv) error {
	f, err := c.filter()
	if err != nil {
		return usageError{err}
	}
	if c.Limit < 1 || c.Limit > store.MaxListLimit {
		return usageError{fmt.Errorf("--limit must be 1-%d", store.MaxListLimit)}
	}
	var after *store.ListCursor
	if c.Cursor != "" {
		cur, err := store.DecodeListCursor(c.Cursor, f)
		if err != nil {
			return usageError{fmt.Errorf("--cursor is not one a listing with these filters printed: %w", err)}
		}
		after = &cur
	}
	return withStore(e, &c.Admin, func(st *store.Store) error {
		page, next, err := st.ListNotifications(e.ctx, c.Tenant, f, c.Limit, after)
		if err != nil {
			return err
		}
		if len(page) == 0 && after == nil {
			if _, err := st.GetTenant(e.ctx, c.Tenant); err != nil {
				return tenantError(c.Tenant, err)
			}
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TRACKING ID\tUSER\tSTATUS\tPRIORITY\tFORMAT\tCATEGORY\tDELIVERED AS\tATTEMPTS\tCREATED\tSEND AT\tEXPIRES AT\tLAST ERROR")
		for _, v := range page {
			lastError := "-"
			if v.LastErrorCode != 0 {
				lastError = strconv.Itoa(v.LastErrorCode) + " " + deref(v.LastErrorMessage)
			}
			r := v.Resource()
			// delivered_as (§13): sent or edited once delivered, "-" before.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", v.TrackingID, v.UserID, v.Status, v.Priority, r.Format,
				cmp.Or(deref(r.Category), "-"), cmp.Or(deref(r.DeliveredAs), "-"), v.Attempts, v.CreatedAt.UTC().Format(time.RFC3339), orDash(v.SendAt), orDash(v.ExpiresAt), lastError)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if next != nil {
			fmt.Fprintf(e.stderr, "more: add --cursor %s\n", next.Encode(f))
		}
		return nil
	})
}

// filter is the listing's filter, from the flags.
func (c *notificationsListCmd) filter() (store.ListFilter, error) {
	var f store.ListFilter
	for _, name := range c.Status {
		st, ok := notification.ParseStatus(name)
		if !ok {
			return f, fmt.Errorf("--status: %q is not a notification state (%s)", name, statusNames())
		}
		f.Statuses = append(f.Statuses, st)
	}
	f.UserID = c.UserID
	for _, t := range []struct {
		flag, value string
		dst         **time.Time
	}{{"--created-after", c.CreatedAfter, &f.CreatedAfter}, {"--created-before", c.CreatedBefore, &f.CreatedBefore}} {
		if t.value == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.value)
		if err != nil {
			return f, fmt.Errorf("%s must be an RFC 3339 time, like 2026-01-02T15:04:05Z", t.flag)
		}
		*t.dst = &v
	}
	return f, nil
}

func orDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func statusNames() string {
	names := make([]string, len(notification.Statuses))
	for i, st := range notification.Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

type notificationsCancelCmd struct {
	config.Admin
	Tenant string `name:"tenant" required:"" placeholder:"TENANT" help:"tenant id"`
	ID     string `name:"id" required:"" placeholder:"TRACKING_ID" help:"the notification's tracking id"`
}

func (c *notificationsCancelCmd) Run(e runEnv) error {
	id, err := uuid.Parse(strings.TrimSpace(c.ID))
	if err != nil {
		return usageError{fmt.Errorf("--id must be a tracking id (a UUID), not %q", c.ID)}
	}
	return withStore(e, &c.Admin, func(st *store.Store) error {
		_, err := st.CancelNotification(e.ctx, c.Tenant, id.String())
		var nc *store.NotCancellable
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("no notification %s of tenant %s", id, c.Tenant)
		case errors.As(err, &nc):
			return fmt.Errorf("notification %s not cancelled: %s", id, nc.Error())
		case err != nil:
			return err
		}
		fmt.Fprintf(e.stderr, "notification %s cancelled\n", id)
		return nil
	})
}
