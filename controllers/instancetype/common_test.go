package instancetype

import (
	"encoding/json"
	"testing"

	"github.com/tekvirt/tekvirt/catalog"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// TestCommonInstancetypesSupported: every instancetype and preference the
// operator installs is within what tekvirt implements, and the u1 series
// is complete.
func TestCommonInstancetypesSupported(t *testing.T) {
	data, err := catalog.CommonInstancetypes()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := ctrlconfig.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range docs {
		raw, err := json.Marshal(d.Object)
		if err != nil {
			t.Fatal(err)
		}
		it, pref, err := Specs(d.GetKind(), d.GetName(), raw)
		if err != nil {
			t.Errorf("%s %s: %v", d.GetKind(), d.GetName(), err)
			continue
		}
		if it != nil && (it.CPU.Guest == 0 || it.Memory.Guest.IsZero()) {
			t.Errorf("%s sizes nothing", d.GetName())
		}
		if it == nil && pref == nil {
			t.Errorf("%s %s is neither", d.GetKind(), d.GetName())
		}
		seen[d.GetName()] = true
	}
	for _, want := range []string{"u1.nano", "u1.micro", "u1.small", "u1.medium", "u1.2xmedium", "u1.large", "u1.xlarge", "u1.2xlarge", "u1.4xlarge", "u1.8xlarge", "tekvirt.guest", "tekvirt.worker"} {
		if !seen[want] {
			t.Errorf("%s is not installed", want)
		}
	}
}
