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
//
// A launcher Pod runs it unprivileged (launcherpod.User, no capabilities):
// libvirt then serves a session, whose configuration, cache and run
// files it keeps under $HOME and the XDG directories, all set to RunDir.
// Run as root (as the tests on a bare machine do) it is libvirt's
// privileged daemon, which reads qemu.conf from ConfDir only.
type Libvirtd struct {
	// Binary is the daemon; empty is /usr/sbin/libvirtd.
	Binary string
	// ConfDir holds qemu.conf for a privileged libvirtd; empty is
	// /etc/libvirt.
	ConfDir string
	// RunDir holds the daemon's configuration and socket and, run
	// unprivileged, everything else it writes.
	RunDir string

	cmd *exec.Cmd
	// done closes when the daemon has exited, with waitErr set.
	done    chan struct{}
	waitErr error
}

// qemuConf leaves QEMU in the Pod's cgroup and mount namespace, with the
// files as the handler made them, and writes its output to a file instead
// of virtlogd. A privileged daemon is told to run QEMU as root in the Pod
// (the Pod is the boundary); an unprivileged one runs it as itself.
const qemuConf = `dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
`

const qemuConfRoot = `user = "root"
group = "root"
`

// libvirtdConf serves only the launcher, on a socket in the run directory.
const libvirtdConf = `unix_sock_dir = %q
unix_sock_rw_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
`

// privileged: libvirtd run by root is the system daemon, by anyone else
// a session daemon.
func privileged() bool { return os.Geteuid() == 0 }

// socket is the daemon's read-write socket.
func (l *Libvirtd) socket() string { return filepath.Join(l.RunDir, "libvirt-sock") }

// URI is how the launcher connects to the daemon.
func (l *Libvirtd) URI() string {
	if privileged() {
		return "qemu:///system?socket=" + l.socket()
	}
	return "qemu:///session?socket=" + l.socket()
}

// CapabilitiesCache is where the daemon keeps what it probed of each QEMU
// binary (QEMUCapabilitiesCache for a privileged one).
func (l *Libvirtd) CapabilitiesCache() string {
	if privileged() {
		return QEMUCapabilitiesCache
	}
	return SessionCapabilitiesCache(l.RunDir)
}

// SessionCapabilitiesCache is the capabilities cache of an unprivileged
// libvirtd run in runDir ($XDG_CACHE_HOME/libvirt/qemu/cache/capabilities).
func SessionCapabilitiesCache(runDir string) string {
	return filepath.Join(runDir, "cache", "libvirt", "qemu", "cache", "capabilities")
}

// env is the daemon's environment: run unprivileged, its home and XDG
// directories are in RunDir, the one place of the Pod it may write.
func (l *Libvirtd) env() []string {
	if privileged() {
		return os.Environ()
	}
	return append(os.Environ(),
		"HOME="+l.RunDir,
		"XDG_CONFIG_HOME="+filepath.Join(l.RunDir, "config"),
		"XDG_CACHE_HOME="+filepath.Join(l.RunDir, "cache"),
		"XDG_RUNTIME_DIR="+filepath.Join(l.RunDir, "run"),
	)
}

// writeQEMUConf writes qemu.conf where the daemon reads it.
func (l *Libvirtd) writeQEMUConf() error {
	dir, conf := l.ConfDir, qemuConfRoot+qemuConf
	switch {
	case !privileged():
		dir, conf = filepath.Join(l.RunDir, "config", "libvirt"), qemuConf
	case dir == "":
		dir = "/etc/libvirt"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "qemu.conf"), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("writing qemu.conf: %w", err)
	}
	return nil
}

// Start writes the configuration, starts the daemon (its output to log) and
// waits until its socket accepts connections.
func (l *Libvirtd) Start(ctx context.Context, log io.Writer) error {
	bin := l.Binary
	if bin == "" {
		bin = "/usr/sbin/libvirtd"
	}
	if err := os.MkdirAll(l.RunDir, 0o700); err != nil {
		return err
	}
	if err := l.writeQEMUConf(); err != nil {
		return err
	}
	conf := filepath.Join(l.RunDir, "libvirtd.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(libvirtdConf, l.RunDir)), 0o600); err != nil {
		return fmt.Errorf("writing libvirtd.conf: %w", err)
	}
	l.cmd = exec.Command(bin, "-f", conf)
	l.cmd.Env = l.env()
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
// the launcher's stderr); stop ends it.
func startLibvirtd(ctx context.Context, l *Libvirtd, log *slog.Logger) (stop func(), err error) {
	start := time.Now()
	if err := l.Start(ctx, os.Stderr); err != nil {
		return nil, err
	}
	log.Info("libvirtd started", "uri", l.URI(), "took", time.Since(start).Round(time.Millisecond).String())
	return l.Stop, nil
}
