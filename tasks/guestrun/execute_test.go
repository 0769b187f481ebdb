package guestrun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/tasks/kube"
)

func TestBuildRequest(t *testing.T) {
	for name, tc := range map[string]struct {
		p       Params
		want    guestexec.Request
		wantErr string
	}{
		"command and args": {p: Params{Command: []string{"/bin/echo", "a"}, Args: []string{"b"}}, want: guestexec.Request{Command: "/bin/echo", Args: []string{"a", "b"}}},
		"script":           {p: Params{Script: "echo hi; exit 3"}, want: guestexec.Request{Command: "/bin/sh", Args: []string{"-c", "echo hi; exit 3"}}},
		"both":             {p: Params{Script: "x", Command: []string{"y"}}, wantErr: "both set"},
		"neither":          {p: Params{}, wantErr: "nothing to execute"},
	} {
		got, err := BuildRequest(tc.p)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v", name, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, tc.want)
		}
	}
}

type fakeExec struct {
	res  *guestexec.Result
	addr string
	req  guestexec.Request
}

func (f *fakeExec) Exec(_ context.Context, addr string, _ *v1.VirtualMachineInstance, req guestexec.Request) (*guestexec.Result, error) {
	f.addr, f.req = addr, req
	return f.res, nil
}

func vmi(name string, agent bool) *v1.VirtualMachineInstance {
	v := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{AddressAnnotation: "192.0.2.1:8186"}},
		Status:     v1.VirtualMachineInstanceStatus{Phase: v1.Running},
	}
	if agent {
		v.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue}}
	}
	return v
}

func TestRun(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(vmi("up", true), vmi("noagent", false)).Build()
	ex := &fakeExec{res: &guestexec.Result{ExitCode: 3, Stdout: []byte("out\n"), Stderr: []byte("err\n")}}
	var stdout, stderr bytes.Buffer
	err = Run(context.Background(), c, ex, Params{VMName: "up", VMNamespace: "ns", Script: "exit 3", Timeout: time.Minute}, &stdout, &stderr)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("err = %v, want exit code 3", err)
	}
	if stdout.String() != "out\n" || stderr.String() != "err\n" || ex.addr != "192.0.2.1:8186" || ex.req.TimeoutSeconds < 50 {
		t.Errorf("stdout %q stderr %q addr %q req %+v", stdout.String(), stderr.String(), ex.addr, ex.req)
	}
	start := time.Now()
	err = Run(context.Background(), c, ex, Params{VMName: "noagent", VMNamespace: "ns", Script: "true", Timeout: 1500 * time.Millisecond}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "timed out after 1.5s waiting for the guest agent") || !strings.Contains(err.Error(), "qemu-guest-agent") {
		t.Fatalf("no agent: err = %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("timeout took %s", time.Since(start))
	}
}

// TestRunStartsAStoppedVM: a Halted or Manual VM whose VMI does not run is
// started first (the fake start creates the running VMI); an Always VM and
// a VMI without VM are only waited for.
func TestRunStartsAStoppedVM(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	vm := func(name string, rs v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
		return &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.VirtualMachineSpec{RunStrategy: &rs}}
	}
	// The halted VM's last VMI is over; the start gives each a running one.
	over := vmi("halted", false)
	over.Status.Phase = v1.Succeeded
	var started []string
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(vm("halted", v1.RunStrategyHalted), over, vm("manual", v1.RunStrategyManual),
		vm("always", v1.RunStrategyAlways), vmi("always", true), vmi("bare", true)).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if running, ok := obj.(*v1.VirtualMachineInstance); ok && slices.Contains(started, key.Name) {
				vmi(key.Name, true).DeepCopyInto(running)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	p := Params{VMNamespace: "ns", Script: "true", Timeout: 5 * time.Second, Start: func(_ context.Context, _, name string) error {
		started = append(started, name)
		return nil
	}}
	ex := &fakeExec{res: &guestexec.Result{}}
	var stderr bytes.Buffer
	for _, name := range []string{"halted", "manual", "always", "bare"} {
		p.VMName = name
		if err := Run(context.Background(), c, ex, p, io.Discard, &stderr); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !reflect.DeepEqual(started, []string{"halted", "manual"}) || !strings.Contains(stderr.String(), "VirtualMachine ns/halted was not running (Halted): started") {
		t.Errorf("started %v; log %q", started, stderr.String())
	}
	p.VMName, p.SecretName = "halted", NoSecret
	if err := Run(context.Background(), c, ex, p, io.Discard, &stderr); err != nil {
		t.Errorf("secretName %s is no secret: %v", NoSecret, err)
	}
}
