package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	templatev1 "github.com/openshift/api/template/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var (
	// stringParam is ${NAME}: the value, as text, in place.
	stringParam = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)\}`)
	// nonStringParam is ${{NAME}}: a field that is only that becomes the
	// value as JSON (a number, a boolean), else the value as text.
	nonStringParam = regexp.MustCompile(`\$\{\{([a-zA-Z0-9_]+)\}\}`)
)

// Values are the template's parameter values by name, after processing.
type Values map[string]string

// Resolve gives every parameter of t its value: the supplied one, else
// its default, else one generated from its expression. Supplying a
// parameter the template does not have, or leaving a required one without
// value, is an error naming each.
func Resolve(t *templatev1.Template, supplied map[string]string) (Values, error) {
	var errs []error
	known := map[string]bool{}
	for _, p := range t.Parameters {
		known[p.Name] = true
	}
	for name := range supplied {
		if !known[name] {
			errs = append(errs, fmt.Errorf("template %s/%s has no parameter %s", t.Namespace, t.Name, name))
		}
	}
	out := Values{}
	for i, p := range t.Parameters {
		v, given := supplied[p.Name]
		switch {
		case given:
		case p.Value != "":
			v = p.Value
		case p.Generate == "expression":
			g, err := Generate(p.From)
			if err != nil {
				errs = append(errs, fmt.Errorf("template %s/%s parameters[%d] %s: %w", t.Namespace, t.Name, i, p.Name, err))
				continue
			}
			v = g
		case p.Generate != "":
			errs = append(errs, fmt.Errorf("template %s/%s parameters[%d] %s: generator %q is not supported (only expression)", t.Namespace, t.Name, i, p.Name, p.Generate))
			continue
		}
		if v == "" && p.Required {
			errs = append(errs, fmt.Errorf("template %s/%s: required parameter %s has no value", t.Namespace, t.Name, p.Name))
		}
		out[p.Name] = v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Process returns t's objects with the values substituted in every string
// and t's labels added to each object's labels; an object's namespace is
// dropped unless a parameter makes it.
func Process(t *templatev1.Template, values Values) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for i, raw := range t.Objects {
		data := raw.Raw
		if len(data) == 0 && raw.Object != nil {
			var err error
			if data, err = json.Marshal(raw.Object); err != nil {
				return nil, fmt.Errorf("template %s/%s objects[%d]: %w", t.Namespace, t.Name, i, err)
			}
		}
		var obj map[string]any
		if err := json.Unmarshal(data, &obj); err != nil {
			return nil, fmt.Errorf("template %s/%s objects[%d] is not a JSON object: %w", t.Namespace, t.Name, i, err)
		}
		// As OpenShift: a namespace written into an object goes (the
		// caller places it), one made from a parameter stays.
		if meta, ok := obj["metadata"].(map[string]any); ok {
			if ns, ok := meta["namespace"].(string); ok && !strings.Contains(ns, "${") {
				delete(meta, "namespace")
			}
		}
		u := &unstructured.Unstructured{Object: substitute(obj, values).(map[string]any)}
		if len(t.ObjectLabels) > 0 {
			labels := u.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			for k, v := range t.ObjectLabels {
				labels[k] = substituteString(v, values)
			}
			u.SetLabels(labels)
		}
		out = append(out, u)
	}
	return out, nil
}

// substitute replaces parameter references in every string below v.
func substitute(v any, values Values) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = substitute(e, values)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = substitute(e, values)
		}
		return x
	case string:
		if m := nonStringParam.FindStringSubmatch(x); m != nil && m[0] == x {
			if val, ok := values[m[1]]; ok {
				var typed any
				if json.Unmarshal([]byte(val), &typed) == nil {
					return typed
				}
				return val
			}
		}
		return substituteString(x, values)
	}
	return v
}

// substituteString replaces ${{NAME}} and ${NAME} by their values as text;
// references to parameters the template does not have stay as written.
func substituteString(s string, values Values) string {
	if !strings.Contains(s, "${") {
		return s
	}
	for _, re := range []*regexp.Regexp{nonStringParam, stringParam} {
		s = re.ReplaceAllStringFunc(s, func(ref string) string {
			name := re.FindStringSubmatch(ref)[1]
			if val, ok := values[name]; ok {
				return val
			}
			return ref
		})
	}
	return s
}
