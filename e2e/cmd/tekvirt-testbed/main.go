// Command tekvirt-testbed runs the local testbed: it builds Kubernetes,
// Tekton and tekvirt from source, brings a bare cluster of one or more
// nodes up on this machine and installs tekvirt through its release, as a
// user's kubectl apply would. The tekvirt CLI runs it for `tekvirt up`,
// `down`, `status`, `release`, `guest-url` and `console-log`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt:", err)
		os.Exit(1)
	}
}
