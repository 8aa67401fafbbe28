// Package pglocal runs a private PostgreSQL cluster from the local server binaries (initdb, pg_ctl).
// The test harness uses it for throwaway clusters and `herald dev` for a cluster kept between runs.
//
// PostgreSQL refuses to run as root; when Herald runs as root the cluster is run as the "postgres" user
// through runuser, and its directory is handed to that user.
package pglocal

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Options configure a cluster.
type Options struct {
	// Dir holds the data directory ("data"), the socket and the log. It is created if missing; an existing
	// initialised cluster in it is reused.
	Dir string
	// Port to listen on, on 127.0.0.1; 0 picks a free one.
	Port int
	// Durable keeps fsync on (dev); tests turn it off for speed.
	Durable bool
	// MaxConnections; 0 means 200.
	MaxConnections int
	// BinDir holds initdb, pg_ctl and postgres (herald dev: --pg-bin); empty: $HERALD_PG_BIN, else
	// FindBinaries looks for them.
	BinDir string
	// ReplaceRunning stops a server already running on Dir before starting: for a caller that knows such
	// a server is an orphan (herald dev holds a lock on its data directory, so a server running there was
	// left by a run that was killed). Without it, Start refuses with ErrRunning.
	ReplaceRunning bool
	// Settings are more server settings, each "name=value" (a benchmark's
	// shared_preload_libraries=pg_stat_statements).
	Settings []string
}

// Cluster is a running private cluster.
type Cluster struct {
	opts   Options
	bin    string
	runAs  string // "" or "postgres"
	port   int
	logOut string
}

// ErrNoBinaries says the PostgreSQL server binaries are not installed.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: install them with `apt-get install postgresql` or set HERALD_PG_BIN to their directory")

// FindBinaries returns the directory holding initdb and pg_ctl: dir, else $HERALD_PG_BIN (for the tests
// and benchmarks, which have no configuration; herald dev passes its --pg-bin), else the directory of
// pg_config --bindir, the newest /usr/lib/postgresql/*/bin, or that of initdb on the PATH.
func FindBinaries(dir string) (string, error) {
	candidates := []string{}
	if d := cmp.Or(dir, os.Getenv("HERALD_PG_BIN")); d != "" {
		candidates = append(candidates, d)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool { return pgMajor(versions[i]) > pgMajor(versions[j]) })
	candidates = append(candidates, versions...)
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// ErrRunning says a server is already running on the cluster's directory.
var ErrRunning = errors.New("a PostgreSQL server is already running on this directory")

// Start initialises the cluster if needed and starts it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 200
	}
	// The tools run with the cluster directory as their working directory: relative paths would double.
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, bin: bin}
	if os.Geteuid() == 0 {
		c.runAs = "postgres"
		if _, err := user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("running as root needs a \"postgres\" user to run PostgreSQL: %w", err)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("while creating %s: %w", opts.Dir, err)
	}
	if err := c.chown(opts.Dir); err != nil {
		return nil, err
	}
	data := c.dataDir()
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C")
		if err != nil {
			return nil, fmt.Errorf("initdb failed: %w\n%s", err, out)
		}
	}
	c.port = opts.Port
	if c.port == 0 {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
	}
	fsync := "off"
	if opts.Durable {
		fsync = "on"
	}
	c.logOut = filepath.Join(opts.Dir, "postgres.log")
	pgOpts := strings.Join([]string{
		"-c listen_addresses=127.0.0.1",
		"-c port=" + strconv.Itoa(c.port),
		"-c unix_socket_directories=" + opts.Dir,
		"-c max_connections=" + strconv.Itoa(opts.MaxConnections),
		"-c fsync=" + fsync,
		"-c synchronous_commit=" + map[bool]string{true: "on", false: "off"}[opts.Durable],
		"-c full_page_writes=" + fsync,
		"-c shared_buffers=128MB",
	}, " ")
	for _, kv := range opts.Settings {
		pgOpts += " -c " + kv
	}
	if pid, running := c.runningPID(); running {
		if !opts.ReplaceRunning {
			return nil, fmt.Errorf("%w (%s, pid %d)", ErrRunning, opts.Dir, pid)
		}
		if out, err := c.run(ctx, "pg_ctl", "stop", "-w", "-m", "fast", "-D", data); err != nil {
			return nil, fmt.Errorf("while stopping the server left running on %s (pid %d): %w\n%s", opts.Dir, pid, err, out)
		}
	} else {
		// A stale postmaster.pid from a killed run would make pg_ctl refuse to start.
		_ = os.Remove(filepath.Join(data, "postmaster.pid"))
	}
	// The log is kept across runs: a failure shows only what this start wrote.
	var logStart int64
	if st, err := os.Stat(c.logOut); err == nil {
		logStart = st.Size()
	}
	out, err := c.run(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", c.logOut, "-o", pgOpts)
	if err != nil {
		return nil, fmt.Errorf("pg_ctl start failed: %w\n%s\n%s", err, out, c.logSince(logStart, 2000))
	}
	return c, nil
}

