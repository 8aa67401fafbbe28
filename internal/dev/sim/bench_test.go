package sim_test

import (
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

// BenchmarkSendMessage measures the client and the simulator together, limits off, many chats in parallel.
func BenchmarkSendMessage(b *testing.B) {
	s := sim.New(sim.Options{GlobalRate: -1, PerChatRate: -1, Logger: discard()})
	defer s.Close()
	srv := newServer(s)
	defer srv.Close()
	const chats = 1000
	for id := range int64(chats) {
		if _, err := s.EnsureUser(sim.User{ID: id + 1}); err != nil {
			b.Fatal(err)
		}
	}
	c := messenger.New(srv.URL, s.Token(), nil)
	var next atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			chat := next.Add(1)%chats + 1
			if _, err := c.SendMessage(b.Context(), messenger.SendMessageRequest{ChatID: chat, Text: "benchmark"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newServer(s *sim.Server) *httptest.Server { return httptest.NewServer(s) }
