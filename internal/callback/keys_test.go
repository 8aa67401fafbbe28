package callback_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/callback"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// HERALD_CALLBACK_SECRET_KEY rotated: with "NEW,OLD" the sender opens the secrets sealed under the old key
// (its callbacks are signed as before) and seals each again under the new one, so that the old key can be
// removed; herald_callback_secrets_old_key counts what is left — here a secret sealed under a key no longer
// listed, which nothing opens and which stays as it is.
func TestTheSenderSealsSecretsUnderTheFirstKeyAgain(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	ep, secret := e.endpoint("acme", rc.srv.URL+"/h") // sealed under e.key, the old key
	newer := signing.GenerateKey()
	lost, _ := signing.ParseKey(signing.GenerateKey())
	orphan, _ := e.endpoint("other", rc.srv.URL+"/o")
	lostSealed := lost.Seal(signing.NewSecret(), orphan)
	e.exec(`UPDATE callback_secrets SET sealed = $1 WHERE endpoint_id = $2`, lostSealed, orphan)
	both, err := signing.ParseKey(newer + "," + e.rawKey)
	if err != nil {
		t.Fatal(err)
	}
	newKey, _ := signing.ParseKey(newer)
	e.pings("acme", ep, 1)
	opts := e.options()
	opts.Key = both
	e.start(opts)

	wait.Until(t, 10*time.Second, "the ping", func() bool { return len(rc.acknowledged()) == 1 })
	r := rc.requests()[0]
	if err := signing.Verify(r.Header, r.Body, time.Now(), signing.DefaultTolerance, secret); err != nil {
		t.Errorf("a secret sealed under the old key no longer signs: %v", err)
	}
	sealedOf := func(endpoint string) []byte {
		secrets := e.fx.CallbackSecrets(t, endpoint)
		if len(secrets) != 1 {
			t.Fatalf("endpoint %s holds %d secrets, want 1", endpoint, len(secrets))
		}
		return secrets[0].Sealed
	}
	wait.Until(t, 10*time.Second, "the secret sealed under the new key", func() bool {
		got, err := newKey.Open(sealedOf(ep), ep)
		return err == nil && got.Equal(secret)
	})
	wait.Until(t, 10*time.Second, "herald_callback_secrets_old_key at 1", func() bool { return value(callback.SecretsOldKey) == 1 })
	if !bytes.Equal(sealedOf(orphan), lostSealed) {
		t.Error("a secret no key opens was changed")
	}
}
