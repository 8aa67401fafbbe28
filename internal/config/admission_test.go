package config

import (
	"testing"

	"github.com/heraldhq/herald/internal/ingress"
)

// The admission settings' default and least value are the ingress's own: the ingress gives a tenant half
// of the in-flight bytes, and that half must hold a full batch.
func TestInFlightBytesBoundsAreTheIngresss(t *testing.T) {
	g, err := parse(t, append(ingressBase[:0:0], ingressBase...)...)
	if err != nil {
		t.Fatal(err)
	}
	if g.Ingress.MaxInFlightBytes != ingress.DefaultMaxInFlightBytes || g.Ingress.MaxInFlight != ingress.DefaultMaxInFlight {
		t.Errorf("defaults %d bytes, %d requests; the ingress's are %d and %d", g.Ingress.MaxInFlightBytes, g.Ingress.MaxInFlight,
			ingress.DefaultMaxInFlightBytes, ingress.DefaultMaxInFlight)
	}
	if minInFlightBytes != ingress.MinMaxInFlightBytes {
		t.Errorf("the least HERALD_MAX_IN_FLIGHT_BYTES is %d here, %d in the ingress", minInFlightBytes, ingress.MinMaxInFlightBytes)
	}
}
