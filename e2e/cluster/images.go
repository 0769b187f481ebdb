package cluster

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/controllers/hyperconverged"
	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// Images maps the import path of each program the cluster runs (the ko://
// names used in Tekton's and tekvirt's manifests) to its pushed digest reference.
type Images map[string]string

const (
	tektonModule  = "github.com/tektoncd/pipeline"
	tekvirtModule = "github.com/tekvirt/tekvirt"
	// ShellImageKey names the busybox image in Images.
	ShellImageKey = "busybox"
	// TektonShellImageKey names Tekton's shell image: busybox as a
	// non-root user, as Tekton's release ships it.
	TektonShellImageKey = "tekton-shell"
	// ProbeImageKey names the image of e2e/cmd/tekvirt-probe, the e2e
	// attacks' toolbox (pushed as tekvirt/tekvirt-probe).
	ProbeImageKey = tekvirtModule + "/e2e/cmd/tekvirt-probe"
)

// goBinaryImage is an image holding one static Go binary at /ko-app/<name>,
// the layout Tekton's controller expects of its entrypoint image.
func goBinaryImage(binary string, args ...string) ocibuild.Spec {
	name := filepath.Base(binary)
	return ocibuild.Spec{
		Files: map[string]ocibuild.File{
			"/ko-app/" + name: {Source: binary, Mode: 0o755},
			"/var/run/ko":     {Dir: true},
			"/tmp":            {Dir: true, Mode: 0o1777},
		},
		Entrypoint: append([]string{"/ko-app/" + name}, args...),
		Env:        []string{"KO_DATA_PATH=/var/run/ko"},
	}
}

// stepUser is the user of the step image: catalog steps run as non-root
// (runAsNonRoot), which the kubelet checks against a numeric image user.
const stepUser = "65532:65532"

func nonRoot(spec ocibuild.Spec) ocibuild.Spec {
	spec.User = stepUser
	return spec
}

// downloadsImage is the downloads server with the clients it serves under
// /downloads/<arch>/linux/.
func downloadsImage(b binaries) ocibuild.Spec {
	spec := nonRoot(goBinaryImage(filepath.Join(b.tekvirt, "tekvirt-downloads")))
	for _, arch := range ClientArchs {
		spec.Files["/downloads/"+arch+"/linux/tekvirt"] = ocibuild.File{Source: b.client(arch), Mode: 0o755}
	}
	return spec
}

// busyboxImage is Debian's static busybox with every applet linked in /bin.
func busyboxImage() (ocibuild.Spec, error) {
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		return ocibuild.Spec{}, fmt.Errorf("listing busybox applets: %w", err)
	}
	files := map[string]ocibuild.File{
		"/bin/busybox": {Source: "/bin/busybox", Mode: 0o755},
		"/tmp":         {Dir: true, Mode: 0o1777},
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			files["/bin/"+applet] = ocibuild.File{Link: "/bin/busybox"}
		}
	}
	return ocibuild.Spec{Files: files, Entrypoint: []string{"/bin/sh"}}, nil
}

// networkAddonsImage holds the network add-ons' programs where their
// manifests (controllers/config/networkaddons) run them: Multus's
// installer at /thin_entrypoint with the plugin it installs at Multus's
// own path, the bridge CNI plugin under /opt/cni-plugins, and busybox (bb)
// to copy and wait.
func networkAddonsImage(bb ocibuild.Spec, dir string) ocibuild.Spec {
	files := maps.Clone(bb.Files)
	files["/thin_entrypoint"] = ocibuild.File{Source: filepath.Join(dir, "thin_entrypoint"), Mode: 0o755}
	files["/usr/src/multus-cni/bin/multus"] = ocibuild.File{Source: filepath.Join(dir, "multus"), Mode: 0o755}
	files["/opt/cni-plugins/bridge"] = ocibuild.File{Source: filepath.Join(dir, "bridge"), Mode: 0o755}
	return ocibuild.Spec{Files: files, Entrypoint: []string{"/thin_entrypoint"}}
}

// csiSidecarsImage holds Kubernetes' CSI sidecars at the root, each
// container naming its own as its command.
func csiSidecarsImage(dir string) ocibuild.Spec {
	files := map[string]ocibuild.File{"/tmp": {Dir: true, Mode: 0o1777}}
	for _, p := range toolBuilds[7].pkgs {
		files["/"+p] = ocibuild.File{Source: filepath.Join(dir, p), Mode: 0o755}
	}
	return ocibuild.Spec{Files: files}
}

