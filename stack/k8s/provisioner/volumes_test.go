package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func newFolders(t *testing.T) *folders {
	t.Helper()
	f, err := openRoot(filepath.Join(t.TempDir(), "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func options(namespace, pvName string) controller.ProvisionOptions {
	retain := v1.PersistentVolumeReclaimRetain
	return controller.ProvisionOptions{
		StorageClass: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "shared"},
			ReclaimPolicy: &retain},
		PVName: pvName,
		PVC: &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: namespace},
			Spec: v1.PersistentVolumeClaimSpec{
				AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany},
				Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceStorage: resource.MustParse("10Gi")}},
			},
		},
	}
}

func TestProvisionMakesAFolderAndAVolumeNamingIt(t *testing.T) {
	f := newFolders(t)
	pv, state, err := f.Provision(context.Background(), options("tenant-a", "pvc-1"))
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("Provision: %v %v", state, err)
	}
	want := filepath.Join(f.path, "tenant-a", "pvc-1")
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != want {
		t.Fatalf("hostPath %+v, want %s", pv.Spec.HostPath, want)
	}
	info, err := os.Stat(want)
	if err != nil || !info.IsDir() || info.Mode().Perm() != 0o777 {
		t.Fatalf("the folder: %v %v", info, err)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimRetain {
		t.Errorf("reclaim policy %s, want the class's", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if got := pv.Spec.Capacity[v1.ResourceStorage]; got.String() != "10Gi" {
		t.Errorf("capacity %s", got.String())
	}
	if len(pv.Spec.AccessModes) != 1 || pv.Spec.AccessModes[0] != v1.ReadWriteMany {
		t.Errorf("access modes %v", pv.Spec.AccessModes)
	}
}

func TestProvisionRefusesNamesThatWouldLeaveTheRoot(t *testing.T) {
	f := newFolders(t)
	for _, c := range []struct{ namespace, pv string }{
		{"..", "pvc-1"}, {"tenant-a", ".."}, {"tenant-a", "../../etc"}, {"a/b", "pvc-1"},
		{"", "pvc-1"}, {"tenant-a", ""}, {".", "pvc-1"}, {"tenant-a", "x\x00y"},
	} {
		if _, _, err := f.Provision(context.Background(), options(c.namespace, c.pv)); err == nil {
			t.Errorf("Provision(%q, %q) was accepted", c.namespace, c.pv)
		}
	}
	entries, _ := os.ReadDir(f.path)
	if len(entries) != 0 {
		t.Errorf("the root holds %v after refusals", entries)
	}
}

func TestProvisionDoesNotFollowALinkOutOfTheRoot(t *testing.T) {
	f := newFolders(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(f.path, "tenant-a")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Provision(context.Background(), options("tenant-a", "pvc-1")); err == nil {
		t.Fatal("a namespace folder linking out of the root was followed")
	}
	if _, err := os.Stat(filepath.Join(outside, "pvc-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a folder was made outside the root: %v", err)
	}
}

func TestProvisionRefusesParametersAndBlockVolumes(t *testing.T) {
	f := newFolders(t)
	o := options("tenant-a", "pvc-1")
	o.StorageClass.Parameters = map[string]string{"type": "ssd"}
	if _, _, err := f.Provision(context.Background(), o); err == nil {
		t.Error("a class with parameters was accepted")
	}
	o = options("tenant-a", "pvc-2")
	block := v1.PersistentVolumeBlock
	o.PVC.Spec.VolumeMode = &block
	if _, _, err := f.Provision(context.Background(), o); err == nil {
		t.Error("a block volume was accepted")
	}
}

func volumeAt(path string) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{
			HostPath: &v1.HostPathVolumeSource{Path: path}}}}
}

func TestDeleteRemovesTheFolderAndItsEmptyNamespaceFolder(t *testing.T) {
	f := newFolders(t)
	pv, _, err := f.Provision(context.Background(), options("tenant-a", "pvc-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pv.Spec.HostPath.Path, "weights.bin"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Provision(context.Background(), options("tenant-b", "pvc-2")); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.path, "tenant-a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the folder or its namespace's is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.path, "tenant-b", "pvc-2")); err != nil {
		t.Errorf("another namespace's volume went too: %v", err)
	}
}

func TestDeleteLeavesWhatIsNotInsideTheRoot(t *testing.T) {
	f := newFolders(t)
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// a link inside the root to a folder outside it: removed as a link, never followed
	if err := os.MkdirAll(filepath.Join(f.path, "tenant-a"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(f.path, "tenant-a", "pvc-1")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{outside, f.path, filepath.Dir(f.path), f.path + "/../x",
		f.path + "-sibling/pvc-1", "relative/pvc-1"} {
		var ignored *controller.IgnoredError
		if err := f.Delete(context.Background(), volumeAt(path)); !errors.As(err, &ignored) {
			t.Errorf("Delete(%q) = %v, want it ignored", path, err)
		}
	}
	var ignored *controller.IgnoredError
	if err := f.Delete(context.Background(), &v1.PersistentVolume{}); !errors.As(err, &ignored) {
		t.Errorf("a volume of another kind: %v", err)
	}
	if err := f.Delete(context.Background(), volumeAt(link)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a file outside the root went with a link to it: %v", err)
	}
}
