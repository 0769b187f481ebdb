package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/runtime/accesscred"
	"github.com/tekvirt/tekvirt/runtime/containerdisk"
	"github.com/tekvirt/tekvirt/runtime/launcher"
	"github.com/tekvirt/tekvirt/runtime/podvolume"
)

// maxRecordBytes bounds what the handler reads of a file its launcher
// Pod's tenant can write (the exit record).
const maxRecordBytes = 1 << 20

// podVolumes are a launcher Pod's volumes on this node. Its tenant can
// write them too, so the handler reaches them only through podvolume.
type podVolumes struct {
	vm, images podvolume.Dir
	// hotplug holds the mounts of hotplugged volumes (empty for a Pod
	// made before hotplug was served).
	hotplug podvolume.Dir
	// secrets are the Secret volumes of the VMI's accessCredentials, by
	// index: read-only for the Pod, so its tenant cannot change them.
	secrets []string
}

// podVolumesOf finds the volumes of vmi's launcher Pod on this node, by the
// Pod UID the controller noted in status.activePods; nil if it noted none
// here.
func (h *Handler) podVolumesOf(vmi *v1.VirtualMachineInstance) (*podVolumes, error) {
	uid := h.launcherPodUID(vmi)
	if uid == "" {
		return nil, nil
	}
	vm, err := launcherpod.EmptyDirOnNode(h.kubeletRoot(), uid, launcherpod.VMVolume)
	if err != nil {
		return nil, err
	}
	images, _ := launcherpod.EmptyDirOnNode(h.kubeletRoot(), uid, launcherpod.ImagesVolume)
	// What the handler writes in the vm volume (a containerDisk's
	// overlay) QEMU writes too, as the Pod's user.
	owner := &podvolume.Owner{UID: launcherpod.User, GID: launcherpod.Group}
	hotplug, _ := launcherpod.EmptyDirOnNode(h.kubeletRoot(), uid, launcherpod.HotplugVolume)
	if fi, err := os.Lstat(hotplug); err != nil || !fi.IsDir() {
		hotplug = ""
	}
	p := &podVolumes{vm: podvolume.Dir{Path: vm, Owner: owner}, images: podvolume.Dir{Path: images}, hotplug: podvolume.Dir{Path: hotplug}}
	for i := range vmi.Spec.AccessCredentials {
		secret, _ := launcherpod.SecretOnNode(h.kubeletRoot(), uid, launcherpod.AccessCredentialVolume(i))
		p.secrets = append(p.secrets, secret)
	}
	return p, nil
}

// launcherPodUID is the UID of vmi's launcher Pod on this node, as the
// controller noted it in status.activePods; "" if it noted none here.
func (h *Handler) launcherPodUID(vmi *v1.VirtualMachineInstance) types.UID {
	for uid, node := range vmi.Status.ActivePods {
		if node == h.Node {
			return uid
		}
	}
	return ""
}

func (h *Handler) kubeletRoot() string {
	if h.KubeletRoot == "" {
		return "/var/lib/kubelet"
	}
	return h.KubeletRoot
}

// errPodNotHere: the launcher Pod's volumes are not (yet) set up on this
// node; the kubelet makes them before it starts the Pod's container.
var errPodNotHere = errors.New("the launcher Pod's volumes are not on this node yet")

// ready checks that the Pod's volumes exist (a Secret volume once the
// kubelet wrote its content, which it links as ..data).
func (p *podVolumes) ready() error {
	for _, d := range []podvolume.Dir{p.vm, p.images} {
		if fi, err := os.Lstat(d.Path); err != nil || !fi.IsDir() {
			return fmt.Errorf("%w (%s)", errPodNotHere, d.Path)
		}
	}
	for _, s := range p.secrets {
		if _, err := os.Lstat(filepath.Join(s, "..data")); err != nil {
			return fmt.Errorf("%w (%s)", errPodNotHere, s)
		}
	}
	return nil
}

// readCredentials reads the Secrets of the VMI's accessCredentials from
// their Pod volumes.
func (p *podVolumes) readCredentials(creds []v1.AccessCredential) accesscred.Set {
	var roots []*os.Root
	defer func() {
		for _, r := range roots {
			_ = r.Close()
		}
	}()
	return accesscred.Read(creds, func(i int) (fs.FS, error) {
		if i >= len(p.secrets) {
			return nil, fmt.Errorf("the launcher Pod has no volume %s", launcherpod.AccessCredentialVolume(i))
		}
		r, err := os.OpenRoot(p.secrets[i])
		if err != nil {
			return nil, err
		}
		roots = append(roots, r)
		return r.FS(), nil
	})
}

// publish copies a file the handler wrote in its own VM directory into
// the Pod's vm volume and returns the launcher's path for it.
func (d vmDir) publish(local string) (string, error) {
	name := filepath.Base(local)
	if err := d.pod.vm.Install(local, name); err != nil {
		return "", err
	}
	return path.Join(launcherpod.VMDir, name), nil
}

