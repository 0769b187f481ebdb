package hostedclusteretcd

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// Command is the hosted-cluster-etcd step.
func Command() *cobra.Command {
	var p Params
	return hostedcp.Command("hosted-cluster-etcd", "Run a hosted control plane's etcd and wait until it is ready", &p.Namespace,
		func(f *pflag.FlagSet) {
			f.StringVar(&p.Image, "release-image", "", "the release image, holding /usr/bin/etcd")
			f.IntVar(&p.Replicas, "replicas", 1, "members: 1 or 3")
			f.StringVar(&p.StorageClassName, "storage-class-name", "", "StorageClass of the members' PVCs (the default class when empty)")
			f.StringVar(&p.StorageSize, "storage-size", "8Gi", "size of each member's PVC")
			f.DurationVar(&p.Timeout, "timeout", 10*time.Minute, "how long to wait for every member to be ready")
		},
		func(ctx context.Context, c client.Client, out io.Writer) (Result, error) { return Run(ctx, c, p, out) })
}
