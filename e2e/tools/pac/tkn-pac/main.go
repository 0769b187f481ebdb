// Command tkn-pac is Pipelines-as-Code's CLI as the pinned release builds
// it, without the commands that set up a GitHub App or a webhook on a
// hosted forge (bootstrap, create, webhook): their packages need a module
// version the testbed's module proxy does not serve, and the local forge's
// repositories, Repository objects and webhooks are made through its API.
package main

import (
	"os"

	"github.com/openshift-pipelines/pipelines-as-code/pkg/cli"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/cel"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/completion"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/deleterepo"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/describe"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/generate"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/info"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/listcmd"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/logs"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/resolve"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/cmd/tknpac/versioncmd"
	"github.com/openshift-pipelines/pipelines-as-code/pkg/params"
	"github.com/spf13/cobra"
)

func main() {
	clients := params.New()
	cmd := &cobra.Command{
		Use:          "tkn-pac",
		Short:        "Pipelines-as-Code CLI (without bootstrap, create and webhook)",
		SilenceUsage: true,
	}
	clients.Info.Kube.AddFlags(cmd)
	streams := cli.NewIOStreams()
	cmd.AddCommand(versioncmd.Command(streams), info.Root(clients, streams), listcmd.Root(clients, streams),
		deleterepo.Root(clients, streams), describe.Root(clients, streams), logs.Command(clients, streams),
		resolve.Command(clients, streams), generate.Command(clients, streams), cel.Command(streams), completion.Command())
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
