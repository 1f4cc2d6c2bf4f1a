// Command gpu-portal-provisioner is a dynamic provisioner for a site whose storage is a shared
// file system mounted at the same path on every GPU node (a Lustre or NFS client mount): a
// claim of a StorageClass naming it gets a folder of its own under that path and a hostPath
// PersistentVolume for the folder, which any node can mount, so every rank of a group spread
// over nodes sees the same files. Deleting a claim whose volume's reclaim policy is Delete
// deletes the folder; Retain leaves both for an operator.
//
//	gpu-portal-provisioner --kubeconfig FILE --root /lustre/portal-volumes \
//	    [--name gpu-portal.io/shared-folder] [--health-address 127.0.0.1:PORT]
//
// The library that dynamic provisioners are written with
// (sigs.k8s.io/sig-storage-lib-external-provisioner) watches the claims, the volumes and the
// classes, asks Provision and Delete, writes the PersistentVolume and records the events; what
// is ours is volumes.go: where a claim's folder is, made and removed through an os.Root of the
// root folder, so that no name and no symbolic link leads outside it.
//
// What it does not do: expansion. A folder has no size of its own to grow (nothing here
// enforces a claim's size; a site does that with its file system's project quotas), and the
// in-tree expand controller waits for an external resizer for a hostPath volume, so the class
// it comes with leaves allowVolumeExpansion off rather than accept growth that never completes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// DefaultName is the provisioner's name, which a StorageClass's `provisioner` names.
const DefaultName = "gpu-portal.io/shared-folder"

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the identity it runs as (empty: in cluster)")
	root := flag.String("root", "", "the folder under which every volume's folder is made")
	name := flag.String("name", DefaultName, "the provisioner's name, as StorageClasses name it")
	health := flag.String("health-address", "", "host:port answering /healthz once it runs (empty: none)")
	flag.Parse()
	if err := run(*kubeconfig, *root, *name, *health); err != nil {
		klog.ErrorS(err, "gpu-portal-provisioner stopped")
		klog.Flush()
		os.Exit(1)
	}
}

func run(kubeconfig, root, name, health string) error {
	if root == "" {
		return errors.New("--root is required")
	}
	folders, err := openRoot(root)
	if err != nil {
		return err
	}
	defer folders.Close()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("making the client: %w", err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	pc := controller.NewProvisionController(ctx, client, name, folders,
		// one copy runs beside the control plane; a site running two would turn this on
		controller.LeaderElection(false),
		controller.ResyncPeriod(time.Minute),
		// a failure is retried with back-off rather than given up after a count
		controller.FailedProvisionThreshold(0), controller.FailedDeleteThreshold(0))
	if health != "" {
		listener, err := net.Listen("tcp", health)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", health, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if !pc.HasRun() {
				http.Error(w, "starting", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = server.Serve(listener) }()
		defer server.Close()
	}
	klog.InfoS("provisioning", "name", name, "root", root)
	pc.Run(ctx)
	return nil
}
