package devenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrAlreadyRunning says another herald dev is running on the same data directory.
var ErrAlreadyRunning = errors.New("another herald dev is running on this data directory")

// lockDataDir takes an exclusive lock on dir/lock for as long as this herald dev runs. The kernel drops it
// when the process ends, however it ends, so a run killed with SIGKILL leaves no stale lock, and a server
// it left running on the data directory is known to be an orphan.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("while locking the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrAlreadyRunning
		}
		return nil, fmt.Errorf("while locking the data directory: %w", err)
	}
	return f, nil
}

// running reports whether a herald dev holds the lock on dir.
func running(dir string) bool {
	f, err := lockDataDir(dir)
	if errors.Is(err, ErrAlreadyRunning) {
		return true
	}
	if err == nil {
		f.Close()
	}
	return false
}
