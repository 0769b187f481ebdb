package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procReader reads what identifies a process; tests stand in for /proc.
type procReader interface {
	stat(pid int) (procStat, error)
	argv0(pid int) string
}

// procFS reads the facts of processes from a proc filesystem mounted at its
// root.
type procFS string

const hostProc procFS = "/proc"

// procStat is what /proc/<pid>/stat tells about a process that this package
// needs: its state letter and when it started (clock ticks since boot).
type procStat struct {
	state   byte
	started uint64
}

// errNoProcess means the PID names no process (or one that cannot be read).
var errNoProcess = errors.New("no such process")

func (p procFS) file(pid int, name string) string {
	return filepath.Join(string(p), strconv.Itoa(pid), name)
}

// stat reads pid's state and start time. Both are set when the process is
// forked, so they are there even while it is still inside execve, unlike
// its command line, which reads empty until the new program's arguments are
// in place.
func (p procFS) stat(pid int) (procStat, error) {
	data, err := os.ReadFile(p.file(pid, "stat"))
	if err != nil {
		return procStat{}, fmt.Errorf("pid %d: %w", pid, errNoProcess)
	}
	// The command name in parentheses may hold spaces and ")", so fields are
	// counted from the last ")": state is field 3 of proc(5), starttime 22.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("pid %d: malformed stat %q", pid, data)
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("pid %d: malformed stat %q", pid, data)
	}
	started, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("pid %d: start time in stat: %w", pid, err)
	}
	return procStat{state: fields[0][0], started: started}, nil
}

// argv0 returns the program pid was started as, or "" when its command line
// is empty (a kernel thread, a zombie, or a process still inside execve).
func (p procFS) argv0(pid int) string {
	cmdline, err := os.ReadFile(p.file(pid, "cmdline"))
	if err != nil {
		return ""
	}
	arg, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(arg)
}

// threads returns how many threads pid still has, or 0 when it is gone.
func (p procFS) threads(pid int) int {
	status, err := os.ReadFile(p.file(pid, "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if n, ok := strings.CutPrefix(line, "Threads:"); ok {
			v, _ := strconv.Atoi(strings.TrimSpace(n))
			return v
		}
	}
	return 0
}

// pidRecord is what a PID file holds: the PID and the start time of the
// process it was written for. Together they name one process for good: a
// PID reused later belongs to a process with another start time.
type pidRecord struct {
	pid     int
	started uint64
	// legacy marks a file from before start times were recorded (PID only).
	legacy bool
}

func (r pidRecord) String() string { return fmt.Sprintf("%d %d\n", r.pid, r.started) }

func parsePIDRecord(data []byte) (pidRecord, error) {
	fields := strings.Fields(string(data))
	if len(fields) == 0 || len(fields) > 2 {
		return pidRecord{}, fmt.Errorf("PID file %q: want \"PID STARTTIME\"", data)
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return pidRecord{}, fmt.Errorf("PID file %q: bad PID", data)
	}
	if len(fields) == 1 {
		return pidRecord{pid: pid, legacy: true}, nil
	}
	started, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return pidRecord{}, fmt.Errorf("PID file %q: bad start time", data)
	}
	return pidRecord{pid: pid, started: started}, nil
}

// alive reports whether the process r was written for still runs: same PID,
// same start time, not a zombie. A PID file without a start time (written
// by an older tekvirt) falls back to the program name, which is safe there
// because such a process started long ago and is past its execve.
func alive(p procReader, r pidRecord, binary string) bool {
	st, err := p.stat(r.pid)
	if err != nil || st.state == 'Z' {
		return false
	}
	if r.legacy {
		return filepath.Base(p.argv0(r.pid)) == filepath.Base(binary)
	}
	return st.started == r.started
}
