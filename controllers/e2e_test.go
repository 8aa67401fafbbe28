package controllers_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// The platform team's path, end to end, against the real tenant API (with its default auth cache) over
// the key store the operator writes: apply a Tenant and an ApiKey, read the key from the Secret, use it,
// disable it, rotate it.
func TestEndToEndFromApplyToRotation(t *testing.T) {
	const grace = 4 * time.Second
	h := start(t, operator.Options{RotationGracePeriod: grace, ResyncPeriod: time.Minute})

	broker := kafkatest.New(t, "e2e")
	producer := broker.Producer(t, "e2e")
	logger := slog.New(slog.DiscardHandler)
	ob := outbox.New(h.st, producer, outbox.Options{Logger: logger})
	t.Cleanup(ob.Close)
	api := ingress.New(h.st, ob, logger, ingress.Options{DeepLinkBase: "https://t.me", BotUsername: "herald_e2e_bot",
		// The waits below poll with keys that are rejected on purpose, all from 127.0.0.1: not an attack.
		MaxAuthFailures: 1000})
	router := server.NewRouter(logger)
	api.Routes(router)
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	linkToken := func(key string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/link-token", bytes.NewBufferString(`{"user_id":"user-1"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST /v1/link-token: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	waitStatus := func(key string, want int, within time.Duration, what string) time.Duration {
		t.Helper()
		began := time.Now()
		wait.For(h.t, within, what, func() error {
			if got := linkToken(key); got != want {
				return fmt.Errorf("POST /v1/link-token: %d, want %d", got, want)
			}
			return nil
		})
		return time.Since(began)
	}

	// Apply.
	tn := h.tenant("shop", func(tn *notifyv1alpha1.Tenant) { tn.Spec.DisplayName = "Shop Inc." })
	key := h.apiKey("shop-backend", tn.Name, func(k *notifyv1alpha1.ApiKey) { k.Spec.Label = "Shop" })
	h.waitKey(key, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)

	// Read the key from the Secret and use it.
	first := h.secretKey(key)
	if got := linkToken(first); got != http.StatusCreated {
		t.Fatalf("POST /v1/link-token with the key from the Secret: %d, want 201", got)
	}

	// Disable: 401 within 5 seconds. Enable again.
	update(h, h.getKey(key), func(k *notifyv1alpha1.ApiKey) { k.Spec.Disabled = true })
	took := waitStatus(first, http.StatusUnauthorized, 5*time.Second, "disabled key rejected")
	t.Logf("disabled key rejected after %s", took.Round(10*time.Millisecond))
	update(h, h.getKey(key), func(k *notifyv1alpha1.ApiKey) { k.Spec.Disabled = false })
	waitStatus(first, http.StatusCreated, 5*time.Second, "re-enabled key accepted")

	// Rotate: the new key works at once, the old one during the grace period only.
	update(h, h.getKey(key), func(k *notifyv1alpha1.ApiKey) { k.Spec.Rotation = &notifyv1alpha1.Rotation{Generation: 1} })
	rotated := time.Now()
	var second string
	wait.For(h.t, 5*time.Second, "rotated key in the Secret", func() error {
		if second = h.secretKey(key); second == first {
			return fmt.Errorf("Secret still holds the old key")
		}
		return nil
	})
	if got := linkToken(second); got != http.StatusCreated {
		t.Fatalf("new key after rotation: %d, want 201", got)
	}
	if got := linkToken(first); got != http.StatusCreated {
		t.Fatalf("old key during the grace period (%s after rotation): %d, want 201", time.Since(rotated), got)
	}
	// After the grace period (plus the API's auth cache of 2s), the old key is refused; the new one stays.
	waitStatus(first, http.StatusUnauthorized, grace+5*time.Second, "old key refused after the grace period")
	if since := time.Since(rotated); since < grace-time.Second {
		t.Errorf("old key refused %s after rotation, before the %s grace period", since, grace)
	}
	if got := linkToken(second); got != http.StatusCreated {
		t.Errorf("new key after the grace period: %d, want 201", got)
	}
}
