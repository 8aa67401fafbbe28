package rate

// Paces: one pace per bot. Each bot the worker sends through has its own global rate (a Limiter, kept by a
// Lease to this worker's part of the bot's rate) and its own per-chat interval (Chats), so that a backlog
// on one bot, or the platform throttling it, never delays another bot's messages. A bot's pace is made
// the first time one of its messages comes, and forgotten when it has been idle for a while.

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// Settings are a bot's rate settings.
type Settings struct {
	// Rate is the bot's global messages per second, shared by all workers.
	Rate float64
	// Free is the rate the platform lets the bot send without paying: past it, sends carry
	// allow_paid_broadcast. 0: the bot has no paid broadcast, and no send carries it.
	Free float64
}

// freeShare is how much of the free rate a worker whose part of the bot's rate is part may use: the same
// fraction of it, in whole messages per second, so that the workers' free parts never add up to more than
// the free rate. NoPaidBroadcast for a bot without paid broadcast.
func (s Settings) freeShare(part float64) float64 {
	limit := math.Floor(s.Rate)
	if s.Free <= 0 || limit <= 0 {
		return NoPaidBroadcast
	}
	if limit <= s.Free {
		return limit // the whole rate is free: nothing is ever paid for
	}
	return math.Floor(s.Free * part / limit)
}

// PacesOptions configure Paces. Every field is required unless it says otherwise.
type PacesOptions struct {
	Store *store.Store
	// Holder names this worker among the holders of every pool.
	Holder string
	// Pool names the rate_leases pool of a bot: the workers that share a bot's rate share its pool.
	Pool func(bot notification.BotID) string
	// Settings reads a bot's rate settings; it is asked again at every renewal, so a changed rate applies
	// within one.
	Settings func(bot notification.BotID) Settings
	// HighWeight is the high-priority grants per normal one while both wait (Limiter).
	HighWeight int
	// PerChatInterval is the minimum spacing of two sends to one chat of a bot.
	PerChatInterval time.Duration
	// Interval is how often the leases are renewed; TTL how long a renewal holds.
	Interval, TTL time.Duration
	// IdleAfter is how long a bot's pace may go unused before it is forgotten and its lease given up; one
	// minute when 0. The shared bot's pace stays.
	IdleAfter time.Duration
	// Killed reports whether the worker was killed (the tests' crash): a dead worker writes nothing more.
	Killed func() bool
	Logger *slog.Logger
}

// Pace is one bot's pace in this worker: its global rate as this worker may use it, and its per-chat
// interval. Take it with Paces.Acquire and give it back with Paces.Release.
type Pace struct {
	Bot     notification.BotID
	Limiter *Limiter
	Chats   *Chats
	lease   *Lease
	// refused: the platform refused the bot's token (its 401, or the store said so at a claim). The bot's
	// messages then skip the waits for their chat and their turn: their claims fail without a send.
	refused atomic.Bool

	// Paces.mu guards these.
	users    int       // Acquires not released
	lastUsed time.Time // the last Release
	stop     context.CancelFunc
}

// Refused reports whether the bot's token was refused, as far as this worker knows.
func (p *Pace) Refused() bool { return p.refused.Load() }

// SetRefused records whether the bot's token was refused.
func (p *Pace) SetRefused(refused bool) { p.refused.Store(refused) }

// Paces holds the pace of every bot this worker sends through. Run renews their leases.
type Paces struct {
	o PacesOptions

	mu      sync.Mutex
	paces   map[notification.BotID]*Pace
	weights map[string]int
	run     context.Context // Run's, which the limiters serve under; nil before Run
	kick    chan struct{}   // a new pace: renew now, so that it has a rate at once
	serving sync.WaitGroup  // the limiters' goroutines

	demand atomic.Pointer[Demand] // MeasureDemand's; read apart from mu (forgetIdle reads it under mu)
}

// Demand is what the paces read of the consumer group: how many of this worker's keys (chats) of a bot
// have messages fetched and not finished, its chats with work. *consume.Group is the one.
type Demand interface {
	Lanes(bot notification.BotID) int
}

// MeasureDemand attaches the group whose lanes are the bots' demand (Demand), before Run. It is the one
// loop between the two, made a seam of its own: the group is built with the paces (it keeps a chat's pace
// across a rebalance through them), so its demand can only be attached after. Until it is, every bot's
// demand is 0.
func (p *Paces) MeasureDemand(d Demand) { p.demand.Store(&d) }

// lanes is bot's demand (Demand.Lanes), 0 before MeasureDemand.
func (p *Paces) lanes(bot notification.BotID) int {
	d := p.demand.Load()
	if d == nil || *d == nil {
		return 0
	}
	return (*d).Lanes(bot)
}

// NewPaces returns the paces, with the shared bot's made already: a worker holds its part of the shared
// bot's rate from the start, as it always did.
func NewPaces(o PacesOptions) *Paces {
	if o.IdleAfter <= 0 {
		o.IdleAfter = time.Minute
	}
	p := &Paces{o: o, paces: map[notification.BotID]*Pace{}, kick: make(chan struct{}, 1)}
	p.Release(p.Acquire(notification.SharedBot))
	return p
}

