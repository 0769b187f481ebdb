package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// HostedReleaseKey names the hosted control plane's release image in
// Images and in manifests (ko://tekvirt.io/hosted-release): the
// Kubernetes control-plane binaries the testbed runs and Debian's etcd.
const HostedReleaseKey = "tekvirt.io/hosted-release"

// hostedReleaseImage holds kube-apiserver, kube-controller-manager and
// kube-scheduler (static) and etcd with the shared libraries it links, all
// under /usr/bin, as the hosted-cluster tasks run them.
func hostedReleaseImage(b binaries) (ocibuild.Spec, error) {
	files := map[string]ocibuild.File{"/tmp": {Dir: true, Mode: 0o1777}}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		files["/usr/bin/"+name] = ocibuild.File{Source: b.k(name), Mode: 0o755}
	}
	const etcd = "/usr/bin/etcd"
	files[etcd] = ocibuild.File{Source: etcd, Mode: 0o755}
	libs, err := sharedLibraries(etcd)
	if err != nil {
		return ocibuild.Spec{}, err
	}
	for _, lib := range libs {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return ocibuild.Spec{}, fmt.Errorf("resolving %s: %w", lib, err)
		}
		files[lib] = ocibuild.File{Source: real, Mode: 0o755}
	}
	return ocibuild.Spec{Files: files, Entrypoint: []string{etcd}}, nil
}

// sharedLibraries lists the libraries (and the loader) binary needs, as
// ldd prints them.
func sharedLibraries(binary string) ([]string, error) {
	out, err := exec.Command("ldd", binary).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", binary, err)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				if _, err := os.Stat(f); err == nil {
					libs = append(libs, f)
				}
			}
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s listed no library", binary)
	}
	return libs, nil
}
