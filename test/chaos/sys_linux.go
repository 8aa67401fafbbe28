package chaos

import "syscall"

// childAttr makes a component die with the test process (a test binary killed by its timeout must not
// leave Herald processes behind) and puts it in its own process group, so that a ^C in the terminal
// reaches the test and not the components behind its back.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
