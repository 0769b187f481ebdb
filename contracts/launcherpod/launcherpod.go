package launcherpod

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
)

// HandlerFinalizer keeps a VMI until the handler of its node has destroyed
// its domain and removed its files there. The VMI controller removes it
// itself only when that node is gone (its Node deleted) and so are the
// VMI's launcher Pods: no handler is left to do it and nothing of the VM
// runs.
const HandlerFinalizer = "tekvirt.io/vmi-handler"

// The Pod's emptyDir volumes. VMVolume holds the VM's files, written by
// the handler (spec, qcow2 overlays, cloud-init seeds) and by the launcher
// and QEMU (sockets, exit record, console log); it is mounted read-write
// at VMDir. ImagesVolume holds, read-only at ImagesDir, one read-only bind
// mount per containerDisk the VM uses, which the handler makes after the
// Pod started (so it is mounted with HostToContainer propagation): the Pod
// sees its own images and no other of the node's cache.
const (
	VMVolume     = "vm"
	VMDir        = "/var/run/tekvirt/vm"
	ImagesVolume = "images"
	ImagesDir    = "/var/lib/tekvirt/images"
	// DisksDir holds each claim volume's mount, DisksDir/<volume name>.
	DisksDir = "/var/run/kubevirt-private/vmi-disks"
	// HotplugVolume, an emptyDir at HotplugDir, read-only in the Pod and
	// with the node's mounts propagated into it, is where the node's
	// handler mounts the volume of each hotplugged claim, at
	// HotplugDir/<HotplugName(volume)>.
	HotplugVolume = "hotplug-disks"
	HotplugDir    = "/var/run/kubevirt/hotplug-disks"
	// LibvirtdVolume, an emptyDir at LibvirtdDir, is the run directory of
	// the Pod's own libvirtd: its socket, configuration and cache.
	LibvirtdVolume = "libvirt"
	LibvirtdDir    = "/var/run/tekvirt/libvirt"
	// ComputeContainer runs the launcher, libvirtd and QEMU.
	ComputeContainer = "compute"
	// AccessCredentialsDir holds, read-only, the Secret of each of the
	// VMI's accessCredentials, at AccessCredentialsDir/<index>.
	AccessCredentialsDir = "/var/run/kubevirt-private/access-credentials"
)

// User and Group run the compute container, and libvirtd and QEMU in it:
// KubeVirt's qemu user, as its non-root virt-launcher, who owns the files
// of containerDisks built as KubeVirt documents. The handler gives the
// files QEMU writes (overlays, claims' disks) to this user.
const (
	User  = 107
	Group = 107
)

// TCPReceiveBuffers and TCPSendBuffers are the launcher Pod's
// net.ipv4.tcp_rmem and tcp_wmem (min, default, max bytes): the node's
// defaults but a 1 MiB maximum, which a migration's streams on the Pod's
// loopback fill at full speed without queueing more than a few
// milliseconds of them.
const (
	TCPReceiveBuffers = "4096 131072 1048576"
	TCPSendBuffers    = "4096 16384 1048576"
)

// AccessCredentialVolume is the Pod volume of the Secret of the VMI's
// accessCredentials[i].
func AccessCredentialVolume(i int) string { return fmt.Sprintf("access-credential-%d", i) }

// AccessCredentialPath is where the compute container sees that Secret.
func AccessCredentialPath(i int) string {
	return filepath.Join(AccessCredentialsDir, strconv.Itoa(i))
}

// EmptyDirOnNode is where the kubelet rooted at kubeletRoot keeps emptyDir
// volume of the Pod podUID. The UID comes from an API object: it is
// checked to be a UUID so that it cannot walk out of the kubelet's
// directory.
func EmptyDirOnNode(kubeletRoot string, podUID types.UID, volume string) (string, error) {
	return volumeOnNode(kubeletRoot, podUID, "kubernetes.io~empty-dir", volume)
}

// SecretOnNode is where the kubelet rooted at kubeletRoot keeps the Secret
// volume of the Pod podUID (read-only for the Pod).
func SecretOnNode(kubeletRoot string, podUID types.UID, volume string) (string, error) {
	return volumeOnNode(kubeletRoot, podUID, "kubernetes.io~secret", volume)
}

// CSIVolumeOnNode is where the kubelet rooted at kubeletRoot mounts the CSI
// volume pv for the Pod podUID (a filesystem volume, published there by
// its driver).
func CSIVolumeOnNode(kubeletRoot string, podUID types.UID, pv string) (string, error) {
	dir, err := volumeOnNode(kubeletRoot, podUID, "kubernetes.io~csi", pv)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "mount"), nil
}

func volumeOnNode(kubeletRoot string, podUID types.UID, plugin, volume string) (string, error) {
	if _, err := uuid.Parse(string(podUID)); err != nil {
		return "", fmt.Errorf("pod UID %q: %w", podUID, err)
	}
	if volume == "" || volume == "." || volume == ".." || strings.Contains(volume, "/") {
		return "", fmt.Errorf("volume name %q is not a directory entry", volume)
	}
	return filepath.Join(kubeletRoot, "pods", string(podUID), "volumes", plugin, volume), nil
}

// HotplugName is the directory of a hotplugged volume in HotplugDir: a
// digest of its name (a volume name is user input, never a path).
func HotplugName(volume string) string {
	sum := sha256.Sum256([]byte(volume))
	return "vol-" + hex.EncodeToString(sum[:8])
}
