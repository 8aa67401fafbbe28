// Package metriclabel bounds the values of Prometheus labels that come from data rather than code: a label
// value from an unbounded set (a tenant id, a request's method, a path) would grow the series count, and
// the memory of every Prometheus that scrapes Herald, without limit. Label values come from closed sets
// only: Herald's own codes and states, route patterns (never paths), the methods below, and the capped
// sets of tenants and of bots.
package metriclabel

import (
	"net/http"
	"sync"
)

// Other is the value that stands for everything past the cap.
const Other = "other"

// Set hands out at most Max distinct values: the first ones seen keep their own, the rest are Other.
type Set struct {
	Max int

	mu    sync.Mutex
	names map[string]bool
}

// Of returns v, or Other when Max other values were seen first.
func (s *Set) Of(v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names[v] {
		return v
	}
	if len(s.names) < s.Max {
		if s.names == nil {
			s.names = map[string]bool{}
		}
		s.names[v] = true
		return v
	}
	return Other
}

// MaxTenants caps the tenant label of every per-tenant metric. Tenants are few and known in most
// installations; past 100, the rest are counted together as "other".
const MaxTenants = 100

// Tenants is the process's one set of tenant label values, shared by every per-tenant metric so that a
// tenant is named (or "other") the same way everywhere.
var Tenants = &Set{Max: MaxTenants}

// Method is the metric label of an HTTP method: one of the methods of RFC 9110 and PATCH, else Other.
func Method(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return Other
}

// MaxBots caps the bot label of every per-bot metric, as MaxTenants caps the tenant label: past 100 bots,
// the rest are counted together as "other".
const MaxBots = 100

// SharedBot is the bot label of the shared bot (HERALD_MESSENGER_BOT_TOKEN), which has no username of
// Herald's own to go by. A tenant's own bot is labelled with its username (its id until the username is
// known), through Bots.
const SharedBot = "shared"

// Bots is the process's one set of bot label values, shared by every per-bot metric.
var Bots = &Set{Max: MaxBots}
