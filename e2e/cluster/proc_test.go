package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// fakeProc writes a /proc stand-in holding one process.
func fakeProc(t *testing.T, pid int, stat, cmdline string) procFS {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"stat": stat, "cmdline": cmdline} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return procFS(root)
}

// statLine is a /proc/<pid>/stat line of proc(5)'s shape with the given
// command name, state and start time (field 22).
func statLine(pid int, comm string, state byte, started uint64) string {
	return strconv.Itoa(pid) + " (" + comm + ") " + string(state) +
		" 1 4242 4242 0 -1 4194560 110 0 0 0 0 0 0 0 20 0 1 0 " +
		strconv.FormatUint(started, 10) + " 5771264 176 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
}

func TestPIDRecordIdentifiesProcess(t *testing.T) {
	const pid = 4242
	const argv = "/usr/bin/kubelet\x00--v=2\x00"
	for _, tc := range []struct {
		name    string
		stat    string
		cmdline string
		file    string
		want    int
	}{
		// The window the start-up race fell into: forked, inside execve,
		// command line not yet set.
		{"inside execve", statLine(pid, "tekvirt-up", 'R', 900), "", "4242 900\n", pid},
		{"running", statLine(pid, "kubelet", 'S', 900), argv, "4242 900\n", pid},
		{"command name with spaces and parens", statLine(pid, "a) (b", 'S', 900), argv, "4242 900\n", pid},
		{"PID reused by a later process", statLine(pid, "kubelet", 'S', 901), argv, "4242 900\n", 0},
		{"zombie", statLine(pid, "kubelet", 'Z', 900), "", "4242 900\n", 0},
		{"other PID", statLine(pid, "kubelet", 'S', 900), argv, "4243 900\n", 0},
		{"legacy file, same program", statLine(pid, "kubelet", 'S', 900), argv, "4242\n", pid},
		{"legacy file, other program", statLine(pid, "sh", 'S', 900), "/bin/sh\x00", "4242\n", 0},
		{"garbage file", statLine(pid, "kubelet", 'S', 900), argv, "pid=4242\n", 0},
		{"malformed stat", "4242 (kubelet S 1\n", argv, "4242 900\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := testCluster(t)
			c.proc = fakeProc(t, pid, tc.stat, tc.cmdline)
			if err := os.WriteFile(c.pidFile("kubelet"), []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := c.pid(&process{name: "kubelet", binary: "/home/x/bin/kubelet"}); got != tc.want {
				t.Fatalf("pid = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRecordPIDWritesStartTime(t *testing.T) {
	c, _ := testCluster(t)
	c.proc = fakeProc(t, 77, statLine(77, "x", 'R', 123456), "")
	if err := c.recordPID("x", 77); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(c.pidFile("x"))
	if err != nil || string(data) != "77 123456\n" {
		t.Fatalf("pid file = %q, %v", data, err)
	}
	if err := c.recordPID("y", 78); err == nil {
		t.Fatal("recording a PID with no process succeeded")
	}
}
