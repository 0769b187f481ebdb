package waitforvmi

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

func TestRunOnCurrentState(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1"},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Failed, Conditions: []v1.VirtualMachineInstanceCondition{
			{Type: v1.VirtualMachineInstanceReady, Status: "False", Reason: "ContainerDiskNotFound", Message: "image x not found"},
		}},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(vmi).Build()
	var out bytes.Buffer
	err = Run(context.Background(), c, Params{VMIName: "vm1", VMINamespace: "ns",
		SuccessCondition: "status.phase == Running", FailureCondition: "status.phase in (Failed, Unknown)"}, &out)
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "image x not found") {
		t.Fatalf("err = %v; want ErrFailed naming the VMI's reason", err)
	}
	err = Run(context.Background(), c, Params{VMIName: "vm1", VMINamespace: "ns", SuccessCondition: "status.phase == Failed"}, &out)
	if err != nil {
		t.Fatalf("success on current state: %v", err)
	}
	if !strings.Contains(out.String(), `phase "Failed"`) {
		t.Errorf("output does not report the phase:\n%s", out.String())
	}
	for _, p := range []Params{{VMINamespace: "ns", SuccessCondition: "a"}, {VMIName: "vm1"}} {
		if err := Run(context.Background(), c, p, &out); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}
