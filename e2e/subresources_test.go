package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	wsclient "k8s.io/client-go/transport/websocket"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// clientsetAs is a clientset acting as user (impersonated; "" is the admin).
func clientsetAs(t *testing.T, f *framework.Framework, user string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(f.Config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// subresource PUTs body to the VM's subresource sub as user (impersonated;
// "" is the admin), as virtctl does.
func subresource(t *testing.T, f *framework.Framework, user, ns, vm, sub, body string) error {
	t.Helper()
	return clientsetAs(t, f, user).Discovery().RESTClient().Put().AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", ns, "virtualmachines", vm, sub).
		SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background()).Error()
}

// bindUser gives user the built-in ClusterRole role in ns.
func bindUser(t *testing.T, f *framework.Framework, ns, user, role string) {
	t.Helper()
	// view, edit and admin all read pods.
	bindUserFor(t, f, ns, user, role, &authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods"})
}

// bindUserFor binds user to the ClusterRole role in ns and waits until the
// API server's authorizer, which learns of bindings from a watch, allows
// what the role grants (ra).
func bindUserFor(t *testing.T, f *framework.Framework, ns, user, role string, ra *authzv1.ResourceAttributes) {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	if _, err := f.Kube.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, user+" bound to "+role+" in "+ns, func() error {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: ra}}
		got, err := f.Kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !got.Status.Allowed {
			return fmt.Errorf("not yet allowed: %s", got.Status.Reason)
		}
		return nil
	})
}

// TestSubresourcesStartStopRestart: KubeVirt's subresources.kubevirt.io API
// is discovered and answers version; a Manual VM starts, restarts (a new
// VMI) and stops through it (tekvirt's CLI calls it, as virtctl does), its
// runStrategy untouched and its requests settled; KubeVirt's conflicts
// come back as 409 with its messages; a user with view in the namespace is
// refused with 403 naming the subresource and the VM is untouched, a user
// with edit may.
func TestSubresourcesStartStopRestart(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	res, err := f.Kube.Discovery().ServerResourcesForGroupVersion("subresources.kubevirt.io/v1")
	if err != nil {
		t.Fatalf("discovery of subresources.kubevirt.io/v1: %v", err)
	}
	var names []string
	for _, r := range res.APIResources {
		names = append(names, r.Name)
	}
	for _, want := range []string{"virtualmachines/start", "virtualmachines/stop", "virtualmachines/restart"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("discovery lists %v, not %s", names, want)
		}
	}
	ver, err := f.Kube.Discovery().RESTClient().Get().AbsPath("/apis/subresources.kubevirt.io/v1/version").DoRaw(ctx)
	if err != nil || !strings.Contains(string(ver), `"gitVersion"`) {
		t.Errorf("version: %s %v", ver, err)
	}

	vm := framework.GuestVM(ns, "manual", framework.GuestImage, v1.RunStrategyManual)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	bindUser(t, f, ns, "e2e-viewer", "view")
	bindUser(t, f, ns, "e2e-editor", "edit")
	err = subresource(t, f, "e2e-viewer", ns, vm.Name, "start", "{}")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "virtualmachines/start") {
		t.Errorf("start by a viewer: %v, want 403 naming virtualmachines/start", err)
	}
	time.Sleep(2 * time.Second)
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil || len(vm.Status.StateChangeRequests) != 0 || vm.Status.Created {
		t.Errorf("the viewer's refused start changed the VM: requests %v, created %v (%v)", vm.Status.StateChangeRequests, vm.Status.Created, err)
	}

	if err := subresource(t, f, "e2e-editor", f.Namespace(t), vm.Name, "start", "{}"); !apierrors.IsForbidden(err) {
		t.Errorf("start by an editor of another namespace: %v, want 403", err)
	}
	if out := tekvirt(t, f, "start", vm.Name, "-n", ns); !strings.Contains(out, "was scheduled to start") {
		t.Errorf("tekvirt start: %s", out)
	}
	first := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "started on request", framework.AgentConnected)
	if err := subresource(t, f, "", ns, vm.Name, "start", "{}"); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "VM is already running") {
		t.Errorf("start of a running VM: %v, want 409 VM is already running", err)
	}
	if err := subresource(t, f, "e2e-editor", ns, vm.Name, "stop", `{"dryRun":["All"]}`); err != nil {
		t.Errorf("dry-run stop by an editor: %v", err)
	}

	tekvirt(t, f, "restart", vm.Name, "-n", ns)
	second := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "a new VMI after the restart", func(vmi *v1.VirtualMachineInstance) error {
		if vmi.UID == first.UID {
			return fmt.Errorf("still the VMI %s", first.UID)
		}
		return framework.AgentConnected(vmi)
	})

	tekvirt(t, f, "stop", vm.Name, "-n", ns, "--grace-period", "0")
	framework.WaitGone(t, c, second, 2*time.Minute)
	framework.Eventually(t, time.Minute, "the VM stopped, still Manual, its requests settled", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if rs, _ := vm.RunStrategy(); rs != v1.RunStrategyManual || len(vm.Status.StateChangeRequests) != 0 || vm.Status.Created {
			return fmt.Errorf("runStrategy %s, requests %+v, created %v", rs, vm.Status.StateChangeRequests, vm.Status.Created)
		}
		return nil
	})
	if err := subresource(t, f, "", ns, vm.Name, "stop", "{}"); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "VM is not running") {
		t.Errorf("stop of a stopped VM: %v, want 409 VM is not running", err)
	}

	always := framework.GuestVM(ns, "always", framework.GuestImage, v1.RunStrategyAlways)
	// Never placed: the answer does not depend on it, and no guest boots.
	always.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "no-such-node"}
	if err := c.Create(ctx, always); err != nil {
		t.Fatal(err)
	}
	// KubeVirt answers "already running" first once the VMI exists (here
	// Pending, as the controller makes it at once), else that Always takes
	// no start request: both are its 409s for this start.
	err = subresource(t, f, "e2e-editor", ns, always.Name, "start", "")
	if refused := apierrors.IsConflict(err) && (strings.Contains(err.Error(), "Always does not support manual start requests") ||
		strings.Contains(err.Error(), "VM is already running")); !refused {
		t.Errorf("start of an Always VM: %v, want KubeVirt's 409", err)
	}
}

