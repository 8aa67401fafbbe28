package devenv

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"
)

func TestListeningBeyondLoopbackIsWarnedAbout(t *testing.T) {
	for _, tc := range []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:8080", false},
		{"[::1]:8080", false},
		{"0.0.0.0:8080", true},
		{"[::]:8080", true},
		{"192.0.2.7:8080", true},
	} {
		var buf bytes.Buffer
		a, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		warnIfExposed(slog.New(slog.NewTextHandler(&buf, nil)), a)
		if got := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "beyond loopback"); got != tc.warn {
			t.Errorf("listening on %s: warned %v, want %v (log: %q)", tc.addr, got, tc.warn, buf.String())
		}
	}
}
