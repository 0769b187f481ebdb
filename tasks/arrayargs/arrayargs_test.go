package arrayargs

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	got, err := Split([]string{"--labels", "a:1", "b:2", "--disks", "--volumes", `{"name":"x"}`}, "labels", "disks", "volumes", "unused")
	want := map[string][]string{"labels": {"a:1", "b:2"}, "disks": {}, "volumes": {`{"name":"x"}`}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Split = %v, %v; want %v", got, err, want)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"before a marker": {[]string{"stray", "--labels"}, `argument 0 "stray" comes before`},
		"marker twice":    {[]string{"--labels", "--labels"}, "argument 1: --labels given twice"},
	} {
		if _, err := Split(tc.args, "labels"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}
