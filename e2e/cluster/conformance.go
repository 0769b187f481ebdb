package cluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// conformanceTool builds Kubernetes' end-to-end suite, agnhost (the
// program most of its tests run) and nonewprivs (the no_new_privs test's), from the Kubernetes module the testbed
// runs (e2e/tools/conformance pins the same version as e2e/tools/kubernetes).
var conformanceTool = toolBuild{
	name:     "conformance",
	module:   "k8s.io/kubernetes",
	pkgs:     []string{"agnhost", "nonewprivs"},
	paths:    map[string]string{"agnhost": "k8s.io/kubernetes/test/images/agnhost", "nonewprivs": "k8s.io/kubernetes/test/images/nonewprivs"},
	ldflags:  toolBuilds[0].ldflags,
	coldHint: "~10 min on 2 cores the first time",
}

// Conformance is what a run of Kubernetes' conformance tests needs here.
type Conformance struct {
	// Suite is the e2e.test binary.
	Suite string
	// RepoList is the KUBE_TEST_REPO_LIST file naming where the tests'
	// images are: the testbed registry, under conformanceRegistry.
	RepoList string
	// Images are the images pushed for the tests, as Pods name them.
	Images []string
}

// The registries of Kubernetes' test images (test/utils/image), as mapped
// into the testbed registry: each one's images under a path of its own.
// invalidRegistry stays invalid: tests pull from it to fail.
var conformanceRegistries = map[string]string{
	"promoterE2eRegistry":   "e2e-test-images",
	"gcRegistry":            "k8s",
	"gcEtcdRegistry":        "k8s",
	"sigStorageRegistry":    "sig-storage",
	"buildImageRegistry":    "build-image",
	"dockerLibraryRegistry": "library",
}

// PrepareConformance builds the suite (once per Kubernetes version) and
// pushes the images its tests pull to the testbed registry.
func (c *Cluster) PrepareConformance(ctx context.Context) (Conformance, error) {
	dir, err := c.buildTool(ctx, conformanceTool)
	if err != nil {
		return Conformance{}, err
	}
	suite := filepath.Join(dir, "e2e.test")
	if _, err := os.Stat(suite); err != nil {
		m, err := c.toolModule(conformanceTool)
		if err != nil {
			return Conformance{}, err
		}
		args := []string{"test", "-c", "-vet=off", "-trimpath", "-ldflags", conformanceTool.ldflags(m.version), "-o", suite + ".partial", "k8s.io/kubernetes/test/e2e"}
		label := fmt.Sprintf("building Kubernetes' e2e suite %s (~15 min on 2 cores the first time)", m.version)
		if err := c.goBuild(ctx, label, filepath.Join(c.Source, "e2e", "tools", conformanceTool.name), "build-e2e-suite", false, args); err != nil {
			return Conformance{}, err
		}
		if err := os.Rename(suite+".partial", suite); err != nil {
			return Conformance{}, err
		}
	}
	images, err := c.pushConformanceImages(dir)
	if err != nil {
		return Conformance{}, err
	}
	list := filepath.Join(dir, "repo-list.yaml")
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(conformanceRegistries)) {
		b = fmt.Appendf(b, "%s: %s/%s\n", k, RegistryAddr, conformanceRegistries[k])
	}
	if err := os.WriteFile(list, b, 0o644); err != nil {
		return Conformance{}, err
	}
	return Conformance{Suite: suite, RepoList: list, Images: images}, nil
}

