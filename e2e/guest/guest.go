package guest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

//go:embed init.sh
var initScript []byte

//go:embed inittab
var inittab []byte

//go:embed chpasswd
var chpasswdScript []byte

//go:embed udhcpc.script
var udhcpcScript []byte

//go:embed network-config.awk
var networkConfigAwk []byte

// Flavor is what a guest is made of besides the Debian kernel and busybox.
type Flavor struct {
	// Name prefixes the build's cache folder.
	Name string
	// Packages are downloaded and unpacked besides the kernel.
	Packages []string
	// Modules are loaded by init, their dependencies first.
	Modules []string
	// Files are small files by path in the initramfs.
	Files map[string][]byte
	// Init is /init; Inittab /etc/inittab.
	Init, Inittab []byte
	// Programs are dynamically linked programs from the unpacked packages,
	// added with the libraries they link.
	Programs []string
	// Static are further files by path in the initramfs, read from this
	// machine (static programs, images), with their modes.
	Static map[string]StaticFile
}

// StaticFile is a file of this machine put into the initramfs.
type StaticFile struct {
	Source string
	Mode   uint32
}

// Test is the test guest: the guest agent, and dropbear with the libraries
// it needs that the host may lack.
var Test = Flavor{
	Name:     "guest",
	Packages: []string{"qemu-guest-agent", "dropbear-bin", "libtomcrypt1", "libtommath1"},
	// ahci and sd_mod: disks on the SATA bus, KubeVirt's default;
	// virtio_scsi: hotplugged disks, on the SCSI bus by default.
	Modules: []string{"virtio_pci", "virtio_blk", "virtio_net", "virtio_console", "ahci", "sd_mod", "virtio_scsi", "ext4", "vfat", "nls_cp437", "nls_ascii"},
	Files: map[string][]byte{
		// guest: a second user, for the guest agent's per-user writes.
		"etc/passwd":             []byte("root:x:0:0:root:/root:/bin/sh\nguest:x:1000:1000:guest:/home/guest:/bin/sh\n"),
		"etc/group":              []byte("root:x:0:\nguest:x:1000:\n"),
		"etc/shadow":             []byte("root:*:20000:0:99999:7:::\nguest:*:20000:0:99999:7:::\n"),
		"home/guest/.profile":    []byte("# the guest user's home\n"),
		"etc/shells":             []byte("/bin/sh\n"),
		"etc/hostname":           []byte("tekvirt-guest\n"),
		"etc/network-config.awk": networkConfigAwk,
		"etc/os-release": []byte("PRETTY_NAME=\"tekvirt test guest (Debian kernel, busybox)\"\nNAME=\"tekvirt guest\"\n" +
			"ID=tekvirt-guest\nID_LIKE=debian\nVERSION_ID=1\n"),
	},
	Init:     initScript,
	Inittab:  inittab,
	Programs: []string{"usr/sbin/qemu-ga", "usr/sbin/dropbear"},
}

// Guest is a built guest: boot it with Kernel and Initrd.
type Guest struct {
	Kernel string
	Initrd string
	// KernelVersion is the Debian kernel release, e.g. 6.1.0-57-amd64.
	KernelVersion string
}

// layoutVersion changes whenever the builder lays files out differently,
// so that no earlier build is reused.
const layoutVersion = 3

// Build makes the test guest under dir, reusing an earlier build of the
// same packages and init files.
func Build(ctx context.Context, dir string) (*Guest, error) { return Test.Build(ctx, dir) }

// key digests everything the build of f reads besides the packages'
// content (named by version through the kernel package).
func (f Flavor) key(kpkg string) ([]byte, error) {
	h := sha256.New()
	fmt.Fprintf(h, "layout %d\n", layoutVersion)
	h.Write([]byte(kpkg + "\x00" + strings.Join(f.Modules, ",") + "\x00" + strings.Join(f.Packages, ",") + "\x00"))
	for _, b := range [][]byte{f.Init, f.Inittab, udhcpcScript} {
		h.Write(b)
	}
	for _, n := range sortedKeys(f.Files) {
		h.Write([]byte(n))
		h.Write(f.Files[n])
	}
	h.Write([]byte(strings.Join(f.Programs, ",")))
	for _, n := range sortedKeys(f.Static) {
		// By content: the testbed relinks its binaries on every run.
		data, err := os.ReadFile(f.Static[n].Source)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s=%x:%o\n", n, sha256.Sum256(data), f.Static[n].Mode)
	}
	return h.Sum(nil), nil
}

