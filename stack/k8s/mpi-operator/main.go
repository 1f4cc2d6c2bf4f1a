// The MPI operator's command (github.com/kubeflow/mpi-operator/cmd/mpi-operator), as its main
// runs it, with one flag more: -health-port. Upstream serves its /healthz on the fixed port
// :8080 of every interface (app.healthCheckPort, unexported) and exits when that port is taken,
// so two clusters on one machine (parallel test workers, the demo beside a test run) cannot
// both run one; the flag sets that variable before app.Run reads it. -monitoring-port (its
// Prometheus metrics, off by default) is not served here.
package main

import (
	"flag"
	_ "unsafe" // go:linkname

	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/cmd/mpi-operator/app"
	"github.com/kubeflow/mpi-operator/cmd/mpi-operator/app/options"
)

//go:linkname healthCheckPort github.com/kubeflow/mpi-operator/cmd/mpi-operator/app.healthCheckPort
var healthCheckPort int

func main() {
	s := options.NewServerOption()
	s.AddFlags(flag.CommandLine)
	flag.IntVar(&healthCheckPort, "health-port", healthCheckPort, "Port of the /healthz endpoint.")
	flag.Parse()
	if s.MonitoringPort != 0 {
		klog.Fatal("-monitoring-port is not served by this build")
	}
	if err := app.Run(s); err != nil {
		klog.Fatalf("%v\n", err)
	}
}
