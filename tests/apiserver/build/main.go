// Command kube-apiserver is the unmodified Kubernetes API server, built from
// the published k8s.io/kubernetes module for the real-API-server test tier.
package main

import (
	"os"
	_ "time/tzdata" // time zones for CronJob validation

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
