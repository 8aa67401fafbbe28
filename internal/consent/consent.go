// Package consent is the end user's say over what reaches them (spec v1-extensions §9), as data: who has
// stopped what (an opt-out of a tenant's notifications, or of one category of them, made by the user in the
// chat or by the tenant through the API), who may lift or take over whose opt-out, and what /stop and
// /resume offer. Every rule is derived from the table below, for Go and for the SQL of the store alike, as
// internal/notification does for the lifecycle; the store persists it and never decides it. A lint rule
// (depguard in .golangci.yml) keeps this package below the store.
//
//	actor \ held by   user                        tenant
//	user (chat)       lifts (/resume)             lifts (/resume); takes over (/stop)
//	tenant (API)      —  (409 opted_out_by_user)  lifts
//
// What /stop offers follows: each tenant and category the user holds no opt-out of that the user's /stop
// could not change (one the tenant made is offered: the user takes it over). /resume offers every opt-out
// the user may lift: all of them.
package consent

import (
	"slices"
	"strings"
	"time"
)

// By says who made an opt-out, or who lifts one (opt_outs.by).
type By string

// Who makes and lifts opt-outs.
const (
	ByUser   By = "user"   // the user, in the chat (/stop, /resume): only the user lifts it
	ByTenant By = "tenant" // the tenant, through the API
)

// Bys lists every maker of an opt-out (the CHECK of opt_outs.by).
var Bys = []By{ByUser, ByTenant}

// SQL is b as a SQL literal.
func (b By) SQL() string { return "'" + string(b) + "'" }

// rule is one cell of the table: what actor may do to an opt-out held (made) by held.
type rule struct {
	actor, held By
	// lift: actor may delete the opt-out.
	lift bool
	// takeOver: actor making the same opt-out makes it actor's own (held may no longer lift it).
	takeOver bool
}

// rules is the table. A pair that is not in it may do nothing.
var rules = []rule{
	{actor: ByUser, held: ByUser, lift: true},
	{actor: ByUser, held: ByTenant, lift: true, takeOver: true},
	{actor: ByTenant, held: ByTenant, lift: true},
	{actor: ByTenant, held: ByUser},
}

func find(actor, held By) rule {
	for _, r := range rules {
		if r.actor == actor && r.held == held {
			return r
		}
	}
	return rule{actor: actor, held: held}
}

// MayLift tells whether actor may lift an opt-out held made.
func MayLift(actor, held By) bool { return find(actor, held).lift }

// TakesOver tells whether actor making an opt-out that held made makes it actor's own.
func TakesOver(actor, held By) bool { return find(actor, held).takeOver }

// render is the SQL condition, over the SQL expressions actor and held, that some rule with ok holds.
func render(actor, held string, ok func(rule) bool) string {
	var terms []string
	for _, a := range Bys {
		var helds []string
		for _, r := range rules {
			if r.actor == a && ok(r) {
				helds = append(helds, r.held.SQL())
			}
		}
		if len(helds) > 0 {
			terms = append(terms, actor+" = "+a.SQL()+" AND "+held+" IN ("+strings.Join(helds, ", ")+")")
		}
	}
	if len(terms) == 0 {
		return "false"
	}
	return "(" + strings.Join(terms, " OR ") + ")"
}

// LiftSQL is MayLift as a SQL condition over the SQL expressions actor and held.
func LiftSQL(actor, held string) string {
	return render(actor, held, func(r rule) bool { return r.lift })
}

// TakeOverSQL is TakesOver as a SQL condition over the SQL expressions actor and held.
func TakeOverSQL(actor, held string) string {
	return render(actor, held, func(r rule) bool { return r.takeOver })
}

// SentCategoriesWindow is how far back the categories a tenant sent a user are offered by /stop.
const SentCategoriesWindow = 30 * 24 * time.Hour

// PromptTTL is how long a /stop or /resume keyboard can be tapped; retention deletes it then.
const PromptTTL = 24 * time.Hour

// Kind is what a /stop or /resume choice does: stop (opt out) or resume (lift the opt-out).
type Kind string

// The kinds of prompt (stop_prompts.kind).
const (
	Stop   Kind = "stop"
	Resume Kind = "resume"
)

// Kinds lists every kind (the CHECK of stop_prompts.kind).
var Kinds = []Kind{Stop, Resume}

// Choice is what a user stops or resumes in a chat: a tenant's notifications (Category ""), or one category
// of them.
type Choice struct {
	TenantID string `json:"tenant_id"`
	Category string `json:"category"`
}

// Record is one opt-out of a user.
type Record struct {
	Category  string // "" for the whole tenant
	By        By
	CreatedAt time.Time
}

// Tenant is a tenant linked to a chat, with what /stop and /resume show of it.
type Tenant struct {
	TenantID string
	// UserIDs are the tenant's users linked to this chat and messenger user (usually one): a choice about
	// the tenant applies to each.
	UserIDs []string
	// Label brands the replies about the tenant: the label of the link token the user redeemed (kept on the
	// link), or the tenant's developer name (a link made before links kept it).
	Label string
	// Categories are those the tenant sent these users in the last 30 days (SentCategoriesWindow), sorted.
	Categories []string
	// OptOuts are what is stopped (of any of the users), the whole tenant's first.
	OptOuts []Record
}

// Offer is a button of a keyboard: its text, and what it stops or resumes.
type Offer struct {
	Text    string
	Choices []Choice
}

// Offers are what kind offers in a chat linked to tenants: the whole tenants' choices and the categories'.
// /stop offers each tenant and each category sent in the last 30 days that the user could still stop (none
// the user holds; one the tenant made is taken over); /resume offers every opt-out the user may lift.
func Offers(kind Kind, tenants []Tenant) (whole, categories []Offer) {
	for _, t := range tenants {
		if kind == Resume {
			for _, o := range t.OptOuts {
				if !MayLift(ByUser, o.By) {
					continue
				}
				c := Offer{t.Label, []Choice{{TenantID: t.TenantID, Category: o.Category}}}
				if o.Category == "" {
					whole = append(whole, c)
				} else {
					c.Text += ": " + o.Category
					categories = append(categories, c)
				}
			}
			continue
		}
		stoppable := func(category string) bool {
			return !slices.ContainsFunc(t.OptOuts, func(o Record) bool { return o.Category == category && !TakesOver(ByUser, o.By) })
		}
		if !stoppable("") {
			continue
		}
		whole = append(whole, Offer{t.Label, []Choice{{TenantID: t.TenantID}}})
		for _, c := range t.Categories {
			if stoppable(c) {
				categories = append(categories, Offer{t.Label + ": " + c, []Choice{{TenantID: t.TenantID, Category: c}}})
			}
		}
	}
	return whole, categories
}

// Result is what a /stop, a /resume or a tap did.
type Result struct {
	// Stale: the tap found no prompt to take — an unknown id, another user's or another chat's, one used
	// already or older than PromptTTL, or an index out of range. Nothing changed.
	Stale bool
	Kind  Kind
	// Choices are what was stopped (or resumed): the choices whose tenant the user is still linked to in
	// this chat, each once.
	Choices []Choice
	// Changed counts the opt-outs made (or taken over from the tenant) or lifted, known once the update's
	// transaction returns (not yet when the reply is built).
	Changed int
}