// vmiSubresource calls the VMI's subresource sub as user (impersonated; ""
// is the admin): GET for reads, PUT with body for changes.
func vmiSubresource(t *testing.T, f *framework.Framework, user, method, ns, vmi, sub, body string) ([]byte, error) {
	t.Helper()
	req := clientsetAs(t, f, user).Discovery().RESTClient().Verb(method).AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", ns, "virtualmachineinstances", vmi, sub)
	if body != "" {
		req = req.SetHeader("Content-Type", "application/json").Body([]byte(body))
	}
	// Result.Error, not DoRaw or Raw: only it decodes an error's Status
	// (its message).
	res := req.Do(context.Background())
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// guestBootID is the guest kernel's boot_id, new at every boot (a clock
// under TCG can run fast, so uptimes do not tell boots apart).
func guestBootID(t *testing.T, f *framework.Framework, vmi *v1.VirtualMachineInstance) string {
	t.Helper()
	res, err := podLauncher(t, f, f.LauncherPod(t, vmi)).Exec(context.Background(), guestexec.Request{Command: "/bin/cat", Args: []string{"/proc/sys/kernel/random/boot_id"}, TimeoutSeconds: 10})
	if err != nil || len(strings.TrimSpace(string(res.Stdout))) == 0 {
		t.Fatalf("the guest's boot_id: %v %+v", err, res)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// TestSubresourcesGuestAgentAndPause: the VMI operations go through the
// subresources API to the node handler and the launcher: guestosinfo,
// userlist and filesystemlist answer with KubeVirt's types (a viewer may
// read them, not pause); pause sets the VMI's Paused condition and the
// VM's Paused status, a second pause is KubeVirt's 409, unpause resumes
// the guest; freeze and unfreeze go through (a malformed timeout is a
// 400); softreboot reboots the guest in the same VMI.
func TestSubresourcesGuestAgentAndPause(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	vm := framework.GuestVM(ns, "ops", framework.GuestImage, v1.RunStrategyAlways)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running with its agent", framework.AgentConnected)
	bindUser(t, f, ns, "e2e-viewer", "view")
	bindUser(t, f, ns, "e2e-editor", "edit")

	raw, err := vmiSubresource(t, f, "e2e-viewer", "GET", ns, vmi.Name, "guestosinfo", "")
	info := &v1.VirtualMachineInstanceGuestAgentInfo{}
	if err != nil || json.Unmarshal(raw, info) != nil || info.GAVersion == "" || info.Hostname != vm.Name || info.OS.ID != "tekvirt-guest" || len(info.SupportedCommands) == 0 {
		t.Errorf("guestosinfo: %v %s", err, raw)
	}
	raw, err = vmiSubresource(t, f, "e2e-viewer", "GET", ns, vmi.Name, "userlist", "")
	users := &v1.VirtualMachineInstanceGuestOSUserList{}
	if err != nil || json.Unmarshal(raw, users) != nil || users.Items == nil {
		t.Errorf("userlist: %v %s", err, raw)
	}
	raw, err = vmiSubresource(t, f, "e2e-viewer", "GET", ns, vmi.Name, "filesystemlist", "")
	fss := &v1.VirtualMachineInstanceFileSystemList{}
	if err != nil || json.Unmarshal(raw, fss) != nil || fss.Items == nil {
		t.Errorf("filesystemlist: %v %s", err, raw)
	}

	if _, err := vmiSubresource(t, f, "e2e-viewer", "PUT", ns, vmi.Name, "pause", "{}"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "virtualmachineinstances/pause") {
		t.Errorf("pause by a viewer: %v, want 403 naming virtualmachineinstances/pause", err)
	}
	other := f.Namespace(t)
	if _, err := vmiSubresource(t, f, "e2e-editor", "PUT", other, vmi.Name, "pause", "{}"); !apierrors.IsForbidden(err) {
		t.Errorf("pause by an editor of another namespace: %v, want 403", err)
	}
	if _, err := vmiSubresource(t, f, "e2e-editor", "PUT", ns, vmi.Name, "pause", "{}"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	framework.WaitVMI(t, c, ns, vmi.Name, time.Minute, "Paused", func(v *v1.VirtualMachineInstance) error {
		for _, cond := range v.Status.Conditions {
			if cond.Type == v1.VirtualMachineInstancePaused && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", v.Status.Conditions)
	})
	waitPrintableStatus(t, c, vm, v1.VirtualMachineStatusPaused, time.Minute)
	if _, err := vmiSubresource(t, f, "e2e-editor", "PUT", ns, vmi.Name, "pause", "{}"); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "VMI is already paused") {
		t.Errorf("second pause: %v, want 409 VMI is already paused", err)
	}
	if _, err := vmiSubresource(t, f, "e2e-editor", "PUT", ns, vmi.Name, "unpause", "{}"); err != nil {
		t.Fatalf("unpause: %v", err)
	}
	framework.WaitVMI(t, c, ns, vmi.Name, time.Minute, "running again, not paused", func(v *v1.VirtualMachineInstance) error {
		for _, cond := range v.Status.Conditions {
			if cond.Type == v1.VirtualMachineInstancePaused {
				return fmt.Errorf("still %+v", cond)
			}
		}
		return framework.AgentConnected(v)
	})

	// The test guest has no filesystem the kernel can freeze (its root is
	// the initramfs): freeze and unfreeze go through, freezing none.
	if _, err := vmiSubresource(t, f, "e2e-editor", "PUT", ns, vmi.Name, "freeze", `{"unfreezeTimeout":"1m"}`); err != nil {
		t.Errorf("freeze: %v", err)
	}
	if _, err := vmiSubresource(t, f, "e2e-editor", "PUT", ns, vmi.Name, "unfreeze", "{}"); err != nil {
		t.Errorf("unfreeze: %v", err)
	}
	if _, err := vmiSubresource(t, f, "e2e-editor", "PUT", ns, vmi.Name, "freeze", `{"unfreezeTimeout":"soon"}`); !apierrors.IsBadRequest(err) {
		t.Errorf("freeze with a malformed unfreezeTimeout: %v, want 400", err)
	}

	before := guestBootID(t, f, vmi)
	if _, err := vmiSubresource(t, f, "e2e-editor", "PUT", ns, vmi.Name, "softreboot", "{}"); err != nil {
		t.Fatalf("softreboot: %v", err)
	}
	framework.Eventually(t, 2*time.Minute, "the guest rebooted in the same VMI", func() error {
		got := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil || got.UID != vmi.UID {
			return fmt.Errorf("VMI %v: %w", got.UID, err)
		}
		res, err := podLauncher(t, f, f.LauncherPod(t, got)).Exec(ctx, guestexec.Request{Command: "/bin/cat", Args: []string{"/proc/sys/kernel/random/boot_id"}, TimeoutSeconds: 5})
		if err != nil {
			return err
		}
		if now := strings.TrimSpace(string(res.Stdout)); now == "" || now == before {
			return fmt.Errorf("boot_id %q, before the reboot %s", now, before)
		}
		return nil
	})
}

// dialConsole opens the VMI's serial console through the kube-apiserver as
// user (impersonated; "" is the admin), as virtctl console does.
func dialConsole(t *testing.T, f *framework.Framework, user, ns, vmi string) (*wsStream, error) {
	t.Helper()
	return dialSubresource(t, f, user, "/apis/subresources.kubevirt.io/v1/namespaces/"+ns+"/virtualmachineinstances/"+vmi+"/console")
}

// dialSubresource opens the websocket stream at path through the
// kube-apiserver as user (impersonated; "" is the admin), with virtctl's
// subprotocol; a refusal is the API's error (its Status).
func dialSubresource(t *testing.T, f *framework.Framework, user, path string) (*wsStream, error) {
	t.Helper()
	cfg := rest.CopyConfig(f.Config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	}
	rt, holder, err := wsclient.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := wsclient.Negotiate(rt, holder, req, "plain.kubevirt.io")
	if err != nil {
		var upgrade *httpstream.UpgradeFailureError
		if errors.As(err, &upgrade) {
			return nil, upgrade.Cause
		}
		return nil, err
	}
	return &wsStream{Conn: conn}, nil
}

// wsStream reads and writes a websocket's binary messages as a byte
// stream.
type wsStream struct {
	*gwebsocket.Conn
	r io.Reader
}

func (s *wsStream) Read(p []byte) (int, error) {
	for {
		if s.r == nil {
			_, r, err := s.NextReader()
			if err != nil {
				return 0, err
			}
			s.r = r
		}
		n, err := s.r.Read(p)
		if errors.Is(err, io.EOF) {
			s.r, err = nil, nil
			if n == 0 {
				continue
			}
		}
		return n, err
	}
}

func (s *wsStream) Write(p []byte) (int, error) {
	return len(p), s.WriteMessage(gwebsocket.BinaryMessage, p)
}

// TestSubresourceConsole: virtctl's console protocol (a websocket with the
// plain.kubevirt.io subprotocol, raw bytes) reaches the guest's serial
// console through the kube-apiserver, the subresources API and the node's
// handler: a command typed there runs in the guest's shell. A second
// console on the same VMI is refused while the first is open, and works
// once it closed; a viewer, or an editor of another namespace, may not
// attach. `tekvirt console` takes the same path.
func TestSubresourceConsole(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	vm := framework.GuestVM(ns, "console", framework.GuestImage, v1.RunStrategyAlways)
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running with its agent", framework.AgentConnected)
	bindUser(t, f, ns, "e2e-viewer", "view")
	if ws, err := dialConsole(t, f, "e2e-viewer", ns, vm.Name); err == nil {
		_ = ws.Close()
		t.Error("a viewer attached to the console")
	}
	other := f.Namespace(t)
	bindUser(t, f, other, "e2e-editor", "edit")
	if ws, err := dialConsole(t, f, "e2e-editor", ns, vm.Name); err == nil {
		_ = ws.Close()
		t.Error("an editor of another namespace attached to the console")
	}

	start := time.Now()
	ws, err := dialConsole(t, f, "", ns, vm.Name)
	if err != nil {
		t.Fatalf("console: %v", err)
	}
	t.Logf("console attached in %s", time.Since(start).Round(time.Millisecond))
	if second, err := dialConsole(t, f, "", ns, vm.Name); err == nil {
		_ = second.Close()
		t.Error("a second console attached while the first is open")
	}
	if _, err := ws.Write([]byte("echo console-$((6*7))\n")); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var seen strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), "console-42") {
		n, err := ws.Read(buf)
		if err != nil {
			t.Fatalf("reading the console (so far %q): %v", seen.String(), err)
		}
		seen.Write(buf[:n])
	}
	_ = ws.Close()
	framework.Eventually(t, 30*time.Second, "a console again once the first closed", func() error {
		again, err := dialConsole(t, f, "", ns, vm.Name)
		if err != nil {
			return err
		}
		return again.Close()
	})
	// tekvirt's own CLI takes the same path.
	checkConsoleCommand(t, append(os.Environ(), "KUBECONFIG="+f.Kubeconfig), f.Bin("tekvirt"), "console", vm.Name, "-n", ns)
}

// TestExpandVMSpec: expand-vm-spec, through the kube-apiserver, answers a
// viewer with the VM sent (tekvirt serves no instancetypes, so there is
// nothing to expand), refuses a VM naming an instancetype with a 400 naming
// the field, and a user without a role in the namespace, or an editor of
// another, with a 403; expand-spec reads a stored VM for its viewers only.
func TestExpandVMSpec(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	bindUser(t, f, ns, "e2e-viewer", "view")
	vm := framework.GuestVM(ns, "expand", framework.GuestImage, v1.RunStrategyHalted)
	vm.APIVersion, vm.Kind = "kubevirt.io/v1", "VirtualMachine"
	body, err := json.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	expand := func(user string, body []byte) ([]byte, error) {
		res := clientsetAs(t, f, user).Discovery().RESTClient().Put().AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", ns, "expand-vm-spec").
			SetHeader("Content-Type", "application/json").Body(body).Do(context.Background())
		if err := res.Error(); err != nil {
			return nil, err
		}
		return res.Raw()
	}
	raw, err := expand("e2e-viewer", body)
	got := &v1.VirtualMachine{}
	if err != nil || json.Unmarshal(raw, got) != nil || got.Name != vm.Name || got.Spec.Template == nil || len(got.Spec.Template.Spec.Volumes) != len(vm.Spec.Template.Spec.Volumes) {
		t.Errorf("expand-vm-spec by a viewer: %v %s", err, raw)
	}
	// Named instancetype (the operator's u1.small: 1 vCPU, 2Gi): the VM
	// comes back sized by it, without the matcher; one that also sizes
	// its memory is a 422 naming the conflicting field.
	vm.Spec.Instancetype = &v1.InstancetypeMatcher{Name: "u1.small"}
	conflicting, _ := json.Marshal(vm)
	if _, err := expand("e2e-viewer", conflicting); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.template.spec.domain.resources.requests.memory conflict") {
		t.Errorf("expand-vm-spec of a VM sizing itself and naming an instancetype: %v, want 422 naming the field", err)
	}
	sized := vm.DeepCopy()
	sized.Spec.Template.Spec.Domain.Resources = v1.ResourceRequirements{}
	withType, _ := json.Marshal(sized)
	raw, err = expand("e2e-viewer", withType)
	got = &v1.VirtualMachine{}
	if err != nil || json.Unmarshal(raw, got) != nil || got.Spec.Instancetype != nil || got.Spec.Template.Spec.Domain.Memory == nil ||
		got.Spec.Template.Spec.Domain.Memory.Guest.String() != "2Gi" || got.Spec.Template.Spec.Domain.CPU == nil || got.Spec.Template.Spec.Domain.CPU.Sockets != 1 {
		t.Errorf("expand-vm-spec of a VM naming u1.small: %v %s", err, raw)
	}
	if _, err := expand("e2e-stranger", body); !apierrors.IsForbidden(err) {
		t.Errorf("expand-vm-spec by a user without a role: %v, want 403", err)
	}
	// An editor of another namespace may expand there, not here, and may
	// not read this namespace's VM through expand-spec.
	other := f.Namespace(t)
	bindUser(t, f, other, "e2e-editor", "edit")
	if _, err := expand("e2e-editor", body); !apierrors.IsForbidden(err) {
		t.Errorf("expand-vm-spec by an editor of another namespace: %v, want 403", err)
	}
	vm.Spec.Instancetype = nil
	if err := f.VMClient(t).Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	if _, err := clientsetAs(t, f, "e2e-editor").Discovery().RESTClient().Get().AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", ns, "virtualmachines", vm.Name, "expand-spec").
		DoRaw(context.Background()); !apierrors.IsForbidden(err) {
		t.Errorf("expand-spec of this namespace's VM by an editor of another: %v, want 403", err)
	}
	if raw, err := clientsetAs(t, f, "e2e-viewer").Discovery().RESTClient().Get().AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", ns, "virtualmachines", vm.Name, "expand-spec").
		DoRaw(context.Background()); err != nil || !strings.Contains(string(raw), `"name":"expand"`) {
		t.Errorf("expand-spec by a viewer of the namespace: %v %s", err, raw)
	}
}
