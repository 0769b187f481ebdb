package e2e

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestUpRestartsOnlyACrashedComponent kills one component and checks that
// `up` restarts it and leaves every other component's process alone.
func TestUpRestartsOnlyACrashedComponent(t *testing.T) {
	framework.New(t)
	src, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c, err := cluster.New(framework.Home(), src, &out)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, s := range c.Status() {
		if s.PID == 0 {
			t.Fatalf("%s is not running before the test", s.Name)
		}
		before[s.Name] = s.PID
	}
	const victim = "kube-scheduler"
	if err := syscall.Kill(before[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.Up(ctx); err != nil {
		t.Fatalf("up after a crash: %v\n%s", err, out.String())
	}
	for _, s := range c.Status() {
		switch {
		case s.Name == victim && (s.PID == 0 || s.PID == before[victim]):
			t.Errorf("%s not restarted (pid %d)", victim, s.PID)
		case s.Name != victim && s.PID != before[s.Name]:
			t.Errorf("%s restarted (pid %d -> %d) though it had not crashed", s.Name, before[s.Name], s.PID)
		}
	}
	if !strings.Contains(out.String(), victim) || !strings.Contains(out.String(), "started") || !strings.Contains(out.String(), "etcd                     running") {
		t.Errorf("up output does not report the restart and the running state:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "export KUBECONFIG=") {
		t.Errorf("up output lacks the KUBECONFIG line:\n%s", out.String())
	}
}
