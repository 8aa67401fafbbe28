package pglocal

import "syscall"

var zeroSignal = syscall.Signal(0)

func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
