package shellwords

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	for in, want := range map[string][]string{
		`create vm --name 'my vm' --x "a \"b\"" c\ d  `: {"create", "vm", "--name", "my vm", "--x", `a "b"`, "c d"},
		`-N "" -C 'it''s'`: {"-N", "", "-C", "its"},
		"":                 nil,
	} {
		if got, err := Split(in); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Split(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`--name 'open`, `trailing\`} {
		if _, err := Split(bad); err == nil {
			t.Errorf("Split(%q) accepted", bad)
		}
	}
}