// pushImages builds and pushes every image to registry (host:port, or
// host:port/path); unchanged images upload nothing.
func (c *Cluster) pushImages(ctx context.Context, b binaries, registry string) (Images, error) {
	bb, err := busyboxImage()
	if err != nil {
		return nil, err
	}
	base, err := c.layer(launcherDebian)
	if err != nil {
		return nil, err
	}
	gitBase, err := c.layer(gitDebian)
	if err != nil {
		return nil, err
	}
	specs := map[string]ocibuild.Spec{
		HostedReleaseKey:                            hostedReleaseImage(b),
		tekvirtModule + "/cmd/tekvirt-launcher":     overBase(base, filepath.Join(b.tekvirt, "tekvirt-launcher")),
		tekvirtModule + "/cmd/tekvirt-handler":      overBase(base, filepath.Join(b.tekvirt, "tekvirt-handler")),
		tekvirtModule + "/cmd/tekvirt-hostpath":     goBinaryImage(filepath.Join(b.tekvirt, "tekvirt-hostpath")),
		ShellImageKey:                               bb,
		TektonShellImageKey:                         nonRoot(bb),
		tekvirtModule + "/cmd/tekvirt-pause":        goBinaryImage(filepath.Join(b.tekvirt, "tekvirt-pause")),
		tekvirtModule + "/cmd/tekvirt-controller":   goBinaryImage(filepath.Join(b.tekvirt, "tekvirt-controller")),
		tekvirtModule + "/cmd/tekvirt-operator":     goBinaryImage(filepath.Join(b.tekvirt, "tekvirt-operator")),
		tekvirtModule + "/cmd/tekvirt-step":         nonRoot(goBinaryImage(filepath.Join(b.tekvirt, "tekvirt-step"))),
		tekvirtModule + "/cmd/tekvirt-downloads":    downloadsImage(b),
		tekvirtModule + "/cmd/tekvirt-router":       nonRoot(goBinaryImage(filepath.Join(b.tekvirt, "tekvirt-router"))),
		CoreDNSImageKey:                             nonRoot(goBinaryImage(b.coredns)),
		hyperconverged.HostedCoreDNSImage:           nonRoot(goBinaryImage(b.coredns)),
		hyperconverged.HostedKonnectivityAgentImage: konnectivityAgentImage(b),
		hyperconverged.NetworkAddonsImage:           networkAddonsImage(bb, b.multus),
		hyperconverged.CSISidecarsImage:             csiSidecarsImage(b.csi),
		NetworkPolicyImageKey:                       networkPolicyImage(b),
		ProbeImageKey:                               goBinaryImage(filepath.Join(b.tekvirt, "tekvirt-probe")),
	}
	// Tekton's images run as a non-root user, as its release's do: with
	// set-security-context its init containers must (runAsNonRoot).
	for _, p := range toolBuilds[1].pkgs {
		spec := goBinaryImage(filepath.Join(b.tekton, p))
		if p == "resolvers" { // the git resolver runs git
			spec = overBase(gitBase, filepath.Join(b.tekton, p))
		}
		specs[tektonModule+"/cmd/"+p] = nonRoot(spec)
	}
	images := Images{}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(runtime.NumCPU())
	for key, spec := range specs {
		repo := "tekvirt/" + filepath.Base(key)
		if strings.HasPrefix(key, tektonModule) {
			repo = "tekton/" + filepath.Base(key)
		}
		g.Go(func() error {
			// Pushed by tag too: containerd names the sandbox image by tag.
			ref, err := ocibuild.Push(spec, registry+"/"+repo+":latest")
			mu.Lock()
			defer mu.Unlock()
			images[key] = ref
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	worker, err := c.pushWorker(ctx, b, registry)
	if err != nil {
		return nil, err
	}
	images[HostedWorkerKey] = worker
	c.progress("%-24s pushed %d images to %s", "images", len(images), registry)
	return images, nil
}

// Resolve replaces every ko://<import path> in manifest with its image.
func (im Images) Resolve(manifest string) (string, error) {
	return catalog.ResolveImages(manifest, im)
}
