// Command kubectl runs the upstream kubectl command tree of the published k8s.io/kubectl module, so
// the tests use the real `kubectl auth can-i` and `kubectl wait`. provide.sh stamps the version
// variables with -ldflags -X so that `kubectl version` names the pinned release.
package main

import (
	"os"

	// Exec and OIDC credential plugins, as a kubectl release binary has them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// The -v level is needed before the command tree exists (plugin lookup logs through klog).
	if _, err := logs.GlogSetter(cmd.GetLogVerbosity(os.Args)); err != nil {
		util.CheckErr(err)
	}
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
