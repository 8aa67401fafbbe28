package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"
	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/quiet"
	"github.com/heraldhq/herald/internal/store"
)

// The admin CLI, for installs without Kubernetes. Results go to stdout (scripts read them: `apikey create`
// prints the key alone on one line); confirmations go to stderr.

type tenantCmd struct {
	Create       tenantCreateCmd       `cmd:"" help:"create a tenant"`
	Update       tenantUpdateCmd       `cmd:"" help:"change a tenant's developer name, limits or bot"`
	Suspend      tenantSuspendCmd      `cmd:"" help:"suspend a tenant: its keys stop authenticating"`
	Resume       tenantResumeCmd       `cmd:"" help:"resume a suspended tenant"`
	List         tenantListCmd         `cmd:"" help:"list the tenants"`
	AddDeveloper tenantAddDeveloperCmd `cmd:"" name:"add-developer" help:"allow a messenger user the /dev_* commands about a tenant"`
}

type apikeyCmd struct {
	Create apikeyCreateCmd `cmd:"" help:"create a key and print it, alone on one line of stdout (it is shown only once)"`
	Revoke apikeyRevokeCmd `cmd:"" help:"revoke a key"`
	List   apikeyListCmd   `cmd:"" help:"list keys: prefixes only, never keys"`
}

type tenantCreateCmd struct {
	config.Admin
	ID            string `name:"id" required:"" placeholder:"TENANT" help:"tenant id: 1-63 of a-z, 0-9 and - (not at the ends)"`
	DeveloperName string `name:"developer-name" required:"" placeholder:"NAME" help:"developer name: the branding label of keys without one (1-128 characters)"`
	limitFlags
}

// limitFlags are a tenant's own limits; a flag not given keeps the installation's default (create) or the
// tenant's current value (update). 0 resets a limit to the installation's default.
type limitFlags struct {
	SendsPerSecond    *int32 `name:"sends-per-second" placeholder:"N" help:"notifications accepted per second, batch items one by one (default: the ingress's HERALD_TENANT_SENDS_PER_SECOND; 0: back to it)"`
	Burst             *int32 `name:"burst" placeholder:"N" help:"sends accepted at once after a quiet period (default: twice the rate; 0: back to it)"`
	RequestsPerSecond *int32 `name:"requests-per-second" placeholder:"N" help:"every other /v1 request per second (default: the ingress's HERALD_TENANT_REQUESTS_PER_SECOND; 0: back to it)"`
	DeliveryWeight    *int32 `name:"delivery-weight" placeholder:"N" help:"share of the bot's rate against other tenants waiting in the same priority class, 1-100 (default 1; 0: back to it)"`
}

// apply sets the limits given on l and checks them.
func (f limitFlags) apply(l *store.TenantLimits) error {
	set := func(dst **int32, v *int32, name string, maxV int32) error {
		switch {
		case v == nil:
		case *v == 0:
			*dst = nil
		case *v < 0 || *v > maxV:
			return fmt.Errorf("--%s must be 1-%d, or 0 for the default", name, maxV)
		default:
			*dst = v
		}
		return nil
	}
	if err := errors.Join(set(&l.SendsPerSecond, f.SendsPerSecond, "sends-per-second", 100000), set(&l.Burst, f.Burst, "burst", 1000000),
		set(&l.RequestsPerSecond, f.RequestsPerSecond, "requests-per-second", 100000), set(&l.DeliveryWeight, f.DeliveryWeight, "delivery-weight", 100)); err != nil {
		return err
	}
	if l.Burst != nil && l.SendsPerSecond != nil && *l.Burst < *l.SendsPerSecond {
		return errors.New("--burst must be at least --sends-per-second")
	}
	return nil
}

func (c *tenantCreateCmd) Run(e runEnv) error {
	if err := validTenantID(c.ID); err != nil {
		return usageError{err}
	}
	name := strings.TrimSpace(c.DeveloperName)
	if name == "" || len([]rune(name)) > 128 {
		return usageError{errors.New("--developer-name must be 1-128 characters")}
	}
	var limits store.TenantLimits
	if err := c.limitFlags.apply(&limits); err != nil {
		return usageError{err}
	}
	return withStore(e, &c.Admin, func(st *store.Store) error {
		if err := st.CreateTenant(e.ctx, c.ID, name); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("tenant %s already exists", c.ID)
			}
			return err
		}
		if err := st.SetTenantLimits(e.ctx, c.ID, limits); err != nil {
			return tenantError(c.ID, err)
		}
		fmt.Fprintf(e.stderr, "created tenant %s\n", c.ID)
		return nil
	})
}