// logSince is what the server log gained after offset, at most its last n bytes.
func (c *Cluster) logSince(offset int64, n int) string {
	b, err := os.ReadFile(c.logOut)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return tail(b[offset:], n)
}

// URL is a connection URL for database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Port is the TCP port the cluster listens on.
func (c *Cluster) Port() int { return c.port }

// Stop shuts the cluster down (fast mode: active sessions are ended).
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.run(ctx, "pg_ctl", "stop", "-w", "-m", "fast", "-D", c.dataDir())
	if err != nil {
		return fmt.Errorf("pg_ctl stop failed: %w\n%s", err, out)
	}
	return nil
}

// Restart restarts the cluster with `pg_ctl restart -m fast`, as an operator or a failover would: every
// session is ended (clients see SQLSTATE 57P01, then refused connections) and the server comes back on the
// same port with the options it was started with (pg_ctl keeps them in postmaster.opts). It returns once
// the server accepts connections again. The fault-injection suite uses it under load.
func (c *Cluster) Restart(ctx context.Context) error {
	// -l keeps the server's output in the log file: without it the new postmaster would inherit pg_ctl's
	// stdout, and run would wait for it until the server stops.
	out, err := c.run(ctx, "pg_ctl", "restart", "-w", "-t", "60", "-m", "fast", "-D", c.dataDir(), "-l", c.logOut)
	if err != nil {
		logTail, _ := os.ReadFile(c.logOut)
		return fmt.Errorf("pg_ctl restart failed: %w\n%s\n%s", err, out, tail(logTail, 2000))
	}
	return nil
}

// CreateDatabase creates database name, optionally as a copy of template, with the cluster's createdb.
func (c *Cluster) CreateDatabase(ctx context.Context, name, template string) error {
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "postgres"}
	if template != "" {
		args = append(args, "-T", template)
	}
	args = append(args, name)
	out, err := c.run(ctx, "createdb", args...)
	if err != nil {
		return fmt.Errorf("createdb %s: %w\n%s", name, err, out)
	}
	return nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.opts.Dir, "data") }

// LogFile is the server's log (a benchmark keeps it, with auto_explain's plans, before the cluster goes).
func (c *Cluster) LogFile() string { return c.logOut }

// PID is the server's process id (its postmaster), while it runs: a benchmark reads the CPU time of the
// server and its backends from it.
func (c *Cluster) PID() (int, bool) { return c.runningPID() }

// runningPID reads postmaster.pid and reports whether the server it names is alive. A pid that a process
// other than a postgres server has taken since (after a reboot) does not count.
func (c *Cluster) runningPID() (int, bool) {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	lines := strings.SplitN(string(b), "\n", 2)
	pid, _ := strconv.Atoi(strings.TrimSpace(lines[0]))
	if pid <= 0 {
		return 0, false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return 0, false
	}
	// A server owned by another user cannot be signalled, but is alive.
	if err := p.Signal(zeroSignal); err != nil && !errors.Is(err, os.ErrPermission) {
		return 0, false
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && !strings.HasPrefix(string(comm), "postgres") {
		return 0, false
	}
	return pid, true
}

func (c *Cluster) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, tool)
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.opts.Dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	// pg_ctl start leaves the postmaster running; it must not hold our stdout or die with our group.
	cmd.SysProcAttr = detached()
	err := cmd.Run()
	return buf.Bytes(), err
}

func (c *Cluster) chown(dir string) error {
	if c.runAs == "" {
		return nil
	}
	u, err := user.Lookup(c.runAs)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The parents must be traversable by the postgres user too.
	for d := filepath.Dir(dir); d != "/" && d != "."; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(d, st.Mode().Perm()|0o011)
		}
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("while finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
