package updates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/store"
)

// StatsWindow is the period /dev_stats counts notifications over.
const StatsWindow = 24 * time.Hour

// RefusalsWindow is the period /dev_stats counts requests refused over the tenant's limits.
const RefusalsWindow = time.Hour

// dev answers the /dev_* commands of developers (tenants.developers) and platform admins (DevAdmins), only
// about their own tenants among those of the bot the command was sent to (a developer of tenants of two
// bots asks each bot about its own). Anyone else gets the reply to an unknown command, as does an unknown
// /dev_*. The reads happen before the transaction that claims the update: they have no effect to protect.
func (rc *Receiver) dev(ctx context.Context, in incoming, name, args string) (Result, error) {
	r := Result{Kind: kindDevCommand, Outcome: outcomeReplied}
	from := in.m.From.ID
	admin := slices.Contains(rc.devAdmins, from)
	all, err := rc.store.DeveloperTenants(ctx, from, admin)
	if err != nil {
		return r, err
	}
	tenants := slices.DeleteFunc(all, func(t store.Tenant) bool { return t.BotID != in.bot })
	if !admin && len(tenants) == 0 {
		r.Outcome = outcomeRefused
		return r, rc.reply(ctx, in, unbranded(textUnknown))
	}
	ids := make([]string, len(tenants))
	for i, t := range tenants {
		ids[i] = t.ID
	}
	var body string
	switch name {
	case "/dev_help":
		body = devHelp
	case "/dev_whoami":
		body = whoami(from, admin, tenants)
	case "/dev_stats":
		counts, err := rc.store.NotificationStats(ctx, ids, StatsWindow)
		if err != nil {
			return r, err
		}
		refused, err := rc.store.RecentRefusals(ctx, ids, RefusalsWindow)
		if err != nil {
			return r, err
		}
		body = formatStats(tenants, counts, refused)
	case "/dev_status":
		body, err = rc.devStatus(ctx, ids, args)
		if err != nil {
			return r, err
		}
	case "/dev_ping":
		body = fmt.Sprintf(textDevPingFormat, in.id, rc.now().UTC().Format(time.RFC3339Nano))
	default:
		r.Kind = kindCommand
		body = textUnknown
	}
	return r, rc.reply(ctx, in, unbranded(truncate(body)))
}

// truncate keeps an answer within the platform's message limit (an admin's list of tenants can be long).
func truncate(s string) string {
	if brand.Fits(s) {
		return s
	}
	r := []rune(s)
	return string(r[:brand.MaxLength-1]) + "…"
}

func whoami(from int64, admin bool, tenants []store.Tenant) string {
	var b strings.Builder
	fmt.Fprintf(&b, textDevWhoamiFormat, from)
	if admin {
		b.WriteString("\n" + textDevWhoamiAdmin)
	}
	b.WriteString("\n" + textDevWhoamiTenants)
	n := 0
	for _, t := range tenants {
		// An admin sees every tenant, but is listed as developer only where they are one.
		if slices.Contains(t.Developers, from) {
			fmt.Fprintf(&b, "\n- %s (%s)", t.ID, t.DeveloperName)
			n++
		}
	}
	if n == 0 {
		b.WriteString(" " + textDevNoTenants)
	}
	return b.String()
}

// formatStats lists every tenant, including those without notifications in the window, with its limits
// and what they refused lately.
func formatStats(tenants []store.Tenant, counts []store.StatusCount, refused []store.Refusals) string {
	var b strings.Builder
	b.WriteString(textDevStatsTitle)
	if len(tenants) == 0 {
		b.WriteString("\n" + textDevNoTenants)
	}
	for _, t := range tenants {
		var parts []string
		for _, c := range counts {
			if c.TenantID == t.ID {
				parts = append(parts, string(c.Status)+" "+strconv.FormatInt(c.Count, 10))
			}
		}
		if len(parts) == 0 {
			parts = []string{textDevStatsNone}
		}
		fmt.Fprintf(&b, "\n%s: %s", t.ID, strings.Join(parts, ", "))
		var refusals []string
		for _, r := range refused {
			if r.TenantID == t.ID {
				refusals = append(refusals, fmt.Sprintf("%d %s", r.Count, r.Kind))
			}
		}
		if len(refusals) == 0 {
			refusals = []string{textDevStatsNone}
		}
		fmt.Fprintf(&b, "\n  limits: %s; refused in the last hour: %s", formatLimits(t.Limits), strings.Join(refusals, ", "))
	}
	return b.String()
}

// formatLimits shows a tenant's own limits; "default" is the ingress's installation default.
func formatLimits(l store.TenantLimits) string {
	v := func(p *int32, unit string) string {
		if p == nil {
			return "default"
		}
		return strconv.Itoa(int(*p)) + unit
	}
	return fmt.Sprintf("sends %s (burst %s), requests %s, delivery weight %s",
		v(l.SendsPerSecond, "/s"), v(l.Burst, ""), v(l.RequestsPerSecond, "/s"), v(l.DeliveryWeight, ""))
}

// devStatus shows the fields of GET /v1/status (and the tenant), never the body. A long metadata makes the
// answer long; dev truncates it to the platform's limit.
func (rc *Receiver) devStatus(ctx context.Context, tenantIDs []string, args string) (string, error) {
	fields := strings.Fields(args)
	if len(fields) != 1 {
		return textDevStatusUsage, nil
	}
	id, err := uuid.Parse(fields[0])
	if err != nil {
		return textDevStatusUsage, nil //nolint:nilerr // not a tracking id: the developer gets the usage as the answer
	}
	v, err := rc.store.FindTenantNotification(ctx, tenantIDs, id.String())
	if errors.Is(err, store.ErrNotFound) {
		return textDevNotFound, nil
	}
	if err != nil {
		return "", err
	}
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	orNull := func(s *string) string {
		if s == nil {
			return "null"
		}
		return *s
	}
	tsOrNull := func(t *time.Time) string {
		if t == nil {
			return "null"
		}
		return ts(*t)
	}
	metadata, _ := json.Marshal(v.Metadata) // {} when none; strings only: cannot fail
	return strings.Join([]string{
		"tracking_id: " + v.TrackingID,
		"tenant: " + v.TenantID,
		"user_id: " + v.UserID,
		"priority: " + strconv.Itoa(v.Priority),
		"status: " + string(v.Status),
		"attempts: " + strconv.Itoa(v.Attempts),
		"created_at: " + ts(v.CreatedAt),
		"updated_at: " + ts(v.UpdatedAt),
		"messenger_message_id: " + orNull(v.MessengerMessageID),
		"last_error_code: " + strconv.Itoa(v.LastErrorCode),
		"last_error_message: " + orNull(v.LastErrorMessage),
		"metadata: " + string(metadata),
		"send_at: " + tsOrNull(v.SendAt),
		"expires_at: " + tsOrNull(v.ExpiresAt),
		"delivered_at: " + tsOrNull(v.DeliveredAt),
		"next_attempt_at: " + tsOrNull(v.NextAttemptAt),
	}, "\n"), nil
}