type tenantUpdateCmd struct {
	config.AdminBot
	ID            string `name:"id" required:"" placeholder:"TENANT" help:"tenant id"`
	DeveloperName string `name:"developer-name" placeholder:"NAME" help:"new developer name (1-128 characters)"`
	limitFlags
	botFlags
	quietFlags
}

// quietFlags set a tenant's quiet hours (spec v1-extensions §14), or clear them.
type quietFlags struct {
	QuietHours     string `name:"quiet-hours" placeholder:"HH:MM-HH:MM" help:"quiet hours, like 22:00-08:00 (may wrap midnight), read in each user's time_zone or else --quiet-hours-zone; needs --quiet-hours-zone"`
	QuietHoursZone string `name:"quiet-hours-zone" placeholder:"ZONE" help:"with --quiet-hours: the tenant's IANA time zone, like Europe/Berlin, for users without a time_zone"`
	QuietHoursMode string `name:"quiet-hours-mode" placeholder:"MODE" help:"with --quiet-hours: hold (a notification waits until the window ends; the default) or silent (delivered at once without a sound)"`
	NoQuietHours   bool   `name:"no-quiet-hours" help:"clear the tenant's quiet hours"`
}

// hours checks the combination of the quiet flags: set reports whether they change anything, h the new
// hours (nil: cleared).
func (f quietFlags) hours() (h *quiet.Hours, set bool, err error) {
	switch {
	case f.NoQuietHours && (f.QuietHours != "" || f.QuietHoursZone != "" || f.QuietHoursMode != ""):
		return nil, false, errors.New("--no-quiet-hours and --quiet-hours: give one of them")
	case f.NoQuietHours:
		return nil, true, nil
	case f.QuietHours == "" && (f.QuietHoursZone != "" || f.QuietHoursMode != ""):
		return nil, false, errors.New("--quiet-hours-zone and --quiet-hours-mode go with --quiet-hours (give the whole window again)")
	case f.QuietHours == "":
		return nil, false, nil
	case f.QuietHoursZone == "":
		return nil, false, errors.New("--quiet-hours needs --quiet-hours-zone, the tenant's IANA time zone (like Europe/Berlin)")
	}
	mode := f.QuietHoursMode
	if mode == "" {
		mode = string(quiet.Hold)
	}
	parsed, err := quiet.Parse(f.QuietHours, f.QuietHoursZone, mode)
	if err != nil {
		return nil, false, err
	}
	return &parsed, true, nil
}

// botFlags give a tenant its own bot (spec §11), or take it back to the shared one. The token is read from
// a file, never from a flag's value: a command line is visible to every user of the machine.
type botFlags struct {
	BotTokenFile     string `name:"bot-token-file" placeholder:"FILE" help:"give the tenant its own bot: the file holding the bot's token (from @BotFather); the bot is checked (getMe), its webhook set (setWebhook at HERALD_PUBLIC_URL), its token stored sealed under HERALD_BOT_TOKEN_KEY, and its username printed. Another bot than the tenant's ends the links made through the old one: those users must link again"`
	BotRateLimit     *int   `name:"bot-rate-limit" placeholder:"N" help:"with --bot-token-file: the bot's messages per second, 1-1000 (default: the workers' HERALD_MESSENGER_RATE_LIMIT)"`
	BotPaidBroadcast bool   `name:"bot-paid-broadcast" help:"with --bot-token-file: sends past 30 a second carry allow_paid_broadcast, up to --bot-rate-limit (the platform charges the bot's owner for them)"`
	NoBot            bool   `name:"no-bot" help:"take the tenant back to the shared bot: the links made through its own bot end, and its users must link again"`
}

// settings checks the combination of the bot flags and returns the bot's settings.
func (f botFlags) settings() (bot.Settings, error) {
	switch {
	case f.NoBot && f.BotTokenFile != "":
		return bot.Settings{}, errors.New("--no-bot and --bot-token-file: give one of them")
	case f.BotTokenFile == "" && (f.BotRateLimit != nil || f.BotPaidBroadcast):
		return bot.Settings{}, errors.New("--bot-rate-limit and --bot-paid-broadcast go with --bot-token-file (the bot is registered again with them)")
	case f.BotRateLimit != nil && (*f.BotRateLimit < 1 || *f.BotRateLimit > store.MaxBotRateLimit):
		return bot.Settings{}, fmt.Errorf("--bot-rate-limit must be 1-%d messages per second (leave it out for the workers' HERALD_MESSENGER_RATE_LIMIT)", store.MaxBotRateLimit)
	}
	s := bot.Settings{PaidBroadcast: f.BotPaidBroadcast}
	if f.BotRateLimit != nil {
		s.RateLimit = *f.BotRateLimit
	}
	return s, nil
}

