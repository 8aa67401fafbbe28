//go:build !linux

package chaos

import "syscall"

// childAttr puts a component in its own process group (Pdeathsig is Linux only).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
