package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
)

// IdempotencyWindow is how long an Idempotency-Key is remembered; an older key is taken over by the next
// request that names it.
const IdempotencyWindow = 24 * time.Hour

// IdempotencyKey names a tenant's Idempotency-Key.
type IdempotencyKey struct {
	TenantID string
	Key      string
}

// KeyClaim is a request's claim of its Idempotency-Key: RequestHash identifies what the request means, so
// that the same key with another request is told apart from a repeat.
type KeyClaim struct {
	IdempotencyKey
	RequestHash [32]byte
}

// ClaimIdempotencyKeys claims each key for this transaction, or takes over one older than
// IdempotencyWindow, and reports the keys it claimed; the others belong to an earlier request (see
// IdempotencyRecord). A concurrent claim of the same key waits here until the other transaction ends, so
// two duplicates never both go ahead. Keys are claimed in a fixed order, so two batches cannot deadlock.
func (tx *Tx) ClaimIdempotencyKeys(ctx context.Context, claims []KeyClaim) (map[IdempotencyKey]bool, error) {
	claims = slices.Clone(claims)
	slices.SortFunc(claims, func(a, b KeyClaim) int {
		return cmpKeys(a.IdempotencyKey, b.IdempotencyKey)
	})
	tenants := make([]string, len(claims))
	keys := make([]string, len(claims))
	hashes := make([][]byte, len(claims))
	for i, c := range claims {
		tenants[i], keys[i], hashes[i] = c.TenantID, c.Key, c.RequestHash[:]
	}
	rows, err := tx.tx.Query(ctx, `
		INSERT INTO idempotency_keys (tenant_id, key, request_hash, published)
		SELECT c.tenant_id, c.key, c.request_hash, false
		FROM unnest($1::text[], $2::text[], $3::bytea[]) WITH ORDINALITY AS c(tenant_id, key, request_hash, n)
		ORDER BY c.n
		ON CONFLICT (tenant_id, key) DO UPDATE
		  SET request_hash = EXCLUDED.request_hash, tracking_id = NULL, results = NULL, published = false, created_at = now()
		  WHERE idempotency_keys.created_at < now() - $4::interval
		RETURNING tenant_id, key`, tenants, keys, hashes, IdempotencyWindow.String())
	if err != nil {
		return nil, translate(err, "claiming idempotency keys")
	}
	claimed := map[IdempotencyKey]bool{}
	var k IdempotencyKey
	_, err = pgx.ForEachRow(rows, []any{&k.TenantID, &k.Key}, func() error {
		claimed[k] = true
		return nil
	})
	return claimed, translate(err, "claiming idempotency keys")
}

// planEachTime makes pgx send a statement unnamed, so that PostgreSQL plans it for its arguments and the
// table as it is now. The statements that find a batch's keys (an unnest joined to idempotency_keys) need
// it: pgx prepares statements once per connection, and PostgreSQL soon settles on a generic plan made for
// the table's size then. Made while the table was small, that plan hashes the keys and scans the whole
// table, and keeps doing so as the table grows, where the primary key finds them at once; planning each
// time costs far less (docs/benchmarks.md, "Keys found by their index").
const planEachTime = pgx.QueryExecModeExec

