package handler

import (
	"context"
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/contracts/vmisubset"
	"github.com/tekvirt/tekvirt/runtime/cloudinit"
	"github.com/tekvirt/tekvirt/runtime/containerdisk"
	"github.com/tekvirt/tekvirt/runtime/diskfile"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// pvcDiskFile is the disk image on a filesystem PVC, as in KubeVirt and CDI.
const pvcDiskFile = "disk.img"

// permanentError marks a preparation failure that retrying cannot fix (an
// image that does not exist); the VMI fails instead of waiting.
type permanentError struct {
	reason string
	err    error
}

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// preparedFile records what prepare made of the VM's volumes for its
// launcher Pod: the disks are prepared once, while the kubelet still
// starts the Pod, and the network once the launcher answers, without
// preparing the disks again at each look until then.
const preparedFile = "prepared.json"

// prepareOnce is prepare's result, from preparedFile after the first time
// for the same Pod.
func (h *Handler) prepareOnce(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (domain.Options, error) {
	if opts, ok := readPodRecord[domain.Options](d, preparedFile); ok {
		return opts, nil
	}
	opts, err := h.prepare(ctx, vmi, d)
	if err != nil {
		return opts, err
	}
	return opts, writePodRecord(d, preparedFile, opts)
}

// prepare turns the VMI's volumes into files in d and returns the domain
// options that point at them.
func (h *Handler) prepare(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (domain.Options, error) {
	opts := domain.Options{
		KVM:          h.KVM,
		Volumes:      map[string]domain.Volume{},
		AgentSocket:  d.launcherFile("agent.sock"),
		SerialSocket: d.launcherFile(serialSocket),
		SerialLog:    d.launcherFile("serial.log"),
		VNCSocket:    d.launcherFile(vncSocket),
	}
	cache := h.images()
	if err := os.MkdirAll(cache.Dir, 0o755); err != nil {
		return opts, err
	}
	for i, vol := range vmi.Spec.Volumes {
		if vmisubset.IsHotplug(vol) {
			continue // attached once the domain runs (hotplug.go)
		}
		v, err := h.prepareVolume(ctx, vmi, i, d, cache)
		if err != nil {
			return opts, err
		}
		if v != nil {
			opts.Volumes[vol.Name] = *v
		}
	}
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil && fw.KernelBoot.Container != nil {
		c := fw.KernelBoot.Container
		var paths []string
		for _, p := range []string{c.KernelPath, c.InitrdPath} {
			if p != "" {
				paths = append(paths, p)
			}
		}
		im, view, err := fetch(ctx, c.Image, cache, d, "spec.domain.firmware.kernelBoot.container", paths...)
		if err != nil {
			return opts, err
		}
		if c.KernelPath != "" {
			opts.Kernel = view(im.Path(c.KernelPath))
		}
		if c.InitrdPath != "" {
			opts.Initrd = view(im.Path(c.InitrdPath))
		}
	}
	return opts, nil
}

func (h *Handler) prepareVolume(ctx context.Context, vmi *v1.VirtualMachineInstance, i int, d vmDir, cache containerdisk.Cache) (*domain.Volume, error) {
	vol := vmi.Spec.Volumes[i]
	field := fmt.Sprintf("spec.volumes[%d]", i)
	switch {
	case vol.ContainerDisk != nil:
		im, view, err := fetch(ctx, vol.ContainerDisk.Image, cache, d, field+".containerDisk", pathOrNone(vol.ContainerDisk.Path)...)
		if err != nil {
			return nil, err
		}
		base := im.Path(vol.ContainerDisk.Path)
		if vol.ContainerDisk.Path == "" {
			if base, err = im.Disk(); err != nil {
				return nil, &permanentError{reason: "ContainerDiskInvalid", err: fmt.Errorf("%s (volume %q): %w", field, vol.Name, err)}
			}
		}
		// Files are named by the volume's index, never its name: a name is
		// user input and must not become a path.
		overlay := d.file(fmt.Sprintf("disk-%d.qcow2", i))
		if _, err := os.Stat(overlay); os.IsNotExist(err) {
			err := containerdisk.Overlay(ctx, base, overlay, view(base))
			if errors.Is(err, containerdisk.ErrNotSelfContained) {
				return nil, &permanentError{reason: "ContainerDiskInvalid", err: fmt.Errorf("%s (volume %q) image %s: %w", field, vol.Name, vol.ContainerDisk.Image, err)}
			}
			if err != nil {
				return nil, err
			}
		}
		published, err := d.publish(overlay)
		if err != nil {
			return nil, err
		}
		return &domain.Volume{Path: published, Format: "qcow2"}, nil
	case vol.PersistentVolumeClaim != nil:
		return h.claimDisk(ctx, vmi, vol.PersistentVolumeClaim.ClaimName, field+".persistentVolumeClaim", vol.PersistentVolumeClaim.ReadOnly, i)
	case vol.DataVolume != nil:
		return h.claimDisk(ctx, vmi, vol.DataVolume.Name, field+".dataVolume", false, i)
	case vol.CloudInitNoCloud != nil:
		seed, err := cloudinit.FromVolume(vmi, i, d.pod.readCredentials(vmi.Spec.AccessCredentials).CloudInit)
		if err != nil {
			return nil, &permanentError{reason: "CloudInitInvalid", err: err}
		}
		path := d.file(fmt.Sprintf("cloudinit-%d.img", i))
		if err := seed.WriteImage(ctx, path); err != nil {
			return nil, fmt.Errorf("%s (volume %q): %w", field, vol.Name, err)
		}
		published, err := d.publish(path)
		if err != nil {
			return nil, err
		}
		return &domain.Volume{Path: published, Format: "raw"}, nil
	}
	return nil, nil // unsupported sources are named by domain.Convert
}

func pathOrNone(p string) []string {
	if p == "" {
		return nil
	}
	return []string{p}
}

// fetch pulls a container image for the VM of d, notes in d that the VM
// uses it (so the cache keeps it), makes it visible to the launcher (view
// maps a path in the cache to the launcher's) and classifies its failures.
func fetch(ctx context.Context, ref string, cache containerdisk.Cache, d vmDir, field string, paths ...string) (im *containerdisk.Image, view func(string) string, err error) {
	im, err = cache.Fetch(ctx, ref, paths...)
	switch {
	case errors.Is(err, containerdisk.ErrNotFound):
		return nil, nil, &permanentError{reason: "ContainerDiskNotFound", err: fmt.Errorf("%s: %w", field, err)}
	case errors.Is(err, containerdisk.ErrTooLarge):
		return nil, nil, &permanentError{reason: "ContainerDiskTooLarge", err: fmt.Errorf("%s: %w", field, err)}
	case err != nil:
		return nil, nil, fmt.Errorf("%s: %w", field, err)
	}
	if err := d.useImage(im); err != nil {
		return nil, nil, err
	}
	view, err = d.imageView(im)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", field, err)
	}
	return im, view, nil
}

// claimDisk finds disk.img on the bound PersistentVolume of a claim (volume
// i of the VMI), as the launcher Pod mounts it, and makes it the launcher's.
func (h *Handler) claimDisk(ctx context.Context, vmi *v1.VirtualMachineInstance, claim, field string, readOnly bool, i int) (*domain.Volume, error) {
	f, err := h.openClaimDisk(ctx, vmi.Namespace, claim, field, readOnly, h.launcherPodUID(vmi))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return &domain.Volume{Path: f.Name(), Format: "raw", ReadOnly: readOnly, FDGroup: fmt.Sprintf("volume-%d", i)}, nil
}

// openClaimDisk opens disk.img of a claim (claimDir) as the launcher will
// open it: no symlinks, a regular file or block device only (anything
// that can write the claim can put something else there). The file is
// given to the launcher Pod's user.
func (h *Handler) openClaimDisk(ctx context.Context, ns, claim, field string, readOnly bool, podUID types.UID) (*os.File, error) {
	dir, err := h.claimDir(ctx, ns, claim, field, podUID)
	if err != nil {
		return nil, err
	}
	return openDisk(dir, ns, claim, field, readOnly)
}

// openDisk opens disk.img in dir, the directory of claim ns/claim, as
// openClaimDisk does.
func openDisk(dir, ns, claim, field string, readOnly bool) (*os.File, error) {
	f, err := diskfile.Open(dir, pvcDiskFile, !readOnly)
	if errors.Is(err, diskfile.ErrUnsafe) {
		return nil, &permanentError{reason: "VolumeInvalid", err: fmt.Errorf("%s: PersistentVolumeClaim %s/%s: %w", field, ns, claim, err)}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: PersistentVolumeClaim %s/%s holds no usable %s yet: %w", field, ns, claim, pvcDiskFile, err)
	}
	// Whoever wrote the disk (a task's user, an importer's), the launcher
	// Pod's user opens it. The claim is the VM's namespace's, as is the
	// Pod: the owner changes, the disk's readers stay those of the claim.
	if err := diskfile.Chown(f, launcherpod.User, launcherpod.Group); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: PersistentVolumeClaim %s/%s: %w", field, ns, claim, err)
	}
	return f, nil
}

// claimDir is the directory of a claim's bound PersistentVolume on this
// node: the volume's own for a hostPath or local volume, where the kubelet
// published it for the Pod podUID for a CSI filesystem volume.
func (h *Handler) claimDir(ctx context.Context, ns, claim, field string, podUID types.UID) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
		return "", fmt.Errorf("%s: PersistentVolumeClaim %s/%s: %w", field, ns, claim, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return "", fmt.Errorf("%s: PersistentVolumeClaim %s/%s is not bound yet", field, ns, claim)
	}
	pv := &corev1.PersistentVolume{}
	if err := h.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return "", fmt.Errorf("%s: PersistentVolume %s: %w", field, pvc.Spec.VolumeName, err)
	}
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, nil
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, nil
	case pv.Spec.CSI != nil && (pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode == corev1.PersistentVolumeFilesystem):
		if podUID == "" {
			return "", fmt.Errorf("%s: %w", field, errPodNotHere)
		}
		dir, err := launcherpod.CSIVolumeOnNode(h.kubeletRoot(), podUID, pv.Name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return dir, nil
	}
	return "", &permanentError{reason: "VolumeUnsupported", err: fmt.Errorf("%s: PersistentVolume %s is neither hostPath, local nor a CSI filesystem volume", field, pv.Name)}
}
