package prunedatavolumes

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

var t0 = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

func dv(name string, age time.Duration, lbls map[string]string) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "golden", Name: name, Labels: lbls,
		CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
}

func names(dvs []cdiv1.DataVolume) []string {
	var out []string
	for _, d := range dvs {
		out = append(out, d.Name)
	}
	return out
}

func TestRunKeepsTheNewestAndTheDataSourcesAndOnlyWhatTheSelectorPicks(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{"tekvirt.io/golden-image": "guest"}
	ds := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: "golden", Name: "guest"},
		Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Name: "guest-old"}}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(ds,
		dv("guest-new", 0, mine), dv("guest-mid", time.Hour, mine), dv("guest-old", 2*time.Hour, mine),
		dv("other", 3*time.Hour, map[string]string{"tekvirt.io/golden-image": "other"}), dv("plain", 4*time.Hour, nil)).Build()
	var out bytes.Buffer
	deleted, err := Run(context.Background(), c, Params{Namespace: "golden", Selector: "tekvirt.io/golden-image=guest", Keep: 1, DataSource: "guest"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(deleted, []string{"guest-mid"}) || !strings.Contains(out.String(), "DataVolume golden/guest-mid deleted") {
		t.Fatalf("deleted %v, output:\n%s", deleted, out.String())
	}
	left := &cdiv1.DataVolumeList{}
	if err := c.List(context.Background(), left, client.InNamespace("golden")); err != nil {
		t.Fatal(err)
	}
	if got := names(left.Items); !reflect.DeepEqual(got, []string{"guest-new", "guest-old", "other", "plain"}) {
		t.Errorf("left %v", got)
	}

	for name, p := range map[string]Params{
		"param selector is empty":     {Namespace: "golden", Keep: 1},
		`param selector "a in (b"`:    {Namespace: "golden", Selector: "a in (b", Keep: 1},
		"param keep is -1: want 0 or": {Namespace: "golden", Selector: "a=b", Keep: -1},
	} {
		if _, err := Run(context.Background(), c, p, &out); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%+v: err = %v, want %q", p, err, name)
		}
	}
}
