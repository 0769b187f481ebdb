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
	if c.pid(p) != 0 || !exited(pid) {
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

func TestPIDWithAnotherStartTimeIsNotOurs(t *testing.T) {
	c, _ := testCluster(t)
	st, err := hostProc.stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Our own PID, recorded with the start time a process that had this PID
	// before us would have had.
	rec := pidRecord{pid: os.Getpid(), started: st.started - 1}
	if err := os.WriteFile(c.pidFile("self"), []byte(rec.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid := c.pid(&process{name: "self", binary: os.Args[0]}); pid != 0 {
		t.Fatalf("pid %d with another start time taken for the component", pid)
	}
	rec.started = st.started
	if err := os.WriteFile(c.pidFile("self"), []byte(rec.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid := c.pid(&process{name: "self", binary: os.Args[0]}); pid != os.Getpid() {
		t.Fatalf("pid = %d, want %d (same PID and start time)", pid, os.Getpid())
	}
}

// insideExec is /proc as seen while every process is still inside execve:
// forked, its stat there, its command line not yet set.
type insideExec struct{ procFS }

func (insideExec) argv0(int) string { return "" }

// TestEnsureSeesProcessInsideExec: right after cmd.Start the child is often
// still inside execve, where its command line reads empty (about half of
// all reads right after Start here). A second ensure must find it all the
// same and leave it alone, so the test holds every process in that window.
func TestEnsureSeesProcessInsideExec(t *testing.T) {
	c, out := testCluster(t)
	c.proc = insideExec{hostProc}
	for i := range 5 {
		p := &process{name: "sleeper-" + strconv.Itoa(i), binary: "/bin/sleep", args: []string{"60"}}
		if err := c.ensure(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		first := c.pid(p)
		out.Reset()
		err := c.ensure(context.Background(), p)
		second := c.pid(p)
		// The rule before start times were recorded (a PID file with the PID
		// only, checked by program name) loses the process in this window.
		legacy := os.WriteFile(c.pidFile(p.name), []byte(strconv.Itoa(first)+"\n"), 0o644)
		byName := c.pid(p)
		_ = os.WriteFile(c.pidFile(p.name), []byte(pidRecord{pid: first, started: mustStart(t, first)}.String()), 0o644)
		_ = c.stop(p)
		if err != nil || first == 0 || second != first || !strings.Contains(out.String(), "running (pid") {
			t.Fatalf("start %d: second ensure did not find the process (pid %d -> %d, err %v):\n%s", i, first, second, err, out)
		}
		if legacy != nil || byName != 0 {
			t.Fatalf("start %d: the program-name rule found pid %d inside execve (%v); the test no longer holds the window open", i, byName, legacy)
		}
	}
}

func mustStart(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := hostProc.stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.started
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
	if second := c.pid(p); second == 0 || second == first || !strings.Contains(out.String(), "binary, flags or configuration changed: restarting") {
		t.Fatalf("changed binary not restarted (pid %d -> %d):\n%s", first, second, out)
	}
}

func TestConfigSumFollowsTheFilesArgsName(t *testing.T) {
	etc := t.TempDir()
	kubeconfig, outside := filepath.Join(etc, "handler.kubeconfig"), filepath.Join(t.TempDir(), "other.yaml")
	for _, p := range []string{kubeconfig, outside} {
		if err := os.WriteFile(p, []byte("cert: A"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--kubeconfig", kubeconfig, "--config=" + filepath.Join(etc, "absent.yaml"), "--other=" + outside}
	first, err := configSum(args, etc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if again, _ := configSum(args, etc); again != first {
		t.Error("a file outside the etc directory changed the sum")
	}
	if err := os.WriteFile(kubeconfig, []byte("cert: B"), 0o600); err != nil {
		t.Fatal(err)
	}
	if reissued, _ := configSum(args, etc); reissued == first {
		t.Error("a reissued certificate in the kubeconfig left the sum unchanged: the component would keep its old identity")
	}
	asFlag, _ := configSum([]string{"--kubeconfig=" + kubeconfig}, etc)
	separate, _ := configSum([]string{"--kubeconfig", kubeconfig}, etc)
	none, _ := configSum(nil, etc)
	if asFlag != separate || asFlag == none {
		t.Error("--flag=path is not followed as --flag path is")
	}
}