func sortedKeys[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Build makes the guest of flavor f under dir, reusing an earlier build of
// the same inputs.
func (f Flavor) Build(ctx context.Context, dir string) (*Guest, error) {
	kpkg, err := kernelPackage(ctx)
	if err != nil {
		return nil, err
	}
	kver := strings.TrimPrefix(kpkg, "linux-image-")
	sum, err := f.key(kpkg)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, f.Name+"-"+hex.EncodeToString(sum[:6]))
	g := &Guest{Kernel: filepath.Join(out, "vmlinuz"), Initrd: filepath.Join(out, "initrd.gz"), KernelVersion: kver}
	if _, err := os.Stat(g.Initrd); err == nil {
		return g, nil
	}
	work := out + ".work"
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	root := filepath.Join(work, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if err := run(ctx, work, "apt-get", append([]string{"download", kpkg}, f.Packages...)...); err != nil {
		return nil, err
	}
	debs, _ := filepath.Glob(filepath.Join(work, "*.deb"))
	for _, d := range debs {
		if err := run(ctx, work, "dpkg-deb", "-x", d, root); err != nil {
			return nil, err
		}
	}
	if err := f.writeOutputs(ctx, g, root, out); err != nil {
		return nil, err
	}
	return g, os.RemoveAll(work)
}

// writeOutputs packs the initramfs from the unpacked packages in root and
// writes it and the kernel into out.
func (f Flavor) writeOutputs(ctx context.Context, g *Guest, root, out string) error {
	entries, err := f.initramfs(ctx, root, g.KernelVersion)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err := writeCPIO(zw, entries); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	kernel, err := os.ReadFile(filepath.Join(root, "boot", "vmlinuz-"+g.KernelVersion))
	if err != nil {
		return err
	}
	if err := os.WriteFile(g.Kernel, kernel, 0o644); err != nil {
		return err
	}
	// The initrd goes last and atomically: its presence marks a complete build.
	if err := os.WriteFile(g.Initrd+".tmp", buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(g.Initrd+".tmp", g.Initrd)
}

// kernelPackage names the kernel image package Debian's meta package points to.
func kernelPackage(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", "linux-image-amd64").Output()
	if err != nil {
		return "", fmt.Errorf("resolving the Debian kernel package: %w", err)
	}
	m := regexp.MustCompile(`Depends: (linux-image-[0-9][^\s]*-amd64)`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("apt-cache depends linux-image-amd64 names no kernel image: %s", out)
	}
	return string(m[1]), nil
}

// initramfs lists the files of the guest's initramfs.
func (f Flavor) initramfs(ctx context.Context, root, kver string) (map[string]cpioEntry, error) {
	e := map[string]cpioEntry{}
	for _, d := range []string{"bin", "sbin", "etc", "proc", "sys", "dev", "run", "tmp", "usr", "usr/sbin", "lib", "lib64", "lib/modules", "var", "root", "mnt"} {
		e[d] = cpioEntry{mode: modeDir | 0o755}
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("reading /bin/busybox (apt-get install busybox-static): %w", err)
	}
	e["bin/busybox"] = cpioEntry{mode: modeFile | 0o755, data: busybox}
	e["bin/sh"] = cpioEntry{mode: modeSymlink | 0o777, data: []byte("busybox")}
	e["init"] = cpioEntry{mode: modeFile | 0o755, data: f.Init}
	e["etc/inittab"] = cpioEntry{mode: modeFile | 0o644, data: f.Inittab}
	e["etc/udhcpc.script"] = cpioEntry{mode: modeFile | 0o755, data: udhcpcScript}
	for name, data := range f.Files {
		e[name] = cpioEntry{mode: modeFile | 0o644, data: data}
		addParents(e, name)
	}
	for name, sf := range f.Static {
		data, err := os.ReadFile(sf.Source)
		if err != nil {
			return nil, err
		}
		e[name] = cpioEntry{mode: modeFile | sf.Mode, data: data}
		addParents(e, name)
	}
	e["etc/dropbear"] = cpioEntry{mode: modeDir | 0o700}
	// qemu-ga powers the guest off through shutdown(8) and sets passwords
	// through chpasswd(8), which busybox lacks.
	e["sbin/shutdown"] = cpioEntry{mode: modeFile | 0o755, data: []byte("#!/bin/sh\nexec /bin/poweroff -f\n")}
	e["usr/sbin/chpasswd"] = cpioEntry{mode: modeFile | 0o755, data: chpasswdScript}
	addParents(e, "usr/sbin/chpasswd")
	if err := addModules(ctx, e, root, kver, f.Modules); err != nil {
		return nil, err
	}
	for _, prog := range f.Programs {
		if err := addProgram(e, root, prog); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// addModules adds the modules and etc/modules.load, their insmod order as
// modprobe --show-depends gives it, each module once.
func addModules(ctx context.Context, e map[string]cpioEntry, root, kver string, modules []string) error {
	if err := run(ctx, root, "depmod", "-b", root, kver); err != nil {
		return err
	}
	modRoot := filepath.Join(root, "lib", "modules", kver)
	seen := map[string]bool{}
	var order []string
	for _, m := range modules {
		out, err := exec.CommandContext(ctx, "modprobe", "-d", root, "-S", kver, "--show-depends", m).Output()
		if err != nil {
			return fmt.Errorf("resolving module %s: %w", m, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "insmod" {
				continue
			}
			rel, err := filepath.Rel(modRoot, f[1])
			if err != nil || seen[rel] {
				continue
			}
			seen[rel] = true
			order = append(order, rel)
			data, err := os.ReadFile(f[1])
			if err != nil {
				return err
			}
			e[filepath.Join("lib/modules", rel)] = cpioEntry{mode: modeFile | 0o644, data: data}
			addParents(e, filepath.Join("lib/modules", rel))
		}
	}
	e["etc/modules.load"] = cpioEntry{mode: modeFile | 0o644, data: []byte(strings.Join(order, "\n") + "\n")}
	return nil
}

// addProgram adds the dynamically linked program root/rel and the libraries
// ldd finds for it, in the unpacked packages first, then on this (Debian)
// machine.
func addProgram(e map[string]cpioEntry, root, rel string) error {
	src := filepath.Join(root, rel)
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	e[rel] = cpioEntry{mode: modeFile | 0o755, data: data}
	addParents(e, rel)
	cmd := exec.Command("ldd", src)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(root, "usr/lib/x86_64-linux-gnu")+":"+filepath.Join(root, "lib/x86_64-linux-gnu"))
	out, err := cmd.Output()
	if err != nil && bytes.Contains(out, []byte("not a dynamic executable")) {
		return nil // static: the program alone
	}
	if err != nil {
		return fmt.Errorf("ldd %s: %w", src, err)
	}
	if bytes.Contains(out, []byte("not found")) {
		return fmt.Errorf("ldd %s: libraries missing:\n%s", src, out)
	}
	for _, m := range regexp.MustCompile(`(?m)(/\S+\.so[.\d]*)\s`).FindAllStringSubmatch(string(out), -1) {
		lib := m[1]
		data, err := os.ReadFile(lib)
		if err != nil {
			return fmt.Errorf("library %s of %s: %w", lib, src, err)
		}
		libRel := strings.TrimPrefix(strings.TrimPrefix(lib, root), "/")
		e[libRel] = cpioEntry{mode: modeFile | 0o755, data: data}
		addParents(e, libRel)
	}
	return nil
}

func addParents(e map[string]cpioEntry, rel string) {
	for d := filepath.Dir(rel); d != "." && d != "/"; d = filepath.Dir(d) {
		if _, ok := e[d]; !ok {
			e[d] = cpioEntry{mode: modeDir | 0o755}
		}
	}
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