// pushConformanceImages pushes the test images the selected conformance
// tests pull, by the names and tags Kubernetes' image manifest gives them,
// and returns their references.
func (c *Cluster) pushConformanceImages(dir string) ([]string, error) {
	bb, err := busyboxImage()
	if err != nil {
		return nil, err
	}
	agnhost, err := c.debianWithBusybox(agnhostDebian, bb)
	if err != nil {
		return nil, err
	}
	agnhost.Entrypoint, agnhost.Cmd = []string{"/agnhost"}, []string{"pause"}
	source := c.tools[conformanceTool.name].dir
	for p, f := range map[string]ocibuild.File{
		"/agnhost":       {Source: filepath.Join(dir, "agnhost"), Mode: 0o755},
		"/agnhost-2":     {Link: "agnhost"},
		"/uploads":       {Dir: true, Mode: 0o755},
		"/localhost.crt": {Source: filepath.Join(source, "test", "images", "agnhost", "porter", "localhost.crt"), Mode: 0o644},
		"/localhost.key": {Source: filepath.Join(source, "test", "images", "agnhost", "porter", "localhost.key"), Mode: 0o644},
	} {
		agnhost.Files[p] = f
	}
	busybox, err := c.debianWithBusybox(busyboxDebian, bb)
	if err != nil {
		return nil, err
	}
	dnsutils, err := c.debianWithBusybox(dnsutilsDebian, bb)
	if err != nil {
		return nil, err
	}
	httpd, err := c.debianWithBusybox(httpdDebian, bb)
	if err != nil {
		return nil, err
	}
	nginx, err := c.debianWithBusybox(nginxDebian, bb)
	if err != nil {
		return nil, err
	}
	if err := c.webServerFiles(httpd.Files, nginx.Files); err != nil {
		return nil, err
	}
	httpd.Entrypoint, httpd.Cmd = nil, []string{"httpd-foreground"}
	nginx.Entrypoint, nginx.Cmd = nil, []string{"nginx", "-g", "daemon off;"}
	// nonewprivs and nonroot are Debian-based as Kubernetes' own are: nnp
	// set-uid root, and an image whose user is 1234.
	nnp := withFile(busybox, "/usr/local/bin/nnp", ocibuild.File{Source: filepath.Join(dir, "nonewprivs"), Mode: 0o4755})
	nnp.Entrypoint, nnp.Cmd = nil, []string{"nnp"}
	nonroot := busybox
	nonroot.User = "1234"
	images := map[string]ocibuild.Spec{
		"e2e-test-images/nonewprivs:1.3":      nnp,
		"e2e-test-images/nonroot:1.4":         nonroot,
		"e2e-test-images/httpd:2.4.38-4":      httpd,
		"e2e-test-images/httpd:2.4.39-4":      withEnv(httpd, "HTTPD_IMAGE_TAG=2.4.39-4"),
		"e2e-test-images/nginx:1.14-4":        nginx,
		"e2e-test-images/nginx:1.15-4":        withEnv(nginx, "NGINX_IMAGE_TAG=1.15-4"),
		"e2e-test-images/agnhost:2.56":        agnhost,
		"e2e-test-images/busybox:1.37.0-1":    busybox,
		"e2e-test-images/jessie-dnsutils:1.7": dnsutils,
		"k8s/pause:3.10.1":                    goBinaryImage(filepath.Join(c.path("cache", "tekvirt"), "tekvirt-pause")),
	}
	var refs []string
	for ref, spec := range images {
		if _, err := ocibuild.Push(spec, RegistryAddr+"/"+ref); err != nil {
			return nil, err
		}
		refs = append(refs, RegistryAddr+"/"+ref)
	}
	// The tests pull these tags if not present: a node keeping an image an
	// earlier build pushed under the same tag would run that one.
	for _, n := range c.nodes() {
		args := append([]string{"--address", c.containerdSocketOf(n), "--namespace", "k8s.io", "images", "rm"}, refs...)
		_ = exec.Command("ctr", args...).Run() // refs the node never pulled are refused, and nothing else
	}
	c.progress("%-24s pushed %d images for the conformance tests", "conformance", len(images))
	slices.Sort(refs)
	return refs, nil
}

// debianWithBusybox is an image of d's Debian packages with busybox's
// applets beside their programs in /usr/bin (the base's /bin is Debian's
// merged-/usr link): Debian's where both have one (ip, nslookup, and nc
// as netcat-openbsd, which Debian names nc by an alternative).
func (c *Cluster) debianWithBusybox(d debianBase, bb ocibuild.Spec) (ocibuild.Spec, error) {
	base, err := c.layer(d)
	if err != nil {
		return ocibuild.Spec{}, err
	}
	listed, err := exec.Command("dpkg-query", append([]string{"-L"}, d.packages...)...).Output()
	if err != nil {
		return ocibuild.Spec{}, fmt.Errorf("listing the files of %v: %w", d.packages, err)
	}
	debian := map[string]bool{}
	for _, p := range strings.Fields(string(listed)) {
		debian[imagePath(p)] = true
	}
	spec := ocibuild.Spec{Base: base, Files: map[string]ocibuild.File{"/tmp": {Dir: true, Mode: 0o1777}}, Entrypoint: []string{"/bin/sh"}}
	for p, f := range bb.Files {
		if f.Link == "" && f.Source == "" {
			continue
		}
		name := filepath.Base(p)
		if f.Link != "" {
			f.Link = "/usr/bin/busybox"
		}
		if !debian["/usr/bin/"+name] && !debian["/usr/sbin/"+name] {
			spec.Files["/usr/bin/"+name] = f
		}
	}
	if debian["/usr/bin/nc.openbsd"] {
		spec.Files["/usr/bin/nc"] = ocibuild.File{Link: "nc.openbsd"}
	}
	// sh is bash: Debian's busybox sh runs its own applet of a name before
	// the PATH's program, and drops from the environment it passes on the
	// variables whose names are no shell names (a ConfigMap's key as
	// data-1), which Kubernetes' tests read back with sh -c env; dash
	// drops them too.
	if debian["/usr/bin/bash"] {
		spec.Files["/usr/bin/sh"] = ocibuild.File{Link: "bash"}
	}
	return spec, nil
}

