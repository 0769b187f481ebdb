package cluster

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// launcherPackages are the Debian packages (installed by .ci/setup-host)
// whose files, with those of everything they depend on, are the launcher
// image's base: libvirt's daemon and QEMU driver and QEMU for the launcher;
// qemu-img (each containerDisk's overlay), mkfs.vfat and mcopy (cloud-init
// seeds) for the handler, whose image shares this base.
var launcherPackages = []string{"libvirt-daemon", "libvirt-daemon-driver-qemu", "qemu-system-x86", "qemu-utils", "dosfstools", "mtools"}

// debPackage is an installed Debian package.
type debPackage struct {
	Name, Version string
	// Depends holds Depends and Pre-Depends, each a list of alternatives.
	Depends [][]string
}

// depName is the package name at the start of a dependency ("libc6 (>= 2.34)",
// "python3:any").
var depName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]*`)

// parseInstalled reads `dpkg-query -W` lines of Package, Version, Status,
// Depends and Pre-Depends (tab-separated), keeping installed packages.
func parseInstalled(out string) map[string]debPackage {
	pkgs := map[string]debPackage{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 5 || !strings.HasSuffix(f[2], " installed") {
			continue
		}
		p := debPackage{Name: f[0], Version: f[1]}
		for _, field := range f[3:5] {
			for _, dep := range strings.Split(field, ",") {
				var alts []string
				for _, alt := range strings.Split(dep, "|") {
					if n := depName.FindString(strings.TrimSpace(alt)); n != "" {
						alts = append(alts, n)
					}
				}
				if len(alts) > 0 {
					p.Depends = append(p.Depends, alts)
				}
			}
		}
		pkgs[p.Name] = p
	}
	return pkgs
}

// closure is roots and every package they depend on (the first installed
// alternative of each dependency), sorted by name; it fails naming a root
// that is not installed.
func closure(installed map[string]debPackage, roots []string) ([]debPackage, error) {
	seen := map[string]bool{}
	todo := append([]string{}, roots...)
	for _, r := range roots {
		if _, ok := installed[r]; !ok {
			return nil, fmt.Errorf("the Debian package %s is not installed (run .ci/setup-host)", r)
		}
	}
	var out []debPackage
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[name] {
			continue
		}
		seen[name] = true
		p := installed[name]
		out = append(out, p)
		for _, alts := range p.Depends {
			for _, a := range alts {
				if _, ok := installed[a]; ok {
					todo = append(todo, a)
					break
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// mergedUsr are the top-level links of a merged-/usr Debian system.
var mergedUsr = []string{"bin", "lib", "lib64", "sbin"}

// skipped holds documentation, which the image does not need, and this
// machine's libvirt configuration: the launcher writes its own.
var skipped = []string{"/usr/share/doc/", "/usr/share/man/", "/usr/share/locale/", "/usr/share/lintian/", "/usr/share/info/", "/etc/libvirt/"}

// imagePath is where a listed file lands in the image: under /usr for the
// merged-/usr directories, whose top-level names are links.
func imagePath(p string) string {
	for _, d := range mergedUsr {
		if strings.HasPrefix(p, "/"+d+"/") {
			return "/usr" + p
		}
	}
	return p
}

// debianFiles are the regular files and links that listed holds (the output
// of `dpkg-query -L`), read from this machine.
func debianFiles(listed string) (map[string]ocibuild.File, error) {
	files := map[string]ocibuild.File{}
	for _, d := range mergedUsr {
		files["/"+d] = ocibuild.File{Link: "usr/" + d}
	}
	for _, p := range strings.Split(listed, "\n") {
		p = strings.TrimSpace(p)
		if !strings.HasPrefix(p, "/") || p == "/." || hasAnyPrefix(p, skipped) {
			continue
		}
		st, err := os.Lstat(p)
		switch {
		case os.IsNotExist(err):
			continue // a file the package lists but that was removed (e.g. a diverted one)
		case err != nil:
			return nil, err
		case st.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil, err
			}
			files[imagePath(p)] = ocibuild.File{Link: target}
		case st.Mode().IsRegular():
			files[imagePath(p)] = ocibuild.File{Source: p, Mode: int64(st.Mode().Perm())}
		}
	}
	return files, nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// debianBase is a base layer of Debian packages (installed by
// .ci/setup-host) with everything they depend on, as installed on this
// machine, plus accounts and empty directories.
type debianBase struct {
	name          string // the cache file's prefix
	packages      []string
	passwd, group string
	dirs          []string // made 0755
}

// launcherDebian is the launcher image's base. A launcher Pod runs
// libvirtd and QEMU as qemu (launcherpod.User, KubeVirt's qemu user), whom
// libvirt looks up by uid, with that user's home in the Pod's libvirtd
// volume; run as root, libvirt resolves its default QEMU user,
// libvirt-qemu, before it reads qemu.conf, so that user exists too.
var launcherDebian = debianBase{
	name:     "launcher",
	packages: launcherPackages,
	passwd: fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nqemu:x:%d:%d:qemu:%s:/usr/sbin/nologin\nlibvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin\n",
		launcherpod.User, launcherpod.Group, launcherpod.LibvirtdDir),
	group: fmt.Sprintf("root:x:0:\nqemu:x:%d:\nlibvirt-qemu:x:64055:\n", launcherpod.Group),
	dirs:  []string{"/run/libvirt", "/var/lib/libvirt/qemu", "/var/cache/libvirt/qemu", "/var/log/libvirt/qemu", "/etc/libvirt"},
}

// gitDebian is the base of Tekton's resolvers image: the git resolver runs
// the git command, as the user the resolvers' Deployment names.
var gitDebian = debianBase{
	name:     "git",
	packages: []string{"git"},
	passwd:   "root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/tmp:/usr/sbin/nologin\n",
	group:    "root:x:0:\nnonroot:x:65532:\n",
}

// layer writes (once per set of package versions) the base layer and
// returns its path.
func (c *Cluster) layer(d debianBase) (string, error) {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Package}\t${Version}\t${Status}\t${Depends}\t${Pre-Depends}\n").Output()
	if err != nil {
		return "", fmt.Errorf("listing Debian packages: %w", err)
	}
	pkgs, err := closure(parseInstalled(string(out)), d.packages)
	if err != nil {
		return "", err
	}
	var key strings.Builder
	names := make([]string, 0, len(pkgs))
	for _, p := range pkgs {
		key.WriteString(p.Name + "=" + p.Version + "\n")
		names = append(names, p.Name)
	}
	key.WriteString(d.passwd + d.group + strings.Join(d.dirs, "\n"))
	h := sha256.Sum256([]byte(key.String()))
	dir := c.path("cache", "images")
	path := filepath.Join(dir, d.name+"-base-"+hex.EncodeToString(h[:])[:16]+".tar.gz")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	listed, err := exec.Command("dpkg-query", append([]string{"-L"}, names...)...).Output()
	if err != nil {
		return "", fmt.Errorf("listing the files of %v: %w", names, err)
	}
	files, err := debianFiles(string(listed))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, content := range map[string]string{"passwd": d.passwd, "group": d.group} {
		src := filepath.Join(dir, d.name+"-"+name)
		if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
			return "", err
		}
		files["/etc/"+name] = ocibuild.File{Source: src, Mode: 0o644}
	}
	for _, dir := range d.dirs {
		files[dir] = ocibuild.File{Dir: true, Mode: 0o755}
	}
	files["/tmp"] = ocibuild.File{Dir: true, Mode: 0o1777}
	files["/var/run"] = ocibuild.File{Link: "/run"}
	c.progress("%-24s packing %d files of %d Debian packages", d.name+" image", len(files), len(pkgs))
	if err := ocibuild.WriteLayer(path, files); err != nil {
		return "", fmt.Errorf("packing the %s base layer: %w", d.name, err)
	}
	return path, nil
}

// overBase runs binary over a Debian base layer: tekvirt-launcher, and
// tekvirt-handler, which links libvirt's client library and runs qemu-img
// (the layer is shared, so the handler's image adds only its binary); and
// Tekton's resolvers over git's.
func overBase(base, binary string) ocibuild.Spec {
	spec := goBinaryImage(binary)
	spec.Base = base
	delete(spec.Files, "/tmp") // in the base, with the rest of the system
	return spec
}