// readToken reads the bot's token from --bot-token-file. Neither the token nor the file's content is ever
// in an error.
func (f botFlags) readToken() (string, error) {
	b, err := os.ReadFile(f.BotTokenFile)
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err // the path is said below; the rest of the error is the system's
		}
		return "", fmt.Errorf("while reading the bot token file %s: %w", f.BotTokenFile, err)
	}
	token := strings.TrimSpace(string(b))
	if err := bot.CheckToken(token); err != nil {
		return "", fmt.Errorf("the file %s does not hold a bot token: %w", f.BotTokenFile, err)
	}
	return token, nil
}

func (c *tenantUpdateCmd) Run(e runEnv) error {
	name := strings.TrimSpace(c.DeveloperName)
	if c.DeveloperName != "" && (name == "" || len([]rune(name)) > 128) {
		return usageError{errors.New("--developer-name must be 1-128 characters")}
	}
	settings, err := c.botFlags.settings()
	if err != nil {
		return usageError{err}
	}
	quietHours, setQuiet, err := c.quietFlags.hours()
	if err != nil {
		return usageError{err}
	}
	var registrar *bot.Registrar
	var token string
	if c.BotTokenFile != "" {
		if registrar, err = bot.NewRegistrar(c.MessengerAPIURL, nil, c.Key(), c.PublicURL); err != nil {
			return err
		}
		if token, err = c.botFlags.readToken(); err != nil {
			return err
		}
	}
	return withStore(e, &c.Admin, func(st *store.Store) error {
		t, err := st.GetTenant(e.ctx, c.ID)
		if err != nil {
			return tenantError(c.ID, err)
		}
		if err := c.limitFlags.apply(&t.Limits); err != nil {
			return usageError{err}
		}
		// The bot is registered before anything is written: a token the platform refuses changes nothing.
		var registered store.Bot
		if registrar != nil {
			if registered, err = registrar.Register(e.ctx, token, settings); err != nil {
				return fmt.Errorf("while registering the bot of tenant %s: %w", c.ID, err)
			}
		}
		if name != "" {
			if err := st.SetTenantDeveloperName(e.ctx, c.ID, name); err != nil {
				return tenantError(c.ID, err)
			}
		}
		if err := st.SetTenantLimits(e.ctx, c.ID, t.Limits); err != nil {
			return tenantError(c.ID, err)
		}
		if setQuiet {
			if _, err := st.SetTenantQuietHours(e.ctx, c.ID, quietHours); err != nil {
				return tenantError(c.ID, err)
			}
			if quietHours == nil {
				fmt.Fprintf(e.stderr, "tenant %s has no quiet hours\n", c.ID)
			} else {
				fmt.Fprintf(e.stderr, "tenant %s: quiet hours %s (%s), mode %s\n", c.ID, quietHours.Window(), quietHours.Zone, quietHours.Mode)
			}
		}
		switch {
		case registrar != nil:
			if err := st.UpsertBot(e.ctx, registered); err != nil {
				return err
			}
			change, err := st.SetTenantBot(e.ctx, c.ID, registered.ID)
			if err != nil {
				return tenantError(c.ID, err)
			}
			// The username alone on stdout: scripts read it (the tenant's deep links name it).
			fmt.Fprintln(e.stdout, registered.Username)
			fmt.Fprintf(e.stderr, "tenant %s sends through its own bot @%s (bot %d)\n", c.ID, registered.Username, registered.ID)
			reportBotChange(e, change)
		case c.NoBot:
			change, err := st.SetTenantBot(e.ctx, c.ID, bot.Shared)
			if err != nil {
				return tenantError(c.ID, err)
			}
			fmt.Fprintf(e.stderr, "tenant %s sends through the shared bot\n", c.ID)
			reportBotChange(e, change)
		default:
			fmt.Fprintf(e.stderr, "updated tenant %s\n", c.ID)
		}
		return nil
	})
}

// reportBotChange says what a change of bot did to the tenant's users.
func reportBotChange(e runEnv, c store.BotChange) {
	if c.LinksEnded > 0 || c.Unlinked > 0 {
		fmt.Fprintf(e.stderr, "%d user(s) linked through the previous bot must link again, through the new one; "+
			"%d of their notifications that were waiting ended unlinked (code %d)\n", c.LinksEnded, c.Unlinked, notification.CodeBotChanged)
	}
}