func cmpKeys(a, b IdempotencyKey) int {
	if c := strings.Compare(a.TenantID, b.TenantID); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// KeyResults is the answer kept under a claimed key: a JSON document of internal/outbox.
type KeyResults struct {
	IdempotencyKey
	Results []byte
}

// SaveIdempotencyResults records the answers to the requests that claimed these keys, for their repeats,
// in one statement (a batch claims several keys).
func (tx *Tx) SaveIdempotencyResults(ctx context.Context, saves []KeyResults) error {
	if len(saves) == 0 {
		return nil
	}
	tenants := make([]string, len(saves))
	keys := make([]string, len(saves))
	results := make([]string, len(saves))
	for i, s := range saves {
		tenants[i], keys[i], results[i] = s.TenantID, s.Key, string(s.Results)
	}
	_, err := tx.tx.Exec(ctx, `UPDATE idempotency_keys k SET results = d.results::jsonb
		FROM unnest($1::text[], $2::text[], $3::text[]) AS d(tenant_id, key, results)
		WHERE k.tenant_id = d.tenant_id AND k.key = d.key`, planEachTime, tenants, keys, results)
	return translate(err, "saving idempotent answers")
}

// IdempotencyRecord is what an earlier request left under a key.
type IdempotencyRecord struct {
	RequestHash [32]byte
	// Results is the answer saved by SaveIdempotencyResults (a JSON document of internal/outbox); a key
	// written before answers were saved reads as [{"tracking_id": …, "status": "queued"}].
	Results []byte
	// Settled: the earlier request has been answered (MarkIdempotencyPublished), or it is older than
	// PublishWindow, so its publish has ended one way or the other (a failed publish deletes the key; a
	// request whose process died mid-publish left rows that the redrive delivers).
	Settled bool
}

// ReadIdempotencyKey reads a key; ErrNotFound when there is none (or its request took it back).
func (s *Store) ReadIdempotencyKey(ctx context.Context, k IdempotencyKey) (IdempotencyRecord, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var r IdempotencyRecord
	var hash []byte
	err := s.pool.QueryRow(ctx, `
		SELECT request_hash,
		       COALESCE(results, jsonb_build_array(jsonb_build_object('tracking_id', tracking_id, 'status', `+notification.Queued.SQL()+`)))::text,
		       published OR created_at < now() - $3::interval
		FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`, k.TenantID, k.Key, PublishWindow.String()).
		Scan(&hash, &r.Results, &r.Settled)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("while reading idempotency key: %w", ErrNotFound)
	}
	copy(r.RequestHash[:], hash)
	return r, translate(err, "reading idempotency key")
}

// DeleteIdempotencyKeys forgets keys whose request stored nothing (a retry is then evaluated afresh).
func (tx *Tx) DeleteIdempotencyKeys(ctx context.Context, keys []IdempotencyKey) error {
	return translate(deleteIdempotencyKeys(ctx, tx.tx, keys), "deleting idempotency keys")
}

// MarkIdempotencyPublished records that the requests of these keys were answered, so that their repeats
// get the answer at once (see IdempotencyRecord.Settled).
//
// Its commit does not wait for the WAL to reach the disk (synchronous_commit off for this statement's
// transaction alone): the mark is a shortcut, not a promise. A crash that loses it leaves the key unsettled
// until PublishWindow has passed, and then it settles by age with the same answer. Waiting for the flush
// cost every batch with a key one more disk sync before its requests were answered.
func (s *Store) MarkIdempotencyPublished(ctx context.Context, keys []IdempotencyKey) error {
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tenants, names := keyArrays(keys)
	_, err := s.pool.Exec(ctx, `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		UPDATE idempotency_keys k SET published = true FROM unnest($1::text[], $2::text[]) AS d(tenant_id, key), async
		WHERE k.tenant_id = d.tenant_id AND k.key = d.key`, planEachTime, tenants, names)
	return translate(err, "marking idempotency keys answered")
}

// MarkIdempotencyPublished is the transaction's variant of Store.MarkIdempotencyPublished. It commits as
// the transaction does (synchronously): the transactions that use it also take keys back.
func (tx *Tx) MarkIdempotencyPublished(ctx context.Context, keys []IdempotencyKey) error {
	if len(keys) == 0 {
		return nil
	}
	tenants, names := keyArrays(keys)
	_, err := tx.tx.Exec(ctx, `UPDATE idempotency_keys k SET published = true FROM unnest($1::text[], $2::text[]) AS d(tenant_id, key)
		WHERE k.tenant_id = d.tenant_id AND k.key = d.key`, planEachTime, tenants, names)
	return translate(err, "marking idempotency keys answered")
}

func keyArrays(keys []IdempotencyKey) (tenants, names []string) {
	tenants = make([]string, len(keys))
	names = make([]string, len(keys))
	for i, k := range keys {
		tenants[i], names[i] = k.TenantID, k.Key
	}
	return tenants, names
}

func deleteIdempotencyKeys(ctx context.Context, q querier, keys []IdempotencyKey) error {
	if len(keys) == 0 {
		return nil
	}
	tenants, names := keyArrays(keys)
	_, err := q.Exec(ctx, `DELETE FROM idempotency_keys k USING unnest($1::text[], $2::text[]) AS d(tenant_id, key)
		WHERE k.tenant_id = d.tenant_id AND k.key = d.key`, planEachTime, tenants, names)
	return err
}
