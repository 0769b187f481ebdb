// Command tekvirt-step runs the step of any tekvirt task: the first argument
// names the task. Exit codes: 0 success, 1 the step failed (the reason is
// the last line on stderr), or the exit code of a command the step ran for
// the user (execute-in-vm).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tekvirt/tekvirt/tasks/result"
	"github.com/tekvirt/tekvirt/tasks/step"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := step.Root().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		result.WriteError(err)
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			os.Exit(coded.ExitCode())
		}
		os.Exit(1)
	}
}
