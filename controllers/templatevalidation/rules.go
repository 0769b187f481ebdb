package templatevalidation

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/jsonpath"

	"github.com/tekvirt/tekvirt/contracts/vmtemplate"
)

// Annotations that carry rules and labels that name the template a VM was
// made from (see contracts/vmtemplate).
const (
	VMAnnotation           = vmtemplate.VMValidationsAnnotation
	TemplateAnnotation     = vmtemplate.TemplateValidationsAnnotation
	TemplateLabel          = vmtemplate.TemplateLabel
	TemplateNamespaceLabel = vmtemplate.TemplateNamespaceLabel
)

// jsonpathPrefix marks a value as a JSONPath, not a literal.
const jsonpathPrefix = "jsonpath::"

// Rule is one validation rule as the annotation writes it.
type Rule struct {
	Name        string          `json:"name"`
	Rule        string          `json:"rule"`
	Path        string          `json:"path"`
	Message     string          `json:"message"`
	Valid       string          `json:"valid,omitempty"`
	JustWarning bool            `json:"justWarning,omitempty"`
	Min         json.RawMessage `json:"min,omitempty"`
	Max         json.RawMessage `json:"max,omitempty"`
	MinLength   json.RawMessage `json:"minLength,omitempty"`
	MaxLength   json.RawMessage `json:"maxLength,omitempty"`
	Regex       string          `json:"regex,omitempty"`
	Values      []string        `json:"values,omitempty"`
}

// Parse reads an annotation's rules; a rule without rule, name, path or
// message, or two of one name, is an error naming it.
func Parse(annotation string) ([]Rule, error) {
	var rules []Rule
	if err := json.Unmarshal([]byte(annotation), &rules); err != nil {
		return nil, fmt.Errorf("validations are not a JSON array of rules: %w", err)
	}
	seen := map[string]bool{}
	var problems []string
	for i, r := range rules {
		var missing []string
		for key, v := range map[string]string{"rule": r.Rule, "name": r.Name, "path": r.Path, "message": r.Message} {
			if v == "" {
				missing = append(missing, key)
			}
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("rule %d (%s) lacks %s", i, r.Name, strings.Join(slices.Sorted(slices.Values(missing)), ", ")))
		}
		if r.Name != "" && seen[r.Name] {
			problems = append(problems, fmt.Sprintf("rule name %s is used twice", r.Name))
		}
		seen[r.Name] = true
		if r.Path != "" && !strings.HasPrefix(r.Path, jsonpathPrefix) {
			problems = append(problems, fmt.Sprintf("rule %s: path %q does not start with %s", r.Name, r.Path, jsonpathPrefix))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("validations: %s", strings.Join(problems, "; "))
	}
	return rules, nil
}

// Result is what the rules say of one VM.
type Result struct {
	// Violations refuse the VM; Warnings are from justWarning rules.
	Violations, Warnings []string
}

// Check applies rules to the VM's spec.template (as a JSON-decoded map,
// the root their paths start from: ".spec.domain...").
func Check(rules []Rule, vmiTemplate map[string]any) Result {
	var res Result
	for _, r := range rules {
		msg, violated := r.evaluate(vmiTemplate)
		if !violated {
			continue
		}
		text := fmt.Sprintf("%s (rule %s: %s)", r.Message, r.Name, msg)
		if r.JustWarning {
			res.Warnings = append(res.Warnings, text)
		} else {
			res.Violations = append(res.Violations, text)
		}
	}
	return res
}

// evaluate says whether r is violated and how. A rule whose valid path
// finds nothing, or whose kind is unknown, does not apply; a path that
// finds nothing violates it.
func (r Rule) evaluate(root map[string]any) (string, bool) {
	if r.Valid != "" {
		if vals, err := find(root, r.Valid); err != nil || len(vals) == 0 {
			return "", false
		}
	}
	vals, err := find(root, r.Path)
	if err != nil {
		return err.Error(), true
	}
	if len(vals) == 0 {
		return strings.TrimPrefix(r.Path, jsonpathPrefix) + " is not set", true
	}
	switch r.Rule {
	case "integer":
		return r.integer(root, vals)
	case "string":
		return r.length(root, vals)
	case "regex":
		return r.regex(vals)
	case "enum":
		return r.enum(vals)
	}
	return "", false
}

