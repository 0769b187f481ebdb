package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// capabilitiesReport is the launcher's "QEMU capabilities" log line.
type capabilitiesReport struct {
	Installed int  `json:"installed"`
	Reused    bool `json:"reused"`
}

// launcherCapabilities starts a VMI named name on node, waits for its guest
// agent, and returns what its launcher reported of the capabilities it was
// given and the launcher's pid.
func launcherCapabilities(t *testing.T, f *framework.Framework, ns, name, node string) (capabilitiesReport, int) {
	t.Helper()
	c := f.VMClient(t)
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: framework.GuestVMI(framework.GuestImage, name)}
	vmi.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	if err := c.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), vmi)
		framework.WaitGone(t, c, vmi, 2*time.Minute)
	})
	got := framework.WaitVMI(t, c, ns, name, 3*time.Minute, "running with its agent", framework.AgentConnected)
	var r capabilitiesReport
	f.LauncherLogLine(t, got, "QEMU capabilities", &r)
	return r, framework.ParentPID(t, qemuOf(t, domain.Name(got)))
}

var qemuCtime = regexp.MustCompile(`<qemuctime>(\d+)</qemuctime>`)

// TestQEMUCapabilitiesWarm: the handler Pod's init container probes QEMU
// once with the launcher image; a launcher Pod on that node starts its
// libvirtd with those capabilities and libvirt keeps them (no probe at VM
// start). Made stale (another QEMU ctime), they are not trusted: libvirt
// probes again, the launcher says so and the VM still starts.
func TestQEMUCapabilitiesWarm(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	node := f.Nodes(t)[0]
	dir, names := f.QEMUCapabilitiesVolume(t, node)

	warm, pid := launcherCapabilities(t, f, ns, "warm", node)
	if warm.Installed != len(names) || !warm.Reused {
		t.Errorf("launcher on %s: %+v; want the node's %d capabilities files installed and reused", node, warm, len(names))
	}
	for _, name := range names {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(fmt.Sprintf("/proc/%d/root", pid), launcher.SessionCapabilitiesCache(launcherpod.LibvirtdDir), name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("libvirt's cache in the launcher container differs from the handler's %s (%v)", name, err)
		}
	}

	// Every VM started on this node meanwhile probes QEMU itself; the
	// files are put back when the test ends.
	path := filepath.Join(dir, names[0])
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := qemuCtime.FindSubmatch(orig)
	if m == nil {
		t.Fatalf("no <qemuctime> in %s", path)
	}
	ctime, _ := strconv.ParseInt(string(m[1]), 10, 64)
	stale := qemuCtime.ReplaceAll(orig, []byte(fmt.Sprintf("<qemuctime>%d</qemuctime>", ctime-1)))
	if err := os.WriteFile(path, stale, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Errorf("restoring %s: %v", path, err)
		}
	})
	cold, pid := launcherCapabilities(t, f, ns, "stale", node)
	if cold.Installed != len(names) || cold.Reused {
		t.Errorf("launcher given stale capabilities: %+v; want them installed and not reused", cold)
	}
	reprobed, err := os.ReadFile(filepath.Join(fmt.Sprintf("/proc/%d/root", pid), launcher.SessionCapabilitiesCache(launcherpod.LibvirtdDir), names[0]))
	if err != nil {
		t.Fatal(err)
	}
	if m := qemuCtime.FindSubmatch(reprobed); m == nil || string(m[1]) != strconv.FormatInt(ctime, 10) {
		t.Errorf("libvirt did not probe QEMU again over the stale file: qemuctime %q, want %d", m, ctime)
	}
}