// Acquire returns bot's pace, making it on first use. Release it when done.
func (p *Paces) Acquire(bot notification.BotID) *Pace {
	p.mu.Lock()
	defer p.mu.Unlock()
	pace := p.paces[bot]
	if pace == nil {
		limiter := NewLimiter(0, p.o.HighWeight)
		limiter.SetWeights(p.weights)
		pace = &Pace{Bot: bot, Limiter: limiter, Chats: NewChats(p.o.PerChatInterval), lease: &Lease{
			pool: p.o.Pool(bot), limiter: limiter, perChat: p.o.PerChatInterval, ttl: p.o.TTL, log: p.o.Logger,
			lanes: func() int { return p.lanes(bot) }, settings: p.o.Settings(bot),
		}}
		p.paces[bot] = pace
		if p.run != nil {
			p.serveLocked(pace)
		}
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	pace.users++
	return pace
}

// Release gives back a pace Acquire returned.
func (p *Paces) Release(pace *Pace) {
	p.mu.Lock()
	pace.users--
	pace.lastUsed = time.Now()
	p.mu.Unlock()
}

// serveLocked starts the goroutine that serves pace's limiter under Run's context. p.mu is held.
func (p *Paces) serveLocked(pace *Pace) {
	ctx, stop := context.WithCancel(p.run)
	pace.stop = stop
	p.serving.Go(func() { pace.Limiter.Run(ctx) })
}

// SetWeights gives every bot's limiter the tenants' grants per turn (Limiter.SetWeights).
func (p *Paces) SetWeights(weights map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.weights = weights
	for _, pace := range p.paces {
		pace.Limiter.SetWeights(weights)
	}
}

// Prune forgets chats whose slot is long past, in every bot's Chats.
func (p *Paces) Prune(before time.Time) {
	for _, pace := range p.all() {
		pace.Chats.Prune(before)
	}
}

// NotBefore holds a chat of bot until t (Chats.NotBefore).
func (p *Paces) NotBefore(bot notification.BotID, chat int64, t time.Time) {
	pace := p.Acquire(bot)
	defer p.Release(pace)
	pace.Chats.NotBefore(chat, t)
}

// Rate is this worker's current part of bot's rate (0 when it has no pace for the bot).
func (p *Paces) Rate(bot notification.BotID) float64 {
	p.mu.Lock()
	pace := p.paces[bot]
	p.mu.Unlock()
	if pace == nil {
		return 0
	}
	return pace.Limiter.Rate()
}

func (p *Paces) all() []*Pace {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Pace, 0, len(p.paces))
	for _, pace := range p.paces {
		out = append(out, pace)
	}
	return out
}

// Run serves the limiters and renews every lease every Interval (at once when a bot's pace is new) until
// ctx ends (after the worker drained), then releases them: the others may take their parts one platform
// window later.
func (p *Paces) Run(ctx context.Context) {
	p.mu.Lock()
	p.run = ctx
	for _, pace := range p.paces {
		p.serveLocked(pace)
	}
	p.mu.Unlock()
	tick := time.NewTicker(p.o.Interval)
	defer tick.Stop()
	for {
		p.renewAll(ctx)
		p.forgetIdle()
		select {
		case <-ctx.Done():
			p.release(p.all())
			p.serving.Wait()
			return
		case <-tick.C:
		case <-p.kick:
		}
	}
}

// renewAll renews the lease of every pace in one transaction.
func (p *Paces) renewAll(ctx context.Context) {
	paces := p.all()
	start := time.Now()
	next := make([]float64, len(paces))
	shares := make([]store.RateShare, len(paces))
	for i, pace := range paces {
		pace.lease.mu.Lock()
		pace.lease.settings = p.o.Settings(pace.Bot)
		pace.lease.mu.Unlock()
		shares[i] = pace.lease.share(start, &next[i])
	}
	_, err := p.o.Store.ShareRates(ctx, p.o.Holder, p.o.TTL, shares)
	for i, pace := range paces {
		pace.lease.renewed(start, next[i], err, ctx.Err() != nil)
		if pace.Bot == notification.SharedBot && err == nil {
			rateShare.Set(next[i])
			rateDemand.Set(shares[i].Demand)
		}
	}
}

// forgetIdle forgets the paces of bots nobody used for IdleAfter — no message of the bot held, none
// waiting, none sent — and gives their leases up. Their next message makes them again. The shared bot's
// stays.
func (p *Paces) forgetIdle() {
	var idle []*Pace
	p.mu.Lock()
	for bot, pace := range p.paces {
		if bot == notification.SharedBot || pace.users > 0 || time.Since(pace.lastUsed) < p.o.IdleAfter || p.lanes(bot) > 0 {
			continue
		}
		delete(p.paces, bot)
		if pace.stop != nil {
			pace.stop()
		}
		idle = append(idle, pace)
	}
	p.mu.Unlock()
	p.release(idle)
}

// release gives up the leases of paces: they stop sending, and their records are shortened to one
// platform window, unless the worker was killed (a dead worker writes nothing; its leases lapse).
func (p *Paces) release(paces []*Pace) {
	for _, pace := range paces {
		recorded := pace.lease.release()
		if pace.Bot == notification.SharedBot {
			rateShare.Set(0)
		}
		if p.o.Killed() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := p.o.Store.ReleaseRate(ctx, pace.lease.pool, p.o.Holder, recorded, platformWindow); err != nil {
			p.o.Logger.Warn("could not release a rate lease; it lapses by itself", "pool", pace.lease.pool, "err", err)
		}
		cancel()
	}
}
