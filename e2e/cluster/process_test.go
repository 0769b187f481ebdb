package cluster

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testCluster(t *testing.T) (*Cluster, *bytes.Buffer) {
	t.Helper()
	home := t.TempDir()
	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	return &Cluster{Home: home, Out: &out, start: time.Now()}, &out
}

func TestEnsureStartsOnceAndStops(t *testing.T) {
	c, out := testCluster(t)
	p := &process{name: "sleeper", binary: "/bin/sleep", args: []string{"60"}}
	if err := c.ensure(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	pid := c.pid(p)
	if pid == 0 {
		t.Fatal("started process not found by its PID file")
	}
	if err := c.ensure(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if c.pid(p) != pid || !strings.Contains(out.String(), "running (pid") {
		t.Fatalf("second ensure did not leave the process alone:\n%s", out)
	}
	if err := c.stop(p); err != nil {
		t.Fatal(err)
	}
	if c.pid(p) != 0 || processMatches(pid, "/bin/sleep") {
		t.Fatal("process still running after stop")
	}
}

func TestPIDOfAnotherProgramIsNotOurs(t *testing.T) {
	c, _ := testCluster(t)
	// Our own PID runs the test binary, not sleep.
	if err := os.WriteFile(c.pidFile("sleeper"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid := c.pid(&process{name: "sleeper", binary: "/bin/sleep"}); pid != 0 {
		t.Fatalf("pid %d of another program taken for the component", pid)
	}
}

func TestPortInUseIsNamed(t *testing.T) {
	c, _ := testCluster(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := &process{name: "sleeper", binary: "/bin/sleep", args: []string{"60"}, ports: []string{l.Addr().String()}}
	err = c.ensure(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "sleeper: port "+l.Addr().String()+" is already in use") {
		t.Fatalf("err = %v, want the component and port named", err)
	}
}

func TestFailedStartNamesLog(t *testing.T) {
	c, _ := testCluster(t)
	p := &process{name: "broken", binary: "/bin/sh", args: []string{"-c", "echo boom >&2; exit 3"},
		ready: func(context.Context) error { return errors.New("not yet") }}
	err := c.ensure(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "broken did not start") || !strings.Contains(err.Error(), c.LogFile("broken")) {
		t.Fatalf("err = %v, want component and log file named", err)
	}
	if !strings.Contains(err.Error(), "ends:\n    boom") {
		t.Fatalf("err = %v, want the log's last lines in it", err)
	}
	log, _ := os.ReadFile(c.LogFile("broken"))
	if !strings.Contains(string(log), "boom") {
		t.Fatalf("log = %q", log)
	}
}

func TestEnsureRestartsOnNewBinary(t *testing.T) {
	c, out := testCluster(t)
	bin := filepath.Join(t.TempDir(), "sleep")
	data, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &process{name: "sleeper", binary: bin, args: []string{"60"}}
	if err := c.ensure(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.stop(p) }()
	first := c.pid(p)
	if err := c.ensure(context.Background(), p); err != nil || c.pid(p) != first {
		t.Fatalf("unchanged binary restarted: %v", err)
	}
	// A rebuild: new content at the same path.
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.ensure(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if second := c.pid(p); second == 0 || second == first || !strings.Contains(out.String(), "binary or flags changed: restarting") {
		t.Fatalf("changed binary not restarted (pid %d -> %d):\n%s", first, second, out)
	}
}
