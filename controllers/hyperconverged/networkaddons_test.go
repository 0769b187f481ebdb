package hyperconverged

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

func TestNetworkAddonsConfig(t *testing.T) {
	hc := func(patch string) *hcov1beta1.HyperConverged {
		h := &hcov1beta1.HyperConverged{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}}
		if patch != "" {
			h.Annotations = map[string]string{NetworkAddonsJSONPatchAnnotation: patch}
		}
		return h
	}
	for _, tc := range []struct {
		name, patch, start, end, err string
		// files are the add-on manifests the spec turns on
		files []string
	}{
		{name: "a range of the UID's, Multus and the bridge plugin on", start: "02:4a:49:00:00:00", end: "02:4a:49:ff:ff:ff",
			files: []string{"networkaddons/linuxbridge.yaml", "networkaddons/multus.yaml"}},
		{name: "Multus off", patch: `[{"op":"remove","path":"/spec/multus"}]`, start: "02:4a:49:00:00:00", end: "02:4a:49:ff:ff:ff",
			files: []string{"networkaddons/linuxbridge.yaml"}},
		{name: "the range HCO's annotation sets",
			patch: `[{"op":"replace","path":"/spec/kubeMacPool","value":{"rangeStart":"02:00:00:00:00:00","rangeEnd":"02:00:00:00:0f:ff"}}]`,
			start: "02:00:00:00:00:00", end: "02:00:00:00:0f:ff", files: []string{"networkaddons/linuxbridge.yaml", "networkaddons/multus.yaml"}},
		{name: "a field tekvirt does not serve", patch: `[{"op":"add","path":"/spec/ovs","value":{}}]`, err: `unknown field "ovs"`},
		{name: "not a JSON patch", patch: `{"spec":{}}`, err: "annotation networkaddonsconfigs.kubevirt.io/jsonpatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, spec, err := networkAddonsConfig(hc(tc.patch))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			start, _, _ := unstructured.NestedString(obj.Object, "spec", "kubeMacPool", "rangeStart")
			end, _, _ := unstructured.NestedString(obj.Object, "spec", "kubeMacPool", "rangeEnd")
			if !strings.HasPrefix(start, tc.start) || !strings.HasSuffix(end, tc.end) || obj.GetName() != "cluster" || obj.GetLabels()[ManagedByLabel] != ManagedBy {
				t.Errorf("NetworkAddonsConfig %v", obj.Object)
			}
			on, off := networkAddonFiles(spec)
			if !slices.Equal(on, tc.files) || len(on)+len(off) != 2 {
				t.Errorf("add-ons on %v, off %v; want on %v", on, off, tc.files)
			}
		})
	}
	a, _, _ := networkAddonsConfig(hc(""))
	b, _, _ := networkAddonsConfig(hc(""))
	if !strings.EqualFold(a.Object["spec"].(map[string]any)["kubeMacPool"].(map[string]any)["rangeStart"].(string), b.Object["spec"].(map[string]any)["kubeMacPool"].(map[string]any)["rangeStart"].(string)) {
		t.Error("the range is not stable for one HyperConverged")
	}
}