// agnhostDebian is agnhost's image base, with what its Dockerfile adds to
// Alpine, from Debian: dig and nslookup, getent, curl, nc, ip, iperf and
// bash (also as sh); and the account and group the image defines.
var agnhostDebian = debianBase{
	name:     "agnhost",
	packages: []string{"bind9-dnsutils", "libc-bin", "curl", "netcat-openbsd", "iproute2", "iperf", "bash"},
	passwd:   "root:x:0:0:root:/root:/bin/sh\nuser-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n",
	group:    "root:x:0:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n",
	dirs:     []string{"/home/user-defined-in-image"},
}

// dnsutilsDebian is the base of jessie-dnsutils, the DNS tests' second
// prober: dig and getent (and bash as sh).
var dnsutilsDebian = debianBase{
	name:     "dnsutils",
	packages: []string{"bash", "bind9-dnsutils", "libc-bin"},
	passwd:   "root:x:0:0:root:/root:/bin/sh\n",
	group:    "root:x:0:\n",
}

// The web servers of the Deployment, StatefulSet and Pod tests, as their
// images lay them out: Apache's httpd serving /usr/local/apache2/htdocs
// (the StatefulSet tests move its index.html away and back) and nginx
// serving /usr/share/nginx/html, both on port 80 in the foreground; from
// Debian's packages, each with a configuration of its own.
var (
	httpdDebian = debianBase{
		name:     "httpd",
		packages: []string{"apache2-bin"},
		passwd:   "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",
		group:    "root:x:0:\ndaemon:x:1:\n",
		dirs:     []string{"/usr/local/apache2/logs"},
	}
	nginxDebian = debianBase{
		name:     "nginx",
		packages: []string{"nginx"},
		passwd:   "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		group:    "root:x:0:\nnogroup:x:65534:\n",
		dirs:     []string{"/var/log/nginx", "/var/lib/nginx/body", "/var/lib/nginx/proxy", "/var/lib/nginx/fastcgi", "/var/lib/nginx/uwsgi", "/var/lib/nginx/scgi"},
	}
)

const httpdConf = `ServerRoot "/usr/lib/apache2"
Listen 80
LoadModule mpm_event_module modules/mod_mpm_event.so
LoadModule authz_core_module modules/mod_authz_core.so
LoadModule dir_module modules/mod_dir.so
LoadModule mime_module modules/mod_mime.so
User daemon
Group daemon
ServerName localhost
DocumentRoot "/usr/local/apache2/htdocs"
<Directory "/usr/local/apache2/htdocs">
    Require all granted
</Directory>
DirectoryIndex index.html
TypesConfig /dev/null
PidFile /usr/local/apache2/logs/httpd.pid
ErrorLog /proc/self/fd/2
LogLevel warn
`

const httpdForeground = `#!/bin/sh
rm -f /usr/local/apache2/logs/httpd.pid
exec /usr/sbin/apache2 -f /usr/local/apache2/conf/httpd.conf -DFOREGROUND "$@"
`

const nginxConf = `user nobody nogroup;
worker_processes 1;
error_log /dev/stderr warn;
pid /tmp/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    server {
        listen 80;
        root /usr/share/nginx/html;
        index index.html;
    }
}
`

const itWorks = "<html><body><h1>It works!</h1></body></html>\n"

// webServerFiles writes the web servers' configurations, start script and
// pages into the cache and adds them to their images' files.
func (c *Cluster) webServerFiles(httpd, nginx map[string]ocibuild.File) error {
	dir := c.path("cache", "images", "conformance")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		files         map[string]ocibuild.File
		path, content string
		mode          int64
	}{
		{httpd, "/usr/local/apache2/conf/httpd.conf", httpdConf, 0o644},
		{httpd, "/usr/local/bin/httpd-foreground", httpdForeground, 0o755},
		{httpd, "/usr/local/apache2/htdocs/index.html", itWorks, 0o644},
		{nginx, "/etc/nginx/nginx.conf", nginxConf, 0o644},
		{nginx, "/usr/share/nginx/html/index.html", itWorks, 0o644},
	} {
		src := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(f.path, "/"), "/", "_"))
		if err := os.WriteFile(src, []byte(f.content), 0o644); err != nil {
			return err
		}
		f.files[f.path] = ocibuild.File{Source: src, Mode: f.mode}
	}
	return nil
}

// withEnv is spec with env added, so that a second tag of one image is an
// image of its own.
func withEnv(spec ocibuild.Spec, env string) ocibuild.Spec {
	spec.Env = append(slices.Clone(spec.Env), env)
	return spec
}

// busyboxDebian is the base of the tests' busybox image: busybox's applets
// with bash as sh (see debianWithBusybox).
var busyboxDebian = debianBase{
	name:     "busybox",
	packages: []string{"bash"},
	passwd:   "root:x:0:0:root:/root:/bin/sh\n",
	group:    "root:x:0:\n",
}

// withFile is spec with the file at path added.
func withFile(spec ocibuild.Spec, path string, f ocibuild.File) ocibuild.Spec {
	spec.Files = maps.Clone(spec.Files)
	spec.Files[path] = f
	return spec
}
