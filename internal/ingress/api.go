package ingress

import (
	"cmp"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/batch"
	"github.com/heraldhq/herald/internal/egress"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/ratelimit"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
)

// Options configure the tenant API.
type Options struct {
	DeepLinkBase string // e.g. https://t.me
	BotUsername  string // the shared bot's; a tenant with its own bot deep-links to that bot's
	// AuthCacheTTL bounds how long a key is trusted without asking PostgreSQL again, and so how long a
	// revoked, disabled or expired key, or a suspended tenant, may still be accepted.
	AuthCacheTTL time.Duration
	// MaxInFlight caps concurrent /v1 requests, one tenant's at half of it; DefaultMaxInFlight when zero.
	MaxInFlight int
	// MaxInFlightBytes caps the request bodies /v1 holds at once (see admit), one tenant at most half of it;
	// DefaultMaxInFlightBytes when zero, and never less than MinMaxInFlightBytes, so that a tenant's half
	// holds a full batch.
	MaxInFlightBytes int64
	// SendsPerSecond and RequestsPerSecond are the limits of a tenant that sets none of its own
	// (DefaultSendsPerSecond and DefaultRequestsPerSecond when zero); a tenant's burst is twice its rate
	// unless set.
	SendsPerSecond    float64
	RequestsPerSecond float64
	// TrustedProxies are the load balancers whose X-Forwarded-For names the client (HERALD_TRUSTED_PROXIES);
	// the client address is what failed authentications are counted by.
	TrustedProxies server.TrustedProxies
	// MaxAuthFailures is how many requests without a valid key one client address may send per
	// AuthFailureWindow before it is throttled; the package's MaxAuthFailures when zero.
	MaxAuthFailures int
	// MaxInFlightBatches caps concurrent POST /v1/send/batch requests within MaxInFlight, since a batch body
	// may be 100 times a send's (MaxBatchBodyBytes), one tenant's at half of it; DefaultMaxInFlightBatches
	// when zero. Past it: 503 with Retry-After, as past MaxInFlight.
	MaxInFlightBatches int
	// CallbackKey seals the secrets of status callback endpoints (HERALD_CALLBACK_SECRET_KEY); without it
	// the routes that make a secret answer 503.
	CallbackKey *signing.Key
	// CallbackPolicy decides which endpoint URLs are accepted.
	CallbackPolicy egress.Policy
	// UserZonesTTL is how long the users' time zones cached for the date filter are trusted before the
	// tenant's version is read again (zonecache.go); UserZonesTTL when zero. MaxZonedUsers is the most
	// zoned users of a tenant cached; DefaultMaxZonedUsers when zero. Tests shorten them.
	UserZonesTTL  time.Duration
	MaxZonedUsers int
}

// DefaultMaxInFlightBatches bounds what batch bodies in flight may hold to about 400 MiB at worst (64 ×
// 6.25 MiB); a typical batch of 100 short messages is under 50 KiB.
const DefaultMaxInFlightBatches = 64

// API serves /v1.
type API struct {
	store    *store.Store
	outbox   *outbox.Outbox
	log      *slog.Logger
	opts     Options
	keys     *keyCache
	limiter  *ratelimit.Buckets
	refusals refusalCounts

	unknownKeys      *negativeCache
	failures         *failureLimiter
	recentKeys       *recentKeys
	throttledLookups *lookupBudget
	authQueries      atomic.Int64 // key lookups in PostgreSQL, for tests
	forwarderWarned  atomic.Bool

	inFlight   chan struct{} // a slot per /v1 request in flight
	batchSlots chan struct{}
	admission  *admission
	templates  *templateCache
	// localeReads shares one statement between concurrent requests' reads of their users' locales.
	localeReads   *batch.Inline[localeRead, map[string]store.UserLocale]
	localeQueries atomic.Int64 // the statements of localeReads, for tests
	zones         *zoneCache
}

// New builds the tenant API. Notifications go through ob (close it after the HTTP server has stopped, so
// that sends in flight are answered).
func New(st *store.Store, ob *outbox.Outbox, logger *slog.Logger, opts Options) *API {
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxInFlightBytes == 0 {
		opts.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	opts.MaxInFlightBytes = max(opts.MaxInFlightBytes, MinMaxInFlightBytes)
	if opts.MaxInFlightBatches == 0 {
		opts.MaxInFlightBatches = DefaultMaxInFlightBatches
	}
	if opts.AuthCacheTTL == 0 {
		opts.AuthCacheTTL = 2 * time.Second
	}
	if opts.SendsPerSecond == 0 {
		opts.SendsPerSecond = DefaultSendsPerSecond
	}
	if opts.RequestsPerSecond == 0 {
		opts.RequestsPerSecond = DefaultRequestsPerSecond
	}
	opts.UserZonesTTL = cmp.Or(opts.UserZonesTTL, UserZonesTTL)
	opts.MaxZonedUsers = cmp.Or(opts.MaxZonedUsers, DefaultMaxZonedUsers)
	a := &API{store: st, outbox: ob, log: logger, opts: opts, keys: newKeyCache(opts.AuthCacheTTL), limiter: ratelimit.New(st),
		unknownKeys: newNegativeCache(NegativeCacheTTL), failures: newFailureLimiter(cmp.Or(opts.MaxAuthFailures, MaxAuthFailures), AuthFailureWindow),
		recentKeys: newRecentKeys(RecentKeyTTL), throttledLookups: newLookupBudget(ThrottledLookupsPerSecond, ThrottledLookupBurst),
		inFlight: make(chan struct{}, opts.MaxInFlight), batchSlots: make(chan struct{}, opts.MaxInFlightBatches),
		admission: newAdmission(opts.MaxInFlight, opts.MaxInFlightBatches, opts.MaxInFlightBytes),
		templates: newTemplateCache(st, TemplateHeadTTL), zones: newZoneCache(st, opts.UserZonesTTL, opts.MaxZonedUsers)}
	a.localeReads = newLocaleReads(st, &a.localeQueries)
	return a
}

// handle adapts a handler that returns an error.
func (a *API) handle(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			a.writeError(w, r, err)
		}
	}
}

// writeError answers err: a catalogued error becomes its JSON body; anything else is logged with the
// request id and answered as a generic error (503 when PostgreSQL is unavailable), never with its text.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if _, ok := apierror.From(err); !ok {
		a.log.Error("request failed", "request_id", server.RequestID(r.Context()), "err", err)
		if store.IsUnavailable(err) {
			err = apierror.Unavailable
		}
	}
	apierror.Write(w, err)
}