// publishCapabilities copies the node's QEMU capabilities files into the
// Pod's vm volume and returns the launcher's paths for them.
func (h *Handler) publishCapabilities(d vmDir) ([]string, error) {
	if h.QEMUCapabilitiesDir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(h.QEMUCapabilitiesDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the QEMU capabilities: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !launcher.IsQEMUCapabilitiesFile(e.Name()) {
			continue
		}
		published, err := d.publish(filepath.Join(h.QEMUCapabilitiesDir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("publishing the QEMU capabilities: %w", err)
		}
		out = append(out, published)
	}
	return out, nil
}

// writePrelude has the launcher start its libvirtd while the VM is
// prepared: the node's QEMU capabilities published, and the prelude
// naming them written, once per launcher Pod; it returns the launcher's
// paths for them.
func (h *Handler) writePrelude(d vmDir) ([]string, error) {
	if caps, ok := readPodRecord[[]string](d, launcher.PreludeFile); ok {
		return caps, nil
	}
	caps, err := h.publishCapabilities(d)
	if err != nil {
		return nil, err
	}
	data, err := launcher.EncodePrelude(&launcher.Prelude{QEMUCapabilities: caps})
	if err != nil {
		return nil, err
	}
	if err := d.pod.vm.WriteFile(launcher.PreludeFile, data); err != nil {
		return nil, err
	}
	return caps, writePodRecord(d, launcher.PreludeFile, caps)
}

// podRecord is what the handler keeps, in its own VM directory, of a step
// it did in one launcher Pod's volumes (the Pod's copy is the tenant's to
// change): a step done for an earlier Pod of the VMI, such as the target
// of a migration that failed before its spec, is done again for the next.
type podRecord[T any] struct {
	Pod   string `json:"pod"`
	Value T      `json:"value"`
}

// readPodRecord is the record name of d's current Pod (ok false: none).
func readPodRecord[T any](d vmDir, name string) (T, bool) {
	var r podRecord[T]
	data, err := os.ReadFile(d.file(name))
	if err != nil || json.Unmarshal(data, &r) != nil || r.Pod != d.pod.vm.Path {
		var zero T
		return zero, false
	}
	return r.Value, true
}

// writePodRecord records v as name, for d's current Pod.
func writePodRecord[T any](d vmDir, name string, v T) error {
	data, err := json.Marshal(podRecord[T]{Pod: d.pod.vm.Path, Value: v})
	if err != nil {
		return err
	}
	return podvolume.Dir{Path: d.path}.WriteFile(name, data)
}

// launcherFile is the launcher's path for a file it makes in the VM
// directory (a socket, the console log).
func (d vmDir) launcherFile(name string) string {
	return path.Join(launcherpod.VMDir, name)
}

// imageView mounts a cached image's directory read-only into the Pod's
// images volume (the Pod sees the images its VM uses and no others) and
// returns a function from a path in the cache to the launcher's path for it.
func (d vmDir) imageView(im *containerdisk.Image) (func(string) string, error) {
	name := filepath.Base(im.Dir)
	if err := d.pod.images.MountReadOnly(im.Dir, name); err != nil {
		return nil, err
	}
	return func(p string) string {
		rel, err := filepath.Rel(im.Dir, p)
		if err != nil {
			return p
		}
		return path.Join(launcherpod.ImagesDir, name, filepath.ToSlash(rel))
	}, nil
}

// readExit is the launcher's exit record, nil while there is none.
func (d vmDir) readExit() (*launcher.Exited, error) {
	data, err := d.pod.vm.ReadFile(launcher.ExitFile, maxRecordBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	exit, err := launcher.DecodeExit(data)
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", launcher.ExitFile, d.pod.vm.Path, err)
	}
	return exit, nil
}

// client talks to the VM's launcher.
func (d vmDir) client() *launcher.Client {
	vm := d.pod.vm
	return launcher.NewClientDial(func(ctx context.Context) (net.Conn, error) {
		return vm.DialUnix(ctx, launcher.SocketFile)
	})
}

// writeSpec hands spec to the launcher and keeps a copy in the handler's
// own directory, which says the VM was launched and whose VM it is (both
// written whole, under a fresh name renamed into place).
func (d vmDir) writeSpec(spec *launcher.Spec) error {
	data, err := launcher.EncodeSpec(spec)
	if err != nil {
		return err
	}
	if err := d.pod.vm.WriteFile(launcher.SpecFile, data); err != nil {
		return err
	}
	return podvolume.Dir{Path: d.path}.WriteFile(launcher.SpecFile, data)
}

// unmountPodMounts undoes the handler's mounts in the Pod's volumes: the
// images imageView mounted and the hotplugged volumes.
func (d vmDir) unmountPodMounts() error {
	var errs []error
	if d.pod.images.Path != "" {
		for _, name := range d.images() {
			errs = append(errs, d.pod.images.Unmount(name))
		}
	}
	// The hotplugged volumes' mounts, which hold their claims on the node
	// as much as their attachment Pods do.
	if d.pod.hotplug.Path != "" {
		entries, _ := os.ReadDir(d.pod.hotplug.Path)
		for _, e := range entries {
			errs = append(errs, d.pod.hotplug.Unmount(e.Name()))
		}
	}
	return errors.Join(errs...)
}
