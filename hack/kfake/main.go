// Command kfake runs the Kafka-protocol broker of the tests (franz-go's kfake) as a process of its own, for
// the suites that treat the broker as a separate machine: the fault-injection suite puts it behind a TCP
// proxy it can cut, and the Kubernetes end-to-end suite runs it on the host for the pods to reach.
//
// It listens on -addr and advertises -advertise in its metadata (default: the listen address), so that
// clients connecting through a proxy keep going through the proxy. Once it listens it prints one line,
// "ready <listen address>", on stdout, and it runs until SIGINT or SIGTERM.
//
//	go run ./hack/kfake -addr 127.0.0.1:0 -advertise 127.0.0.1:19092 -prefix herald -partitions 12
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heraldhq/herald/internal/queue"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	advertise := flag.String("advertise", "", "host:port given to clients in metadata (default: the listen address)")
	prefix := flag.String("prefix", "herald", "topic prefix: <prefix>.notifications.high and .normal are created")
	partitions := flag.Int("partitions", queue.DefaultPartitions, "partitions of each topic")
	flag.Parse()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: %v\n", err)
		os.Exit(1)
	}
	listenAddr := ln.Addr().String()
	if *advertise != "" {
		adv, err := net.ResolveTCPAddr("tcp", *advertise)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kfake: -advertise: %v\n", err)
			os.Exit(2)
		}
		ln = advertised{Listener: ln, addr: adv}
	}
	t := queue.TopicsFor(*prefix)
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(*partitions), t.High, t.Normal),
		kfake.AllowAutoTopicCreation(),
		kfake.ListenFn(func(string, string) (net.Listener, error) { return ln, nil }),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("ready %s\n", listenAddr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Close()
}

// advertised is a listener that reports another address: kfake puts its listener's address in the
// metadata it gives clients.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }
