package chaos

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, s string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, s+"\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return line, err
}

// echoThroughProxy starts a proxy in front of an echo server, both closed at the end of the test, and
// returns it with a connection through it that has echoed a line.
func echoThroughProxy(t *testing.T) (*Proxy, net.Conn) {
	t.Helper()
	p, err := NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.SetUpstream(echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if got, err := roundTrip(c, "hello"); err != nil || got != "hello\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	return p, c
}

func TestProxyCutResetsAndRefusesThenRestores(t *testing.T) {
	p, c := echoThroughProxy(t)

	p.Cut()
	if _, err := roundTrip(c, "after the cut"); err == nil {
		t.Error("an open connection still works after Cut")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a new connection during the cut: %v, want connection refused", err)
	}

	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	// The listener is back at once; Eventually only guards against a slow goroutine start.
	err := Eventually(context.Background(), 5*time.Second, 20*time.Millisecond, "proxy restored", func(context.Context) error {
		c2, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return err
		}
		defer c2.Close()
		got, err := roundTrip(c2, "again")
		if err == nil && got != "again\n" {
			err = errors.New("wrong echo " + got)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
	if p.Accepted() != 2 {
		t.Errorf("accepted %d connections, want 2", p.Accepted())
	}
}

func TestProxyPartitionHoldsBytesUntilRestored(t *testing.T) {
	p, c := echoThroughProxy(t)

	p.Partition()
	// Nothing comes back while partitioned: the read times out rather than failing.
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := io.WriteString(c, "during\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); !isTimeout(err) {
		t.Fatalf("read during the partition: %v, want a timeout", err)
	}
	// A new connection is accepted (the kernel does that) but leads nowhere.
	c2, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatalf("dial during the partition: %v", err)
	}
	defer c2.Close()

	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "during\n" {
		t.Errorf("after the partition healed: %q, %v; want the held-up bytes", got, err)
	}
	if got, err := roundTrip(c2, "new"); err != nil || got != "new\n" {
		t.Errorf("a connection opened during the partition, after it healed: %q, %v", got, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
