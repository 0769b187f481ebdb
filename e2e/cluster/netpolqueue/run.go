package netpolqueue

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/nftables"
)

// Run waits until the agent listens on c.Queue, installs the rules, keeps
// them there (put back if something flushed them) and removes them when
// ctx ends. Until the agent listens nothing is steered, so starting the
// two in any order never drops traffic.
func Run(ctx context.Context, log *slog.Logger, c Config, every time.Duration) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	installed := false
	for {
		if !installed {
			ok, err := listening(c.Queue)
			if err != nil {
				return err
			}
			if ok {
				if err := Install(conn, c); err != nil {
					return err
				}
				installed = true
				log.Info("steering the Pod network's new connections to the queue", "podCIDR", c.PodCIDR, "queue", c.Queue, "failOpen", c.FailOpen)
			}
		} else if there, err := Installed(conn, c); err != nil {
			return err
		} else if !there {
			log.Info("table removed by someone else; installing it again", "table", TableName)
			installed = false
			continue
		}
		select {
		case <-ctx.Done():
			if installed {
				if err := Remove(conn, c); err != nil {
					return err
				}
				log.Info("removed the steering rules", "table", TableName)
			}
			return nil
		case <-tick.C:
		}
	}
}

func listening(queue uint16) (bool, error) {
	f, err := os.Open(QueuesFile)
	if os.IsNotExist(err) { // no queue was ever bound in this namespace
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	return Listening(f, queue)
}
