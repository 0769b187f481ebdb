package handler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/containerdisk"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// LauncherState is what the node knows of a VMI's launcher.
type LauncherState int

const (
	// NotStarted means the VM was not prepared on this node.
	NotStarted LauncherState = iota
	// Running means the VM was handed to its launcher, which has not
	// recorded an end.
	Running
	// Exited means the launcher recorded how its domain ended.
	Exited
	// Lost means the VMI runs on this node, which knows nothing of it.
	Lost
)

func (s LauncherState) String() string {
	return [...]string{"NotStarted", "Running", "Exited", "Lost"}[s]
}

// vmDir is the handler's own directory of one VMI on the node, named by
// its UID (a copy of the spec, the images the VM uses), and the volumes of
// the VMI's launcher Pod (empty until the controller noted the Pod on
// this node).
type vmDir struct {
	path string
	pod  *podVolumes
}

func (h *Handler) dirOf(uid types.UID) vmDir {
	return vmDir{path: filepath.Join(h.Root, "vms", string(uid)), pod: &podVolumes{}}
}

// dirFor is vmi's directory, with its launcher Pod's volumes.
func (h *Handler) dirFor(vmi *v1.VirtualMachineInstance) (vmDir, error) {
	d := h.dirOf(vmi.UID)
	pod, err := h.podVolumesOf(vmi)
	if pod != nil {
		d.pod = pod
	}
	return d, err
}

func (d vmDir) file(name string) string { return filepath.Join(d.path, name) }

// state: NotStarted until the handler wrote the spec, then Running until
// the launcher records an end.
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
	return Running, nil, nil
}

// stop asks the launcher to shut its guest down and waits, up to grace and
// a margin, for it to record how the VM ended; its Pod ends with it.
func (d vmDir) stop(ctx context.Context, grace time.Duration) error {
	if d.pod.ready() != nil {
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

// remove undoes the image mounts in the launcher Pod and deletes the
// directory.
func (d vmDir) remove() error {
	if err := d.unmountPodMounts(); err != nil {
		return err
	}
	if err := os.RemoveAll(d.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", d.path, err)
	}
	return nil
}

// create makes the directory, the handler's alone.
func (d vmDir) create() error { return os.MkdirAll(d.path, 0o700) }

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
