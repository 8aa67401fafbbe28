package rate_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/heraldhq/herald/internal/delivery/rate"
)

func TestAllocateSharesTheRateByDemand(t *testing.T) {
	for _, c := range []struct {
		name    string
		limit   float64
		demands map[string]float64
		want    map[string]float64
	}{
		{"alone: everything", 50, map[string]float64{"a": 3}, map[string]float64{"a": 50}},
		{"both want more than half: even", 50, map[string]float64{"a": 50, "b": 50}, map[string]float64{"a": 25, "b": 25}},
		// The chaos suite's skew: 39 chats with a backlog on one worker, 21 on the other, 1 s per chat. Every
		// chat should get 50/60 a second, as if one worker served them all: 32.5 and 17.5. The unit left by
		// rounding goes to the worker whose chats get less each (17/21 < 32/39), so no chat falls below
		// 32/39.
		{"oversubscribed: in proportion to the chats with work", 50, map[string]float64{"a": 39, "b": 21}, map[string]float64{"a": 32, "b": 18}},
		{"a demand past the limit still weighs", 50, map[string]float64{"a": 150, "b": 50}, map[string]float64{"a": 37, "b": 13}},
		{"an idle worker keeps its floor", 30, map[string]float64{"a": 30, "b": 1}, map[string]float64{"a": 29, "b": 1}},
		{"idle workers keep one a second each", 30, map[string]float64{"a": 200, "b": 1, "c": 0}, map[string]float64{"a": 28, "b": 1, "c": 1}},
		{"what nobody needs is split evenly", 50, map[string]float64{"a": 20, "b": 10}, map[string]float64{"a": 30, "b": 20}},
		{"whole numbers adding up to the limit", 50, map[string]float64{"a": 50, "b": 50, "c": 50}, map[string]float64{"a": 17, "b": 17, "c": 16}},
		{"a fractional limit rounds down", 30.9, map[string]float64{"a": 40, "b": 40}, map[string]float64{"a": 15, "b": 15}},
		{"no holders", 50, map[string]float64{}, map[string]float64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := rate.Allocate(c.limit, c.demands)
			if !maps.Equal(got, c.want) {
				t.Errorf("allocate(%v, %v) = %v, want %v", c.limit, c.demands, got, c.want)
			}
		})
	}
}

// Whatever the demands, the parts are whole, at least 1 while the limit has one for each holder, and add
// up to the limit rounded down.
func TestAllocateAddsUpToTheLimit(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 7, 47, 60} {
		for seed := range 50 {
			demands := map[string]float64{}
			for i := range n {
				demands[fmt.Sprintf("w%02d", i)] = float64((seed*7+i*13)%60) + float64(i)/3
			}
			got := rate.Allocate(47.5, demands)
			sum := 0.0
			for h, r := range got {
				if r < 0 || r != float64(int(r)) || (n <= 47 && r < 1) {
					t.Fatalf("%v: %s got %v", demands, h, r)
				}
				sum += r
			}
			if sum != 47 {
				t.Fatalf("%v: parts %v add up to %v, want 47", demands, got, sum)
			}
		}
	}
}
