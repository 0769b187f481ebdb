package waitforvmi

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/labels"
)

// Condition is a label selector evaluated over an object's fields, each
// scalar field keyed by its dotted path ("status.phase") and each list
// element by its index ("status.conditions.0.type").
type Condition struct {
	text string
	sel  labels.Selector
}

// ParseCondition parses a condition; empty text gives a nil condition.
func ParseCondition(param, text string) (*Condition, error) {
	if text == "" {
		return nil, nil
	}
	sel, err := labels.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("param %s %q is not a selector like \"status.phase == Running\" or \"status.phase in (Failed, Unknown)\": %w", param, text, err)
	}
	return &Condition{text: text, sel: sel}, nil
}

func (c *Condition) String() string { return c.text }

// Matches evaluates the condition over obj (an object as decoded from JSON).
func (c *Condition) Matches(obj map[string]any) bool {
	return c.sel.Matches(labels.Set(Flatten(obj)))
}

// Flatten maps each scalar field of obj to its dotted path.
func Flatten(obj map[string]any) map[string]string {
	out := map[string]string{}
	flatten("", obj, out)
	return out
}

func flatten(prefix string, v any, out map[string]string) {
	key := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			flatten(key(k), e, out)
		}
	case []any:
		for i, e := range t {
			flatten(key(strconv.Itoa(i)), e, out)
		}
	case nil:
	default:
		out[prefix] = fmt.Sprint(t)
	}
}
