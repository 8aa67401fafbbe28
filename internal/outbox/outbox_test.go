package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/batch"
	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const prefix = "ob"

type env struct {
	t      *testing.T
	st     *store.Store
	fx     *fixture.F
	broker *kafkatest.Broker
	ob     *outbox.Outbox
}

// newEnv: PostgreSQL with tenant acme (user "ok" linked and verified, "no" linked but unverified), a
// broker, and an outbox with a short produce budget.
func newEnv(t *testing.T) *env {
	t.Helper()
	st, _ := pgtest.NewStore(t)
	b := kafkatest.New(t, prefix)
	p := b.Producer(t, prefix)
	ob := outbox.New(st, p, outbox.Options{ProduceTimeout: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(ob.Close)
	e := &env{t: t, st: st, fx: fixture.New(st), broker: b, ob: ob}
	e.fx.Tenant(t, "acme", fixture.DeveloperName("Acme"))
	e.fx.VerifiedUser(t, "acme", "ok", 1)
	e.fx.User(t, "acme", "no", fixture.LinkedTo(2), fixture.Unverified())
	return e
}

func (e *env) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.st.Pool().QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// envelopes maps the tracking ids on the normal topic to their partition keys.
func (e *env) envelopes() map[string]string {
	out := map[string]string{}
	for _, m := range e.broker.Messages(e.t, prefix+".notifications.normal") {
		env, err := queue.ParseEnvelope(m.Value)
		if err != nil {
			e.t.Fatal(err)
		}
		out[env.TrackingID] = string(m.Key)
	}
	return out
}

func item(user string) outbox.Item {
	return outbox.Item{UserID: user, Priority: 5, Body: "A message from Acme\nhello"}
}

// Each item is answered in its place: stored and published, refused by the gate, or refused beforehand by
// the caller (which the outbox neither stores nor changes).
func TestSendAnswersEachItemInOrder(t *testing.T) {
	e := newEnv(t)
	refused := &outbox.Result{Code: "invalid_request", Message: "message is required"}
	items := []outbox.Item{item("ok"), item("no"), {Refused: refused}, item("ok")}
	res, replayed, err := e.ob.Send(context.Background(), "acme", items, nil)
	if err != nil || replayed {
		t.Fatalf("Send: %v (replayed %v)", err, replayed)
	}
	if !res[0].Accepted() || res[0].Status != "queued" || !res[3].Accepted() {
		t.Errorf("verified items answered %+v and %+v, want queued", res[0], res[3])
	}
	if res[1].Code != apierror.PhoneUnverified.Code {
		t.Errorf("unverified item answered %+v, want %s", res[1], apierror.PhoneUnverified.Code)
	}
	if res[2] != *refused {
		t.Errorf("refused item answered %+v, want the caller's answer", res[2])
	}
	got := e.envelopes()
	for _, i := range []int{0, 3} {
		if got[res[i].TrackingID] != "chat/1" { // user "ok"'s chat
			t.Errorf("envelope of item %d: key %q, want chat/1", i, got[res[i].TrackingID])
		}
	}
	if len(got) != 2 {
		t.Errorf("%d envelopes published, want 2", len(got))
	}
}

// A publish the broker does not acknowledge in time takes the stored items back: they answer queue_error
// and nothing stays; the gate's refusals stand.
func TestPublishFailureTakesTheItemsBack(t *testing.T) {
	e := newEnv(t)
	e.broker.Close()
	res, _, err := e.ob.Send(context.Background(), "acme", []outbox.Item{item("ok"), item("no")}, &outbox.Idempotency{Key: "k1", RequestHash: [32]byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Code != apierror.QueueError.Code || res[1].Code != apierror.PhoneUnverified.Code {
		t.Errorf("answers %+v, want queue_error then phone_unverified", res)
	}
	if n := e.count(`SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d rows left after a failed publish", n)
	}
	if n := e.count(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Errorf("the key stayed after a failed publish: a retry could never succeed")
	}
}

// A repeat of an idempotent request gets the first answer, item by item, and stores nothing; the same key
// with another request is a conflict.
func TestIdempotentRepeatReplaysTheAnswer(t *testing.T) {
	e := newEnv(t)
	idem := &outbox.Idempotency{Key: "batch-1", RequestHash: [32]byte{1}}
	items := []outbox.Item{item("ok"), item("no")}
	first, replayed, err := e.ob.Send(context.Background(), "acme", items, idem)
	if err != nil || replayed {
		t.Fatal(err, replayed)
	}
	start := time.Now()
	again, replayed, err := e.ob.Send(context.Background(), "acme", items, idem)
	if err != nil || !replayed {
		t.Fatalf("repeat: %v (replayed %v)", err, replayed)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the repeat of an answered request waited %v", took)
	}
	if len(again) != 2 || again[0] != first[0] || again[1] != first[1] {
		t.Errorf("repeat answered %+v, want %+v", again, first)
	}
	if n := e.count(`SELECT count(*) FROM notifications`); n != 1 {
		t.Errorf("%d rows after a repeat, want 1", n)
	}
	_, _, err = e.ob.Send(context.Background(), "acme", items, &outbox.Idempotency{Key: "batch-1", RequestHash: [32]byte{2}})
	if !errors.Is(err, outbox.ErrIdempotencyConflict) {
		t.Errorf("another request under the key: %v, want ErrIdempotencyConflict", err)
	}
}

// A duplicate that arrives while the first request is still publishing waits for its outcome. When that
// publish fails (the first is answered queue_error and takes its notification back), the duplicate goes
// ahead as the first: it never answers 202 for a notification that no longer exists.
func TestDuplicateWaitsForTheFirstPublish(t *testing.T) {
	e := newEnv(t)
	var held atomic.Int32
	entered := make(chan struct{})
	e.broker.Cluster().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		// Hold the first produce past the budget; let the later ones through.
		if held.Add(1) == 1 {
			e.broker.Cluster().KeepControl()
			close(entered)
			time.Sleep(800 * time.Millisecond) // past the 500 ms budget; kfake holds the others meanwhile
		}
		return nil, nil, false
	})
	idem := &outbox.Idempotency{Key: "k", RequestHash: [32]byte{1}}
	type answer struct {
		res      []outbox.Result
		replayed bool
		err      error
	}
	firstDone := make(chan answer, 1)
	go func() {
		res, replayed, err := e.ob.Send(context.Background(), "acme", []outbox.Item{item("ok")}, idem)
		firstDone <- answer{res, replayed, err}
	}()
	<-entered
	second, replayed, err := e.ob.Send(context.Background(), "acme", []outbox.Item{item("ok")}, idem)
	first := <-firstDone
	if first.err != nil || first.res[0].Code != apierror.QueueError.Code {
		t.Fatalf("first request: %+v, want queue_error", first)
	}
	if err != nil || replayed || !second[0].Accepted() {
		t.Fatalf("duplicate: %+v (replayed %v, err %v), want its own notification queued", second, replayed, err)
	}
	if n := e.count(`SELECT count(*) FROM notifications WHERE tracking_id = $1`, second[0].TrackingID); n != 1 {
		t.Error("the duplicate's notification is not stored")
	}
}

// Concurrent sends share batches: a hundred callers, all answered, all stored, all published once.
func TestConcurrentSendsAreAllAnswered(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	ids := make([]string, 100)
	for i := range 100 {
		wg.Go(func() {
			res, _, err := e.ob.Send(context.Background(), "acme", []outbox.Item{item("ok")}, nil)
			if err != nil || !res[0].Accepted() {
				t.Errorf("send %d: %+v, %v", i, res, err)
				return
			}
			ids[i] = res[0].TrackingID
		})
	}
	wg.Wait()
	got := e.envelopes()
	for _, id := range ids {
		if _, ok := got[id]; !ok {
			t.Errorf("notification %s was not published", id)
		}
	}
	if n := e.count(`SELECT count(*) FROM notifications`); n != 100 {
		t.Errorf("%d rows, want 100", n)
	}
}

// A system message the broker does not take is left to the relay; the change that produced it stands.
func TestSystemMessagePublishFailureGoesToTheRelay(t *testing.T) {
	e := newEnv(t)
	n := outbox.System(outbox.SystemMessage{TenantID: "acme", ChatID: 1, Body: "Thank you"})
	if err := e.st.InsertSystemMessage(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	e.broker.Close()
	if e.ob.Publish(context.Background(), []store.NewNotification{n}) {
		t.Fatal("Publish reported success with the broker down")
	}
	if c := e.count(`SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'queued' AND published_at IS NULL`, n.TrackingID); c != 1 {
		t.Error("the message is not waiting for the relay")
	}
}

// Concurrent repeats of one request can land in one batch. Only the first claims the key (PostgreSQL
// refuses an INSERT … ON CONFLICT DO UPDATE that touches one row twice: it used to answer 500); the others
// replay its answer.
func TestRepeatsInOneBatchShareTheFirstAnswer(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	b := kafkatest.New(t, prefix)
	p := b.Producer(t, prefix)
	// One loop, so that requests arriving while a batch runs wait together for the next one.
	ob := outbox.New(st, p, outbox.Options{Logger: slog.New(slog.DiscardHandler), Batch: batch.Options{Loops: 1}})
	t.Cleanup(ob.Close)
	e := &env{t: t, st: st, fx: fixture.New(st), broker: b, ob: ob}
	e.fx.Tenant(t, "acme", fixture.DeveloperName("Acme"))
	e.fx.VerifiedUser(t, "acme", "ok", 1)

	for round := range 5 {
		idem := &outbox.Idempotency{Key: fmt.Sprintf("round-%d", round), RequestHash: [32]byte{byte(round)}}
		const n = 24
		ids := make([]string, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		// A large send occupies the loop, so the repeats gather behind it in one batch, their key new.
		blocker := make([]outbox.Item, 400)
		for i := range blocker {
			blocker[i] = item("ok")
		}
		wg.Go(func() {
			if _, _, err := ob.Send(context.Background(), "acme", blocker, nil); err != nil {
				t.Errorf("blocker: %v", err)
			}
		})
		time.Sleep(time.Millisecond)
		for i := range n {
			wg.Go(func() {
				<-start
				res, _, err := ob.Send(context.Background(), "acme", []outbox.Item{item("ok")}, idem)
				if err == nil {
					ids[i] = res[0].TrackingID
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil || ids[i] == "" || ids[i] != ids[0] {
				t.Fatalf("round %d: repeat %d answered %q, %v; want the first answer %q", round, i, ids[i], errs[i], ids[0])
			}
		}
	}
	if got := e.count(`SELECT count(*) FROM notifications`); got != 5+5*400 {
		t.Errorf("%d notifications for 5 keys and 5 blockers of 400, want %d", got, 5+5*400)
	}
}

// A publish that times out may still reach the broker, and a worker may claim the notification before
// the outbox takes it back. Then it is being delivered: its item is answered accepted, never queue_error
// (the tenant would be told nothing was stored while the user receives it), and a repeat of the request
// replays that answer; the item that was taken back is answered queue_error.
func TestAFailedPublishThatAWorkerClaimedAfterAllIsAnsweredAccepted(t *testing.T) {
	e := newEnv(t)
	e.fx.VerifiedUser(t, "acme", "ok2", 3)
	claimed := make(chan string, 1)
	e.broker.Cluster().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.broker.Cluster().KeepControl()
		// While the produce is held past the budget, a worker claims the notification to user "ok".
		if ns, _, err := e.st.ListNotifications(context.Background(), "acme", store.ListFilter{UserID: "ok"}, 1, nil); err == nil && len(ns) == 1 {
			id := ns[0].TrackingID
			if _, err := e.st.ClaimDelivery(context.Background(), id, time.Minute); err == nil {
				claimed <- id
			}
		}
		time.Sleep(800 * time.Millisecond) // past the 500 ms budget
		return nil, errors.New("held"), true
	})
	idem := &outbox.Idempotency{Key: "k-claimed", RequestHash: [32]byte{7}}
	res, _, err := e.ob.Send(context.Background(), "acme", []outbox.Item{item("ok"), item("ok2")}, idem)
	if err != nil {
		t.Fatal(err)
	}
	id := <-claimed
	if !res[0].Accepted() || res[0].TrackingID != id {
		t.Errorf("the claimed item answered %+v, want accepted as %s", res[0], id)
	}
	if res[1].Code != apierror.QueueError.Code {
		t.Errorf("the item taken back answered %+v, want queue_error", res[1])
	}
	if n := e.count(`SELECT count(*) FROM notifications`); n != 1 {
		t.Errorf("%d rows, want only the claimed one", n)
	}
	start := time.Now()
	again, replayed, err := e.ob.Send(context.Background(), "acme", []outbox.Item{item("ok"), item("ok2")}, idem)
	if err != nil || !replayed || again[0] != res[0] || again[1] != res[1] {
		t.Errorf("repeat: %+v (replayed %v, err %v), want %+v", again, replayed, err, res)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the repeat waited %v: the key was not marked answered", took)
	}
}

// An item whose send_at is ahead is stored as scheduled, with its options, and not published; one whose
// send_at has come is queued and published at once, like an item without it.
func TestScheduledItemsWaitAndDueOnesGoAtOnce(t *testing.T) {
	e := newEnv(t)
	later, past, expires := time.Now().Add(time.Hour), time.Now().Add(-time.Minute), time.Now().Add(2*time.Hour)
	scheduled := item("ok")
	scheduled.SendAt, scheduled.ExpiresAt, scheduled.Metadata = &later, &expires, map[string]string{"order": "42"}
	due := item("ok")
	due.SendAt = &past
	res, _, err := e.ob.Send(context.Background(), "acme", []outbox.Item{scheduled, due}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != "scheduled" || res[1].Status != "queued" {
		t.Fatalf("answers %+v, want scheduled then queued", res)
	}
	got := e.envelopes()
	if _, ok := got[res[0].TrackingID]; ok {
		t.Error("the scheduled notification was published")
	}
	if _, ok := got[res[1].TrackingID]; !ok {
		t.Error("the notification whose send_at had come was not published")
	}
	if n := e.count(`SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'scheduled' AND metadata->>'order' = '42'
		AND send_at IS NOT NULL AND expires_at IS NOT NULL AND published_at IS NULL`, res[0].TrackingID); n != 1 {
		t.Error("the scheduled notification is not stored with its options")
	}
}

// A broker failure takes back every accepted item of a request that had something to publish, its
// scheduled items included, so the request is stored whole or not at all and its key starts afresh; a
// request with only scheduled items needs no broker and stands.
func TestPublishFailureTakesTheWholeRequestBack(t *testing.T) {
	e := newEnv(t)
	later := time.Now().Add(time.Hour)
	scheduled := item("ok")
	scheduled.SendAt = &later
	e.broker.Close()
	onlyScheduled, _, err := e.ob.Send(context.Background(), "acme", []outbox.Item{scheduled}, nil)
	if err != nil || onlyScheduled[0].Status != "scheduled" {
		t.Fatalf("a scheduled-only request with the broker down: %+v, %v; want scheduled", onlyScheduled, err)
	}
	idem := &outbox.Idempotency{Key: "mixed", RequestHash: [32]byte{3}}
	mixed, _, err := e.ob.Send(context.Background(), "acme", []outbox.Item{item("ok"), scheduled, item("no")}, idem)
	if err != nil {
		t.Fatal(err)
	}
	if mixed[0].Code != apierror.QueueError.Code || mixed[1].Code != apierror.QueueError.Code || mixed[2].Code != apierror.PhoneUnverified.Code {
		t.Fatalf("mixed request answered %+v, want queue_error, queue_error, phone_unverified", mixed)
	}
	if n := e.count(`SELECT count(*) FROM notifications`); n != 1 {
		t.Errorf("%d rows, want only the scheduled-only request's", n)
	}
	if n := e.count(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Error("the failed request's key stayed: its retry would replay the failure")
	}
}

// The scheduler's step releases what is due, commits, and publishes it; a publish that fails leaves the
// notification queued for the relay.
func TestReleaseScheduledPublishesOrHandsToTheRelay(t *testing.T) {
	e := newEnv(t)
	soon := time.Now().Add(100 * time.Millisecond)
	due := item("ok")
	due.SendAt = &soon
	res, _, err := e.ob.Send(context.Background(), "acme", []outbox.Item{due, due}, nil)
	if err != nil || res[0].Status != "scheduled" {
		t.Fatalf("%+v, %v", res, err)
	}
	if n, _, err := e.ob.ReleaseScheduled(context.Background(), 1); err != nil || n != 0 {
		t.Fatalf("released %d before send_at (%v)", n, err)
	}
	time.Sleep(150 * time.Millisecond)
	n, locked, err := e.ob.ReleaseScheduled(context.Background(), 1)
	if err != nil || !locked || n != 1 {
		t.Fatalf("release: %d (locked %v), %v; want 1", n, locked, err)
	}
	got := e.envelopes()
	published := 0
	for _, r := range res {
		if _, ok := got[r.TrackingID]; ok {
			published++
		}
	}
	if published != 1 {
		t.Fatalf("%d published, want the one released", published)
	}
	e.broker.Close()
	if n, _, err := e.ob.ReleaseScheduled(context.Background(), 10); err != nil || n != 1 {
		t.Fatalf("release with the broker down: %d, %v; want 1 (queued, for the relay)", n, err)
	}
	if c := e.count(`SELECT count(*) FROM notifications WHERE status = 'queued' AND published_at IS NULL`); c != 1 {
		t.Error("the notification whose publish failed is not waiting for the relay")
	}
}

// An item the gate refused for an opt-out answers user_opted_out, told apart from an unverified phone, with
// a message that names the category it covers; its category is stored on the ones accepted. Under a key,
// the refusal is kept and replayed like the rest.
func TestAnItemOfAnOptedOutUserIsRefusedAsSuch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.st.OptOut(ctx, "acme", "ok", "promo", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	promo, news := item("ok"), item("ok")
	promo.Category, news.Category = "promo", "news"
	for _, idem := range []*outbox.Idempotency{nil, {Key: "k", RequestHash: [32]byte{1}}, {Key: "k", RequestHash: [32]byte{1}}} {
		res, _, err := e.ob.Send(ctx, "acme", []outbox.Item{promo, news, item("no")}, idem)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Code != apierror.UserOptedOut.Code || res[0].Message == "" || !res[1].Accepted() || res[2].Code != apierror.PhoneUnverified.Code {
			t.Errorf("answers %+v, want user_opted_out, accepted, phone_unverified", res)
		}
		if n := e.count(`SELECT count(*) FROM notifications WHERE tracking_id = $1 AND category = 'news'`, res[1].TrackingID); n != 1 {
			t.Error("the accepted item's category was not stored")
		}
	}
}
