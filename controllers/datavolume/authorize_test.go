package datavolume

import (
	"context"
	"errors"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/requester"
)

// TestAuthorizeClone: at clone time the recorded requester is asked about,
// in the PVC's namespace and the DataSource's; the controller's own rights
// never stand in.
func TestAuthorizeClone(t *testing.T) {
	s := runtime.NewScheme()
	if err := authzv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	// alice may clone in "mine" and "golden"; nobody in "victim".
	var asked []string
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			sar := obj.(*authzv1.SubjectAccessReview)
			a := sar.Spec.ResourceAttributes
			asked = append(asked, sar.Spec.User+"@"+a.Namespace)
			sar.Status.Allowed = sar.Spec.User == "alice" && a.Namespace != "victim" &&
				a.Verb == "create" && a.Resource == "datavolumes" && a.Subresource == "source"
			return nil
		},
	}).Build()
	r := &Reconciler{Client: c}
	dv := func(who, pvcNS string) *cdiv1.DataVolume {
		d := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "mine", Name: "copy"},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: pvcNS, Name: "disk"}}}}
		if who != "" {
			d.Annotations = map[string]string{requester.Annotation: `{"username":"` + who + `"}`}
		}
		return d
	}
	golden := &observed{dataSource: &types.NamespacedName{Namespace: "golden", Name: "os"}}
	for _, tc := range []struct {
		name  string
		dv    *cdiv1.DataVolume
		obs   *observed
		asked string
		want  string
	}{
		{"same namespace", dv("alice", ""), &observed{}, "alice@mine", ""},
		{"through a DataSource", dv("alice", "golden"), golden, "alice@golden alice@golden", ""},
		{"a DataSource re-pointed at another namespace", dv("alice", "victim"), golden, "alice@golden alice@victim", "alice may not clone PVC victim/disk: permission denied"},
		{"another user", dv("bob", ""), &observed{}, "bob@mine", "bob may not clone PVC mine/disk"},
		{"no requester", dv("", ""), &observed{}, "", "no requester recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			err := r.authorizeClone(context.Background(), tc.dv, tc.obs)
			if got := strings.Join(asked, " "); got != tc.asked {
				t.Errorf("asked %q, want %q", got, tc.asked)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !denied(err) {
				t.Fatalf("err = %v, want a refusal with %q", err, tc.want)
			}
		})
	}
	// An API error is not a refusal: the reconcile is retried.
	broken := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return errors.New("connection refused")
		},
	}).Build()
	err := (&Reconciler{Client: broken}).authorizeClone(context.Background(), dv("alice", ""), &observed{})
	if err == nil || denied(err) {
		t.Errorf("API failure: err = %v, denied %v", err, denied(err))
	}
}
