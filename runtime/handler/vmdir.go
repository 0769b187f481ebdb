package handler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/containerdisk"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// LauncherState is what the node knows of a VMI's launcher.
type LauncherState int

const (
	// NotStarted means no launcher was started for this VMI on this node.
	NotStarted LauncherState = iota
	// Running means the launcher process is alive.
	Running
	// Exited means the launcher recorded how its domain ended.
	Exited
	// Lost means the launcher is gone without a record (killed).
	Lost
)

func (s LauncherState) String() string {
	return [...]string{"NotStarted", "Running", "Exited", "Lost"}[s]
}

// vmDir is the handler's node directory of one VMI, named by its UID, and,
// for a VMI in a launcher Pod, that Pod's volumes (nil until the
// controller noted the Pod on this node).
type vmDir struct {
	path string
	pod  *podVolumes
}

func (h *Handler) dirOf(uid types.UID) vmDir {
	return vmDir{path: filepath.Join(h.Root, "vms", string(uid))}
}

// dirFor is vmi's directory, with its launcher Pod's volumes if it has one.
func (h *Handler) dirFor(vmi *v1.VirtualMachineInstance) (vmDir, error) {
	d := h.dirOf(vmi.UID)
	if !InLauncherPod(vmi) {
		return d, nil
	}
	var err error
	d.pod, err = h.podVolumesOf(vmi)
	if d.pod == nil && err == nil {
		d.pod = &podVolumes{} // not here yet: ready() says so
	}
	return d, err
}

func (d vmDir) file(name string) string { return filepath.Join(d.path, name) }

// pid is the launcher's process id, or 0 if none was recorded.
func (d vmDir) pid() int {
	data, err := os.ReadFile(d.file(launcher.PIDFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// state inspects the directory and the launcher process.
func (d vmDir) state() (LauncherState, *launcher.Exited, error) {
	if _, err := os.Stat(d.file(launcher.SpecFile)); os.IsNotExist(err) {
		return NotStarted, nil, nil
	}
	exit, err := d.readExit()
	if err != nil {
		return Lost, nil, err
	}
	if exit != nil {
		return Exited, exit, nil
	}
	pid := d.pid()
	if pid == 0 {
		// Written, not yet started by the launcher (or in its Pod, where
		// no PID is noted): it is starting or running.
		return Running, nil, nil
	}
	if d.alive(pid) {
		return Running, nil, nil
	}
	return Lost, nil, nil
}

// alive reports whether pid is a live (not zombie) launcher of this dir;
// a recycled PID of another program does not count.
func (d vmDir) alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return bytes.Contains(cmdline, []byte("tekvirt-launcher")) && bytes.Contains(cmdline, []byte(d.path))
}

// start runs the launcher in its own session, so that it outlives the
// handler, and reaps it if it ends while this handler still runs.
func (h *Handler) startLauncher(d vmDir) error {
	logf, err := os.OpenFile(d.file(launcher.LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(h.LauncherBinary, "--dir", d.path)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", h.LauncherBinary, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// stop asks the launcher to shut its guest down within grace and waits for
// it to exit (grace plus a margin); a launcher that does not answer gets
// SIGTERM, then SIGKILL.
func (d vmDir) stop(ctx context.Context, grace time.Duration) error {
	pid := d.pid()
	if pid == 0 {
		return d.stopInPod(ctx, grace)
	}
	if !d.alive(pid) {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := d.client().Shutdown(cctx, grace)
	cancel()
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace + 15*time.Second)
	for d.alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("launcher %d did not stop within %s; killed", pid, grace+15*time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// stopInPod asks a launcher that runs in its Pod (it records no PID on the
// node) to shut its guest down and waits, up to grace and a margin, for it
// to record how the VM ended; the Pod ends with it.
func (d vmDir) stopInPod(ctx context.Context, grace time.Duration) error {
	if d.pod == nil || d.pod.ready() != nil {
		return nil // never started, or gone
	}
	if ex, _ := d.readExit(); ex != nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := d.client().Shutdown(cctx, grace)
	cancel()
	if err != nil {
		return nil // nothing answers: its Pod is gone
	}
	deadline := time.Now().Add(grace + 15*time.Second)
	for {
		if ex, _ := d.readExit(); ex != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the launcher of %s did not stop within %s", d.path, grace+15*time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// remove deletes the directory, the launcher's cgroup and the image
// mounts in its Pod.
func (d vmDir) remove() error {
	if err := d.unmountImages(); err != nil {
		return err
	}
	launcher.RemoveCgroup(filepath.Base(d.path))
	if err := os.RemoveAll(d.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", d.path, err)
	}
	return nil
}

// create makes the directory, owned by the user QEMU runs as, which binds
// the agent and console sockets in it.
func (d vmDir) create(qemuUser string) error {
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return err
	}
	if qemuUser == "" {
		return nil
	}
	u, err := user.Lookup(qemuUser)
	if err != nil {
		return fmt.Errorf("looking up the QEMU user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(d.path, uid, gid)
}

// imagesFile lists, one per line, the cached containerDisks (digest
// directory names) the VM uses, so that the cache keeps them.
const imagesFile = "images"

// useImage notes that the VM uses im.
func (d vmDir) useImage(im *containerdisk.Image) error {
	name := filepath.Base(im.Dir)
	if slices.Contains(d.images(), name) {
		return nil
	}
	f, err := os.OpenFile(d.file(imagesFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, name); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// images lists the cached images the VM uses.
func (d vmDir) images() []string {
	data, err := os.ReadFile(d.file(imagesFile))
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}
