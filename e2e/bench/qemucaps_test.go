package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// capsStart creates a VMI on node and returns how long its launcher took
// to start the domain (libvirt probes QEMU there unless its capabilities
// are warm) and create -> Running with the agent connected; then deletes it.
func capsStart(t *testing.T, f *framework.Framework, c client.Client, ns, name, node string) (domainStart, running time.Duration) {
	t.Helper()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: framework.GuestVMI(framework.GuestImage, "bench")}
	vmi.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	start := time.Now()
	if err := c.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	got := framework.WaitVMI(t, c, ns, name, 3*time.Minute, "running with its agent", framework.AgentConnected)
	running = time.Since(start)
	var line struct {
		Took string `json:"took"`
	}
	f.LauncherLogLine(t, got, "domain started", &line)
	d, err := time.ParseDuration(line.Took)
	if err != nil {
		t.Fatalf("domain started took %q: %v", line.Took, err)
	}
	if err := c.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, got, 2*time.Minute)
	return d, running
}

// setAside hides the node's QEMU capabilities files from the handler (it
// hands launchers only *.xml) or puts them back.
func setAside(t *testing.T, dir string, names []string, aside bool) {
	t.Helper()
	for _, n := range names {
		from, to := filepath.Join(dir, n), filepath.Join(dir, n+".aside")
		if !aside {
			from, to = to, from
		}
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
}

// TestQEMUCapabilitiesStart compares VM starts whose launcher gets the
// node's QEMU capabilities (warm) with starts where the handler has none to
// give (cold: libvirt probes QEMU in the launcher Pod), interleaved on one
// node, median of 5 each: the launcher's domain start, and VMI create ->
// Running with its agent.
func TestQEMUCapabilitiesStart(t *testing.T) {
	f := benchOnly(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	node := f.Nodes(t)[0]
	dir, names := f.QEMUCapabilitiesVolume(t, node)
	t.Cleanup(func() {
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(dir, n+".aside")); err == nil {
				_ = os.Rename(filepath.Join(dir, n+".aside"), filepath.Join(dir, n))
			}
		}
	})
	var warmDomain, coldDomain, warmRun, coldRun []time.Duration
	for i := 0; i < runs; i++ {
		d, r := capsStart(t, f, c, ns, fmt.Sprintf("warm-%d", i), node)
		warmDomain, warmRun = append(warmDomain, d), append(warmRun, r)
		setAside(t, dir, names, true)
		d, r = capsStart(t, f, c, ns, fmt.Sprintf("cold-%d", i), node)
		setAside(t, dir, names, false)
		coldDomain, coldRun = append(coldDomain, d), append(coldRun, r)
	}
	t.Logf("launcher domain start, libvirt probing QEMU: median %s of %v", median(coldDomain), coldDomain)
	t.Logf("launcher domain start, warm capabilities:    median %s of %v", median(warmDomain), warmDomain)
	t.Logf("domain start ratio warm/cold %.2f", float64(median(warmDomain))/float64(median(coldDomain)))
	t.Logf("VMI create -> Running with agent: cold median %s, warm median %s, ratio warm/cold %.2f",
		median(coldRun), median(warmRun), float64(median(warmRun))/float64(median(coldRun)))
}
