// Command tekvirt-step runs the step of any tekvirt task: the first argument
// names the task. Exit codes: 0 success, 1 the step failed (the reason is
// the last line on stderr).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tekvirt/tekvirt/tasks/step"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := step.Root().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