type tenantSuspendCmd struct {
	config.Admin
	ID string `name:"id" required:"" placeholder:"TENANT" help:"tenant id"`
}

func (c *tenantSuspendCmd) Run(e runEnv) error { return setSuspended(e, &c.Admin, c.ID, true) }

type tenantResumeCmd struct {
	config.Admin
	ID string `name:"id" required:"" placeholder:"TENANT" help:"tenant id"`
}

func (c *tenantResumeCmd) Run(e runEnv) error { return setSuspended(e, &c.Admin, c.ID, false) }

func setSuspended(e runEnv, admin *config.Admin, id string, suspended bool) error {
	return withStore(e, admin, func(st *store.Store) error {
		if err := st.SetTenantSuspended(e.ctx, id, suspended); err != nil {
			return tenantError(id, err)
		}
		done := "resumed"
		if suspended {
			done = "suspended"
		}
		fmt.Fprintf(e.stderr, "tenant %s %s\n", id, done)
		return nil
	})
}

type tenantAddDeveloperCmd struct {
	config.Admin
	ID              string          `name:"id" required:"" placeholder:"TENANT" help:"tenant id"`
	MessengerUserID messengerUserID `name:"messenger-user-id" required:"" placeholder:"ID" help:"the developer's numeric messenger user id, like 123456789 (not a @username or a phone number)"`
}

func (c *tenantAddDeveloperCmd) Run(e runEnv) error {
	return withStore(e, &c.Admin, func(st *store.Store) error {
		if err := st.AddTenantDeveloper(e.ctx, c.ID, int64(c.MessengerUserID)); err != nil {
			return tenantError(c.ID, err)
		}
		fmt.Fprintf(e.stderr, "messenger user %d is a developer of %s\n", c.MessengerUserID, c.ID)
		return nil
	})
}

type tenantListCmd struct{ config.Admin }

