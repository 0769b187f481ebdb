package cluster

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestDebianClosure(t *testing.T) {
	out := "qemu\t1:7.2\tinstall ok installed\tlibc6 (>= 2.34), libfoo1 | libfoo-alt, python3:any\t\n" +
		"libc6\t2.36\tinstall ok installed\t\tlibgcc-s1\n" +
		"libgcc-s1\t12.2\tinstall ok installed\t\t\n" +
		"libfoo-alt\t1.0\tinstall ok installed\tlibc6\t\n" +
		"libfoo1\t1.0\tdeinstall ok config-files\t\t\n" +
		"unrelated\t1\tinstall ok installed\t\t\n"
	installed := parseInstalled(out)
	if _, ok := installed["libfoo1"]; ok {
		t.Error("a package with only config files left counts as installed")
	}
	got, err := closure(installed, []string{"qemu"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Name+"="+p.Version)
	}
	// The first installed alternative; Pre-Depends followed; ":any" dropped;
	// python3 is not installed and skipped.
	if want := []string{"libc6=2.36", "libfoo-alt=1.0", "libgcc-s1=12.2", "qemu=1:7.2"}; !reflect.DeepEqual(names, want) {
		t.Errorf("closure %v, want %v", names, want)
	}
	if _, err := closure(installed, []string{"libvirt-daemon"}); err == nil {
		t.Error("a root that is not installed must fail")
	}
}

func TestDebianFilesMergedUsr(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libx.so.1")
	if err := os.WriteFile(lib, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "libx.so")
	if err := os.Symlink("libx.so.1", link); err != nil {
		t.Fatal(err)
	}
	files, err := debianFiles("/.\n" + lib + "\n" + link + "\n" + dir + "/gone\n/usr/share/doc/x/copyright\n/etc/libvirt/qemu.conf\n")
	if err != nil {
		t.Fatal(err)
	}
	if f := files[lib]; f.Source != lib || f.Mode != 0o755 {
		t.Errorf("regular file %+v", f)
	}
	if f := files[link]; f.Link != "libx.so.1" {
		t.Errorf("link %+v", f)
	}
	if f := files["/lib"]; f.Link != "usr/lib" {
		t.Errorf("merged /usr link /lib: %+v", f)
	}
	for _, p := range []string{dir + "/gone", "/usr/share/doc/x/copyright", "/etc/libvirt/qemu.conf"} {
		if _, ok := files[p]; ok {
			t.Errorf("%s is in the image", p)
		}
	}
	if got := imagePath("/lib/x86_64-linux-gnu/libc.so.6"); got != "/usr/lib/x86_64-linux-gnu/libc.so.6" {
		t.Errorf("imagePath = %s", got)
	}
}
