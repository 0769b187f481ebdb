package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/tekvirt/tekvirt/e2e/guest"
	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// HostedReleaseKey names the hosted control plane's release image in
// Images and in manifests (ko://tekvirt.io/hosted-release): the
// Kubernetes control-plane binaries the testbed runs, etcd and the
// Konnectivity proxy server.
const HostedReleaseKey = "tekvirt.io/hosted-release"

// hostedReleaseImage holds kube-apiserver, kube-controller-manager,
// kube-scheduler, etcd and proxy-server (all static) under /usr/bin, as
// the hosted-cluster tasks run them.
func hostedReleaseImage(b binaries) ocibuild.Spec {
	files := map[string]ocibuild.File{"/tmp": {Dir: true, Mode: 0o1777}}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		files["/usr/bin/"+name] = ocibuild.File{Source: b.k(name), Mode: 0o755}
	}
	files["/usr/bin/etcd"] = ocibuild.File{Source: b.etcd, Mode: 0o755}
	files["/usr/bin/proxy-server"] = ocibuild.File{Source: filepath.Join(b.konn, "server"), Mode: 0o755}
	return ocibuild.Spec{Files: files, Entrypoint: []string{"/usr/bin/etcd"}}
}

// konnectivityAgentImage is the workers' Konnectivity agent alone (it
// is pulled by every worker), at /usr/bin/proxy-agent, non-root.
func konnectivityAgentImage(b binaries) ocibuild.Spec {
	return nonRoot(ocibuild.Spec{
		Files: map[string]ocibuild.File{
			"/usr/bin/proxy-agent": {Source: filepath.Join(b.konn, "agent"), Mode: 0o755},
			"/tmp":                 {Dir: true, Mode: 0o1777},
		},
		Entrypoint: []string{"/usr/bin/proxy-agent"},
	})
}

// HostedWorkerKey names the hosted-cluster worker's containerDisk in
// Images and in manifests (ko://tekvirt.io/hosted-worker): the worker
// guest's bootable disk under /disk/ (kernel and initrd under /boot/), as
// the test guest's. NodePools boot it unless they name another image.
const HostedWorkerKey = "tekvirt.io/hosted-worker"

// pushWorker builds the worker guest (cached by its inputs: the kubelet,
// kube-proxy and flanneld binaries and the pause image among them) and pushes it as a containerDisk to
// registry; it returns the pushed reference (by digest).
func (c *Cluster) pushWorker(ctx context.Context, b binaries, registry string) (string, error) {
	pause := c.path("cache", "images", "pause.tar")
	if err := writePauseTarball(filepath.Join(b.tekvirt, "tekvirt-pause"), pause); err != nil {
		return "", err
	}
	g, err := guest.Worker(guest.Node{Kubelet: b.k("kubelet"), KubeProxy: b.k("kube-proxy"), Flanneld: b.flannel, Portmap: filepath.Join(b.multus, "portmap"), PauseTar: pause}).Build(ctx, c.path("cache"))
	if err != nil {
		return "", fmt.Errorf("building the worker guest: %w", err)
	}
	ref, err := pushGuestDisk(ctx, g, registry+"/tekvirt/hosted-worker:latest")
	if err != nil {
		return "", err
	}
	c.progress("%-24s %s", "hosted worker", ref)
	return ref, nil
}

// writePauseTarball writes the pause image (tekvirt-pause) as an image
// tarball tagged guest.PauseImage, for `ctr images import` in the worker.
// The same binary gives the same bytes, so the worker's cache holds.
func writePauseTarball(binary, path string) error {
	img, err := ocibuild.Build(goBinaryImage(binary))
	if err != nil {
		return err
	}
	tag, err := name.NewTag(guest.PauseImage)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("writing the pause image tarball: %w", err)
	}
	return os.Rename(tmp, path)
}
