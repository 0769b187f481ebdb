// Command virtctl is KubeVirt's own virtctl, built from KubeVirt's source
// module at the version go.mod names, so that e2e scenarios drive tekvirt
// with the client KubeVirt users run. It is its own module: KubeVirt's
// dependencies stay out of tekvirt's.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth"

	"kubevirt.io/kubevirt/pkg/virtctl"
)

func main() {
	os.Exit(virtctl.Execute())
}
