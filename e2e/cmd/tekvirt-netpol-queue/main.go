// Command tekvirt-netpol-queue runs beside kube-network-policies on each of
// the testbed's nodes and steers the Pod network's new connections to the
// agent's queue with rules this kernel can load (see package netpolqueue).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tekvirt/tekvirt/e2e/cluster/netpolqueue"
)

func main() {
	podCIDR := flag.String("pod-cidr", "", "the cluster's Pod network (CIDR; a dual-stack cluster's two, comma-separated)")
	queue := flag.Uint("nfqueue-id", 100, "the agent's queue (its --nfqueue-id)")
	failOpen := flag.Bool("fail-open", false, "accept packets while the agent does not read the queue (its --fail-open)")
	every := flag.Duration("check-every", 2*time.Second, "how often to look for the agent and for the rules")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(*podCIDR, *queue, *failOpen, *every, log); err != nil {
		log.Error("steering to the NetworkPolicy agent", "error", err)
		os.Exit(1)
	}
}

func run(podCIDRs string, queue uint, failOpen bool, every time.Duration, log *slog.Logger) error {
	var configs []netpolqueue.Config
	for _, cidr := range strings.Split(podCIDRs, ",") {
		prefix, err := netip.ParsePrefix(strings.TrimSpace(cidr))
		if err != nil {
			return fmt.Errorf("--pod-cidr: %w", err)
		}
		configs = append(configs, netpolqueue.Config{PodCIDR: prefix, FailOpen: failOpen})
	}
	if queue > 0xffff {
		return fmt.Errorf("--nfqueue-id %d: queues are numbered up to 65535", queue)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// One table per family, each kept by its own loop; the first to fail
	// stops the others.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(configs))
	for _, c := range configs {
		c.Queue = uint16(queue)
		go func() {
			err := netpolqueue.Run(ctx, log, c, every)
			if err != nil {
				err = fmt.Errorf("%s: %w", c.PodCIDR, err)
			}
			cancel()
			errc <- err
		}()
	}
	var errs []error
	for range configs {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}
