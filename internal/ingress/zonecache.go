package ingress

import (
	"context"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/store"
)

// The users' time zones, cached per tenant: a template's date filter renders in its user's time_zone (spec
// v1-extensions §12), and reading it from PostgreSQL for every templated send cost PostgreSQL more than the
// send's own insert (docs/benchmarks.md). Most users have no zone, so a tenant's users that have one are
// few enough to keep: per tenant, the map of those users to their zone, complete up to DefaultMaxZonedUsers.
// A user absent from a complete map has no zone and renders as before (UTC).
//
// Whether the map is still true is one tiny read: tenants.user_zones_version, which every change of one of
// the tenant's users' zones bumps in its own transaction (internal/store/zones.go). The same promise as the
// template cache's heads (templatecache.go): this replica trusts what it read for UserZonesTTL, then reads
// the version — once for all the tenant's concurrent sends, which wait for that one read — and reloads the
// tenant's zoned users only when it changed. So a zone changed through another replica (or the admin CLI,
// the operator) reaches this replica's sends at most UserZonesTTL after; one changed through this replica
// (PATCH /v1/users, the erasure) at once.
//
// Past DefaultMaxZonedUsers zoned users a tenant's map is not kept (incomplete): its sends read their users'
// zones per request as they did before (localeReads: concurrent requests share a statement), and the
// version is read again only every incompleteRecheck TTLs, to notice the tenant fell back under the cap.
// Across tenants the cache holds at most maxHeldZonedUsers users (about 100 bytes each), then starts over.
const (
	UserZonesTTL         = time.Second
	DefaultMaxZonedUsers = 100_000
	maxHeldZonedUsers    = 1_000_000
	incompleteRecheck    = 60 // TTLs
)

type zoneCache struct {
	st    *store.Store
	ttl   time.Duration
	limit int // the most zoned users a tenant's complete map holds

	mu      sync.Mutex
	tenants map[string]*zoneEntry
	held    int // zoned users held across tenants

	versionReads, reloads int // reads of PostgreSQL, for tests
}

// zoneEntry is one tenant's.
type zoneEntry struct {
	// version is the tenant's user_zones_version the entry reflects (-1: never read): the version read
	// before its users were (the users read after it are at least as new), advanced by this replica's own
	// changes that follow it with no other change between.
	version  int64
	zones    map[string]string // user → IANA name; nil when incomplete
	complete bool
	checked  time.Time  // when the version was last read (zero: never)
	check    *zoneCheck // the read in flight, which the tenant's other sends wait for; nil when none
	own      []ownZone  // this replica's changes a reload in flight may have missed
	loaded   bool       // the users were read once at least
}

// zoneCheck is a read of the version (and maybe the users) in flight.
type zoneCheck struct {
	done chan struct{}
	err  error
}

// ownZone is a change made through this replica: the user's zone ("" none) as of the version it made.
type ownZone struct {
	version int64
	user    string
	zone    string
}

func newZoneCache(st *store.Store, ttl time.Duration, limit int) *zoneCache {
	return &zoneCache{st: st, ttl: ttl, limit: limit, tenants: map[string]*zoneEntry{}}
}

// fresh makes the tenant's entry at most a TTL old and reports whether it is complete (zonesOf answers for
// every user); an incomplete tenant's sends read their users' zones themselves.
func (c *zoneCache) fresh(ctx context.Context, tenant string) (bool, error) {
	for {
		c.mu.Lock()
		e := c.tenants[tenant]
		if e == nil {
			e = &zoneEntry{version: -1}
			c.tenants[tenant] = e
		}
		ttl := c.ttl
		if e.loaded && !e.complete {
			ttl *= incompleteRecheck
		}
		if e.check == nil && !e.checked.IsZero() && time.Since(e.checked) < ttl {
			complete := e.complete
			c.mu.Unlock()
			return complete, nil
		}
		if chk := e.check; chk != nil {
			c.mu.Unlock()
			select {
			case <-chk.done:
				if chk.err != nil {
					return false, chk.err
				}
				continue // the entry is fresh now (or was dropped: then this send reads it again)
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		chk := &zoneCheck{done: make(chan struct{})}
		e.check = chk
		c.mu.Unlock()
		// Under the store's own deadline, not this request's: a caller that gives up does not fail the others.
		chk.err = c.refresh(context.WithoutCancel(ctx), tenant, e)
		c.mu.Lock()
		e.check = nil
		c.mu.Unlock()
		close(chk.done)
		if chk.err != nil {
			return false, chk.err
		}
	}
}

// refresh reads the tenant's version and, when it differs from the entry's, the tenant's zoned users.
func (c *zoneCache) refresh(ctx context.Context, tenant string, e *zoneEntry) error {
	c.mu.Lock()
	c.versionReads++
	c.mu.Unlock()
	v, err := c.st.UserZonesVersion(ctx, tenant)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if v == e.version {
		e.checked = time.Now()
		c.mu.Unlock()
		return nil
	}
	c.reloads++
	c.mu.Unlock()
	zones, err := c.st.ZonedUsers(ctx, tenant, c.limit+1)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenants[tenant] != e {
		return nil // dropped meanwhile (the cache started over): the next send reads it again
	}
	c.held -= len(e.zones)
	e.zones, e.complete, e.version, e.loaded, e.checked = zones, true, v, true, time.Now()
	// This replica's changes past v may be missing from what was read: made again on top.
	kept := e.own[:0]
	for _, o := range e.own {
		if o.version > v {
			kept = append(kept, o)
			c.apply(e, o)
		}
	}
	e.own = kept
	c.advance(e)
	if len(e.zones) > c.limit {
		e.zones, e.complete = nil, false
	}
	if c.held+len(e.zones) > maxHeldZonedUsers {
		c.tenants, c.held = map[string]*zoneEntry{tenant: e}, 0
	}
	c.held += len(e.zones)
	return nil
}

// apply sets a user's zone in the entry's map (under c.mu; the caller keeps held right).
func (c *zoneCache) apply(e *zoneEntry, o ownZone) {
	if e.zones == nil {
		return
	}
	if o.zone == "" {
		delete(e.zones, o.user)
	} else {
		e.zones[o.user] = o.zone
	}
}

// advance moves the entry's version over this replica's changes that follow it with none other between,
// so that they cost no reload (under c.mu).
func (c *zoneCache) advance(e *zoneEntry) {
	for moved := true; moved; {
		moved = false
		for _, o := range e.own {
			if o.version == e.version+1 {
				e.version, moved = o.version, true
			}
		}
	}
}

// changed records a change of a user's zone ("" none) made through this replica, as of the tenant's
// version it made: the next send sees it.
func (c *zoneCache) changed(tenant, user, zone string, version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.tenants[tenant]
	if e == nil || version <= e.version {
		return // not cached, or already read with the change
	}
	o := ownZone{version: version, user: user, zone: zone}
	c.held -= len(e.zones)
	c.apply(e, o)
	if len(e.zones) > c.limit {
		e.zones, e.complete = nil, false
	}
	c.held += len(e.zones)
	e.own = append(e.own, o)
	c.advance(e)
	if e.check == nil {
		// No read in flight could miss them: keep only the changes the version has not caught up with.
		kept := e.own[:0]
		for _, o := range e.own {
			if o.version > e.version {
				kept = append(kept, o)
			}
		}
		e.own = kept
	}
}

// zonesOf returns the zones of those of users that have one, and true, when the tenant's entry is fresh
// and complete; false when the sends must read their users' zones themselves (the tenant is past the cap).
func (c *zoneCache) zonesOf(ctx context.Context, tenant string, users []string) (map[string]string, bool, error) {
	complete, err := c.fresh(ctx, tenant)
	if err != nil || !complete {
		return nil, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.tenants[tenant]
	if e == nil || !e.complete {
		return nil, false, nil // dropped or past the cap since: as an incomplete tenant's
	}
	out := make(map[string]string, len(users))
	for _, u := range users {
		if z, ok := e.zones[u]; ok {
			out[u] = z
		}
	}
	return out, true, nil
}

// counts are the cache's reads of PostgreSQL: versions read, and reloads of a tenant's zoned users.
func (c *zoneCache) counts() (versionReads, reloads int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.versionReads, c.reloads
}