func (c *tenantListCmd) Run(e runEnv) error {
	return withStore(e, &c.Admin, func(st *store.Store) error {
		tenants, err := st.ListTenants(e.ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tDEVELOPER NAME\tSUSPENDED\tDEVELOPERS\tSENDS/S\tBURST\tREQUESTS/S\tWEIGHT\tBOT\tQUIET HOURS\tCREATED")
		for _, t := range tenants {
			fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.DeveloperName, t.Suspended, joinIDs(t.Developers),
				limitText(t.Limits.SendsPerSecond), limitText(t.Limits.Burst), limitText(t.Limits.RequestsPerSecond),
				limitText(t.Limits.DeliveryWeight), botText(t.BotID), quietText(t.Quiet), t.CreatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	})
}

// quietText shows a tenant's quiet hours: "22:00-08:00 Europe/Berlin hold", or "-".
func quietText(h *quiet.Hours) string {
	if h == nil {
		return "-"
	}
	return h.Window() + " " + h.Zone + " " + string(h.Mode)
}

// botText shows the bot a tenant sends through: its id, or "shared".
func botText(id bot.ID) string {
	if id == bot.Shared {
		return "shared"
	}
	return strconv.FormatInt(int64(id), 10)
}

// limitText shows a tenant's own limit, or "default".
func limitText(v *int32) string {
	if v == nil {
		return "default"
	}
	return strconv.Itoa(int(*v))
}

type apikeyCreateCmd struct {
	config.Admin
	Tenant    string         `name:"tenant" required:"" placeholder:"TENANT" help:"tenant id"`
	Label     string         `name:"label" placeholder:"LABEL" help:"branding label, at most 64 characters (default: the tenant's developer name)"`
	ExpiresIn *time.Duration `name:"expires-in" placeholder:"DURATION" help:"expire the key after this long, like 720h (default: never)"`
}

func (c *apikeyCreateCmd) Run(e runEnv) error {
	var label *string
	if c.Label != "" {
		if len([]rune(c.Label)) > 64 {
			return usageError{errors.New("--label must be at most 64 characters")}
		}
		label = &c.Label
	}
	var expires *time.Time
	if c.ExpiresIn != nil {
		// Zero or negative would make a key that is expired at birth or, worse, read as "never".
		if *c.ExpiresIn <= 0 {
			return usageError{fmt.Errorf("--expires-in must be a positive duration, like 720h (leave it out for a key that never expires), not %s", *c.ExpiresIn)}
		}
		t := time.Now().Add(*c.ExpiresIn)
		expires = &t
	}
	return withStore(e, &c.Admin, func(st *store.Store) error {
		k := apikey.New()
		if _, err := st.InsertAPIKey(e.ctx, c.Tenant, k.Digest, k.Prefix, label, expires); err != nil {
			// The one conflict a new key can meet is its tenant missing (the digest is 256 random bits).
			if errors.Is(err, store.ErrConflict) {
				if _, gerr := st.GetTenant(e.ctx, c.Tenant); errors.Is(gerr, store.ErrNotFound) {
					return tenantError(c.Tenant, gerr)
				}
			}
			return fmt.Errorf("while creating a key for tenant %s: %w", c.Tenant, err)
		}
		// The key alone on stdout: scripts capture it. It is shown once and never stored.
		fmt.Fprintln(e.stdout, k.Secret)
		return nil
	})
}

type apikeyRevokeCmd struct {
	config.Admin
	Tenant string `name:"tenant" required:"" placeholder:"TENANT" help:"tenant id"`
	Key    string `name:"key" required:"" placeholder:"KEY" help:"the key to revoke: its ID, or its PREFIX exactly as herald apikey list shows it (hk_ and 8 characters; the trailing … may be left out), or the key itself"`
}

func (c *apikeyRevokeCmd) Run(e runEnv) error {
	ref, err := keyRef(c.Key)
	if err != nil {
		return usageError{err}
	}
	return withStore(e, &c.Admin, func(st *store.Store) error {
		n, err := st.RevokeAPIKeys(e.ctx, c.Tenant, ref)
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := st.GetTenant(e.ctx, c.Tenant); err != nil {
				return tenantError(c.Tenant, err)
			}
			return fmt.Errorf("no active key of tenant %s matches %s (see herald apikey list --tenant %s)", c.Tenant, ref, c.Tenant)
		}
		fmt.Fprintf(e.stderr, "revoked %d key(s)\n", n)
		return nil
	})
}

// keyRef turns what --key was given into what the store matches: a key id, or a key's whole prefix.
// A key given whole is reduced to its prefix, so it is never echoed.
func keyRef(s string) (string, error) {
	s = strings.TrimSpace(s)
	if id, err := uuid.Parse(s); err == nil {
		return id.String(), nil
	}
	if apikey.LooksValid(s) {
		return s[:apikey.PrefixLen], nil
	}
	// `apikey list` prints the prefix with an ellipsis to show that it is not the whole key.
	s = strings.TrimSuffix(strings.TrimSuffix(s, "…"), "...")
	if len(s) == apikey.PrefixLen && strings.HasPrefix(s, apikey.Scheme) {
		return s, nil
	}
	// A shorter prefix could match several keys: refuse it.
	return "", fmt.Errorf("--key must be a key id or a key's prefix as herald apikey list shows it: %s and 8 characters, like %sAbCdEfGh…",
		apikey.Scheme, apikey.Scheme)
}

type apikeyListCmd struct {
	config.Admin
	Tenant string `name:"tenant" placeholder:"TENANT" help:"tenant id (default: every tenant)"`
}

func (c *apikeyListCmd) Run(e runEnv) error {
	return withStore(e, &c.Admin, func(st *store.Store) error {
		keys, err := st.ListAPIKeys(e.ctx, c.Tenant)
		if err != nil {
			return err
		}
		if len(keys) == 0 && c.Tenant != "" {
			if _, err := st.GetTenant(e.ctx, c.Tenant); err != nil {
				return tenantError(c.Tenant, err)
			}
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tPREFIX\tLABEL\tSTATE\tEXPIRES\tCREATED")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%s…\t%s\t%s\t%s\t%s\n", k.ID, k.TenantID, k.Prefix, deref(k.Label), keyState(k), optTime(k.ExpiresAt), k.CreatedAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	})
}

// withStore opens the store for one admin command.
func withStore(e runEnv, admin *config.Admin, do func(*store.Store) error) error {
	st, err := store.Open(e.ctx, admin.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer st.Close()
	return do(st)
}

// tenantError says in plain words that a tenant does not exist.
func tenantError(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no tenant %s", id)
	}
	return err
}

// messengerUserID is --messenger-user-id, parsed here so that a wrong value says what is wrong with it.
type messengerUserID int64

// Decode implements kong.MapperValue.
func (id *messengerUserID) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("messenger user id", &s); err != nil {
		return err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("%s is too large for a messenger user id", s)
	case err != nil:
		return fmt.Errorf("%q is not a messenger user id: that is a number, like 123456789, not a @username or a phone number", s)
	case n <= 0:
		return fmt.Errorf("%d is not a messenger user id: they are positive numbers, like 123456789", n)
	}
	*id = messengerUserID(n)
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
