package catalog

import (
	"bytes"
	"embed"
	"io/fs"
)

// commonFS holds the cluster instancetypes and preferences (common/) and
// the common VM templates (common/templates/) the operator installs.
//
//go:embed common/*.yaml common/templates/*.yaml
var commonFS embed.FS

// CommonInstancetypes is the YAML stream of the cluster instancetypes
// (the u1 series) and preferences (one per guest tekvirt builds) the
// operator installs.
func CommonInstancetypes() ([]byte, error) {
	var out bytes.Buffer
	for _, f := range []string{"common/instancetypes.yaml", "common/preferences.yaml"} {
		data, err := fs.ReadFile(commonFS, f)
		if err != nil {
			return nil, err
		}
		out.WriteString("\n---\n")
		out.Write(data)
	}
	return out.Bytes(), nil
}

// CommonTemplates is the YAML stream of the common VM templates, one per
// guest tekvirt builds, that the operator installs into the
// HyperConverged's common templates namespace.
func CommonTemplates() ([]byte, error) {
	files, err := fs.Glob(commonFS, "common/templates/*.yaml")
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, f := range files {
		data, err := fs.ReadFile(commonFS, f)
		if err != nil {
			return nil, err
		}
		out.WriteString("\n---\n")
		out.Write(data)
	}
	return out.Bytes(), nil
}
