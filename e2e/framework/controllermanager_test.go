package framework

import (
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The garbage collector that StartGarbageCollector runs really collects:
// a namespaced ConfigMap owned by a cluster-scoped ClusterRole disappears
// once the ClusterRole is deleted, and one without the owner reference
// stays.
func TestStartGarbageCollector_collectsWhatADeletedOwnerOwned(t *testing.T) {
	bin := RequireControlPlane(t)
	log := &Buffer{}
	env := &envtest.Environment{BinaryAssetsDirectory: bin, ControlPlaneStartTimeout: 60 * time.Second, ControlPlaneStopTimeout: 30 * time.Second}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(bin, "etcd")}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(bin, "kube-apiserver")
	api.Out, api.Err = log, log
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start kube-apiserver and etcd: %v\n%s", err, log.Tail(20))
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()

	StartGarbageCollector(t, cfg)

	anchor, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "anchor"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: anchor.Name, UID: anchor.UID}
	for name, refs := range map[string][]metav1.OwnerReference{"owned": {owned}, "unowned": nil} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: refs}}
		if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kube.RbacV1().ClusterRoles().Delete(ctx, anchor.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	Eventually(t, 30*time.Second, "the garbage collector deletes the ConfigMap the ClusterRole owned", func() bool {
		_, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "owned", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	t.Logf("collected %s after the owner's deletion", time.Since(start).Round(time.Millisecond))
	if _, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "unowned", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap without an owner reference: %v", err)
	}
}
