package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	wsclient "k8s.io/client-go/transport/websocket"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// runningAfter runs argv and returns how long from its start until the
// VM's VMI is Running; then stops the VM with a runStrategy patch and
// waits for the VMI to go.
func runningAfter(t *testing.T, f *framework.Framework, c client.Client, vm *v1.VirtualMachine, argv ...string) time.Duration {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out)
	}
	framework.WaitVMI(t, c, vm.Namespace, vm.Name, 3*time.Minute, "Running", func(vmi *v1.VirtualMachineInstance) error {
		if vmi.Status.Phase != v1.Running {
			return fmt.Errorf("phase %s", vmi.Status.Phase)
		}
		return nil
	})
	took := time.Since(start)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"runStrategy":"Halted"}}`))
	if err := c.Patch(context.Background(), vm, patch); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "the VMI gone", func() error {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), &v1.VirtualMachineInstance{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("VMI still there (%w)", err)
	})
	return took
}

// TestVirtctlStart compares `virtctl start` (the subresources API sets
// runStrategy Always) with `kubectl patch` of runStrategy, each until the
// VMI is Running, interleaved on one Halted VM, median of 5 each.
func TestVirtctlStart(t *testing.T) {
	f := benchOnly(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	vm := framework.GuestVM(ns, "start-bench", framework.GuestImage, v1.RunStrategyHalted)
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	var ours, patch []time.Duration
	for i := 0; i < runs; i++ {
		ours = append(ours, runningAfter(t, f, c, vm, framework.Virtctl(t), "start", vm.Name, "-n", ns))
		patch = append(patch, runningAfter(t, f, c, vm, f.Bin("kubectl"), "patch", "vm", vm.Name, "-n", ns, "--type=merge", "-p", `{"spec":{"runStrategy":"Always"}}`))
	}
	mo, mp := median(ours), median(patch)
	t.Logf("kubectl patch runStrategy Always -> VMI Running: median %s of %v", mp, patch)
	t.Logf("virtctl start -> VMI Running: median %s of %v", mo, ours)
	t.Logf("virtctl start / kubectl patch: %.2f", float64(mo)/float64(mp))
}

// dialStream opens the websocket at path through the kube-apiserver as
// the framework's admin, with virtctl's subprotocol.
func dialStream(t *testing.T, f *framework.Framework, path string) *gwebsocket.Conn {
	t.Helper()
	rt, holder, err := wsclient.RoundTripperFor(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(f.Config.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := wsclient.Negotiate(rt, holder, req, "plain.kubevirt.io")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return conn
}

// TestStreams measures, on one running VM: the console's attach (websocket
// open through the kube-apiserver, the subresources API and the node's
// handler) against a GET of the VMI through the same kube-apiserver,
// median of 20 each; and port-forward's throughput reading 2 MiB the guest
// sends on a port, against the same bytes as the output of a guest-agent
// exec straight through libvirt, median of 3 each.
func TestStreams(t *testing.T) {
	f := benchOnly(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	vm := framework.GuestVM(ns, "stream-bench", framework.GuestImage, v1.RunStrategyAlways)
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running with its agent", framework.AgentConnected)
	base := "/apis/subresources.kubevirt.io/v1/namespaces/" + ns + "/virtualmachineinstances/" + vm.Name

	var attach, get []time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		conn := dialStream(t, f, base+"/console")
		attach = append(attach, time.Since(start))
		_ = conn.Close()
		start = time.Now()
		if _, err := f.Kube.Discovery().RESTClient().Get().AbsPath("/apis/kubevirt.io/v1/namespaces", ns, "virtualmachineinstances", vm.Name).DoRaw(context.Background()); err != nil {
			t.Fatal(err)
		}
		get = append(get, time.Since(start))
		// The handler lets the next console in once the last one's
		// stream has ended.
		time.Sleep(100 * time.Millisecond)
	}
	ma, mg := median(attach), median(get)
	t.Logf("GET the VMI through the kube-apiserver: median %s", mg)
	t.Logf("console attach: median %s of %v; ratio %.1f", ma, attach, float64(ma)/float64(mg))

	direct, _ := directAgent(t, vmi)
	// libvirt carries at most 4 MiB of agent reply, base64 included.
	const size = 2 << 20
	var forwarded, exec []time.Duration
	for i := 0; i < 3; i++ {
		// No descriptor of the agent's may stay open in the background,
		// or the exec never ends.
		serve := fmt.Sprintf("(head -c %d /dev/zero | busybox nc -l -p 9000) </dev/null >/dev/null 2>&1 &", size)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := direct.Exec(ctx, "/bin/sh", []string{"-c", serve}, 20*time.Millisecond)
		cancel()
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("serving bytes in the guest: %+v %v", res, err)
		}
		var n int
		framework.Eventually(t, 30*time.Second, "the guest's bytes through port-forward", func() error {
			start := time.Now()
			conn := dialStream(t, f, base+"/portforward/9000")
			defer func() { _ = conn.Close() }()
			n = 0
			// nc may keep the connection open after its input ended.
			for n < size {
				_, data, err := conn.ReadMessage()
				n += len(data)
				if err != nil {
					break
				}
			}
			if n != size {
				return fmt.Errorf("read %d bytes, want %d", n, size)
			}
			forwarded = append(forwarded, time.Since(start))
			return nil
		})
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		res, err = direct.Exec(ctx, "/bin/sh", []string{"-c", fmt.Sprintf("head -c %d /dev/zero", size)}, 20*time.Millisecond)
		cancel()
		if err != nil || len(res.Stdout) != size {
			t.Fatalf("guest-exec of %d bytes: %d bytes, %v", size, len(res.Stdout), err)
		}
		exec = append(exec, time.Since(start))
	}
	mf, me := median(forwarded), median(exec)
	mib := float64(size) / (1 << 20)
	t.Logf("guest-agent exec straight through libvirt, %.0f MiB of output: median %s (%.1f MiB/s)", mib, me, mib/me.Seconds())
	t.Logf("port-forward, %.0f MiB from the guest: median %s of %v (%.1f MiB/s); ratio of throughputs %.1f",
		mib, mf, forwarded, mib/mf.Seconds(), me.Seconds()/mf.Seconds())
}
