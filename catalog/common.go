package catalog

import (
	"bytes"
	"embed"
	"io/fs"
)

// commonFS holds the cluster instancetypes and preferences the operator
// installs (common/).
//
//go:embed common/*.yaml
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
