package arrayargs

import (
	"fmt"
	"strings"
)

// Split groups args by the markers --name for each of names: every
// argument up to the next marker belongs to the array before it. An
// argument before the first marker is an error, so is a repeated marker
// (its array would be ambiguous). An element that is itself exactly a
// marker cannot be passed.
func Split(args []string, names ...string) (map[string][]string, error) {
	known := map[string]bool{}
	for _, n := range names {
		known["--"+n] = true
	}
	out := map[string][]string{}
	current := ""
	for i, a := range args {
		if known[a] {
			current = strings.TrimPrefix(a, "--")
			if _, seen := out[current]; seen {
				return nil, fmt.Errorf("argument %d: %s given twice", i, a)
			}
			out[current] = []string{}
			continue
		}
		if current == "" {
			return nil, fmt.Errorf("argument %d %q comes before any of the array markers --%s", i, a, strings.Join(names, ", --"))
		}
		out[current] = append(out[current], a)
	}
	return out, nil
}
