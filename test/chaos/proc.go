package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one component running as an OS process, as a Helm install runs it: its own binary, its
// configuration in HERALD_* variables, stdout and stderr appended to a log file that survives kills and
// restarts (each incarnation starts with a "=== start" line).
type Proc struct {
	Name string
	// Addr is the HTTP listen address (host:port) of the component, "" for the broker. It stays the same
	// across restarts, as a Service would.
	Addr string
	Log  string // path of the log file
	// PprofAddr serves net/http/pprof (HERALD_PPROF_ADDR), "" when not enabled.
	PprofAddr string

	bin  string
	args []string
	env  []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current incarnation has exited
	exitErr error
	starts  int
}

func newProc(name, addr, logPath, bin string, args, env []string) *Proc {
	return &Proc{Name: name, Addr: addr, Log: logPath, bin: bin, args: args, env: env}
}

// Start starts a new incarnation. The previous one, if any, must have exited.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s: still running", p.Name)
		}
	}
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "=== start #%d of %s at %s: %s %s\n", p.starts, p.Name, time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("while starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exitErr = cmd, done, nil
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Restart starts the process again with the same configuration (and so the same address); it must have
// exited (Kill or Term first).
func (p *Proc) Restart() error { return p.Start() }

// Running reports whether the current incarnation is alive (a stopped process is alive).
func (p *Proc) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Exited is closed when the current incarnation exits.
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// ExitErr is how the last incarnation ended (nil: status 0).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Pid of the current incarnation, 0 when none was started.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || !p.Running() {
		return fmt.Errorf("%s: not running", p.Name)
	}
	return cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits for the process to be gone: a crash, with nothing flushed or drained.
func (p *Proc) Kill() error {
	if !p.Running() {
		return nil
	}
	// A stopped process dies of SIGKILL too; no SIGCONT needed.
	if err := p.signal(syscall.SIGKILL); err != nil && p.Running() {
		return err
	}
	select {
	case <-p.Exited():
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: still running 30 s after SIGKILL", p.Name)
	}
}

// Term sends SIGTERM and waits up to timeout for the process to exit; it returns how long the exit took.
// A process still running after timeout is killed and that is an error: it did not honour its grace period.
func (p *Proc) Term(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := p.signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-p.Exited():
		took := time.Since(start)
		if err := p.ExitErr(); err != nil {
			return took, fmt.Errorf("%s exited after SIGTERM with %w", p.Name, err)
		}
		return took, nil
	case <-time.After(timeout):
		_ = p.Kill()
		return time.Since(start), fmt.Errorf("%s: still running %v after SIGTERM; killed", p.Name, timeout)
	}
}

// Stop freezes the process (SIGSTOP): it keeps its sockets and state but runs no code, like a VM paused
// or a container starved of CPU.
func (p *Proc) Stop() error { return p.signal(syscall.SIGSTOP) }

// Cont resumes a stopped process (SIGCONT).
func (p *Proc) Cont() error { return p.signal(syscall.SIGCONT) }

// Tail returns the last n lines of the log, leaving out the access log lines of successful requests, which
// would otherwise crowd out everything else under load.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		if !accessOK.Match(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

var accessOK = regexp.MustCompile(`msg=request .*status=2\d\d `)

// CountLog counts log lines (of every incarnation) containing s.
func (p *Proc) CountLog(s string) int {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte(s))
}

// WaitLog waits until a log line of the current incarnation matches re and returns the first submatch of
// the last match (or the whole match when re has no group).
func (p *Proc) WaitLog(ctx context.Context, re *regexp.Regexp) (string, error) {
	for {
		b, _ := os.ReadFile(p.Log)
		if i := bytes.LastIndex(b, []byte("=== start #")); i >= 0 {
			b = b[i:]
		}
		if m := re.FindAllSubmatch(b, -1); len(m) > 0 {
			last := m[len(m)-1]
			if len(last) > 1 {
				return string(last[1]), nil
			}
			return string(last[0]), nil
		}
		if !p.Running() {
			//nolint:errorlint // the exit status, nil after a clean exit, says how it ended; it is not the cause
			return "", fmt.Errorf("%s exited (%v) before logging %q", p.Name, p.ExitErr(), re)
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return "", fmt.Errorf("while waiting for %s to log %q: %w", p.Name, re, err)
		}
	}
}

// WaitHTTP waits until GET http://Addr+path answers 200, failing early if the process exits.
func (p *Proc) WaitHTTP(ctx context.Context, path string) error {
	var last string
	for {
		status, _, err := get(ctx, "http://"+p.Addr+path)
		switch {
		case err == nil && status == http.StatusOK:
			return nil
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("status %d", status)
		}
		if !p.Running() {
			//nolint:errorlint // the exit status, nil after a clean exit, says how it ended; it is not the cause
			return fmt.Errorf("%s exited (%v) before GET %s answered 200", p.Name, p.ExitErr(), path)
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("while waiting for %s GET %s (last: %s): %w", p.Name, path, last, err)
		}
	}
}

// pause waits d or until ctx ends. It is the only way the harness waits: always inside a loop that checks
// a condition, under a deadline.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Eventually polls cond every interval until it returns nil or the deadline passes; the error says what
// was still wrong.
func Eventually(ctx context.Context, timeout, interval time.Duration, what string, cond func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		if perr := pause(ctx, interval); perr != nil {
			return fmt.Errorf("%s: not true within %v: %w", what, timeout, errors.Join(err, perr))
		}
	}
}
