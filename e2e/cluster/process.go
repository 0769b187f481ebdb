package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// startMarker opens what one start of a component wrote to its log.
const startMarker = "=== tekvirt starting "

// process is one daemon the cluster runs on this machine.
type process struct {
	name   string
	binary string
	args   []string
	env    []string
	// ports are TCP addresses the process listens on; checked before a start
	// so that a port taken by something else gets a clear message.
	ports []string
	// ready returns nil once the process serves.
	ready func(ctx context.Context) error
	// readyTimeout bounds the wait for ready after a start.
	readyTimeout time.Duration
	// ns, when set, are the namespaces of the extra node the process runs in.
	ns *namespaces
	// configs are configuration files outside etc/ whose change restarts it.
	configs []string
	// user, when set, is who it runs as (root otherwise).
	user *syscall.Credential
}

// namespaces are an extra node's network and mount namespace files.
type namespaces struct{ net, mnt string }

// command is how p is started: in its node's namespaces through nsenter,
// which execs the binary, so the PID recorded is the binary's.
func (p *process) command() *exec.Cmd {
	if p.ns == nil {
		return exec.Command(p.binary, p.args...)
	}
	return exec.Command("nsenter", append([]string{"--net=" + p.ns.net, "--mount=" + p.ns.mnt, "--", p.binary}, p.args...)...)
}

func (c *Cluster) pidFile(name string) string { return filepath.Join(c.Home, "run", name+".pid") }

// LogFile is where the named component writes its output.
func (c *Cluster) LogFile(name string) string { return filepath.Join(c.Home, "logs", name+".log") }

// pid returns the PID of the named component when it is running, else 0.
// A PID reused by an unrelated process is never taken for ours: the PID
// file records the process's start time too.
func (c *Cluster) pid(p *process) int {
	data, err := os.ReadFile(c.pidFile(p.name))
	if err != nil {
		return 0
	}
	rec, err := parsePIDRecord(data)
	if err != nil || !alive(c.procReader(), rec, p.binary) {
		return 0
	}
	return rec.pid
}

// procReader is where c reads process facts: /proc unless a test set another.
func (c *Cluster) procReader() procReader {
	if c.proc == nil {
		return hostProc
	}
	return c.proc
}

// recordPID writes the PID file of a component just started as pid.
func (c *Cluster) recordPID(name string, pid int) error {
	st, err := c.procReader().stat(pid)
	if err != nil {
		return fmt.Errorf("%s: reading the start time of pid %d: %w", name, pid, err)
	}
	rec := pidRecord{pid: pid, started: st.started}
	if err := os.WriteFile(c.pidFile(name), []byte(rec.String()), 0o644); err != nil {
		return fmt.Errorf("%s: writing pid file: %w", name, err)
	}
	return nil
}

func (c *Cluster) sumFile(name string) string { return filepath.Join(c.Home, "run", name+".binsum") }

// binarySum identifies the content of a component's binary.
func binarySum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// configSum sums the contents of the files under etcDir that args name
// (kubeconfigs, which embed the client certificate, and config files), and
// of the files also lists wherever they are, so
// that a component whose identity or configuration changed restarts: a
// running one keeps the certificate it read at start.
func configSum(args []string, etcDir string, also ...string) (string, error) {
	h := sha256.New()
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if !strings.HasPrefix(a, etcDir+string(filepath.Separator)) {
			continue
		}
		data, err := os.ReadFile(a)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return "", err
		}
		fmt.Fprintf(h, "%s %x\n", a, sha256.Sum256(data))
	}
	for _, path := range also {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		fmt.Fprintf(h, "%s %x\n", path, sha256.Sum256(data))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ensure starts p unless it already runs its current binary with its
// current flags and configuration files, then waits until it is ready. A
// component whose binary, flags or configuration changed since it started
// (a rebuilt tekvirt, a new Kubernetes version, a moved directory, a
// reissued certificate) is restarted.
func (c *Cluster) ensure(ctx context.Context, p *process) error {
	start := time.Now()
	sum, err := binarySum(p.binary)
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", p.name, p.binary, err)
	}
	conf, err := configSum(p.args, c.path("etc"), p.configs...)
	if err != nil {
		return fmt.Errorf("%s: reading its configuration: %w", p.name, err)
	}
	sum += " " + strings.Join(p.args, " ") + " " + conf
	if pid := c.pid(p); pid != 0 {
		if old, _ := os.ReadFile(c.sumFile(p.name)); string(old) == sum {
			c.progress("%-24s running (pid %d)", p.name, pid)
			return nil
		}
		c.progress("%-24s binary, flags or configuration changed: restarting (pid %d)", p.name, pid)
		if err := c.stop(p); err != nil {
			return err
		}
	}
	for _, addr := range p.ports {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s: port %s is already in use by another process; stop it or free the port: %w", p.name, addr, err)
		}
		l.Close()
	}
	logPath := c.LogFile(p.name)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: opening log: %w", p.name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n"+startMarker+"%s at %s: %s %s\n", p.name, time.Now().Format(time.RFC3339), p.binary, strings.Join(p.args, " "))
	cmd := p.command()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: p.user}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: starting %s: %w (log: %s)", p.name, p.binary, err, logPath)
	}
	pid := cmd.Process.Pid
	// Not yet waited for, so the child's /proc entry stays even if it has
	// already exited.
	if err := c.recordPID(p.name, pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	if err := os.WriteFile(c.sumFile(p.name), []byte(sum), 0o644); err != nil {
		return fmt.Errorf("%s: writing binary sum: %w", p.name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := waitReady(ctx, p, exited); err != nil {
		return fmt.Errorf("%s did not start: %w; see %s, which ends:\n%s", p.name, err, logPath, logTail(logPath, 8))
	}
	c.progress("%-24s started (pid %d) in %s", p.name, pid, since(start))
	return nil
}

// logTail returns the last n lines the latest start wrote to the log at
// path, indented, so that a failed start shows its cause where it is
// reported (a CI log, say) and not only in a file on the machine.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	text := string(data)
	if i := strings.LastIndex(text, startMarker); i >= 0 {
		if nl := strings.IndexByte(text[i:], '\n'); nl >= 0 {
			text = text[i+nl+1:]
		}
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

func waitReady(ctx context.Context, p *process, exited <-chan error) error {
	timeout := p.readyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("exited during start-up: %w", err)
		default:
		}
		if p.ready == nil {
			return nil
		}
		if last = p.ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, last)
		case err := <-exited:
			return fmt.Errorf("exited during start-up: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stop terminates the named component if Up started it and it still runs.
func (c *Cluster) stop(p *process) error {
	pid := c.pid(p)
	defer os.Remove(c.pidFile(p.name))
	defer os.Remove(c.sumFile(p.name))
	if pid == 0 {
		return nil
	}
	if err := terminate(pid, 15*time.Second); err != nil {
		return fmt.Errorf("stopping %s (pid %d): %w", p.name, pid, err)
	}
	c.progress("%-24s stopped", p.name)
	return nil
}

// terminate sends SIGTERM to pid's process group, then SIGKILL after grace.
func terminate(pid int, grace time.Duration) error {
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if exited(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	for end := time.Now().Add(5 * time.Second); !exited(pid) && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// exited reports whether pid is gone or a zombie with no thread left. A Go
// program's main thread can be a zombie while its other threads still run
// and hold its sockets, so a zombie alone is not enough: its ports would
// still be taken when the component is started again.
func exited(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	st, err := hostProc.stat(pid)
	if err != nil {
		return true
	}
	return st.state == 'Z' && hostProc.threads(pid) <= 1
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }
