package hostpathcsi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
)

// DriverName and TopologyKey are the driver's, as the rest of tekvirt
// knows them.
const (
	DriverName  = hoststorage.DriverName
	TopologyKey = hoststorage.TopologyKey
)

// A location says where a volume or a snapshot is: on one node (Node set)
// or under the shared root (Node empty), and its name there.
type location struct {
	Node string
	Name string
}

const (
	localPrefix  = hoststorage.LocalPrefix
	sharedPrefix = hoststorage.SharedPrefix
)

// String is the location as a volume or snapshot ID.
func (l location) String() string {
	if l.Node == "" {
		return sharedPrefix + l.Name
	}
	return localPrefix + l.Node + "/" + l.Name
}

// parseLocation reads a volume or snapshot ID made by location.String.
func parseLocation(id string) (location, error) {
	var l location
	switch {
	case strings.HasPrefix(id, sharedPrefix):
		l.Name = strings.TrimPrefix(id, sharedPrefix)
	case strings.HasPrefix(id, localPrefix):
		node, name, ok := strings.Cut(strings.TrimPrefix(id, localPrefix), "/")
		if !ok || len(validation.IsDNS1123Subdomain(node)) > 0 {
			return location{}, fmt.Errorf("ID %q names no node", id)
		}
		l.Node, l.Name = node, name
	default:
		return location{}, fmt.Errorf("ID %q is not one of %s's (local/<node>/<name> or shared/<name>)", id, DriverName)
	}
	if err := checkName(l.Name); err != nil {
		return location{}, fmt.Errorf("ID %q: %w", id, err)
	}
	return l, nil
}

// checkName refuses a volume or snapshot name that is not one directory
// entry the driver may make: a DNS subdomain (as the sidecars' pvc-<uid>
// and snapshot-<uid>), never "." or "..", never hidden.
func checkName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", name, strings.Join(errs, ", "))
	}
	return nil
}

// entryName is the directory entry for the volume or snapshot the
// sidecars call name: the name itself when it is one the driver may make
// (pvc-<uid>, snapshot-<uid>), else a digest of it (CSI names are any
// string up to 128 characters).
func entryName(name string) string {
	if checkName(name) == nil {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "x-" + hex.EncodeToString(sum[:20])
}
