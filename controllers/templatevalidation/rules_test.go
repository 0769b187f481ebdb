package templatevalidation

import (
	"encoding/json"
	"strings"
	"testing"
)

// commonRules are rules as the common templates carry them.
const commonRules = `[
  {"name": "minimal-required-memory", "path": "jsonpath::.spec.domain.memory.guest", "rule": "integer",
   "message": "This VM requires more memory.", "min": 268435456},
  {"name": "virtio-disk-bus", "valid": "jsonpath::.spec.domain.devices.disks[*].disk.bus", "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus",
   "rule": "enum", "message": "Use a bus the guest supports.", "values": ["virtio", "sata"]},
  {"name": "cores-within-sockets", "path": "jsonpath::.spec.domain.cpu.cores", "rule": "integer",
   "message": "No more cores than the limit.", "max": "jsonpath::.spec.domain.cpu.maxCores", "justWarning": true},
  {"name": "hostname", "valid": "jsonpath::.spec.hostname", "path": "jsonpath::.spec.hostname", "rule": "regex",
   "message": "The hostname must be lower case.", "regex": "^[a-z0-9-]+$"},
  {"name": "hostname-length", "valid": "jsonpath::.spec.hostname", "path": "jsonpath::.spec.hostname", "rule": "string",
   "message": "The hostname is too long.", "minLength": 1, "maxLength": 12},
  {"name": "a-future-rule", "path": "jsonpath::.spec.domain", "rule": "something-new", "message": "ignored"}
]`

func vmiTemplate(t *testing.T, spec string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(spec), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCheck(t *testing.T) {
	rules, err := Parse(commonRules)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"spec":{"hostname":"vm-1","domain":{"memory":{"guest":"512Mi"},"cpu":{"cores":2,"maxCores":4},
	  "devices":{"disks":[{"name":"a","disk":{"bus":"virtio"}},{"name":"b","disk":{"bus":"sata"}}]}}}}`
	for _, tc := range []struct {
		name, spec         string
		violations, warned []string
	}{
		{"all satisfied", good, nil, nil},
		{"too little memory", strings.Replace(good, "512Mi", "128Mi", 1),
			[]string{"This VM requires more memory. (rule minimal-required-memory: 128Mi is less than 268435456)"}, nil},
		{"memory not set", strings.Replace(good, `"memory":{"guest":"512Mi"},`, "", 1),
			[]string{"rule minimal-required-memory: .spec.domain.memory.guest is not set"}, nil},
		{"a bus not allowed", strings.Replace(good, `"bus":"sata"`, `"bus":"scsi"`, 1),
			[]string{`Use a bus the guest supports. (rule virtio-disk-bus: "scsi" is not one of virtio, sata)`}, nil},
		{"no bus: the rule does not apply", strings.ReplaceAll(good, `"disk":{"bus":"virtio"}`, `"disk":{}`), nil, nil},
		{"too many cores only warns", strings.Replace(good, `"cores":2`, `"cores":8`, 1),
			nil, []string{"No more cores than the limit. (rule cores-within-sockets: 8 is more than 4)"}},
		{"hostname upper case and long", strings.Replace(good, `"vm-1"`, `"VM-NUMBER-ONE-TOO-LONG"`, 1),
			[]string{`rule hostname: "VM-NUMBER-ONE-TOO-LONG" does not match`, `rule hostname-length: "VM-NUMBER-ONE-TOO-LONG" is longer than 12`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(rules, vmiTemplate(t, tc.spec))
			if len(res.Violations) != len(tc.violations) || len(res.Warnings) != len(tc.warned) {
				t.Fatalf("violations %q warnings %q, want %q and %q", res.Violations, res.Warnings, tc.violations, tc.warned)
			}
			for i, want := range tc.violations {
				if !strings.Contains(res.Violations[i], want) {
					t.Errorf("violation %q lacks %q", res.Violations[i], want)
				}
			}
			for i, want := range tc.warned {
				if !strings.Contains(res.Warnings[i], want) {
					t.Errorf("warning %q lacks %q", res.Warnings[i], want)
				}
			}
		})
	}
}

func TestParseNamesBadRules(t *testing.T) {
	for annotation, want := range map[string]string{
		`{"name": "x"}`: "not a JSON array",
		`[{"name": "core-limits", "path": "jsonpath::.spec.domain.cpu.cores", "message": "m", "min": 1}]`: "rule 0 (core-limits) lacks rule",
		`[{"rule": "integer", "path": "jsonpath::.spec.domain.cpu.cores", "min": 1}]`:                     "rule 0 () lacks message, name",
		`[{"name": "a", "rule": "enum", "path": ".spec.x", "message": "m"}]`:                              `path ".spec.x" does not start with jsonpath::`,
		`[{"name": "a", "rule": "enum", "path": "jsonpath::.a", "message": "m"},
		  {"name": "a", "rule": "enum", "path": "jsonpath::.b", "message": "m"}]`: "rule name a is used twice",
	} {
		if _, err := Parse(annotation); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want %q", annotation, err, want)
		}
	}
}

func TestBadArguments(t *testing.T) {
	rules, err := Parse(`[{"name": "m", "path": "jsonpath::.spec.domain.memory.guest", "rule": "integer", "message": "m", "min": "jsonpath::.spec.nope"},
	  {"name": "r", "path": "jsonpath::.spec.hostname", "rule": "regex", "message": "r", "regex": "("},
	  {"name": "i", "path": "jsonpath::.spec.hostname", "rule": "integer", "message": "i", "min": 1}]`)
	if err != nil {
		t.Fatal(err)
	}
	res := Check(rules, vmiTemplate(t, `{"spec":{"hostname":"a","domain":{"memory":{"guest":"1Gi"}}}}`))
	for i, want := range []string{"min: .spec.nope finds no value", `regex "("`, `a is not an integer`} {
		if i >= len(res.Violations) || !strings.Contains(res.Violations[i], want) {
			t.Errorf("violations %q, want [%d] to hold %q", res.Violations, i, want)
		}
	}
}