func (r Rule) integer(root map[string]any, vals []any) (string, bool) {
	lo, hasLo, err := r.bound(root, r.Min)
	if err != nil {
		return "min: " + err.Error(), true
	}
	hi, hasHi, err := r.bound(root, r.Max)
	if err != nil {
		return "max: " + err.Error(), true
	}
	for _, v := range vals {
		n, err := integer(v)
		switch {
		case err != nil:
			return fmt.Sprintf("%s is not an integer", text(v)), true
		case hasLo && n < lo:
			return fmt.Sprintf("%v is less than %d", v, lo), true
		case hasHi && n > hi:
			return fmt.Sprintf("%v is more than %d", v, hi), true
		}
	}
	return "", false
}

func (r Rule) length(root map[string]any, vals []any) (string, bool) {
	lo, hasLo, err := r.bound(root, r.MinLength)
	if err != nil {
		return "minLength: " + err.Error(), true
	}
	hi, hasHi, err := r.bound(root, r.MaxLength)
	if err != nil {
		return "maxLength: " + err.Error(), true
	}
	for _, v := range vals {
		s := text(v)
		switch {
		case hasLo && int64(len(s)) < lo:
			return fmt.Sprintf("%q is shorter than %d", s, lo), true
		case hasHi && int64(len(s)) > hi:
			return fmt.Sprintf("%q is longer than %d", s, hi), true
		}
	}
	return "", false
}

func (r Rule) regex(vals []any) (string, bool) {
	re, err := regexp.Compile(r.Regex)
	if err != nil {
		return fmt.Sprintf("regex %q: %v", r.Regex, err), true
	}
	for _, v := range vals {
		if !re.MatchString(text(v)) {
			return fmt.Sprintf("%q does not match %s", text(v), r.Regex), true
		}
	}
	return "", false
}

func (r Rule) enum(vals []any) (string, bool) {
	for _, v := range vals {
		ok := false
		for _, allowed := range r.Values {
			ok = ok || text(v) == allowed
		}
		if !ok {
			return fmt.Sprintf("%q is not one of %s", text(v), strings.Join(r.Values, ", ")), true
		}
	}
	return "", false
}

// bound reads a min/max argument: a number, a quantity string, or a
// jsonpath:: to one in the VM.
func (r Rule) bound(root map[string]any, raw json.RawMessage) (int64, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, false, err
	}
	if s, ok := v.(string); ok && strings.HasPrefix(s, jsonpathPrefix) {
		vals, err := find(root, s)
		if err != nil || len(vals) == 0 {
			return 0, false, fmt.Errorf("%s finds no value", strings.TrimPrefix(s, jsonpathPrefix))
		}
		v = vals[0]
	}
	n, err := integer(v)
	return n, err == nil, err
}

// integer reads a JSON number or a Kubernetes quantity ("2Gi").
func integer(v any) (int64, error) {
	switch x := v.(type) {
	case float64:
		if x != float64(int64(x)) {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int64(x), nil
	case int64:
		return x, nil
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n, nil
		}
		q, err := resource.ParseQuantity(x)
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer or a quantity", x)
		}
		return q.Value(), nil
	}
	return 0, fmt.Errorf("%v is not an integer", v)
}

func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	data, _ := json.Marshal(v)
	return string(data)
}

// find evaluates a jsonpath:: value on root.
func find(root map[string]any, path string) ([]any, error) {
	expr := strings.TrimPrefix(path, jsonpathPrefix)
	jp := jsonpath.New("rule").AllowMissingKeys(true)
	if err := jp.Parse("{" + expr + "}"); err != nil {
		return nil, fmt.Errorf("path %s: %w", expr, err)
	}
	results, err := jp.FindResults(root)
	if err != nil {
		return nil, fmt.Errorf("path %s: %w", expr, err)
	}
	var out []any
	for _, rs := range results {
		for _, v := range rs {
			if v.IsValid() && v.CanInterface() && v.Interface() != nil {
				out = append(out, v.Interface())
			}
		}
	}
	return out, nil
}
