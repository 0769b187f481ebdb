package launcher

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Libvirtd is a libvirt daemon of the launcher's own, in its Pod: QEMU runs
// as its child, so the VM lives in the Pod's cgroup and network namespace.
// It keeps no state beyond the Pod and manages nothing but QEMU.
type Libvirtd struct {
	// Binary is the daemon; empty is /usr/sbin/libvirtd.
	Binary string
	// ConfDir holds qemu.conf, which a privileged libvirtd reads only from
	// there; empty is /etc/libvirt.
	ConfDir string
	// RunDir holds the daemon's configuration and socket.
	RunDir string

	cmd *exec.Cmd
	// done closes when the daemon has exited, with waitErr set.
	done    chan struct{}
	waitErr error
}

// qemuConf runs QEMU as root inside the Pod (the Pod is the boundary),
// leaves it in the Pod's cgroup and mount namespace, and writes its output
// to a file instead of virtlogd.
const qemuConf = `user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
`

// libvirtdConf serves only the launcher, on a socket in the run directory.
const libvirtdConf = `unix_sock_dir = %q
unix_sock_rw_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
`

// socket is the daemon's read-write socket.
func (l *Libvirtd) socket() string { return filepath.Join(l.RunDir, "libvirt-sock") }

// URI is how the launcher connects to the daemon.
func (l *Libvirtd) URI() string { return "qemu:///system?socket=" + l.socket() }

// Start writes the configuration, starts the daemon (its output to log) and
// waits until its socket accepts connections.
func (l *Libvirtd) Start(ctx context.Context, log io.Writer) error {
	bin, confDir := l.Binary, l.ConfDir
	if bin == "" {
		bin = "/usr/sbin/libvirtd"
	}
	if confDir == "" {
		confDir = "/etc/libvirt"
	}
	if err := os.MkdirAll(l.RunDir, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(confDir, "qemu.conf"), []byte(qemuConf), 0o644); err != nil {
		return fmt.Errorf("writing qemu.conf: %w", err)
	}
	conf := filepath.Join(l.RunDir, "libvirtd.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(libvirtdConf, l.RunDir)), 0o600); err != nil {
		return fmt.Errorf("writing libvirtd.conf: %w", err)
	}
	l.cmd = exec.Command(bin, "-f", conf)
	l.cmd.Stdout, l.cmd.Stderr = log, log
	// Its own process group: a signal to the launcher reaches libvirtd
	// only when the launcher passes it on, after the guest stopped.
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := l.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	l.done = make(chan struct{})
	go func() {
		l.waitErr = l.cmd.Wait()
		close(l.done)
	}()
	for {
		if c, err := net.Dial("unix", l.socket()); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-l.done:
			return fmt.Errorf("%s exited before serving: %w", bin, l.waitErr)
		case <-ctx.Done():
			l.Stop()
			return fmt.Errorf("waiting for %s: %w", bin, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends the daemon (QEMU, its child, has ended before).
func (l *Libvirtd) Stop() {
	if l.cmd == nil || l.cmd.Process == nil {
		return
	}
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.done:
	case <-time.After(10 * time.Second):
		_ = l.cmd.Process.Kill()
		<-l.done
	}
}

// startLibvirtd starts a daemon for this launcher in runDir (its output on
// the launcher's stderr) and returns its URI; stop ends it.
func startLibvirtd(ctx context.Context, runDir string, log *slog.Logger) (uri string, stop func(), err error) {
	l := &Libvirtd{RunDir: runDir}
	start := time.Now()
	if err := l.Start(ctx, os.Stderr); err != nil {
		return "", nil, err
	}
	log.Info("libvirtd started", "uri", l.URI(), "took", time.Since(start).Round(time.Millisecond).String())
	return l.URI(), l.Stop, nil
}
