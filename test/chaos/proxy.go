package chaos

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy between every Herald process and the broker. The broker advertises the proxy's
// address in its metadata, so no client ever bypasses it. It fails in the two ways a broker becomes
// unreachable for its clients:
//
//   - Cut: a dead broker host. Open connections are reset and new ones are refused; clients learn at once.
//   - Partition: a network partition. Connections stay open and new ones are accepted, but no byte goes
//     through in either direction; clients learn only from their own timeouts. Restore heals it and the
//     bytes held up are delivered, as TCP retransmission would after a partition heals.
type Proxy struct {
	addr string // fixed for the proxy's life: Restore listens on the same port

	mu       sync.Mutex
	upstream string
	ln       net.Listener
	conns    map[net.Conn]struct{}
	cut      bool
	healed   chan struct{} // non-nil while partitioned; closed by Restore
	closed   bool
	accepted int
}

// NewProxy listens on a free loopback port. Set the upstream with SetUpstream before clients connect.
func NewProxy() (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve(ln)
	return p, nil
}

// Addr is the address clients use.
func (p *Proxy) Addr() string { return p.addr }

// SetUpstream sets the address connections are forwarded to.
func (p *Proxy) SetUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	p.mu.Unlock()
}

// Cut resets every open connection and closes the listener, so that new connections are refused.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return
	}
	p.cut = true
	_ = p.ln.Close()
	for c := range p.conns {
		reset(c)
	}
	p.conns = map[net.Conn]struct{}{}
}

// Partition stops every byte in both directions, on open and new connections alike, until Restore.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed == nil && !p.closed {
		p.healed = make(chan struct{})
	}
}

// Restore ends a Cut or a Partition. After a cut it listens again on the same address: Linux lets a
// listener rebind a port whose old connections are in TIME_WAIT (Go sets SO_REUSEADDR), so this only
// fails if another process took the port meanwhile.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
	if !p.cut || p.closed {
		return nil
	}
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond) // the port is ours; a rebind fails only transiently
	}
	if err != nil {
		return fmt.Errorf("proxy: while listening again on %s: %w", p.addr, err)
	}
	p.ln, p.cut = ln, false
	go p.serve(ln)
	return nil
}

// Close stops the proxy for good.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Accepted counts the connections accepted so far (a test can check that clients do go through it).
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go p.handle(ln, c)
	}
}

func (p *Proxy) handle(ln net.Listener, client net.Conn) {
	p.mu.Lock()
	upstream := p.upstream
	// A connection accepted just before a Cut belongs to the old listener: refuse it like the rest.
	if p.cut || p.closed || p.ln != ln || upstream == "" {
		p.mu.Unlock()
		reset(client)
		return
	}
	p.accepted++
	p.mu.Unlock()
	p.gate() // during a partition the connection is open but leads nowhere
	server, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		reset(client)
		return
	}
	p.mu.Lock()
	if p.cut || p.closed || p.ln != ln {
		p.mu.Unlock()
		reset(client)
		reset(server)
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.gate()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// Either side closing ends both: a half-open connection would leave the client waiting.
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Add(2)
	go pipe(server, client)
	go pipe(client, server)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// gate blocks while the proxy is partitioned.
func (p *Proxy) gate() {
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	if healed != nil {
		<-healed
	}
}

// reset closes c with an RST rather than a FIN: what a client sees when the path to the broker breaks.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
