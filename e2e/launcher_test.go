package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"libvirt.org/go/libvirt"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/e2e/guest"
	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// TestLauncherBootsGuestThroughLibvirt runs a kernel-boot VMI through the
// launcher on the libvirtd `tekvirt up` started: the domain XML of
// runtime/domain must be accepted by real libvirt, the guest must boot, the
// agent must run a command, and a guest poweroff must end the run as
// Succeeded with the transient domain gone.
func TestLauncherBootsGuestThroughLibvirt(t *testing.T) {
	home := framework.Home()
	sock := filepath.Join(home, "run", "libvirt", "libvirt-sock")
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("no libvirtd socket at %s: run `tekvirt up` first", sock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g, err := guest.Build(ctx, filepath.Join(home, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	// QEMU runs as libvirt-qemu: it must reach the kernel and create the
	// agent socket, so the VM's files live outside $TEKVIRT_HOME (which may
	// sit in a private home directory) in a folder it owns.
	dir := filepath.Join("/run/tekvirt/vms", "e2e-launcher")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	for _, f := range []string{g.Kernel, g.Initrd} {
		if out, err := exec.Command("cp", f, dir).CombinedOutput(); err != nil {
			t.Fatalf("staging %s: %v %s", f, err, out)
		}
	}
	if out, err := exec.Command("chown", "-R", "libvirt-qemu", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	// No network: the handler builds a guest's tap in its launcher Pod.
	noNIC := false
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "e2e", Name: "launcher", UID: "3f0e4a8c-1b2d-4c5e-8f7a-9b0c1d2e3f40"},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Devices:   v1.Devices{AutoattachPodInterface: &noNIC},
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
			Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{
				KernelArgs: "console=ttyS0 panic=-1 quiet",
				Container:  &v1.KernelBootContainer{Image: "local/guest", KernelPath: "/boot/vmlinuz", InitrdPath: "/boot/initrd.gz"},
			}},
		}},
	}
	opts := domain.Options{
		Kernel: filepath.Join(dir, filepath.Base(g.Kernel)), Initrd: filepath.Join(dir, filepath.Base(g.Initrd)),
		AgentSocket:  filepath.Join(dir, "agent.sock"),
		SerialSocket: filepath.Join(dir, "serial.sock"),
		SerialLog:    filepath.Join(dir, "serial.log"),
	}
	start := time.Now()
	vm, err := launcher.Start("qemu:///system?socket="+sock, vmi, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	t.Logf("domain started in %s", time.Since(start).Round(time.Millisecond))
	c := vm.Agent()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Ping(pctx)
		pcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			log, _ := os.ReadFile(opts.SerialLog)
			t.Fatalf("guest agent never answered (%v); serial log:\n%s", err, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("guest agent connected %s after the launcher started", time.Since(start).Round(time.Millisecond))
	res, err := c.Exec(ctx, "/bin/uname", []string{"-r"}, 50*time.Millisecond)
	if err != nil || strings.TrimSpace(string(res.Stdout)) != g.KernelVersion {
		t.Fatalf("uname -r in guest: %+v %v", res, err)
	}
	// The agent does not answer a poweroff it runs itself; the exit is what counts.
	_, _ = c.Exec(ctx, "/bin/poweroff", []string{"-f"}, 50*time.Millisecond)
	exit, err := vm.Wait(ctx)
	if err != nil || !exit.Succeeded {
		t.Fatalf("launcher exit = %+v, %v; want a Succeeded shutdown", exit, err)
	}
	conn, err := libvirt.NewConnect("qemu:///system?socket=" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Close() }()
	if dom, err := conn.LookupDomainByName(domain.Name(vmi)); err == nil {
		_ = dom.Free()
		t.Fatalf("transient domain %s still known to libvirt", domain.Name(vmi))
	}
}
