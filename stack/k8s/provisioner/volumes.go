package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// folders provisions each claim a folder <root>/<namespace>/<volume name>. A folder per
// namespace keeps a project's volumes together, where a site's file system can hold them to a
// project quota.
type folders struct {
	path string   // the root's absolute, clean path: what the PersistentVolumes name
	root *os.Root // every folder is made and removed through it: nothing outside is reached
}

func openRoot(path string) (*folders, error) {
	absolute, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("the root %q: %w", path, err)
	}
	if err := os.MkdirAll(absolute, 0o755); err != nil {
		return nil, fmt.Errorf("making the root: %w", err)
	}
	root, err := os.OpenRoot(absolute)
	if err != nil {
		return nil, fmt.Errorf("opening the root: %w", err)
	}
	return &folders{path: filepath.Clean(absolute), root: root}, nil
}

func (f *folders) Close() error { return f.root.Close() }

// nameComponent refuses what could not be one path component of our own making: the API
// server's names never hold these, but a folder's place is never left to that.
func nameComponent(kind, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("%s %q cannot name a folder", kind, name)
	}
	return nil
}

// relative is a claim's folder, relative to the root.
func relative(namespace, volume string) (string, error) {
	if err := nameComponent("namespace", namespace); err != nil {
		return "", err
	}
	if err := nameComponent("volume", volume); err != nil {
		return "", err
	}
	return filepath.Join(namespace, volume), nil
}

// inside is where a PersistentVolume's path lies relative to the root, or an error when it
// lies anywhere else (a volume of another provisioner's making, or edited by hand).
func (f *folders) inside(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%q is not an absolute path", path)
	}
	rel, err := filepath.Rel(f.path, filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%q is not inside the root %q", path, f.path)
	}
	return rel, nil
}

// Provision makes the claim's folder and the PersistentVolume naming it.
func (f *folders) Provision(ctx context.Context, options controller.ProvisionOptions) (
	*v1.PersistentVolume, controller.ProvisioningState, error) {
	class := options.StorageClass
	if len(class.Parameters) > 0 {
		return nil, controller.ProvisioningFinished,
			fmt.Errorf("the StorageClass %s has parameters: this provisioner takes none", class.Name)
	}
	if options.PVC.Spec.VolumeMode != nil && *options.PVC.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return nil, controller.ProvisioningFinished, errors.New("a folder is no block device: only volumeMode Filesystem")
	}
	rel, err := relative(options.PVC.Namespace, options.PVName)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := f.root.MkdirAll(rel, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("making the folder %s: %w", rel, err)
	}
	// any user the workload runs as may write there: the pods run as non-root users of their
	// images' choosing (the umask would take the group's and others' write away)
	if err := f.root.Chmod(rel, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("opening the folder %s to its users: %w", rel, err)
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	directory := v1.HostPathDirectory
	klog.FromContext(ctx).Info("provisioned", "claim", klog.KObj(options.PVC), "folder", rel)
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: options.PVName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   options.PVC.Spec.AccessModes,
			MountOptions:                  class.MountOptions,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: options.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: filepath.Join(f.path, rel), Type: &directory},
			},
		},
	}, controller.ProvisioningFinished, nil
}

// Delete removes a released volume's folder (the library calls it only for the reclaim policy
// Delete), and its namespace's folder when that is left empty.
func (f *folders) Delete(ctx context.Context, volume *v1.PersistentVolume) error {
	source := volume.Spec.HostPath
	if source == nil {
		return &controller.IgnoredError{Reason: "not a hostPath volume"}
	}
	rel, err := f.inside(source.Path)
	if err != nil {
		return &controller.IgnoredError{Reason: err.Error()}
	}
	if err := f.root.RemoveAll(rel); err != nil {
		return fmt.Errorf("removing the folder %s: %w", rel, err)
	}
	if parent := filepath.Dir(rel); parent != "." {
		_ = f.root.Remove(parent) // only when empty: another volume of the namespace keeps it
	}
	klog.FromContext(ctx).Info("deleted", "volume", volume.Name, "folder", rel)
	return nil
}
