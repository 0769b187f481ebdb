package importcron

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

var t0 = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

func dv(name string, age time.Duration) *cdiv1.DataVolume {
	return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "golden", Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
}

func names(dvs []cdiv1.DataVolume) []string {
	var out []string
	for _, d := range dvs {
		out = append(out, d.Name)
	}
	return out
}

func TestNewestFirstAndOutdated(t *testing.T) {
	exact := dv("exact", 2*time.Hour) // made a moment after c and c2, in the same second
	exact.Annotations = map[string]string{CreatedAnnotation: t0.Add(-2 * time.Hour).Add(time.Millisecond).Format(time.RFC3339Nano)}
	all := []cdiv1.DataVolume{*dv("b", time.Hour), *dv("d", 3*time.Hour), *dv("a", 0), *dv("c", 2*time.Hour),
		*exact, *dv("c2", 2*time.Hour)}
	NewestFirst(all)
	if got := names(all); !reflect.DeepEqual(got, []string{"a", "b", "exact", "c2", "c", "d"}) {
		t.Fatalf("NewestFirst: %v", got)
	}
	for _, tc := range []struct {
		keep  int
		inUse string
		want  []string
	}{
		{keep: 3, want: []string{"c2", "c", "d"}},
		{keep: 3, inUse: "d", want: []string{"c2", "c"}},
		{keep: 0, inUse: "a", want: []string{"b", "exact", "c2", "c", "d"}},
		{keep: 6, want: nil},
		{keep: 9, inUse: "x", want: nil},
	} {
		if got := names(Outdated(all, tc.keep, tc.inUse)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("keep %d, in use %q: %v, want %v", tc.keep, tc.inUse, got, tc.want)
		}
	}
}
