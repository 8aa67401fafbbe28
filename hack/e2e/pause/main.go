// Command pause is the sandbox ("pause") container of the end-to-end cluster: containerd starts one per pod
// to hold the pod's namespaces. It does nothing until it is told to stop. Built static and put on an empty
// base by hack/e2e/up.sh, since this machine cannot pull registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 of its namespace it gets no default signal handling: exit on SIGINT and SIGTERM explicitly.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
