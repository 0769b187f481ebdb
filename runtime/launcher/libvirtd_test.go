package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/domain"
)

// fakeLibvirtdEnv makes the test binary act as libvirtd: it serves the
// socket its -f configuration names until SIGTERM.
const fakeLibvirtdEnv = "TEKVIRT_FAKE_LIBVIRTD"

func TestMain(m *testing.M) {
	switch os.Getenv(fakeLibvirtdEnv) {
	case "serve":
		fakeLibvirtd()
	case "fail":
		os.Exit(3)
	case "orphaner":
		os.Exit(orphanLeftZombie())
	case "spawn":
		self, _ := os.Executable()
		nap := exec.Command(self)
		nap.Env = append(os.Environ(), fakeLibvirtdEnv+"=nap")
		if err := nap.Start(); err != nil {
			os.Exit(20)
		}
		fmt.Println(nap.Process.Pid)
		os.Exit(0)
	case "nap":
		time.Sleep(100 * time.Millisecond)
		os.Exit(0)
	case "await-term":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		select {
		case <-sig:
			os.Exit(0)
		case <-time.After(10 * time.Second):
			os.Exit(21)
		}
	}
	os.Exit(m.Run())
}

func fakeLibvirtd() {
	conf, err := os.ReadFile(os.Args[len(os.Args)-1])
	if err != nil {
		os.Exit(4)
	}
	dir := regexp.MustCompile(`unix_sock_dir = "([^"]+)"`).FindSubmatch(conf)
	if dir == nil {
		os.Exit(5)
	}
	l, err := net.Listen("unix", filepath.Join(string(dir[1]), "libvirt-sock"))
	if err != nil {
		os.Exit(6)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	os.Exit(0)
}

func TestLibvirtdStartsAndStops(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv(fakeLibvirtdEnv, "serve")
	l := &Libvirtd{Binary: self, ConfDir: filepath.Join(dir, "etc"), RunDir: filepath.Join(dir, "run")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.Start(ctx, io.Discard); err != nil {
		t.Fatal(err)
	}
	// Root runs the system daemon (tests on a bare machine); anyone else,
	// as in a launcher Pod, a session daemon configured in its run
	// directory.
	uri, qemuConf := "qemu:///session", filepath.Join(dir, "run", "config", "libvirt", "qemu.conf")
	if os.Geteuid() == 0 {
		uri, qemuConf = "qemu:///system", filepath.Join(dir, "etc", "qemu.conf")
	}
	if l.URI() != uri+"?socket="+filepath.Join(dir, "run", "libvirt-sock") {
		t.Errorf("URI %s", l.URI())
	}
	if conf, err := os.ReadFile(qemuConf); err != nil || !strings.Contains(string(conf), "cgroup_controllers = [ ]") {
		t.Errorf("qemu.conf: %q, %v", conf, err)
	}
	l.Stop()
	if l.cmd.ProcessState == nil || !l.cmd.ProcessState.Exited() {
		t.Errorf("libvirtd still runs after Stop: %v", l.cmd.ProcessState)
	}

	t.Setenv(fakeLibvirtdEnv, "fail")
	failing := &Libvirtd{Binary: self, ConfDir: filepath.Join(dir, "etc"), RunDir: filepath.Join(dir, "run2")}
	if err := failing.Start(ctx, io.Discard); err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Errorf("a daemon that dies: %v", err)
	}
}

// orphanLeftZombie is the child's check: it starts an intermediate that
// starts a short-lived grandchild and exits at once, leaving the grandchild
// to the reaper; once that has ended it must not linger as a zombie.
func orphanLeftZombie() int {
	self, _ := os.Executable()
	mid := exec.Command(self)
	mid.Env = append(os.Environ(), fakeLibvirtdEnv+"=spawn")
	out, err := mid.Output()
	if err != nil {
		return 10
	}
	pid := strings.TrimSpace(string(out))
	time.Sleep(700 * time.Millisecond)
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0 // reaped
	}
	if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
		return 11
	}
	return 12 // still running: the test's timing is off
}

func TestRunAsInitReapsOrphansAndPassesSignals(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeLibvirtdEnv, "orphaner")
	if code := RunAsInit([]string{self}); code != 0 {
		t.Errorf("orphan check exited %d (11: a zombie was left)", code)
	}
	t.Setenv(fakeLibvirtdEnv, "await-term")
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
	if code := RunAsInit([]string{self}); code != 0 {
		t.Errorf("the child did not get SIGTERM and exit 0: %d", code)
	}
}

func TestAwaitSpec(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		time.Sleep(100 * time.Millisecond)
		data, _ := EncodeSpec(&Spec{URI: "qemu:///system?socket=/s1"})
		_ = writeAtomic(filepath.Join(dir, SpecFile), data)
	}()
	s, err := AwaitSpec(ctx, dir, 10*time.Millisecond)
	if err != nil || s.URI != "qemu:///system?socket=/s1" {
		t.Fatalf("spec written later: %+v, %v", s, err)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	if _, err := AwaitSpec(stopped, t.TempDir(), 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "waiting for launch.json") {
		t.Errorf("a stopped wait: %v", err)
	}
	cancelled := t.TempDir()
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = os.WriteFile(filepath.Join(cancelled, CancelFile), nil, 0o644)
	}()
	if s, err := AwaitSpec(ctx, cancelled, 10*time.Millisecond); s != nil || err != nil {
		t.Errorf("a cancelled launch: %+v, %v; want nil, nil", s, err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, SpecFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := AwaitSpec(ctx, bad, 10*time.Millisecond); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a broken spec must fail at once: %v", err)
	}
}

func TestPodClaimPaths(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{
		{Name: "root", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "root-dv"}}},
		{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}},
		{Name: "containerdisk", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
	}}}
	spec := &Spec{VMI: vmi, Options: domain.Options{Volumes: map[string]domain.Volume{
		"root":          {Path: "/var/lib/tekvirt/pool/pvc-1/disk.img", FDGroup: "volume-0"},
		"data":          {Path: "/var/lib/tekvirt/pool/pvc-2/disk.img", FDGroup: "volume-1", ReadOnly: true},
		"containerdisk": {Path: "/var/lib/tekvirt/vms/uid/disk-2.qcow2", Format: "qcow2"},
	}}}
	(&Pod{DisksDir: "/var/run/kubevirt-private/vmi-disks"}).claimPaths(spec)
	for name, want := range map[string]string{
		"root": "/var/run/kubevirt-private/vmi-disks/root/disk.img", "data": "/var/run/kubevirt-private/vmi-disks/data/disk.img",
		"containerdisk": "/var/lib/tekvirt/vms/uid/disk-2.qcow2",
	} {
		if got := spec.Options.Volumes[name]; got.Path != want {
			t.Errorf("%s: %s, want %s", name, got.Path, want)
		}
	}
	if !spec.Options.Volumes["data"].ReadOnly || spec.Options.Volumes["root"].FDGroup != "volume-0" {
		t.Errorf("remapping lost the volume's other fields: %+v", spec.Options.Volumes)
	}
}
